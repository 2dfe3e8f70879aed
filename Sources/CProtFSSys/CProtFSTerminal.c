// A program's pseudo-terminal and the relay between it and the caller's streams (CProtFSSpawn.h).
#define _GNU_SOURCE
#include "CProtFSSys.h"
#include "CProtFSSpawn.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>

int protfs_open_pty(int *master, int *slave, uid_t owner) {
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -1;
  char name[128];
  if (grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, name, sizeof(name)) != 0) {
    int saved = errno;
    close(m);
    errno = saved;
    return -1;
  }
  int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0 || (owner != (uid_t)-1 && (fchown(s, owner, (gid_t)-1) != 0 || fchmod(s, 0620) != 0))) {
    int saved = errno;
    if (s >= 0) close(s);
    close(m);
    errno = saved;
    return -1;
  }
  *master = m;
  *slave = s;
  return 0;
}

/* Writes all of `bytes` to `fd` (a terminal may take them in parts); -1 with errno. */
static int protfs_write_all(int fd, const char *bytes, ssize_t length) {
  while (length > 0) {
    ssize_t written = write(fd, bytes, (size_t)length);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd wait = {.fd = fd, .events = POLLOUT};
        (void)poll(&wait, 1, 1000);
        continue;
      }
      return -1;
    }
    bytes += written;
    length -= written;
  }
  return 0;
}

int protfs_relay_terminal(int input, int output, int master, int stop, int suspend_char, pid_t leader) {
  char buffer[16384];
  for (;;) {
    struct pollfd polled[3] = {{.fd = master, .events = POLLIN}, {.fd = stop, .events = POLLIN},
                               {.fd = input, .events = POLLIN}};
    int count = input >= 0 ? 3 : 2;
    if (poll(polled, (nfds_t)count, -1) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (polled[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t got = read(master, buffer, sizeof(buffer));
      /* EIO: every slave descriptor is closed (the program and all it started are gone). */
      if (got < 0 && errno == EIO) return 1;
      if (got == 0) return 1;
      if (got > 0 && output >= 0 && protfs_write_all(output, buffer, got) != 0 && errno != EPIPE) return -1;
      if (got < 0 && errno != EINTR && errno != EAGAIN) return -1;
    }
    if (polled[1].revents & (POLLIN | POLLHUP)) {
      /* What the program wrote before it ended is still in the master: out with it first. */
      int flags = fcntl(master, F_GETFL);
      if (flags >= 0) (void)fcntl(master, F_SETFL, flags | O_NONBLOCK);
      /* Bounded: a process the program left behind may keep writing. */
      for (int part = 0; part < 256; part++) {
        ssize_t got = read(master, buffer, sizeof(buffer));
        if (got <= 0) break;
        if (output >= 0) (void)protfs_write_all(output, buffer, got);
      }
      if (flags >= 0) (void)fcntl(master, F_SETFL, flags);
      return 0;
    }
    if (count == 3 && (polled[2].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = read(input, buffer, sizeof(buffer));
      if (got <= 0) {
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        /* The caller's input ended: nothing more to pass on, the output still flows. */
        input = -1;
        continue;
      }
      if (suspend_char >= 0 && suspend_char <= 255 && tcgetpgrp(master) == leader) {
        char *at = memchr(buffer, suspend_char, (size_t)got);
        if (at != NULL) {
          if (protfs_write_all(master, buffer, at - buffer) != 0) return -1;
          return 2;
        }
      }
      if (protfs_write_all(master, buffer, got) != 0) return -1;
    }
  }
}
