// The futex word under ProtFSKit's os_unfair_lock (CProtFSFutex.h): in C, for the atomic
// compare-and-swap on memory Swift hands over, and for the thread id kept per thread.
#define _GNU_SOURCE
#include "CProtFSFutex.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

/* This thread's id, asked of the kernel once per thread: every lock and unlock needs it. */
static __thread uint32_t thread_id;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

/* A forked child's one thread has a new id; the copy of its parent's thread's cache is wrong. */
static void forget_thread_id(void) { thread_id = 0; }
static void install_fork_handler(void) { pthread_atfork(NULL, NULL, forget_thread_id); }

static uint32_t self(void) {
  if (__builtin_expect(thread_id == 0, 0)) {
    pthread_once(&fork_handler_once, install_fork_handler);
    thread_id = (uint32_t)syscall(SYS_gettid);
  }
  return thread_id;
}

static int futex(uint32_t *word, int operation) {
  return syscall(SYS_futex, word, operation, 0, NULL, NULL, 0) == 0 ? 0 : errno;
}

int protfs_futex_lock(uint32_t *word) {
  uint32_t expected = 0;
  if (__atomic_compare_exchange_n(word, &expected, self(), 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return 0;
  if ((expected & FUTEX_TID_MASK) == self()) return EDEADLK;
  int error;
  /* The kernel restarts the wait itself after a signal; EINTR is not expected, but costs nothing. */
  do error = futex(word, FUTEX_LOCK_PI_PRIVATE);
  while (error == EINTR);
  return error;
}

int protfs_futex_trylock(uint32_t *word) {
  uint32_t expected = 0;
  return __atomic_compare_exchange_n(word, &expected, self(), 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED) ? 0 : EBUSY;
}

int protfs_futex_unlock(uint32_t *word) {
  uint32_t expected = self();
  if (__atomic_compare_exchange_n(word, &expected, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) return 0;
  if ((expected & FUTEX_TID_MASK) != self()) return EPERM;
  /* Waiters: the kernel gives the lock to the first of them. */
  return futex(word, FUTEX_UNLOCK_PI_PRIVATE);
}

int protfs_futex_owned(const uint32_t *word) {
  return (__atomic_load_n(word, __ATOMIC_RELAXED) & FUTEX_TID_MASK) == self();
}
