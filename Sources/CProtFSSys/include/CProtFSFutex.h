#ifndef CPROTFSFUTEX_H
#define CPROTFSFUTEX_H

#include <stdint.h>

/* A lock in one 32-bit word, as the kernel's priority-inheriting futexes keep one (futex(2),
   FUTEX_LOCK_PI): 0 when free, else its owner's thread id, with FUTEX_WAITERS set while others
   wait. Taking a free lock and giving one back that nobody waits for are a compare-and-swap in the
   process; only a contended call enters the kernel, which looks at the word during that call
   alone. So a free word is plain memory that may be copied and moved, as Apple's os_unfair_lock
   (ProtFSKit's), and a waiter lends its priority to the owner, as on Apple's platforms.

   Each call returns 0 or an errno value. */

/* Takes the lock, waiting while another thread holds it; EDEADLK when this thread holds it. */
int protfs_futex_lock(uint32_t *word);
/* Takes the lock if it is free: 0, else EBUSY. */
int protfs_futex_trylock(uint32_t *word);
/* Gives the lock back, to the first waiter if there is one; EPERM when this thread does not hold it. */
int protfs_futex_unlock(uint32_t *word);
/* Whether this thread holds the lock (1) or not (0). */
int protfs_futex_owned(const uint32_t *word);

#endif
