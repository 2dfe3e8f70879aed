#define _GNU_SOURCE
#include "CProtFSLaunch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* A growing buffer; on allocation failure `failed` is set and the launch falls back. */
struct buffer {
  char *bytes;
  size_t length, capacity;
  int failed;
};

static void append(struct buffer *b, const char *text, size_t length) {
  if (b->failed) return;
  if (b->length + length + 32 > b->capacity) {
    size_t capacity = (b->capacity + length + 32) * 2;
    char *bytes = realloc(b->bytes, capacity);
    if (!bytes) {
      b->failed = 1;
      return;
    }
    b->bytes = bytes;
    b->capacity = capacity;
  }
  int head = snprintf(b->bytes + b->length, 32, "%zu:", length);
  b->length += (size_t)head;
  memcpy(b->bytes + b->length, text, length);
  b->length += length;
  b->bytes[b->length++] = '\n';
}

/* Whether `entry` is a passcode variable's (never sent anywhere). */
static int is_passcode(const char *entry) {
  return strncmp(entry, "PROTFS_PASSCODE=", 16) == 0 || strncmp(entry, "PROTFS_CURRENT_PASSCODE=", 24) == 0;
}

int protfs_launch_request(int count, char *const *words, char *const *environment, const char *directory,
                          const char *umask, char **bytes, size_t *length) {
  struct buffer body = {0};
  char number[24];
  snprintf(number, sizeof(number), "%d", count);
  append(&body, number, strlen(number));
  for (int i = 0; i < count; i++) append(&body, words[i], strlen(words[i]));
  append(&body, directory, strlen(directory));
  append(&body, umask, strlen(umask));
  for (char *const *entry = environment; *entry; entry++) {
    if (!is_passcode(*entry)) append(&body, *entry, strlen(*entry));
  }
  if (body.failed) {
    free(body.bytes);
    return -1;
  }
  *bytes = body.bytes;
  *length = body.length;
  return 0;
}

/* The umask line's value from /proc/self/status, into `out` (at most 15 bytes). */
static void read_umask(char *out) {
  out[0] = 0;
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char text[4096];
  ssize_t count = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (count <= 0) return;
  text[count] = 0;
  char *line = strstr(text, "\nUmask:");
  if (!line) return;
  line += 7;
  while (*line == '\t' || *line == ' ') line++;
  int i = 0;
  while (i < 15 && line[i] && line[i] != '\n') {
    out[i] = line[i];
    i++;
  }
  out[i] = 0;
}

/* Reads one line (without its newline) from `fd` into `line`; its length, or -1 at end of file or on
   an error. */
static int read_line(int fd, char *line, int capacity) {
  int length = 0;
  line[0] = 0;
  while (length < capacity - 1) {
    char c;
    ssize_t count = read(fd, &c, 1);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      line[length] = 0;
      return -1;
    }
    if (c == '\n') break;
    line[length++] = c;
  }
  line[length] = 0;
  return length;
}

/* The launch's connection, for the signal handlers. */
static int launch_connection = -1;

static void forward_signal(int signal) {
  int saved = errno;
  const char *line = signal == SIGINT ? "signal 2\n" : signal == SIGTERM ? "signal 15\n" : "signal 1\n";
  (void)send(launch_connection, line, strlen(line), MSG_NOSIGNAL);
  errno = saved;
}

/* The device's directory as protfs finds it (`Device.locate`), or NULL. */
static const char *device_path(const char *explicit, char *storage, size_t capacity) {
  if (explicit && *explicit) return explicit;
  const char *variable = getenv("PROTFS_DEVICE");
  if (variable && *variable) return variable;
  const char *data = getenv("XDG_DATA_HOME");
  if (data && data[0] == '/') {
    if ((size_t)snprintf(storage, capacity, "%s/protfs/device", data) >= capacity) return NULL;
    return storage;
  }
  const char *home = getenv("HOME");
  if (!home || !*home) return NULL;
  if ((size_t)snprintf(storage, capacity, "%s/.local/share/protfs/device", home) >= capacity) return NULL;
  return storage;
}

/* The launch socket's name in DEVICE/.protfs/apps/BUNDLE.prewarm, each directory opened without
   following a link; 0 when there is one, -1 otherwise. */
static int prewarm_socket(const char *device, const char *bundle, char *name, size_t capacity) {
  int root = open(device, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -1;
  int state = openat(root, ".protfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(root);
  if (state < 0) return -1;
  int apps = openat(state, "apps", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(state);
  if (apps < 0) return -1;
  char file[300];
  if ((size_t)snprintf(file, sizeof(file), "%s.prewarm", bundle) >= sizeof(file)) {
    close(apps);
    return -1;
  }
  int fd = openat(apps, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  close(apps);
  if (fd < 0) return -1;
  struct stat status;
  ssize_t count = -1;
  if (fstat(fd, &status) == 0 && S_ISREG(status.st_mode)) count = read(fd, name, capacity - 1);
  close(fd);
  if (count <= 0) return -1;
  name[count] = 0;
  if (strncmp(name, "protfs-prewarm.", 15) != 0) return -1;
  for (ssize_t i = 0; i < count; i++) {
    if (name[i] <= 0x20 || name[i] >= 0x7F) return -1;
  }
  return 0;
}

/* Connects to the abstract socket `name`, held by root or by this process's user; -1 otherwise. */
static int connect_supervisor(const char *name, pid_t *server) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un address;
  memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  size_t length = strlen(name);
  if (length + 1 > sizeof(address.sun_path)) {
    close(fd);
    return -1;
  }
  memcpy(address.sun_path + 1, name, length);
  socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + length);
  struct ucred peer;
  socklen_t peer_size = sizeof(peer);
  if (connect(fd, (struct sockaddr *)&address, size) != 0 ||
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) != 0 ||
      (peer.uid != 0 && peer.uid != geteuid())) {
    close(fd);
    return -1;
  }
  *server = peer.pid;
  return fd;
}

/* Sends the request: "launch LENGTH\n" with the standard streams attached, then its body. */
static int send_request(int fd, const struct buffer *body) {
  char head[48];
  int length = snprintf(head, sizeof(head), "launch %zu\n", body->length);
  int streams[3] = {0, 1, 2};
  struct iovec part = {.iov_base = head, .iov_len = (size_t)length};
  union {
    char bytes[CMSG_SPACE(sizeof(streams))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control.bytes,
                           .msg_controllen = sizeof(control.bytes)};
  struct cmsghdr *header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(streams));
  memcpy(CMSG_DATA(header), streams, sizeof(streams));
  if (sendmsg(fd, &message, MSG_NOSIGNAL) != length) return -1;
  size_t sent = 0;
  while (sent < body->length) {
    ssize_t count = send(fd, body->bytes + sent, body->length - sent, MSG_NOSIGNAL);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) return -1;
    sent += (size_t)count;
  }
  return 0;
}

/* Waits (at most 10 s) until process `pid` is gone. */
static void wait_for_end(pid_t pid) {
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) return;
  struct pollfd polled = {.fd = fd, .events = POLLIN};
  while (poll(&polled, 1, 10000) < 0 && errno == EINTR) {
  }
  close(fd);
}

/* The prewarmed app's launch socket this command line asks for, into `name`: the app's bundle id,
   or NULL when the Swift program takes the launch. */
static const char *prewarmed_launch(int argc, char **argv, char *name, size_t capacity) {
  /* protfs [--device DEVICE | --device=DEVICE] app launch BUNDLE-ID WORDS... -- CMD... */
  int index = 1;
  const char *explicit = NULL;
  if (strcmp(argv[index], "--device") == 0 && index + 1 < argc) {
    explicit = argv[index + 1];
    index += 2;
  } else if (strncmp(argv[index], "--device=", 9) == 0) {
    explicit = argv[index] + 9;
    index += 1;
  }
  if (index + 3 > argc || strcmp(argv[index], "app") != 0 || strcmp(argv[index + 1], "launch") != 0) return NULL;
  const char *bundle = argv[index + 2];
  if (!*bundle || bundle[0] == '-' || bundle[0] == '.' || strchr(bundle, '/') || strlen(bundle) > 255) return NULL;
  int command = 0;
  for (int i = index + 3; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      command = i + 1 < argc;
      break;
    }
    /* A passcode is never sent anywhere: the Swift program takes that launch. */
    if (strncmp(argv[i], "--passcode", 10) == 0) return NULL;
  }
  if (!command) return NULL;
  char storage[4096];
  const char *device = device_path(explicit, storage, sizeof(storage));
  if (!device || prewarm_socket(device, bundle, name, capacity) != 0) return NULL;
  return bundle;
}

/* Sends the launch of this command line to the supervisor holding the launch socket `name`: the
   connection, with `server` the supervisor's pid, or -1. */
static int send_launch(int argc, char **argv, char **envp, const char *name, pid_t *server) {
  char directory[4096];
  if (!getcwd(directory, sizeof(directory))) directory[0] = 0;
  char mask[16];
  read_umask(mask);
  struct buffer body = {0};
  if (protfs_launch_request(argc - 1, argv + 1, envp, directory, mask, &body.bytes, &body.length) != 0) return -1;
  int fd = connect_supervisor(name, server);
  if (fd < 0 || send_request(fd, &body) != 0) {
    free(body.bytes);
    if (fd >= 0) close(fd);
    return -1;
  }
  free(body.bytes);
  return fd;
}

/* Whether the supervisor on `fd` launched the app; when not, `fd` is closed. */
static int launched(int fd, pid_t server) {
  /* The answer comes at once: a supervisor silent for 10 s is left to the Swift program, which
     ends it. The app's end, later, may take as long as the app runs. */
  struct timeval answer_limit = {.tv_sec = 10, .tv_usec = 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &answer_limit, sizeof(answer_limit));
  char line[64];
  if (read_line(fd, line, sizeof(line)) < 0 || strcmp(line, "launched") != 0) {
    /* Declined (another launch of the app): it ends the held app, then the Swift program starts it
       anew. Anything else: the Swift program sees for itself. */
    if (strcmp(line, "declined") == 0) wait_for_end(server);
    close(fd);
    return 0;
  }
  struct timeval unlimited = {.tv_sec = 0, .tv_usec = 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &unlimited, sizeof(unlimited));
  return 1;
}

/* From now on SIGINT, SIGTERM and SIGHUP go to the app, through its supervisor on `fd`. */
static void forward_signals_to(int fd) {
  launch_connection = fd;
  signal(SIGPIPE, SIG_IGN);
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = forward_signal;
  action.sa_flags = SA_RESTART;
  sigfillset(&action.sa_mask);
  sigset_t unblock;
  sigemptyset(&unblock);
  int forwarded[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; i++) {
    sigaction(forwarded[i], &action, NULL);
    sigaddset(&unblock, forwarded[i]);
  }
  sigprocmask(SIG_UNBLOCK, &unblock, NULL);
}

/* Waits for the app's end, which the supervisor on `fd` tells, and exits as the app did. */
static void exit_as_the_app(int fd, const char *bundle) {
  char line[64];
  while (read_line(fd, line, sizeof(line)) >= 0) {
    if (strncmp(line, "exit ", 5) != 0) continue;
    int status = atoi(line + 5);
    /* Once the supervisor is gone, its mount and claim with it. */
    while (read_line(fd, line, sizeof(line)) >= 0) {
    }
    _exit(status);
  }
  dprintf(2, "Error: The supervisor of the app %s ended without telling how the app ended.\n", bundle);
  _exit(1);
}

__attribute__((constructor)) static void protfs_take_prewarmed(int argc, char **argv, char **envp) {
  if (argc < 6 || !argv || !envp) return;
  /* A launch from a terminal is the Swift program's: it gives the app a pseudo-terminal of its own
     (handing the held app this terminal's descriptors would let it read and set the caller's
     terminal); it ends the held app first. */
  if (isatty(0) || isatty(1) || isatty(2)) return;
  char name[256];
  const char *bundle = prewarmed_launch(argc, argv, name, sizeof(name));
  if (!bundle) return;
  pid_t server = 0;
  int fd = send_launch(argc, argv, envp, name, &server);
  if (fd < 0 || !launched(fd, server)) return;
  forward_signals_to(fd);
  exit_as_the_app(fd, bundle);
}
