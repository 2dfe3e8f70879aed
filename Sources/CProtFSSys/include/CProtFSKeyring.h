#ifndef PROTFS_KEYRING_H
#define PROTFS_KEYRING_H

/* The kernel's key retention service (keyrings(7)), where a sealed device's unlocked class keys
   wait between processes: `unlock` adds them, the mount and the commands that write container
   files read them, `lock` invalidates the ones a lock evicts. Kernel memory is never swapped,
   and an invalidated key's payload is freed and cleared by the kernel. libkeyutils would wrap
   these same three system calls; glibc declares none of them. */

#include <sys/syscall.h>
#include <unistd.h>

/* The keyring of the calling user (root's for protfs): it outlives the process that adds a key. */
#define PROTFS_KEY_SPEC_USER_KEYRING (-4)

/* add_key(2) of a "user" key named `description` holding `count` bytes to the user keyring,
   replacing the payload of one of that name: the key's serial, or -1 and errno. */
static inline long protfs_add_user_key(const char *description, const void *payload, size_t count) {
  return syscall(SYS_add_key, "user", description, payload, count, PROTFS_KEY_SPEC_USER_KEYRING);
}

/* keyctl(KEYCTL_SEARCH) of the user keyring for the "user" key named `description`: its serial, or
   -1 and errno (ENOKEY when there is none). */
static inline long protfs_search_user_key(const char *description) {
  return syscall(SYS_keyctl, 10 /* KEYCTL_SEARCH */, PROTFS_KEY_SPEC_USER_KEYRING, "user", description, 0);
}

/* keyctl(KEYCTL_READ): up to `count` bytes of the key's payload into `buffer`; the payload's full
   length, or -1 and errno. */
static inline long protfs_read_key(long serial, void *buffer, size_t count) {
  return syscall(SYS_keyctl, 11 /* KEYCTL_READ */, serial, buffer, count);
}

/* keyctl(KEYCTL_INVALIDATE): the key is gone for every process at once, its payload cleared. */
static inline long protfs_invalidate_key(long serial) {
  return syscall(SYS_keyctl, 21 /* KEYCTL_INVALIDATE */, serial);
}

#endif
