#ifndef CPROTFS_LAUNCH_H
#define CPROTFS_LAUNCH_H

/* The protfs program's fast way into a prewarmed app (`protfs app prewarm`): a constructor that
   runs before the Swift runtime and the command line are made, and, for
   `protfs [--device DEVICE] app launch BUNDLE-ID ... -- CMD` when BUNDLE-ID is held prewarmed on the
   device, hands the launch to the app's supervisor and exits with the app's status. Everything else
   (no prewarmed app, another form of the command, a refusal) goes on to the Swift program, which
   takes the same path itself (PrewarmedLaunch) or starts the app anew.

   The request is the one PrewarmedLaunch.LaunchRequest encodes: entries "LEN:BYTES\n", the number
   of words, the words (argv after the program), the working directory, the umask (as
   /proc/self/status shows it), then the environment's entries but the passcodes'. The supervisor
   parses the words itself and compares the launch with its own. */

#include <stddef.h>

/* Linking this target into the protfs program installs the constructor. This is the request it
   sends, exposed for a test that decodes it as the supervisor does: `count` words, the
   environment's entries (NULL-terminated; the passcodes' are left out), the directory and the
   umask. Allocates `*bytes` (the caller frees it); 0, or -1 when memory ran out. */
int protfs_launch_request(int count, char *const *words, char *const *environment, const char *directory,
                          const char *umask, char **bytes, size_t *length);

#endif
