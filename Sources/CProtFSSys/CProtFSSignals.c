// protfs_forward_signals (CProtFSSys.h): the signals a process receives, as bytes on a pipe.
#define _GNU_SOURCE
#include "CProtFSSys.h"
#include "CProtFSSpawn.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t protfs_forward_fd = -1;

static void protfs_forward_handler(int signal_number) {
  int saved = errno;
  unsigned char byte = (unsigned char)signal_number;
  ssize_t ignored = write(protfs_forward_fd, &byte, 1);
  (void)ignored;
  errno = saved;
}

int protfs_forward_signals(int write_end, const int *signals, int count) {
  protfs_forward_fd = write_end;
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = protfs_forward_handler;
  action.sa_flags = SA_RESTART;
  sigfillset(&action.sa_mask);
  sigset_t unblock;
  sigemptyset(&unblock);
  for (int i = 0; i < count; i++) {
    if (sigaction(signals[i], &action, NULL) != 0) return -1;
    sigaddset(&unblock, signals[i]);
  }
  /* A parent may have left them blocked (a child inherits its signal mask). */
  return pthread_sigmask(SIG_UNBLOCK, &unblock, NULL) == 0 ? 0 : -1;
}
