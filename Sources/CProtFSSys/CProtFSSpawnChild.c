// The confined spawn's child (CProtFSSpawnInternal.h): every step that confines the program, in
// order, then its exec. It runs in a child that may share the parent's memory (a vfork-like
// clone), so it makes system calls alone: no allocation, no stdio, nothing not
// async-signal-safe. A failed step is reported to the parent through the report pipe (its step,
// errno and detail) and ends the child.
#define _GNU_SOURCE
#include "CProtFSSys.h"
#include "CProtFSSpawn.h"
#include "CProtFSSpawnInternal.h"

#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

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

/* The report descriptor moves above the one passed on, so that neither dup2 nor close_range
   takes it; it stays close-on-exec, so a successful exec closes it. Returns where it is now. */
static int protfs_spawn_raise_report(const struct protfs_spawn *spawn, int report) {
  int floor = spawn->descriptor_to > 2 ? spawn->descriptor_to + 1 : 3;
  if (report < floor) {
    int moved = fcntl(report, F_DUPFD_CLOEXEC, floor);
    if (moved < 0) protfs_spawn_fail(report, PROTFS_SPAWN_DESCRIPTORS, errno, 0);
    report = moved;
  }
  return report;
}

/* The program leads a session of its own: every signal starts at its default, whatever the
   caller ignored (a background job's SIGINT and SIGQUIT, nohup's SIGHUP, a runner's SIGTSTP), so
   that its terminal's keys and its own job control work as in a fresh login. protfs receives the
   caller's signals and decides what to pass on. */
static void protfs_spawn_reset_signals(int report) {
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
}

/* An app's sandbox (`spawn->sandbox_tree`), its mounts and its working directory. */
static void protfs_spawn_enter_sandbox(const struct protfs_spawn *spawn, int report) {
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
static void protfs_spawn_leave_session(const struct protfs_spawn *spawn, int report) {
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
}

/* The descriptor passed on, and the program's limit on descriptors. */
static void protfs_spawn_pass_descriptor(const struct protfs_spawn *spawn, int report) {
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
}

/* The program's cgroup, where the child was not made in it, then every descriptor not passed on. */
static void protfs_spawn_join_cgroup(const struct protfs_spawn *spawn, int report, int in_cgroup) {
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
}

/* The device's mount (`spawn->mount_source`) in a mount namespace of the program's own. */
static void protfs_spawn_enter_device_mount(const struct protfs_spawn *spawn, int report) {
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

/* Every capability, the groups and the ids, then the Landlock domain of an isolated program. */
static void protfs_spawn_drop_privileges(const struct protfs_spawn *spawn, int report) {
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
}

/* A failed step the kernel did not report must not let the program run with more. */
static void protfs_spawn_verify(const struct protfs_spawn *spawn, int report) {
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
}

/* As the user now: every directory down to the device must let it through. A missing one ends
   the check (the program meets it and says so itself). */
static void protfs_spawn_check_reach(const struct protfs_spawn *spawn, int report) {
  for (int i = 0; i < spawn->reachable_count; i++) {
    if (access(spawn->reachable[i], X_OK) != 0) {
      if (errno == ENOENT) break;
      protfs_spawn_fail(report, PROTFS_SPAWN_REACH, errno, i);
    }
  }
}

/* Set after the identity change, which clears the parent-death signal; kept across the exec. A
   parent already gone is caught by the parent check. */
static void protfs_spawn_watch_parent(const struct protfs_spawn *spawn, int report) {
  if (protfs_set_pdeathsig(SIGKILL) != 0) protfs_spawn_fail(report, PROTFS_SPAWN_PARENT, errno, 0);
  if (getppid() != spawn->parent) protfs_spawn_fail(report, PROTFS_SPAWN_PARENT, ESRCH, 0);
}

/* The exec, or the report of why there was none. ETXTBSY: some process holds the program open for
   writing. Most often that is a moment's state, not the user's (a fork made by another thread of
   whatever wrote the file holds a copy of its descriptor until its own exec): the exec is tried
   again for up to two seconds. */
static void protfs_spawn_exec(const struct protfs_spawn *spawn, int report) {
  int error = ENOENT, found = -1;
  unsigned long long skipped = 0;
  for (int attempt = 0;; attempt++) {
    error = protfs_spawn_search(spawn, &found, &skipped);
    if (error != ETXTBSY || attempt >= 200) break;
    protfs_spawn_pause(10);
  }
  protfs_spawn_report(report, (struct protfs_spawn_failure){PROTFS_SPAWN_EXEC, error, found, skipped});
}

/* The child: every step of `spawn`, then the exec. Never returns. */
void protfs_spawn_child(const struct protfs_spawn *spawn, int report, int in_cgroup) {
  report = protfs_spawn_raise_report(spawn, report);
  protfs_spawn_reset_signals(report);
  /* First, before any descriptor is passed on or closed: the container's copy is one of them. */
  if (spawn->sandbox_tree >= 0) protfs_spawn_enter_sandbox(spawn, report);
  protfs_spawn_leave_session(spawn, report);
  protfs_spawn_pass_descriptor(spawn, report);
  protfs_spawn_join_cgroup(spawn, report, in_cgroup);
  if (spawn->mount_source != NULL) protfs_spawn_enter_device_mount(spawn, report);
  protfs_spawn_drop_privileges(spawn, report);
  protfs_spawn_verify(spawn, report);
  protfs_spawn_check_reach(spawn, report);
  if (spawn->parent > 0) protfs_spawn_watch_parent(spawn, report);
  protfs_spawn_exec(spawn, report);
}
