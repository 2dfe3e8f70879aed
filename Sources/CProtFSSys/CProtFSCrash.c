// The crash handler of a ProtFSKit app (CProtFSCrash.h). Everything it calls after the signal is
// async-signal-safe: system calls on a descriptor opened in advance, and memory of its own.
#define _GNU_SOURCE
#include "CProtFSCrash.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

_Static_assert(sizeof(struct protfs_crash_record) == 64, "a crash record is 64 bytes");

static const int protfs_crash_signals[] = {SIGILL, SIGTRAP, SIGABRT, SIGSEGV, SIGBUS, SIGFPE};
#define PROTFS_CRASH_SIGNAL_COUNT (sizeof(protfs_crash_signals) / sizeof(protfs_crash_signals[0]))

static int protfs_crash_socket = -1;
static struct sigaction protfs_crash_previous[PROTFS_CRASH_SIGNAL_COUNT];

/* struct linux_dirent64, as getdents64(2) fills it. */
struct protfs_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* The number of thread `tid` as a crash report counts threads: the main thread (`pid`) 0, the
   others from 1 in the order of their ids, read from /proc/self/task; -1 when it cannot be read. */
static int protfs_crash_thread_number(pid_t tid, pid_t pid) {
  if (tid == pid) return 0;
  int directory = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory < 0) return -1;
  char buffer[2048] __attribute__((aligned(8)));
  int number = 1;
  long count;
  while ((count = syscall(SYS_getdents64, directory, buffer, sizeof(buffer))) > 0) {
    for (long offset = 0; offset < count;) {
      const struct protfs_dirent64 *entry = (const struct protfs_dirent64 *)(buffer + offset);
      long id = 0;
      const char *digit = entry->d_name;
      while (*digit >= '0' && *digit <= '9' && id < 1L << 40) id = id * 10 + (*digit++ - '0');
      if (*digit == '\0' && id > 0 && id != pid && id < tid) number++;
      offset += entry->d_reclen;
    }
  }
  close(directory);
  return count < 0 ? -1 : number;
}

static void protfs_crash_handler(int signal_number, siginfo_t *info, void *context) {
  (void)context;
  int saved = errno;
  struct protfs_crash_record record;
  memset(&record, 0, sizeof(record));
  memcpy(record.magic, PROTFS_CRASH_MAGIC, sizeof(record.magic));
  record.signal = signal_number;
  pid_t pid = getpid();
  pid_t tid = (pid_t)syscall(SYS_gettid);
  record.thread = protfs_crash_thread_number(tid, pid);
  if (tid == pid) {
    /* iOS names the main thread by its queue's label, as libdispatch's main queue is named. */
    static const char main_thread[] = "com.apple.main-thread";
    memcpy(record.name, main_thread, sizeof(main_thread) - 1);
    record.name_length = sizeof(main_thread) - 1;
  } else {
    /* Its name, unless it has none of its own: a thread starts with its creator's, the program's. */
    char name[16] = {0};
    char program[17] = {0};
    int comm = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (comm >= 0) {
      ssize_t count = read(comm, program, sizeof(program) - 1);
      if (count > 0 && program[count - 1] == '\n') program[count - 1] = '\0';
      close(comm);
    }
    if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && strncmp(name, program, sizeof(name)) != 0) {
      size_t length = strnlen(name, sizeof(name));
      memcpy(record.name, name, length);
      record.name_length = (uint8_t)length;
    }
  }
  if (protfs_crash_socket >= 0) {
    (void)send(protfs_crash_socket, &record, sizeof(record), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  for (size_t index = 0; index < PROTFS_CRASH_SIGNAL_COUNT; index++) {
    if (protfs_crash_signals[index] == signal_number) {
      sigaction(signal_number, &protfs_crash_previous[index], NULL);
    }
  }
  /* Sent again, pending until this handler returns: then the handler before (or the default)
     takes it, whether it was a fault, a trap that would go on past its instruction, or abort's. */
  (void)info;
  raise(signal_number);
  errno = saved;
}

int protfs_crash_handler_install(int socket) {
  /* Once: a second install would take this handler for the one before it. */
  if (protfs_crash_socket >= 0) return 0;
  stack_t current;
  if (sigaltstack(NULL, &current) == 0 && (current.ss_flags & SS_DISABLE)) {
    size_t size = 64 * 1024;
    void *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack != MAP_FAILED) {
      stack_t alternate = {.ss_sp = stack, .ss_flags = 0, .ss_size = size};
      if (sigaltstack(&alternate, NULL) != 0) munmap(stack, size);
    }
  }
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = protfs_crash_handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (size_t index = 0; index < PROTFS_CRASH_SIGNAL_COUNT; index++) {
    if (sigaction(protfs_crash_signals[index], &action, &protfs_crash_previous[index]) != 0) return -1;
  }
  protfs_crash_socket = socket;
  return 0;
}
