#ifndef CPROTFSSPAWN_H
#define CPROTFSSPAWN_H

/* Starting a program confined, as `protfs exec` and `protfs app launch` do: a forked child takes
   every privilege from itself and then executes the program, with nothing but system calls
   between the fork and the exec (the child of a multithreaded process may do no more). */

#include <sys/types.h>

/* The steps of the child, in the order it takes them; a failure names its step. */
enum protfs_spawn_step {
  PROTFS_SPAWN_SIGNALS = 1,      /* default dispositions and an empty mask */
  PROTFS_SPAWN_SANDBOX,          /* an app's: the target holds its own container alone */
  PROTFS_SPAWN_SESSION,          /* setsid(): a session (and process group) of its own */
  PROTFS_SPAWN_TERMINAL,         /* the pseudo-terminal made controlling and the streams' */
  PROTFS_SPAWN_DESCRIPTORS,      /* dup2 of the one passed descriptor, close_range of the rest */
  PROTFS_SPAWN_DESCRIPTOR_LIMIT, /* the soft RLIMIT_NOFILE */
  PROTFS_SPAWN_CGROUP,           /* "0" written to the app's cgroup.procs (where clone3 cannot) */
  PROTFS_SPAWN_MOUNT,            /* a mount namespace of its own, the mount bound over the target */
  PROTFS_SPAWN_BOUNDING_SET,     /* every capability dropped from the bounding set */
  PROTFS_SPAWN_AMBIENT,          /* the ambient set cleared */
  PROTFS_SPAWN_NO_NEW_PRIVS,     /* no_new_privs set */
  PROTFS_SPAWN_GROUPS,           /* no supplementary group */
  PROTFS_SPAWN_GID,              /* the app user's group */
  PROTFS_SPAWN_UID,              /* the app user */
  PROTFS_SPAWN_CAPABILITIES,     /* permitted, effective and inheritable emptied */
  PROTFS_SPAWN_DOMAIN,           /* an app's: a Landlock domain of its own */
  PROTFS_SPAWN_VERIFY,           /* the checks after the drop; `detail` has a bit per failed check */
  PROTFS_SPAWN_REACH,            /* `detail` is the index of the directory the user cannot search */
  PROTFS_SPAWN_PARENT,           /* the parent ended before the program started */
  PROTFS_SPAWN_EXEC,             /* execve failed: ENOENT when no path held a file the user can reach
                                    (`skipped` has a bit per path behind a directory it cannot
                                    search), EACCES when `detail` is the index of the first file
                                    found that it may not execute */
};

/* The checks of PROTFS_SPAWN_VERIFY, as bits of `detail`. */
enum protfs_spawn_check {
  PROTFS_SPAWN_CHECK_CAPABILITIES = 1,
  PROTFS_SPAWN_CHECK_AMBIENT = 2,
  PROTFS_SPAWN_CHECK_NO_NEW_PRIVS = 4,
  PROTFS_SPAWN_CHECK_IDS = 8,
  PROTFS_SPAWN_CHECK_GROUPS = 16,
  PROTFS_SPAWN_CHECK_BOUNDING_SET = 32,
};

/* Why the child did not execute the program: its step, errno there (0 for a failed check), the
   step's detail and, for PROTFS_SPAWN_EXEC, a bit for each of the first 64 paths it passed over
   because a directory on the way was closed to it. */
struct protfs_spawn_failure {
  int step;
  int error;
  int detail;
  unsigned long long skipped;
};

/* What the child does before it executes `path`. Strings and arrays belong to the caller; every
   optional member is NULL or negative when not wanted. */
struct protfs_spawn {
  const char *const *paths;      /* where the program may be, tried in order as execvp tries PATH */
  int path_count;
  char *const *argv;
  char *const *envp;
  char **shell_argv;             /* `/bin/sh - args…`: with the path found at [1], run when execve
                                    says ENOEXEC (as execvp) */
  int terminal;                  /* a pseudo-terminal's slave, or -1: the controlling terminal of
                                    the session the child leads (it has none else), dup2'd onto
                                    each standard stream whose bit (1 << fd) is in
                                    terminal_streams */
  int terminal_streams;
  int descriptor_from;           /* dup2'd onto descriptor_to, or -1 */
  int descriptor_to;
  int close_from;                /* every descriptor from here on is closed, or -1 */
  long long descriptor_limit;    /* the soft RLIMIT_NOFILE to take, or -1 */
  int cgroup;                    /* the app's cgroup directory, opened, to start in, or -1 */
  const char *mount_source;      /* bind-mounted over mount_target in a namespace of its own */
  const char *mount_target;
  const char *working_directory; /* entered again after the mount, or NULL */
  /* An app's sandbox, instead of the bind of mount_source: in a namespace of its own mount_target
     becomes a read-only tmpfs holding at sandbox_point (mount_target/BUNDLE-ID) one mount alone,
     sandbox_tree (a detached copy of the app's container, through the protfs mount or its backing
     directory, from protfs_clone_mount_tree), or -1. Either way the namespace takes no later mount
     from the system's, and every other protfs mount in it leaves (lazily), the one the container
     was taken from too: the child reads which from the namespace's own mount table. */
  int sandbox_tree;
  const char *sandbox_point;
  /* The bundles' directory (Bundles/) in the sandbox, or NULL: likewise a read-only tmpfs, holding
     at bundle_point (bundles_target/BUNDLE-ID.app) bundle_tree alone (a detached copy of the app's
     own bundle), or nothing when it is -1: no app reads another's program or Info.plist. */
  const char *bundles_target;
  int bundle_tree;
  const char *bundle_point;
  int isolated;                  /* nonzero: an app's Landlock domain of its own, where the kernel
                                    has Landlock: no ptrace access (/proc/PID/root, mem, fd…) nor
                                    signal (Landlock ABI 6) reaches a process outside it */
  int privileged;                /* nonzero: drop the bounding set and become uid/gid */
  uid_t uid;
  gid_t gid;
  const char *const *reachable;  /* directories the user must be able to search, outermost first */
  int reachable_count;
  pid_t parent;                  /* > 0: SIGKILL when the parent thread ends, refused if it has */
};

/* Forks a child that confines itself as `spawn` says and executes the program. Returns the
   child's pid once the program runs (the exec closed the child's end of a close-on-exec pipe);
   or -1 with `failure` filled in (the child has been reaped), and errno for a failed fork.

   With a cgroup the child is created in it (clone3 with CLONE_INTO_CGROUP, Linux 5.7): a process
   that moves itself there by writing cgroup.procs waits for the kernel to quiesce every reader
   of the cgroups' thread-group lock, 10 to 20 ms on this kind of machine. Where clone3 cannot,
   the child does just that. On x86-64 the clone also shares this process's memory until the
   child's exec (CLONE_VM | CLONE_VFORK, on a stack of its own, as posix_spawn does): a fork of
   protfs would copy some 100 MB of page tables. */
pid_t protfs_spawn_confined(const struct protfs_spawn *spawn, struct protfs_spawn_failure *failure);

/* posix_spawn of `path`, unconfined, with standard input, output and error dup'd from `input`,
   `output` and `error`, every other descriptor closed (whether close-on-exec or not), in
   `directory` unless NULL, leading a process group of its own, with an empty signal mask and
   SIGPIPE's default disposition (as a shell starts a program). 0 with `pid` set, or an errno. */
/* Opens a new pseudo-terminal: its master and slave, both close-on-exec and neither becoming
   this process's controlling terminal; the slave is given to `owner` (its group unchanged, mode
   0620) unless owner is (uid_t)-1. 0, or -1 with errno. */
int protfs_open_pty(int *master, int *slave, uid_t owner);

/* Relays between a caller's terminal and a pseudo-terminal's master until the master hangs up
   (every slave descriptor closed), `stop` becomes readable (what the master still holds is
   written out first), or, when `suspend_char` is 0..255, that byte is read from `input` while the
   pseudo-terminal's foreground group is `leader` (the byte is not passed on). `input` (-1: none)
   is copied to the master, the master to `output` (-1: read and dropped). Returns 0 when stopped,
   1 on a hang-up, 2 for the suspend character, -1 with errno on a failure. */
int protfs_relay_terminal(int input, int output, int master, int stop, int suspend_char, pid_t leader);

/* posix_spawn of `path` as a shell starts a program: standard streams copies of `input`, `output`
   and `error`, every other descriptor closed, an empty signal mask, SIGPIPE at its default, in
   `directory` (NULL: the caller's), leading a process group of its own, or a session of its own
   when `new_session`. 0, or the error number. */
int protfs_spawn_plain(pid_t *pid, const char *path, char *const argv[], char *const envp[], int input, int output,
                       int error, const char *directory, int new_session);

#endif
