#ifndef CPROTFSSYS_H
#define CPROTFSSYS_H

#include <dirent.h>
#include <spawn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* Syscall numbers newer than Debian 12's kernel headers. They are the same on x86_64 and on the
   architectures that use the generic table (aarch64, riscv64), since they were added after the
   tables were unified. */
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_setxattrat
#define SYS_setxattrat 463
#endif
#ifndef SYS_getxattrat
#define SYS_getxattrat 464
#endif
#ifndef SYS_listxattrat
#define SYS_listxattrat 465
#endif
#ifndef SYS_removexattrat
#define SYS_removexattrat 466
#endif

#ifndef AT_SYMLINK_NOFOLLOW
#define AT_SYMLINK_NOFOLLOW 0x100
#endif

/* struct xattr_args of <linux/xattr.h> (Linux 6.13). */
struct protfs_xattr_args {
  uint64_t value;
  uint32_t size;
  uint32_t flags;
};

/* getxattrat(2): reads attribute `name` of `path` relative to `dirfd`, never following a final
   symlink when `at_flags` has AT_SYMLINK_NOFOLLOW. Returns the size, or -1 with errno set. */
static inline long protfs_getxattrat(int dirfd, const char *path, unsigned int at_flags,
                                     const char *name, void *value, size_t size) {
  struct protfs_xattr_args args = {(uint64_t)(uintptr_t)value, (uint32_t)size, 0};
  return syscall(SYS_getxattrat, dirfd, path, at_flags, name, &args, sizeof(args));
}

/* setxattrat(2). `flags` are XATTR_CREATE / XATTR_REPLACE. */
static inline long protfs_setxattrat(int dirfd, const char *path, unsigned int at_flags,
                                     const char *name, const void *value, size_t size,
                                     unsigned int flags) {
  struct protfs_xattr_args args = {(uint64_t)(uintptr_t)value, (uint32_t)size, flags};
  return syscall(SYS_setxattrat, dirfd, path, at_flags, name, &args, sizeof(args));
}

/* removexattrat(2). */
static inline long protfs_removexattrat(int dirfd, const char *path, unsigned int at_flags,
                                        const char *name) {
  return syscall(SYS_removexattrat, dirfd, path, at_flags, name);
}

/* listxattrat(2). */
static inline long protfs_listxattrat(int dirfd, const char *path, unsigned int at_flags,
                                      char *list, size_t size) {
  return syscall(SYS_listxattrat, dirfd, path, at_flags, list, size);
}

/* fchmodat2(2): unlike fchmodat(2), honours AT_SYMLINK_NOFOLLOW (EOPNOTSUPP on a symlink). */
static inline long protfs_fchmodat2(int dirfd, const char *path, mode_t mode, unsigned int flags) {
  return syscall(SYS_fchmodat2, dirfd, path, mode, flags);
}

/* prctl(PR_CAPBSET_DROP, cap): removes `cap` from this process's capability bounding set. */
static inline int protfs_capbset_drop(int cap) {
  return prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0UL, 0UL, 0UL);
}

/* prctl(PR_SET_PDEATHSIG, sig). */
static inline int protfs_set_pdeathsig(int sig) {
  return prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0UL, 0UL, 0UL);
}

/* open(2) with a mode (open is variadic in C). */
static inline int protfs_openat(int dirfd, const char *path, int flags, mode_t mode) {
  return openat(dirfd, path, flags, mode);
}

/* syncfs(2): flushes the filesystem holding `fd`. The download finisher flushes a batch of finished
   files with one call instead of one fsync each. Through syscall(2), as glibc declares it only
   under _GNU_SOURCE. */
static inline int protfs_syncfs(int fd) { return (int)syscall(SYS_syncfs, fd); }

/* Makes standard output line-buffered, as a terminal's is, also when it is a pipe: an app's print()
   then reaches whoever reads it line by line, as in Xcode's console. (Swift 6 cannot name `stdout`,
   a mutable C global.) */
static inline void protfs_line_buffer_stdout(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

/* sync_file_range(2) with SYNC_FILE_RANGE_WRITE: starts writing back a range of a file without
   waiting, so a download's final fsync has little left to do. Through syscall(2), as glibc declares
   it only under _GNU_SOURCE. */
static inline int protfs_start_writeback(int fd, long long offset, long long nbytes) {
  return (int)syscall(SYS_sync_file_range, fd, offset, nbytes, 2 /* SYNC_FILE_RANGE_WRITE */);
}

/* fallocate(2) with FALLOC_FL_KEEP_SIZE (1): reserves blocks for a range of a file without changing
   its size, so that writes into it find their space allocated. Through syscall(2), as glibc
   declares fallocate only under _GNU_SOURCE. */
static inline int protfs_reserve_space(int fd, long long offset, long long length) {
  return (int)syscall(SYS_fallocate, fd, 1 /* FALLOC_FL_KEEP_SIZE */, offset, length);
}

/* The d_type of a dirent, as Swift cannot reach the bit-field-free struct portably. */
static inline unsigned char protfs_dirent_type(const struct dirent *entry) { return entry->d_type; }
static inline const char *protfs_dirent_name(const struct dirent *entry) { return entry->d_name; }

/* renameat2(2) with RENAME_NOREPLACE: fails with EEXIST instead of replacing the target. */
static inline int protfs_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd,
                                          const char *newpath) {
  return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, 1U /* RENAME_NOREPLACE */);
}

/* renameat2(2) with any flags (RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT). */
static inline int protfs_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                                   unsigned int flags) {
  return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}

/* copy_file_range(2), declared by glibc only under _GNU_SOURCE. */
static inline long protfs_copy_file_range(int fd_in, int fd_out, size_t len) {
  return syscall(SYS_copy_file_range, fd_in, NULL, fd_out, NULL, len, 0U);
}

/* ioctl(2) FICLONE of <linux/fs.h> (not included: it clashes with <sys/mount.h>): `fd_out` becomes
   a clone of all of `fd_in`, sharing its extents until either is written (XFS with reflink,
   btrfs). */
#include <sys/ioctl.h>
#define PROTFS_FICLONE _IOW(0x94, 9, int)
static inline int protfs_clone_file(int fd_in, int fd_out) { return ioctl(fd_out, PROTFS_FICLONE, fd_in); }

/* openat2(2) (Linux 5.6) with RESOLVE_* flags: the audit resolves a symlink with RESOLVE_BENEATH to
   learn whether it leaves its container (EXDEV), and opens directories with RESOLVE_NO_SYMLINKS. */
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define PROTFS_O_PATH 010000000 /* O_PATH on x86_64 and the generic table; glibc hides it without _GNU_SOURCE */
/* lseek(2)'s SEEK_DATA and SEEK_HOLE (Linux 3.1), which glibc also hides without _GNU_SOURCE. */
#define PROTFS_SEEK_DATA 3
#define PROTFS_SEEK_HOLE 4
#define PROTFS_RESOLVE_NO_MAGICLINKS 0x02
#define PROTFS_RESOLVE_NO_SYMLINKS 0x04
#define PROTFS_RESOLVE_BENEATH 0x08
struct protfs_open_how {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};
static inline int protfs_openat2(int dirfd, const char *path, int flags, uint64_t resolve) {
  struct protfs_open_how how = {(uint64_t)(unsigned int)flags, 0, resolve};
  return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* Allocator policy for a process that frees and reallocates big buffers again and again: blocks
 * up to 16 MiB come from the heap rather than a fresh mmap each time, and the heap is not given
 * back to the kernel until 64 MiB are free at its top. Otherwise libcurl's 1 MiB receive buffer,
 * freed and reallocated per transfer, is returned with madvise(MADV_DONTNEED) and faulted in
 * again thousands of times in a run of small downloads. Setting either also stops glibc's
 * dynamic adjustment of both. */
#include <malloc.h>
static inline void protfs_malloc_keep_freed_memory(void) {
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

/* pidfd_open(2) (Linux 5.3): a descriptor that becomes readable when process `pid` exits. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
static inline int protfs_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

/* The lock simulator's helpers (capabilities, inotify). */
#include "CProtFSLock.h"

/* One item held by a descriptor while a lock checks and changes it. */
#include "CProtFSItem.h"

/* Starting a program confined (exec, app launch). */
#include "CProtFSSpawn.h"

/* A lock in one word on priority-inheriting futexes (ProtFSKit's os_unfair_lock). */
#include "CProtFSFutex.h"

/* An NSObject subclass made from its metadata (ProtFSKit's UIApplicationMain). */
#include "CProtFSObject.h"

/* A ProtFSKit app's crash handler and the record it sends its supervisor. */
#include "CProtFSCrash.h"

/* The kernel's keyrings, where a sealed device's unlocked class keys wait between processes. */
#include "CProtFSKeyring.h"

/* An unnamed regular file in directory `dirfd` (open(2) with O_TMPFILE, read-write), or -1 with
   errno (EOPNOTSUPP or EISDIR where the filesystem or kernel has no O_TMPFILE). */
static inline int protfs_open_unnamed(int dirfd, mode_t mode) {
#ifdef __O_TMPFILE
  return openat(dirfd, ".", __O_TMPFILE | O_DIRECTORY | O_RDWR | O_CLOEXEC, mode);
#else
  return openat(dirfd, ".", 020000000 | O_DIRECTORY | O_RDWR | O_CLOEXEC, mode);
#endif
}

/* Gives the unnamed file open as `fd` the name `name` in directory `dirfd` (linkat(2)); fails with
   EEXIST when the name is taken. AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; without it the file is
   linked through /proc/self/fd, which any process may. */
static inline int protfs_link_unnamed(int fd, int dirfd, const char *name) {
  if (linkat(fd, "", dirfd, name, AT_EMPTY_PATH) == 0) return 0;
  if (errno != ENOENT && errno != EPERM) return -1;
  char path[32];
  protfs_fd_path(fd, path);
  return linkat(AT_FDCWD, path, dirfd, name, AT_SYMLINK_FOLLOW);
}

/* The peer of a Unix socket as a process descriptor (SO_PEERPIDFD, Linux 6.5): it names the process
   that connected and no later one given its pid. Returns the descriptor, or -1 with errno set
   (ENOPROTOOPT on older kernels). */
static inline int protfs_peer_pidfd(int socket) {
  int pidfd = -1;
  socklen_t size = sizeof(pidfd);
  if (getsockopt(socket, SOL_SOCKET, 77 /* SO_PEERPIDFD */, &pidfd, &size) != 0) return -1;
  return pidfd;
}

/* pidfd_send_signal(2) with signal 0: 0 while the process a pidfd names exists (until it is
   reaped, its pid is given to no other process), else -1 with errno set (ESRCH). */
static inline int protfs_pidfd_alive(int pidfd) {
  return (int)syscall(424 /* SYS_pidfd_send_signal */, pidfd, 0, NULL, 0);
}

/* pidfd_send_signal(2): `signal` to the process a pidfd names (never to a later one given its pid).
   0, or -1 with errno set. */
static inline int protfs_pidfd_signal(int pidfd, int signal) {
  return (int)syscall(424 /* SYS_pidfd_send_signal */, pidfd, signal, NULL, 0);
}

/* accept4(2) with SOCK_CLOEXEC, so that a connection never leaks into a program another thread
   starts meanwhile (glibc declares accept4 only under _GNU_SOURCE). */
static inline int protfs_accept_cloexec(int listener) {
  return (int)syscall(SYS_accept4, listener, NULL, NULL, 02000000 /* SOCK_CLOEXEC */);
}

/* glibc 2.34's posix_spawn_file_actions_addclosefrom_np, declared again because the Swift module
   is not built with _GNU_SOURCE: the child closes every descriptor from `from` on. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
/* glibc's POSIX_SPAWN_SETSID (a GNU extension, hidden without _GNU_SOURCE): the child starts a
   session of its own. */
static inline short protfs_spawn_setsid_flag(void) {
#ifdef POSIX_SPAWN_SETSID
  return POSIX_SPAWN_SETSID;
#else
  return 0x80;
#endif
}

static inline int protfs_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
  return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

/* Signals handed over through a pipe (the self-pipe pattern): from now on each of `signals`
   (`count` of them) that reaches this process writes its number, one byte, to `write_end`
   (non-blocking; a full pipe drops it), whichever thread it interrupts. Installed synchronously,
   unlike a dispatch source, whose handler libdispatch installs later on a thread of its own: a
   signal sent in between is lost. One set of forwarded signals per process; 0, or -1 and errno. */
int protfs_forward_signals(int write_end, const int *signals, int count);

/* Descriptors handed over on a Unix socket (SCM_RIGHTS). Sends `length` bytes of `bytes` with the
   `count` descriptors of `fds` (at most 8) attached; the bytes sent, or -1 and errno. Never raises
   SIGPIPE. */
ssize_t protfs_send_descriptors(int socket, const void *bytes, size_t length, const int *fds, int count);

/* Receives up to `length` bytes into `bytes` and the descriptors that came with them (close-on-exec,
   at most `capacity`, their number in `*count`); the bytes received (0 at end of file), or -1 and
   errno. Descriptors beyond `capacity` are closed; a message cut short (MSG_CTRUNC) fails with
   EMSGSIZE after closing what did arrive. */
ssize_t protfs_receive_descriptors(int socket, void *bytes, size_t length, int *fds, int capacity, int *count);

#endif
