#ifndef PROTFS_CFUSE3_SHIM_H
#define PROTFS_CFUSE3_SHIM_H

/* libfuse3's low-level API, at the 3.5 interface level (Debian 12 ships 3.14). */
#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

/* Constants glibc declares only under _GNU_SOURCE, which Swift's Glibc module is built without. */
#define PROTFS_MOUNT_O_PATH 010000000
#define PROTFS_MOUNT_AT_EMPTY_PATH 0x1000
#define PROTFS_MOUNT_RENAME_EXCHANGE 2
#define PROTFS_MOUNT_MNT_DETACH 2
static const long PROTFS_MOUNT_UTIME_NOW = (1l << 30) - 1l;
static const long PROTFS_MOUNT_UTIME_OMIT = (1l << 30) - 2l;

/* A file handle (name_to_handle_at(2)): identifies an inode without holding it open, so the daemon
   needs no descriptor per file the kernel knows. Room for any filesystem's handle. */
#define PROTFS_MOUNT_HANDLE_MAX 128
struct protfs_file_handle {
  unsigned int handle_bytes;
  int handle_type;
  unsigned char f_handle[PROTFS_MOUNT_HANDLE_MAX];
};

/* The handle of the item `fd` holds (an O_PATH descriptor is fine); its length in bytes (header
   included), or -1 with errno set. */
static inline int protfs_name_to_handle(int fd, struct protfs_file_handle *handle) {
  int mount_id;
  handle->handle_bytes = PROTFS_MOUNT_HANDLE_MAX;
  if (syscall(SYS_name_to_handle_at, fd, "", handle, &mount_id, PROTFS_MOUNT_AT_EMPTY_PATH) != 0) return -1;
  return (int)(sizeof(unsigned int) + sizeof(int) + handle->handle_bytes);
}

/* The handle of the entry `name` of the directory `dirfd`, not following a symlink. */
static inline int protfs_name_to_handle_at(int dirfd, const char *name, struct protfs_file_handle *handle) {
  int mount_id;
  handle->handle_bytes = PROTFS_MOUNT_HANDLE_MAX;
  if (syscall(SYS_name_to_handle_at, dirfd, name, handle, &mount_id, 0) != 0) return -1;
  return (int)(sizeof(unsigned int) + sizeof(int) + handle->handle_bytes);
}

/* open_by_handle_at(2): opens the inode `handle` names, on the filesystem of `mount_fd`. */
static inline int protfs_open_by_handle(int mount_fd, const void *handle, int flags) {
  return (int)syscall(SYS_open_by_handle_at, mount_fd, handle, flags);
}

/* The daemon's heap: few arenas (its worker threads allocate small nodes, which per-thread arenas
   would scatter) and freed memory given back, undoing what the CLI sets for downloads. */
#include <malloc.h>
static inline void protfs_mount_tune_memory(void) {
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
}

/* The filesystem type (statfs(2)'s f_type) of `path`, or -1 with errno set. */
static inline long protfs_filesystem_type(const char *path) {
  struct statfs s;
  if (statfs(path, &s) != 0) return -1;
  return (long)s.f_type;
}

/* struct fuse_file_info keeps its flags in bitfields, which Swift cannot set: one setter each. */

static inline void protfs_fuse_set_direct_io(struct fuse_file_info *fi, int on) { fi->direct_io = on ? 1 : 0; }

static inline void protfs_fuse_set_keep_cache(struct fuse_file_info *fi, int on) { fi->keep_cache = on ? 1 : 0; }

static inline void protfs_fuse_set_cache_readdir(struct fuse_file_info *fi, int on) { fi->cache_readdir = on ? 1 : 0; }

/* Whether a write request carries the kernel's page cache being written back (FUSE_WRITE_CACHE). */
static inline int protfs_fuse_is_writeback(const struct fuse_file_info *fi) { return fi->writepage; }

/* The multithreaded loop: fuse_session_loop_mt is a macro over a versioned symbol. */
static inline int protfs_fuse_loop_mt(struct fuse_session *se, unsigned int max_idle_threads) {
  struct fuse_loop_config config;
  memset(&config, 0, sizeof config);
  config.clone_fd = 0;
  config.max_idle_threads = max_idle_threads;
  return fuse_session_loop_mt(se, &config);
}

/* fuse_session_new is a macro in newer headers; the arguments are built from a C array here. */
static inline struct fuse_session *protfs_fuse_session_new(int argc, char **argv,
                                                           const struct fuse_lowlevel_ops *ops, void *userdata) {
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  struct fuse_session *se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
  fuse_opt_free_args(&args);
  return se;
}

/* Replies to a read with `size` bytes of `fd` at `offset`, spliced when the kernel allows it. */
static inline int protfs_fuse_reply_fd(fuse_req_t req, int fd, size_t size, off_t offset) {
  struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
  buf.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
  buf.buf[0].fd = fd;
  buf.buf[0].pos = offset;
  return fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/* Copies a write's buffers (memory or a spliced pipe) to `fd` at `offset`; the count or -errno. */
static inline ssize_t protfs_fuse_write_to_fd(struct fuse_bufvec *in, int fd, off_t offset) {
  struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
  out.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
  out.buf[0].fd = fd;
  out.buf[0].pos = offset;
  return fuse_buf_copy(&out, in, (enum fuse_buf_copy_flags)0);
}

/* Copies a write's buffers (memory or a spliced pipe) into `memory` (`size` bytes, at least
   fuse_buf_size(in)): a sealed file's plaintext, which is encrypted before it reaches the disk. */
static inline ssize_t protfs_fuse_write_to_memory(struct fuse_bufvec *in, void *memory, size_t size) {
  struct fuse_bufvec out = FUSE_BUFVEC_INIT(size);
  out.buf[0].mem = memory;
  return fuse_buf_copy(&out, in, (enum fuse_buf_copy_flags)0);
}

/* The memory a write's data lies in when it is one buffer in memory (not a spliced pipe), its size
   in *size; NULL otherwise. */
static inline const void *protfs_fuse_buffers_memory(struct fuse_bufvec *in, size_t *size) {
  if (in->count != 1 || in->idx != 0 || (in->buf[0].flags & FUSE_BUF_IS_FD) || !in->buf[0].mem ||
      in->off > in->buf[0].size)
    return NULL;
  *size = in->buf[0].size - in->off;
  return (const char *)in->buf[0].mem + in->off;
}

/* The number of bytes a write carries. */
static inline size_t protfs_fuse_buffers_size(struct fuse_bufvec *in) { return fuse_buf_size(in); }

/* Asks for the capabilities the daemon relies on, when the kernel offers them. */
static inline void protfs_fuse_init_connection(struct fuse_conn_info *conn) {
  if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
  if (conn->capable & FUSE_CAP_SPLICE_MOVE) conn->want |= FUSE_CAP_SPLICE_MOVE;
  if (conn->capable & FUSE_CAP_SPLICE_READ) conn->want |= FUSE_CAP_SPLICE_READ;
  /* Listings always carry the entries' attributes (readdirplus), never a lookup per entry after. */
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  /* Writes arrive as large as the kernel allows (big writes are the default in FUSE 3). */
  conn->max_write = 1 << 20;
  conn->max_readahead = 1 << 20;
  /* Writes of class none go to the kernel's page cache and are written back to the daemon behind
     the writer (files of every other class are opened for direct I/O: each of their writes still
     reaches the daemon, which decides it when it happens). */
  if (conn->capable & FUSE_CAP_WRITEBACK_CACHE) conn->want |= FUSE_CAP_WRITEBACK_CACHE;
}

#endif
