// Most wrappers are header-only (static inline); the C files of this target hold what is too long
// to inline, or must run C alone. This one starts the confined spawn: its child, made in the
// program's cgroup where it can be, runs the steps of CProtFSSpawnChild.c, C alone, and the mount
// namespace's of CProtFSMounts.c (CProtFSSpawnInternal.h declares what the three share).
#define _GNU_SOURCE
#include "CProtFSSys.h"
#include "CProtFSSpawn.h"
#include "CProtFSSpawnInternal.h"

#include <signal.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

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
