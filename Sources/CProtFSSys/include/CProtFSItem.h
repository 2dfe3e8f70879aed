#ifndef CPROTFSITEM_H
#define CPROTFSITEM_H

/* One item of the device held by a descriptor, so that what a lock checks (type, link count,
   identity) is the inode it then changes. */

#include <errno.h>
#include <linux/stat.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

/* What a lock needs to know about an item. `birth_*` are 0 where the filesystem keeps no birth time. */
struct protfs_item_status {
  uint64_t inode;
  int64_t birth_seconds;
  uint32_t birth_nanoseconds;
  uint32_t mode; /* st_mode: type and permission bits */
  uint32_t uid;
  uint32_t gid;
  uint64_t links;
};

/* statx(2) of the descriptor itself (AT_EMPTY_PATH), with the birth time; fstat(2) where statx is missing. */
static inline int protfs_item_status(int fd, struct protfs_item_status *out) {
  struct statx sx;
  /* The raw syscall: glibc declares statx(3) only under _GNU_SOURCE. */
  if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &sx) == 0) {
    out->inode = sx.stx_ino;
    out->mode = sx.stx_mode;
    out->uid = sx.stx_uid;
    out->gid = sx.stx_gid;
    out->links = sx.stx_nlink;
    out->birth_seconds = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_sec : 0;
    out->birth_nanoseconds = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime.tv_nsec : 0;
    return 0;
  }
  if (errno != ENOSYS) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  out->inode = st.st_ino;
  out->mode = st.st_mode;
  out->uid = st.st_uid;
  out->gid = st.st_gid;
  out->links = st.st_nlink;
  out->birth_seconds = 0;
  out->birth_nanoseconds = 0;
  return 0;
}

/* "/proc/self/fd/N": the way to reach an O_PATH descriptor's inode with calls that take a path. */
static inline void protfs_fd_path(int fd, char buffer[32]) {
  /* By hand: a forked child, which may not call into stdio, builds these too. */
  memcpy(buffer, "/proc/self/fd/", 14);
  char digits[12];
  int n = 0;
  for (unsigned value = (unsigned)fd; n == 0 || value > 0; value /= 10) digits[n++] = (char)('0' + value % 10);
  int at = 14;
  while (n > 0) buffer[at++] = digits[--n];
  buffer[at] = 0;
}

/* chmod of the descriptor's inode: fchmodat2(fd, "", AT_EMPTY_PATH) (Linux 6.6), else chmod of /proc/self/fd/N. */
static inline int protfs_item_chmod(int fd, mode_t mode) {
  long result = syscall(452 /* SYS_fchmodat2 */, fd, "", mode, AT_EMPTY_PATH);
  if (result == 0 || (errno != ENOSYS && errno != EINVAL)) return (int)result;
  char path[32];
  protfs_fd_path(fd, path);
  return chmod(path, mode);
}

/* chown of the descriptor's inode (fchownat with AT_EMPTY_PATH accepts O_PATH descriptors). */
static inline int protfs_item_chown(int fd, uid_t uid, gid_t gid) {
  return fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
}

#endif
