#ifndef CPROTFSLOCK_H
#define CPROTFSLOCK_H

/* Helpers for the lock simulator: capability confinement for `protfs exec`, inotify, flock. */

#include <errno.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#endif
#ifndef PR_CAP_AMBIENT_CLEAR_ALL
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

/* Removes `cap` from the inheritable set (capset(2)), so that an execve cannot bring it back
   through the inheritable path: the bounding set alone only limits the file-permitted path. */
static inline int protfs_cap_inheritable_drop(int cap) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) != 0) return -1;
  data[cap / 32].inheritable &= ~(1U << (cap % 32));
  return (int)syscall(SYS_capset, &header, data);
}

/* Clears the ambient capability set (PR_CAP_AMBIENT_CLEAR_ALL). */
static inline int protfs_cap_ambient_clear(void) {
  return prctl(PR_CAP_AMBIENT, (unsigned long)PR_CAP_AMBIENT_CLEAR_ALL, 0UL, 0UL, 0UL);
}

/* Whether `cap` is in this process's bounding set (1), not (0), or -1 on error. */
static inline int protfs_capbset_read(int cap) {
  return prctl(PR_CAPBSET_READ, (unsigned long)cap, 0UL, 0UL, 0UL);
}

/* Whether `cap` is in this process's effective set. */
static inline int protfs_cap_effective(int cap) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) != 0) return 0;
  return (data[cap / 32].effective >> (cap % 32)) & 1U;
}

/* The identity change and capability drop of `protfs exec`. Each returns 0 or -1 with errno set. */

#include <grp.h>

#ifndef PR_SET_NO_NEW_PRIVS
#define PR_SET_NO_NEW_PRIVS 38
#endif
#ifndef PR_GET_NO_NEW_PRIVS
#define PR_GET_NO_NEW_PRIVS 39
#endif

/* prctl(PR_SET_NO_NEW_PRIVS, 1): no later execve can grant privileges (setuid bits, file
   capabilities); the flag is inherited and cannot be cleared. */
static inline int protfs_set_no_new_privs(void) {
  return prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL);
}

/* prctl(PR_GET_NO_NEW_PRIVS): 1 when set, 0 when not, -1 on error. */
static inline int protfs_no_new_privs(void) { return prctl(PR_GET_NO_NEW_PRIVS, 0UL, 0UL, 0UL, 0UL); }

/* Empties the bounding set, capability by capability, until the kernel says there are no more
   (EINVAL past its last capability). Needs CAP_SETPCAP. */
static inline int protfs_capbset_drop_all(void) {
  for (int cap = 0; cap < 64; cap++) {
    if (prctl(PR_CAPBSET_READ, (unsigned long)cap, 0UL, 0UL, 0UL) < 0) {
      if (errno == EINVAL) return 0;
      return -1;
    }
    if (prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0UL, 0UL, 0UL) != 0) return -1;
  }
  return 0;
}

/* Whether the bounding set is empty (1), not (0), or -1 on error. */
static inline int protfs_capbset_is_empty(void) {
  for (int cap = 0; cap < 64; cap++) {
    int held = prctl(PR_CAPBSET_READ, (unsigned long)cap, 0UL, 0UL, 0UL);
    if (held < 0) return errno == EINVAL ? 1 : -1;
    if (held == 1) return 0;
  }
  return 1;
}

/* capset(2) with empty permitted, effective and inheritable sets: always allowed, as it only
   gives up. */
static inline int protfs_cap_clear_all(void) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {{0, 0, 0}, {0, 0, 0}};
  return (int)syscall(SYS_capset, &header, data);
}

/* Whether the permitted, effective and inheritable sets are all empty (1), not (0), or -1. */
static inline int protfs_cap_sets_are_empty(void) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) != 0) return -1;
  for (int i = 0; i < 2; i++) {
    if (data[i].permitted || data[i].effective || data[i].inheritable) return 0;
  }
  return 1;
}

/* Whether the ambient set is empty (1), not (0), or -1 on error. */
static inline int protfs_cap_ambient_is_empty(void) {
  for (int cap = 0; cap < 64; cap++) {
    int held = prctl(PR_CAP_AMBIENT, 1UL /* PR_CAP_AMBIENT_IS_SET */, (unsigned long)cap, 0UL, 0UL);
    if (held < 0) return errno == EINVAL ? 1 : -1;
    if (held == 1) return 0;
  }
  return 1;
}

/* Whether the real, effective and saved user ids are all `uid` and the group ids all `gid` (1),
   or not (0). getresuid(2) and getresgid(2), which glibc declares only under _GNU_SOURCE. */
static inline int protfs_ids_are(uid_t uid, gid_t gid) {
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (syscall(SYS_getresuid, &ruid, &euid, &suid) != 0) return 0;
  if (syscall(SYS_getresgid, &rgid, &egid, &sgid) != 0) return 0;
  return ruid == uid && euid == uid && suid == uid && rgid == gid && egid == gid && sgid == gid;
}

/* setgroups(2) with no supplementary group. */
static inline int protfs_clear_groups(void) { return setgroups(0, NULL); }

/* The inotify event header fields Swift needs (the struct ends in a flexible array). */
static inline uint32_t protfs_inotify_mask(const void *event) { return ((const struct inotify_event *)event)->mask; }
static inline uint32_t protfs_inotify_len(const void *event) { return ((const struct inotify_event *)event)->len; }
static inline const char *protfs_inotify_name(const void *event) { return ((const struct inotify_event *)event)->name; }

/* Kills this process with SIGKILL: the crash the transition tests ask for. */
static inline void protfs_crash_now(void) {
  kill(getpid(), SIGKILL);
  _exit(137);
}

/* `protfs exec` in a mounted device: moves this process into a mount namespace of its own (whose
   mounts receive the host's changes and send none back), then bind-mounts `source`, the protfs
   mount, over `target`, the device's Containers/: the program reaches the containers only through
   the mount, by their usual paths. Needs CAP_SYS_ADMIN. 0, or -1 with errno set. */
#include <sys/mount.h>
#ifndef PROTFS_CLONE_NEWNS
#define PROTFS_CLONE_NEWNS 0x00020000
#endif
/* A detached copy of the mount at `fd`, from `fd`'s directory down and without the mounts below
   it (open_tree(2) with OPEN_TREE_CLONE, Linux 5.2), close-on-exec: a process in another mount
   namespace puts it in place with move_mount(2), resolving no path to it. The descriptor, or -1
   with errno set. */
#include <fcntl.h>
static inline int protfs_clone_mount_tree(int fd) {
  return (int)syscall(428 /* open_tree */, fd, "", 0x1000 /* AT_EMPTY_PATH */ | 1 /* OPEN_TREE_CLONE */ | O_CLOEXEC);
}

/* Whether `fd` is on a FUSE file system (fstatfs(2) f_type FUSE_SUPER_MAGIC): 1, 0, or -1 with
   errno set. */
#include <sys/vfs.h>
static inline int protfs_is_on_fuse(int fd) {
  struct statfs s;
  if (fstatfs(fd, &s) != 0) return -1;
  return s.f_type == 0x65735546;
}

static inline int protfs_enter_mount(const char *source, const char *target) {
  if (syscall(SYS_unshare, PROTFS_CLONE_NEWNS) != 0) return -1;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
  return mount(source, target, NULL, MS_BIND, NULL);
}

#endif
