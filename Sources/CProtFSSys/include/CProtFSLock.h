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

/* The inotify event header fields Swift needs (the struct ends in a flexible array). */
static inline uint32_t protfs_inotify_mask(const void *event) { return ((const struct inotify_event *)event)->mask; }
static inline uint32_t protfs_inotify_len(const void *event) { return ((const struct inotify_event *)event)->len; }
static inline const char *protfs_inotify_name(const void *event) { return ((const struct inotify_event *)event)->name; }

/* Kills this process with SIGKILL: the crash the transition tests ask for. */
static inline void protfs_crash_now(void) {
  kill(getpid(), SIGKILL);
  _exit(137);
}

#endif
