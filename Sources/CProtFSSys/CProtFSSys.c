// Most wrappers are header-only (static inline); SwiftPM needs one source file per C target. The
// confined spawn lives here: it is too long to inline, and the forked child must run C alone.
#define _GNU_SOURCE
#include "CProtFSSys.h"
#include "CProtFSSpawn.h"

#include <grp.h>
#include <signal.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <termios.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#define PROTFS_CLONE_INTO_CGROUP 0x200000000ULL
#define PROTFS_CLONE_VM 0x00000100ULL
#define PROTFS_CLONE_VFORK 0x00004000ULL

/* struct clone_args of <linux/sched.h> up to its `cgroup` member (Linux 5.7). */
struct protfs_clone_args {
  uint64_t flags;
  uint64_t pidfd;
  uint64_t child_tid;
  uint64_t parent_tid;
  uint64_t exit_signal;
  uint64_t stack;
  uint64_t stack_size;
  uint64_t tls;
  uint64_t set_tid;
  uint64_t set_tid_size;
  uint64_t cgroup;
};

/* Reports `failure` to the parent and ends the child. Only system calls from here on. */
static void protfs_spawn_report(int report, struct protfs_spawn_failure failure) {
  ssize_t ignored = write(report, &failure, sizeof(failure));
  (void)ignored;
  _exit(127);
}

/* Reports the failed step to the parent and ends the child. */
static void protfs_spawn_fail(int report, int step, int error, int detail) {
  protfs_spawn_report(report, (struct protfs_spawn_failure){step, error, detail, 0});
}

/* Closes every descriptor from `from` on but `keep`. */
static int protfs_spawn_close_others(int from, int keep) {
  if (keep >= from) {
    if (keep > from && syscall(SYS_close_range, (unsigned)from, (unsigned)(keep - 1), 0U) != 0) return -1;
    return (int)syscall(SYS_close_range, (unsigned)(keep + 1), ~0U, 0U);
  }
  return (int)syscall(SYS_close_range, (unsigned)from, ~0U, 0U);
}

/* Sleeps `milliseconds` (nanosleep, which a forked child may call). */
static void protfs_spawn_pause(long milliseconds) {
  struct timespec pause = {0, milliseconds * 1000000L};
  while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {}
}

/* Executes the first of `spawn->paths` that runs, as the user the child now is, the way execvp
   searches PATH: a file the kernel cannot execute runs as a shell script; a missing one, or one
   this user may not execute, is passed over; any other failure ends the search. Returns the errno
   that ended it: EACCES when a file was found but none could be executed (`found` is the first
   such path's index), else ENOENT, with a bit in `skipped` for each path passed over because a
   directory on the way is closed to this user (a shell's lookup, as that user, finds nothing
   there: not "Permission denied" but "command not found"). */
static int protfs_spawn_search(const struct protfs_spawn *spawn, int *found, unsigned long long *skipped) {
  *found = -1;
  *skipped = 0;
  for (int i = 0; i < spawn->path_count; i++) {
    execve(spawn->paths[i], spawn->argv, spawn->envp);
    int error = errno;
    if (error == ENOEXEC && spawn->shell_argv != NULL) {
      spawn->shell_argv[1] = (char *)spawn->paths[i];
      execve("/bin/sh", spawn->shell_argv, spawn->envp);
      error = errno;
    }
    switch (error) {
    case EACCES:
      /* The file itself, or a directory before it? access(2) checks the real ids, which are this
         user's now (and no capability is left to override them). */
      if (access(spawn->paths[i], F_OK) == 0) {
        if (*found < 0) *found = i;
      } else if (errno == EACCES && i < 64) {
        *skipped |= 1ULL << i;
      }
      break;
    case ENOENT: case ENOTDIR: case ESTALE: case ENODEV: case ETIMEDOUT: break;
    default: return error;
    }
  }
  return *found >= 0 ? EACCES : ENOENT;
}

/* The id of the mount `fd` is on, as /proc/self/fdinfo gives it (which asks nothing of the file
   system, so a dead FUSE mount has one too), or 0. No allocation. */
static uint64_t protfs_fd_mount_id(int fd) {
  char path[40];
  protfs_fd_path(fd, path); /* "/proc/self/fd/N" becomes "/proc/self/fdinfo/N" */
  char info[40] = "/proc/self/fdinfo/";
  memcpy(info + 18, path + 14, strlen(path + 14) + 1);
  int file = open(info, O_RDONLY | O_CLOEXEC);
  if (file < 0) return 0;
  char text[512];
  ssize_t length = read(file, text, sizeof(text) - 1);
  close(file);
  if (length <= 0) return 0;
  text[length] = 0;
  const char *found = strstr(text, "mnt_id:");
  if (found == NULL) return 0;
  found += 7;
  while (*found == ' ' || *found == '\t') found++;
  uint64_t id = 0;
  for (; *found >= '0' && *found <= '9'; found++) id = id * 10 + (uint64_t)(*found - '0');
  return id;
}

/* One line of /proc/self/mountinfo, as much of it as the detach needs. */
struct protfs_mount_line {
  uint64_t id;
  unsigned major, minor;
  char mountpoint[4096]; /* decoded (the kernel writes space, tab, newline and \ as \ooo) */
  int too_long;
  char type[64];
};

/* Reads the fields of mountinfo's lines from `file` one character at a time (no allocation, no
   line too long for it), calling `each` with every whole line. -1 when the file cannot be read.
   ProtFSSystem's MountInfo reads the same table in Swift; the forked child cannot call it (it
   allocates), hence this reader. */
static int protfs_each_mount(int file, void (*each)(const struct protfs_mount_line *, void *), void *context) {
  struct protfs_mount_line line;
  char field[64];
  int field_length = 0, index = 0, after_dash = 0, escape = 0, escaped = 0, length = 0;
  memset(&line, 0, sizeof(line));
  char buffer[4096];
  for (;;) {
    ssize_t count = read(file, buffer, sizeof(buffer));
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) return -1;
    if (count == 0) return 0;
    for (ssize_t i = 0; i < count; i++) {
      char c = buffer[i];
      if (c == ' ' || c == '\n') {
        field[field_length < (int)sizeof(field) ? field_length : (int)sizeof(field) - 1] = 0;
        if (index == 0) {
          line.id = 0;
          for (int k = 0; k < field_length && field[k] >= '0' && field[k] <= '9'; k++) {
            line.id = line.id * 10 + (uint64_t)(field[k] - '0');
          }
        } else if (index == 2) {
          unsigned *part = &line.major;
          line.major = line.minor = 0;
          for (int k = 0; k < field_length && field[k] != 0; k++) {
            if (field[k] == ':') part = &line.minor;
            else if (field[k] >= '0' && field[k] <= '9') *part = *part * 10 + (unsigned)(field[k] - '0');
          }
        } else if (index == 4) {
          line.mountpoint[length] = 0;
        } else if (index >= 6 && after_dash == 0 && field_length == 1 && field[0] == '-') {
          after_dash = 1;
        } else if (after_dash == 1) {
          /* A type as long as the field's room is none the detach looks for. */
          if (field_length < (int)sizeof(field)) memcpy(line.type, field, (size_t)field_length + 1);
          after_dash = 2;
        }
        index++;
        field_length = 0;
        if (c == '\n') {
          if (after_dash == 2) each(&line, context);
          memset(&line, 0, sizeof(line));
          index = after_dash = escape = length = 0;
        }
        continue;
      }
      if (index == 4) {
        if (escape > 0) {
          escaped = escaped * 8 + (c - '0');
          if (++escape == 4) {
            c = (char)escaped;
            escape = 0;
          } else {
            continue;
          }
        } else if (c == '\\') {
          escape = 1;
          escaped = 0;
          continue;
        }
        if (length < (int)sizeof(line.mountpoint) - 1) line.mountpoint[length++] = c;
        else line.too_long = 1;
      } else if (field_length < (int)sizeof(field)) {
        field[field_length++] = c;
      } else {
        field_length = (int)sizeof(field); /* longer than any field read here: ignored */
      }
    }
  }
}

/* What a pass of the detach spares and how far it got. */
struct protfs_detach_pass {
  uint64_t spared_id;     /* a mount kept by its id, or 0 */
  dev_t spared_device;    /* mounts of this file system kept, or 0 */
  int detached;
};

/* Detaches the mount of `line` when it is a protfs mount the pass does not spare: taken by a
   descriptor first, and detached only when that descriptor is on that very mount (its id), so a
   path swapped for a link after the kernel wrote it leads the detach nowhere else. */
static void protfs_detach_one(const struct protfs_mount_line *line, void *context) {
  struct protfs_detach_pass *pass = context;
  /* MountRegistry.filesystemType, the type every protfs mount has. */
  if (strcmp(line->type, "fuse.protfs") != 0 || line->too_long) return;
  if (line->id == pass->spared_id) return;
  if (pass->spared_device != 0 && makedev(line->major, line->minor) == pass->spared_device) return;
  int fd = open(line->mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  if (protfs_fd_mount_id(fd) == line->id) {
    char link[32];
    protfs_fd_path(fd, link);
    if (umount2(link, MNT_DETACH) == 0) pass->detached++;
  }
  close(fd);
}

/* Detaches from this process's mount namespace, which must take nothing more from the system's,
   every protfs mount (other devices', other apps', the device's own) but those it is told to
   keep: `keep_mount`, the mount at `target` by its id (an app's sandbox keeps its container's copy
   and drops the mount it was taken from), or else every mount of the file system at `target`
   (`protfs exec` keeps its device's mount). The namespace's own table says which mounts there are,
   read after the namespace was made, so none made since the parent looked is missed; the table is
   read again until a pass detaches nothing (stacked mounts come off one at a time). A mount that
   no path reaches (covered by another) stays, out of reach. 0, or -1 with errno set. No
   allocation. */
static int protfs_spawn_detach(const char *target, int keep_mount) {
  int kept = open(target, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (kept < 0) return -1;
  struct protfs_detach_pass pass = {0, 0, 0};
  struct stat bound;
  if (keep_mount) {
    pass.spared_id = protfs_fd_mount_id(kept);
  } else if (fstat(kept, &bound) == 0) {
    pass.spared_device = bound.st_dev;
  }
  close(kept);
  if (pass.spared_id == 0 && pass.spared_device == 0) {
    errno = EIO;
    return -1;
  }
  for (int round = 0; round < 64; round++) {
    int table = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (table < 0) return -1;
    pass.detached = 0;
    int read_all = protfs_each_mount(table, protfs_detach_one, &pass);
    int error = errno;
    close(table);
    if (read_all != 0) {
      errno = error;
      return -1;
    }
    if (pass.detached == 0) return 0;
  }
  return 0;
}

/* Makes `target` a read-only tmpfs holding `tree` (a detached mount) alone at `point`, or nothing
   when `tree` is -1. The tmpfs allows no exec; a program in `tree` runs, as its own mount allows.
   0, or -1 with errno set. No allocation. */
static int protfs_spawn_sole_mount(const char *target, int tree, const char *point) {
  const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (mount("protfs-sandbox", target, "tmpfs", flags, "mode=0755,size=4k,nr_inodes=4") != 0) return -1;
  if (tree >= 0) {
    if (mkdir(point, 0755) != 0) return -1;
    if (syscall(429 /* move_mount */, tree, "", AT_FDCWD, point, 0x04 /* MOVE_MOUNT_F_EMPTY_PATH */) != 0) {
      return -1;
    }
  }
  return mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, NULL);
}

/* An app's sandbox (`spawn->sandbox_tree`): enters a mount namespace of its own in which
   `mount_target`, the device's Containers/, is a read-only tmpfs with the app's own container
   alone at `sandbox_point`: the detached copy the parent took of it by descriptors, so that no
   path to the container is resolved here. No other app's container has a path there, nor (with
   `bundles_target`) another app's bundle. 0, or -1 with errno set. No allocation. */
static int protfs_spawn_sandbox(const struct protfs_spawn *spawn) {
  if (syscall(SYS_unshare, PROTFS_CLONE_NEWNS) != 0) return -1;
  /* Private: a mount made later elsewhere (another protfs mount, say) never shows here. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
  if (protfs_spawn_sole_mount(spawn->mount_target, spawn->sandbox_tree, spawn->sandbox_point) != 0) return -1;
  if (spawn->bundles_target == NULL) return 0;
  return protfs_spawn_sole_mount(spawn->bundles_target, spawn->bundle_tree, spawn->bundle_point);
}

/* Puts this process in a Landlock domain of its own, where the kernel has Landlock with reparenting
   (ABI 2, Linux 5.19): the kernel then refuses it ptrace access (the /proc/PID files root, cwd,
   fd, mem, environ…) to every process outside the domain, which its own children join, and with
   ABI 6 (6.12) signals to them too. A domain must handle some file right, and any that handles one
   refuses every rename and link into another directory (EXDEV) unless a rule grants it: this one
   handles making block devices (which the app user may not do anyway) and reparenting, and grants
   both beneath `/`. Needs no_new_privs. 0 (also without Landlock, or with ABI 1, which cannot grant
   reparenting), or -1 with errno set. No allocation. */
static int protfs_enter_landlock_domain(void) {
  enum { create_ruleset = 444, add_rule = 445, restrict_self = 446, version = 1, path_beneath = 1 };
  const uint64_t make_block = 1ULL << 11, refer = 1ULL << 13, scope_signal = 1ULL << 1;
  long abi = syscall(create_ruleset, NULL, 0, version);
  if (abi < 2) return 0;
  struct {
    uint64_t handled_access_fs, handled_access_net, scoped;
  } ruleset = {make_block | refer, 0, abi >= 6 ? scope_signal : 0};
  size_t size = abi >= 6 ? sizeof(ruleset) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  struct __attribute__((packed)) {
    uint64_t allowed_access;
    int32_t parent_fd;
  } beneath = {make_block | refer, -1};
  int fd = (int)syscall(create_ruleset, &ruleset, size, 0);
  if (fd < 0) return -1;
  int result = -1;
  beneath.parent_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (beneath.parent_fd >= 0 && syscall(add_rule, fd, path_beneath, &beneath, 0) == 0) {
    result = (int)syscall(restrict_self, fd, 0);
  }
  int error = errno;
  if (beneath.parent_fd >= 0) close(beneath.parent_fd);
  close(fd);
  errno = error;
  return result;
}

/* The child: every step of `spawn`, then the exec. Never returns. */
static void protfs_spawn_child(const struct protfs_spawn *spawn, int report, int in_cgroup) {
  /* The report descriptor moves above the one passed on, so that neither dup2 nor close_range
     takes it; it stays close-on-exec, so a successful exec closes it. */
  int floor = spawn->descriptor_to > 2 ? spawn->descriptor_to + 1 : 3;
  if (report < floor) {
    int moved = fcntl(report, F_DUPFD_CLOEXEC, floor);
    if (moved < 0) protfs_spawn_fail(report, PROTFS_SPAWN_DESCRIPTORS, errno, 0);
    report = moved;
  }

  /* The program leads a session of its own: every signal starts at its default, whatever the
     caller ignored (a background job's SIGINT and SIGQUIT, nohup's SIGHUP, a runner's SIGTSTP), so
     that its terminal's keys and its own job control work as in a fresh login. protfs receives the
     caller's signals and decides what to pass on. */
  struct sigaction defaults;
  memset(&defaults, 0, sizeof(defaults));
  defaults.sa_handler = SIG_DFL;
  for (int signal_number = 1; signal_number < NSIG; signal_number++) {
    if (signal_number == SIGKILL || signal_number == SIGSTOP) continue;
    /* EINVAL: a number that is no signal here (the C library's own real-time ones). */
    if (sigaction(signal_number, &defaults, NULL) != 0 && errno != EINVAL) {
      protfs_spawn_fail(report, PROTFS_SPAWN_SIGNALS, errno, signal_number);
    }
  }
  sigset_t empty;
  sigemptyset(&empty);
  if (sigprocmask(SIG_SETMASK, &empty, NULL) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_SIGNALS, errno, 0);

  /* First, before any descriptor is passed on or closed: the container's copy is one of them. */
  if (spawn->sandbox_tree >= 0) {
    if (protfs_spawn_sandbox(spawn) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_SANDBOX, errno, 0);
    /* Every protfs mount leaves, the one the container was taken from too: a path to it would
       lead to every other container. */
    if (protfs_spawn_detach(spawn->sandbox_point, 1) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_SANDBOX, errno, 0);
    /* A working directory inside the containers still names the backing directory, perhaps of
       another app: it is taken again by its path, which now leads through the sandbox, or, where
       that path leads nowhere, the app starts in its own container. */
    if (spawn->working_directory == NULL || chdir(spawn->working_directory) != 0) {
      if (chdir(spawn->sandbox_point) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_SANDBOX, errno, 0);
    }
  }

  /* Away from the caller's session (and so in a process group of its own): the caller's terminal
     is no longer this process's controlling terminal, so TIOCSTI into it (typing into root's
     shell) is refused. */
  if (setsid() < 0) protfs_spawn_fail(report, PROTFS_SPAWN_SESSION, errno, 0);
  if (spawn->terminal >= 0) {
    if (ioctl(spawn->terminal, TIOCSCTTY, 0) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_TERMINAL, errno, 0);
    for (int fd = 0; fd <= 2; fd++) {
      if ((spawn->terminal_streams & (1 << fd)) && dup2(spawn->terminal, fd) < 0) {
        protfs_spawn_fail(report, PROTFS_SPAWN_TERMINAL, errno, fd);
      }
    }
    if (spawn->terminal > 2) close(spawn->terminal);
  }

  if (spawn->descriptor_from >= 0) {
    if (spawn->descriptor_from == spawn->descriptor_to) {
      if (fcntl(spawn->descriptor_to, F_SETFD, 0) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_DESCRIPTORS, errno, 0);
    } else if (dup2(spawn->descriptor_from, spawn->descriptor_to) < 0) {
      protfs_spawn_fail(report, PROTFS_SPAWN_DESCRIPTORS, errno, 0);
    }
  }

  if (spawn->descriptor_limit >= 0) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_DESCRIPTOR_LIMIT, errno, 0);
    rlim_t wanted = (rlim_t)spawn->descriptor_limit;
    limit.rlim_cur = wanted < limit.rlim_max ? wanted : limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_DESCRIPTOR_LIMIT, errno, 0);
  }

  /* Joined while still root (the cgroup is root's), before anything of the program runs, so that
     every process it ever starts is held with it. */
  if (spawn->cgroup >= 0 && !in_cgroup) {
    int procs = openat(spawn->cgroup, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (procs < 0 || write(procs, "0", 1) != 1) protfs_spawn_fail(report, PROTFS_SPAWN_CGROUP, errno, 0);
    close(procs);
  }

  /* The descriptors go only now: the cgroup's was one of them. */
  if (spawn->close_from >= 0 && protfs_spawn_close_others(spawn->close_from, report) != 0) {
    protfs_spawn_fail(report, PROTFS_SPAWN_DESCRIPTORS, errno, 0);
  }

  if (spawn->mount_source != NULL) {
    if (protfs_enter_mount(spawn->mount_source, spawn->mount_target) != 0) {
      protfs_spawn_fail(report, PROTFS_SPAWN_MOUNT, errno, 0);
    }
    /* Each copy the namespace holds keeps its filesystem alive: its daemon would serve it, after
       its own unmount, for as long as the program runs. */
    if (protfs_spawn_detach(spawn->mount_target, 0) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_MOUNT, errno, 0);
    /* A working directory inside the containers still names the backing directory: take it again
       by its path, which now leads through the mount. */
    if (spawn->working_directory != NULL) {
      int ignored = chdir(spawn->working_directory);
      (void)ignored;
    }
  }

  /* Without CAP_SETPCAP the bounding set cannot shrink; no_new_privs and the empty permitted set
     then keep the program from gaining anything through it. */
  if (spawn->privileged && protfs_capbset_drop_all() != 0) {
    protfs_spawn_fail(report, PROTFS_SPAWN_BOUNDING_SET, errno, 0);
  }
  if (protfs_cap_ambient_clear() != 0) protfs_spawn_fail(report, PROTFS_SPAWN_AMBIENT, errno, 0);
  if (protfs_set_no_new_privs() != 0) protfs_spawn_fail(report, PROTFS_SPAWN_NO_NEW_PRIVS, errno, 0);
  if (spawn->privileged) {
    /* The raw calls: glibc's wrappers would signal the parent's other threads to change theirs. */
    if (syscall(SYS_setgroups, 0, NULL) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_GROUPS, errno, 0);
    if (syscall(SYS_setresgid, spawn->gid, spawn->gid, spawn->gid) != 0) {
      protfs_spawn_fail(report, PROTFS_SPAWN_GID, errno, 0);
    }
    if (syscall(SYS_setresuid, spawn->uid, spawn->uid, spawn->uid) != 0) {
      protfs_spawn_fail(report, PROTFS_SPAWN_UID, errno, 0);
    }
  }
  /* setuid from root to another uid already empties permitted and effective; inheritable stays. */
  if (protfs_cap_clear_all() != 0) protfs_spawn_fail(report, PROTFS_SPAWN_CAPABILITIES, errno, 0);
  if (spawn->isolated && protfs_enter_landlock_domain() != 0) protfs_spawn_fail(report, PROTFS_SPAWN_DOMAIN, errno, 0);

  /* A failed step the kernel did not report must not let the program run with more. */
  int failed = 0;
  if (protfs_cap_sets_are_empty() != 1) failed |= PROTFS_SPAWN_CHECK_CAPABILITIES;
  if (protfs_cap_ambient_is_empty() != 1) failed |= PROTFS_SPAWN_CHECK_AMBIENT;
  if (protfs_no_new_privs() != 1) failed |= PROTFS_SPAWN_CHECK_NO_NEW_PRIVS;
  if (spawn->privileged) {
    if (protfs_ids_are(spawn->uid, spawn->gid) != 1) failed |= PROTFS_SPAWN_CHECK_IDS;
    if (syscall(SYS_getgroups, 0, NULL) != 0) failed |= PROTFS_SPAWN_CHECK_GROUPS;
    if (protfs_capbset_is_empty() != 1) failed |= PROTFS_SPAWN_CHECK_BOUNDING_SET;
  }
  if (failed != 0) protfs_spawn_fail(report, PROTFS_SPAWN_VERIFY, 0, failed);

  /* As the user now: every directory down to the device must let it through. A missing one ends
     the check (the program meets it and says so itself). */
  for (int i = 0; i < spawn->reachable_count; i++) {
    if (access(spawn->reachable[i], X_OK) != 0) {
      if (errno == ENOENT) break;
      protfs_spawn_fail(report, PROTFS_SPAWN_REACH, errno, i);
    }
  }

  /* Set after the identity change, which clears the parent-death signal; kept across the exec. A
     parent already gone is caught by the parent check. */
  if (spawn->parent > 0) {
    if (protfs_set_pdeathsig(SIGKILL) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_PARENT, errno, 0);
    if (getppid() != spawn->parent) protfs_spawn_fail(report, PROTFS_SPAWN_PARENT, ESRCH, 0);
  }

  /* ETXTBSY: some process holds the program open for writing. Most often that is a moment's state,
     not the user's (a fork made by another thread of whatever wrote the file holds a copy of its
     descriptor until its own exec): the exec is tried again for up to two seconds. */
  int error = ENOENT, found = -1;
  unsigned long long skipped = 0;
  for (int attempt = 0;; attempt++) {
    error = protfs_spawn_search(spawn, &found, &skipped);
    if (error != ETXTBSY || attempt >= 200) break;
    protfs_spawn_pause(10);
  }
  protfs_spawn_report(report, (struct protfs_spawn_failure){PROTFS_SPAWN_EXEC, error, found, skipped});
}

#if defined(__x86_64__)
/* What the child of a shared-memory clone runs, on its own stack. */
struct protfs_vfork_start {
  const struct protfs_spawn *spawn;
  int report;
  int unused;
};

static int protfs_vfork_child(void *argument) {
  struct protfs_vfork_start *start = argument;
  /* This child shares the parent's memory until its exec: a handler of the parent's must never
     run in it. Every caught signal goes back to its default first (all are blocked until the
     child's own steps, which then give every signal its default, unblock them). */
  struct sigaction current, defaults;
  memset(&defaults, 0, sizeof(defaults));
  defaults.sa_handler = SIG_DFL;
  for (int signal_number = 1; signal_number < NSIG; signal_number++) {
    if (signal_number == SIGKILL || signal_number == SIGSTOP) continue;
    if (sigaction(signal_number, NULL, &current) == 0 && current.sa_handler != SIG_IGN
        && current.sa_handler != SIG_DFL) {
      sigaction(signal_number, &defaults, NULL);
    }
  }
  protfs_spawn_child(start->spawn, start->report, 1);
  return 127;
}

/* clone3 with `args` (which name a stack), the child running `child(argument)` on that stack and
   exiting with what it returns; the parent gets the pid, or -1 and errno. The raw system call,
   since glibc has no clone3 wrapper: the child cannot return through C frames, which are the
   parent's, so it starts its function here, from the new stack (16-byte aligned, as the call
   needs), and ends with exit(2) should it return. */
static pid_t protfs_clone3_on_stack(struct protfs_clone_args *args, int (*child)(void *), void *argument) {
  long result;
  register long function __asm__("r8") = (long)child;
  register long data __asm__("r9") = (long)argument;
  __asm__ volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"
      "movq %%r9, %%rdi\n\t"
      "callq *%%r8\n\t"
      "movl %%eax, %%edi\n\t"
      "movl $60, %%eax\n\t" /* SYS_exit */
      "syscall\n\t"
      "hlt\n"
      "1:\n\t"
      : "=a"(result)
      : "0"((long)SYS_clone3), "D"(args), "S"(sizeof(*args)), "r"(function), "r"(data)
      : "rcx", "r11", "memory");
  if (result < 0) {
    errno = (int)-result;
    return -1;
  }
  return (pid_t)result;
}

/* The child created in the cgroup without copying this process (CLONE_VM | CLONE_VFORK, as
   posix_spawn does): this thread waits until the child's exec or exit, the others run on. A fork
   of protfs (some 100 MB mapped) costs 1.5 to 2.5 ms of a launch in copying page tables alone.
   -1 with errno when the kernel refuses it. */
static pid_t protfs_spawn_vfork(const struct protfs_spawn *spawn, int report) {
  enum { stack_size = 256 * 1024 };
  void *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  struct protfs_vfork_start start = {spawn, report, 0};
  struct protfs_clone_args args;
  memset(&args, 0, sizeof(args));
  args.flags = PROTFS_CLONE_VM | PROTFS_CLONE_VFORK | PROTFS_CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.stack = (uint64_t)(uintptr_t)stack;
  args.stack_size = stack_size;
  args.cgroup = (uint64_t)spawn->cgroup;
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = protfs_clone3_on_stack(&args, protfs_vfork_child, &start);
  int error = errno;
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  munmap(stack, stack_size);
  errno = error;
  return pid;
}
#endif

pid_t protfs_spawn_confined(const struct protfs_spawn *spawn, struct protfs_spawn_failure *failure) {
  memset(failure, 0, sizeof(*failure));
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return -1;
  pid_t pid = -1;
  int in_cgroup = 0;
#if defined(__x86_64__)
  if (spawn->cgroup >= 0) {
    pid = protfs_spawn_vfork(spawn, report[1]);
    in_cgroup = pid >= 0;
  }
#endif
  if (pid < 0 && spawn->cgroup >= 0) {
    /* The raw clone3 copies this thread as fork does, without glibc's bookkeeping for the child,
       which makes only system calls before its exec. */
    struct protfs_clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = PROTFS_CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = (uint64_t)spawn->cgroup;
    pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
    in_cgroup = pid >= 0;
  }
  if (pid < 0) pid = fork();
  if (pid < 0) {
    int error = errno;
    close(report[0]);
    close(report[1]);
    errno = error;
    return -1;
  }
  if (pid == 0) {
    close(report[0]);
    protfs_spawn_child(spawn, report[1], in_cgroup);
  }
  close(report[1]);
  struct protfs_spawn_failure reported;
  ssize_t count;
  do {
    count = read(report[0], &reported, sizeof(reported));
  } while (count < 0 && errno == EINTR);
  close(report[0]);
  if (count == 0) return pid;
  if (count == (ssize_t)sizeof(reported)) {
    *failure = reported;
  } else {
    failure->step = PROTFS_SPAWN_EXEC;
    failure->error = count < 0 ? errno : EIO;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  errno = failure->error;
  return -1;
}

static volatile sig_atomic_t protfs_forward_fd = -1;

static void protfs_forward_handler(int signal_number) {
  int saved = errno;
  unsigned char byte = (unsigned char)signal_number;
  ssize_t ignored = write(protfs_forward_fd, &byte, 1);
  (void)ignored;
  errno = saved;
}

int protfs_forward_signals(int write_end, const int *signals, int count) {
  protfs_forward_fd = write_end;
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = protfs_forward_handler;
  action.sa_flags = SA_RESTART;
  sigfillset(&action.sa_mask);
  sigset_t unblock;
  sigemptyset(&unblock);
  for (int i = 0; i < count; i++) {
    if (sigaction(signals[i], &action, NULL) != 0) return -1;
    sigaddset(&unblock, signals[i]);
  }
  /* A parent may have left them blocked (a child inherits its signal mask). */
  return pthread_sigmask(SIG_UNBLOCK, &unblock, NULL) == 0 ? 0 : -1;
}

int protfs_spawn_plain(pid_t *pid, const char *path, char *const argv[], char *const envp[], int input, int output,
                       int error, const char *directory, int new_session) {
  posix_spawn_file_actions_t actions;
  int result = posix_spawn_file_actions_init(&actions);
  if (result != 0) return result;
  posix_spawnattr_t attributes;
  result = posix_spawnattr_init(&attributes);
  if (result != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return result;
  }
  const int from[3] = {input, output, error};
  for (int i = 0; i < 3 && result == 0; i++) result = posix_spawn_file_actions_adddup2(&actions, from[i], i);
  if (result == 0) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (result == 0 && directory != NULL) result = posix_spawn_file_actions_addchdir_np(&actions, directory);
  sigset_t none, pipe;
  sigemptyset(&none);
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  if (result == 0) result = posix_spawnattr_setsigmask(&attributes, &none);
  if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &pipe);
  if (result == 0 && !new_session) result = posix_spawnattr_setpgroup(&attributes, 0);
  if (result == 0) {
    const short flags =
        (new_session ? POSIX_SPAWN_SETSID : POSIX_SPAWN_SETPGROUP) | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    result = posix_spawnattr_setflags(&attributes, flags);
  }
  if (result == 0) result = posix_spawn(pid, path, &actions, &attributes, argv, envp);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  return result;
}

ssize_t protfs_send_descriptors(int socket, const void *bytes, size_t length, const int *fds, int count) {
  if (count < 0 || count > 8) {
    errno = EINVAL;
    return -1;
  }
  struct iovec part = {.iov_base = (void *)bytes, .iov_len = length};
  union {
    char buffer[CMSG_SPACE(8 * sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1};
  if (count > 0) {
    message.msg_control = control.buffer;
    message.msg_controllen = CMSG_SPACE(count * sizeof(int));
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(count * sizeof(int));
    memcpy(CMSG_DATA(header), fds, count * sizeof(int));
  }
  return sendmsg(socket, &message, MSG_NOSIGNAL);
}

ssize_t protfs_receive_descriptors(int socket, void *bytes, size_t length, int *fds, int capacity, int *count) {
  *count = 0;
  struct iovec part = {.iov_base = bytes, .iov_len = length};
  union {
    char buffer[CMSG_SPACE(8 * sizeof(int))];
    struct cmsghdr align;
  } control;
  struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control.buffer,
                           .msg_controllen = sizeof(control.buffer)};
  ssize_t received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  if (received < 0) return -1;
  for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    int arrived = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < arrived; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if (*count < capacity) {
        fds[(*count)++] = fd;
      } else {
        close(fd);
      }
    }
  }
  if (message.msg_flags & MSG_CTRUNC) {
    for (int i = 0; i < *count; i++) close(fds[i]);
    *count = 0;
    errno = EMSGSIZE;
    return -1;
  }
  return received;
}

int protfs_open_pty(int *master, int *slave, uid_t owner) {
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -1;
  char name[128];
  if (grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, name, sizeof(name)) != 0) {
    int saved = errno;
    close(m);
    errno = saved;
    return -1;
  }
  int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0 || (owner != (uid_t)-1 && (fchown(s, owner, (gid_t)-1) != 0 || fchmod(s, 0620) != 0))) {
    int saved = errno;
    if (s >= 0) close(s);
    close(m);
    errno = saved;
    return -1;
  }
  *master = m;
  *slave = s;
  return 0;
}

/* Writes all of `bytes` to `fd` (a terminal may take them in parts); -1 with errno. */
static int protfs_write_all(int fd, const char *bytes, ssize_t length) {
  while (length > 0) {
    ssize_t written = write(fd, bytes, (size_t)length);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd wait = {.fd = fd, .events = POLLOUT};
        (void)poll(&wait, 1, 1000);
        continue;
      }
      return -1;
    }
    bytes += written;
    length -= written;
  }
  return 0;
}

int protfs_relay_terminal(int input, int output, int master, int stop, int suspend_char, pid_t leader) {
  char buffer[16384];
  for (;;) {
    struct pollfd polled[3] = {{.fd = master, .events = POLLIN}, {.fd = stop, .events = POLLIN},
                               {.fd = input, .events = POLLIN}};
    int count = input >= 0 ? 3 : 2;
    if (poll(polled, (nfds_t)count, -1) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (polled[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t got = read(master, buffer, sizeof(buffer));
      /* EIO: every slave descriptor is closed (the program and all it started are gone). */
      if (got < 0 && errno == EIO) return 1;
      if (got == 0) return 1;
      if (got > 0 && output >= 0 && protfs_write_all(output, buffer, got) != 0 && errno != EPIPE) return -1;
      if (got < 0 && errno != EINTR && errno != EAGAIN) return -1;
    }
    if (polled[1].revents & (POLLIN | POLLHUP)) {
      /* What the program wrote before it ended is still in the master: out with it first. */
      int flags = fcntl(master, F_GETFL);
      if (flags >= 0) (void)fcntl(master, F_SETFL, flags | O_NONBLOCK);
      /* Bounded: a process the program left behind may keep writing. */
      for (int part = 0; part < 256; part++) {
        ssize_t got = read(master, buffer, sizeof(buffer));
        if (got <= 0) break;
        if (output >= 0) (void)protfs_write_all(output, buffer, got);
      }
      if (flags >= 0) (void)fcntl(master, F_SETFL, flags);
      return 0;
    }
    if (count == 3 && (polled[2].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = read(input, buffer, sizeof(buffer));
      if (got <= 0) {
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        /* The caller's input ended: nothing more to pass on, the output still flows. */
        input = -1;
        continue;
      }
      if (suspend_char >= 0 && suspend_char <= 255 && tcgetpgrp(master) == leader) {
        char *at = memchr(buffer, suspend_char, (size_t)got);
        if (at != NULL) {
          if (protfs_write_all(master, buffer, at - buffer) != 0) return -1;
          return 2;
        }
      }
      if (protfs_write_all(master, buffer, got) != 0) return -1;
    }
  }
}
