// Descriptors passed over a Unix socket with SCM_RIGHTS (CProtFSSys.h).
#define _GNU_SOURCE
#include "CProtFSSys.h"

#include <string.h>
#include <sys/socket.h>

ssize_t protfs_send_descriptors(int socket, const void *bytes, size_t length, const int *fds, int count) {
  if (count < 0 || count > 8) {
    errno = EINVAL;
    return -1;
  }
  struct iovec part = {.iov_base = (void *)bytes, .iov_len = length};
  union {
    char buffer[CMSG_SPACE(8 * sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1};
  if (count > 0) {
    message.msg_control = control.buffer;
    message.msg_controllen = CMSG_SPACE(count * sizeof(int));
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(count * sizeof(int));
    memcpy(CMSG_DATA(header), fds, count * sizeof(int));
  }
  return sendmsg(socket, &message, MSG_NOSIGNAL);
}

ssize_t protfs_receive_descriptors(int socket, void *bytes, size_t length, int *fds, int capacity, int *count) {
  *count = 0;
  struct iovec part = {.iov_base = bytes, .iov_len = length};
  union {
    char buffer[CMSG_SPACE(8 * sizeof(int))];
    struct cmsghdr align;
  } control;
  struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control.buffer,
                           .msg_controllen = sizeof(control.buffer)};
  ssize_t received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  if (received < 0) return -1;
  for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    int arrived = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < arrived; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if (*count < capacity) {
        fds[(*count)++] = fd;
      } else {
        close(fd);
      }
    }
  }
  if (message.msg_flags & MSG_CTRUNC) {
    for (int i = 0; i < *count; i++) close(fds[i]);
    *count = 0;
    errno = EMSGSIZE;
    return -1;
  }
  return received;
}
