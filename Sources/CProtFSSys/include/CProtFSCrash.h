#ifndef CPROTFSCRASH_H
#define CPROTFSCRASH_H

#include <stdint.h>

/* What a ProtFSKit app's crash handler sends its supervisor as it crashes (docs/apps.md): the
   signal and the thread that took it. The supervisor believes none of it beyond its bounds: the
   signal must be the one the app died of, the thread a number in range, the name is escaped. */
struct protfs_crash_record {
  char magic[8];          /* PROTFS_CRASH_MAGIC, unterminated */
  int32_t signal;
  int32_t thread;         /* 0 for the main thread, the others by thread id from 1; -1 unknown */
  uint8_t name_length;    /* of `name`, at most its size */
  char name[47];          /* the thread's name, UTF-8, unterminated: the main thread's
                             com.apple.main-thread, another's its own (none when unnamed) */
};

#define PROTFS_CRASH_MAGIC "PFSCRASH"

/* Installs the crash handler for SIGILL, SIGTRAP, SIGABRT, SIGSEGV, SIGBUS and SIGFPE, which does
   only what a signal handler may: it sends one record on `socket` without blocking, then hands
   the signal on to the handler installed before it (the Swift runtime's backtracer) or to the
   default, which ends the process with it. The calling thread gets an alternate stack, so that
   its stack's overflow is caught too. Returns 0, or -1 with errno. */
int protfs_crash_handler_install(int socket);

#endif
