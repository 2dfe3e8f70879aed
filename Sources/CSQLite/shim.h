#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: the one option the task store sets.
 * Closing the last connection then leaves the write-ahead log for the next open to use instead
 * of checkpointing it, which would flush the log and the database to disk (milliseconds at the
 * end of every protfs command that touched the store). */
static inline int protfs_sqlite3_no_checkpoint_on_close(sqlite3 *db) {
  return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}

#include <stdint.h>
#include <unistd.h>

/* SQLite's own busy handler sleeps 1, 2, 5, 10, 15, 20 and 25 ms between tries, so a writer that
 * held the lock for a millisecond can cost the waiter ten. This one tries again every 100 µs for
 * the first 10 ms, then every millisecond, until `context` milliseconds have passed. */
static int protfs_sqlite3_busy(void *context, int tries) {
  intptr_t limit = (intptr_t)context;
  intptr_t waited = tries < 100 ? tries / 10 : 10 + (tries - 100);
  if (waited >= limit) return 0;
  usleep(tries < 100 ? 100 : 1000);
  return 1;
}

/* Waits up to `milliseconds` for another connection's lock (none at 0), as sqlite3_busy_timeout
 * does, with protfs_sqlite3_busy's finer steps. */
static inline int protfs_sqlite3_busy_timeout(sqlite3 *db, int milliseconds) {
  return sqlite3_busy_handler(db, milliseconds > 0 ? protfs_sqlite3_busy : 0, (void *)(intptr_t)milliseconds);
}

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A read-only VFS, "protfs-descriptor", whose main database is a descriptor the caller holds:
 * `import-backup` reads a backup's Manifest.db through the descriptor it opened beneath the backup
 * folder. SQLite's own VFS cannot: given /proc/self/fd/N it resolves the link back to the file's
 * path (readlink) and opens that path, through whatever a user put there since. The database is
 * named PROTFS_SQLITE3_DESCRIPTOR_PREFIX followed by the descriptor's number; a journal or a log
 * of it does not exist, and temporary files (a sort's) are the default VFS's. Reads past the end
 * are short reads (zeros), never a fault: the file's owner may truncate it while it is read. */
#define PROTFS_SQLITE3_DESCRIPTOR_VFS "protfs-descriptor"
#define PROTFS_SQLITE3_DESCRIPTOR_PREFIX "/protfs-descriptor/"

typedef struct {
  sqlite3_file base;
  int fd;
} protfs_sqlite3_held_file;

static int protfs_sqlite3_held_close(sqlite3_file *file) {
  close(((protfs_sqlite3_held_file *)file)->fd);
  return SQLITE_OK;
}

static int protfs_sqlite3_held_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
  int fd = ((protfs_sqlite3_held_file *)file)->fd;
  char *bytes = buffer;
  int done = 0;
  while (done < amount) {
    ssize_t count = pread(fd, bytes + done, (size_t)(amount - done), offset + done);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) return SQLITE_IOERR_READ;
    if (count == 0) {
      memset(bytes + done, 0, (size_t)(amount - done));
      return SQLITE_IOERR_SHORT_READ;
    }
    done += (int)count;
  }
  return SQLITE_OK;
}

static int protfs_sqlite3_held_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
  return SQLITE_READONLY;
}

static int protfs_sqlite3_held_truncate(sqlite3_file *file, sqlite3_int64 size) { return SQLITE_READONLY; }

static int protfs_sqlite3_held_sync(sqlite3_file *file, int flags) { return SQLITE_OK; }

static int protfs_sqlite3_held_size(sqlite3_file *file, sqlite3_int64 *size) {
  struct stat status;
  if (fstat(((protfs_sqlite3_held_file *)file)->fd, &status) != 0) return SQLITE_IOERR_FSTAT;
  *size = status.st_size;
  return SQLITE_OK;
}

static int protfs_sqlite3_held_lock(sqlite3_file *file, int level) { return SQLITE_OK; }

static int protfs_sqlite3_held_reserved(sqlite3_file *file, int *reserved) {
  *reserved = 0;
  return SQLITE_OK;
}

static int protfs_sqlite3_held_control(sqlite3_file *file, int operation, void *argument) { return SQLITE_NOTFOUND; }

static int protfs_sqlite3_held_sector(sqlite3_file *file) { return 4096; }

static int protfs_sqlite3_held_characteristics(sqlite3_file *file) { return SQLITE_IOCAP_IMMUTABLE; }

static const sqlite3_io_methods protfs_sqlite3_held_methods = {
  1, protfs_sqlite3_held_close, protfs_sqlite3_held_read, protfs_sqlite3_held_write, protfs_sqlite3_held_truncate,
  protfs_sqlite3_held_sync, protfs_sqlite3_held_size, protfs_sqlite3_held_lock, protfs_sqlite3_held_lock,
  protfs_sqlite3_held_reserved, protfs_sqlite3_held_control, protfs_sqlite3_held_sector,
  protfs_sqlite3_held_characteristics,
};

/* Whether `name` is one of this VFS's names (the database's, or one SQLite derives from it). */
static int protfs_sqlite3_is_held(const char *name) {
  return name != 0 && strncmp(name, PROTFS_SQLITE3_DESCRIPTOR_PREFIX, strlen(PROTFS_SQLITE3_DESCRIPTOR_PREFIX)) == 0;
}

static int protfs_sqlite3_held_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags,
                                    int *outFlags) {
  sqlite3_vfs *real = vfs->pAppData;
  file->pMethods = 0;
  if (name == 0) return real->xOpen(real, name, file, flags, outFlags);
  if (!protfs_sqlite3_is_held(name) || !(flags & SQLITE_OPEN_MAIN_DB) || (flags & SQLITE_OPEN_READWRITE)) {
    return SQLITE_CANTOPEN;
  }
  const char *digits = name + strlen(PROTFS_SQLITE3_DESCRIPTOR_PREFIX);
  char *end = 0;
  long number = strtol(digits, &end, 10);
  if (end == digits || *end != 0 || number < 0 || number > 1 << 30) return SQLITE_CANTOPEN;
  int fd = fcntl((int)number, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return SQLITE_CANTOPEN;
  ((protfs_sqlite3_held_file *)file)->fd = fd;
  file->pMethods = &protfs_sqlite3_held_methods;
  if (outFlags) *outFlags = SQLITE_OPEN_READONLY;
  return SQLITE_OK;
}

static int protfs_sqlite3_held_delete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
  sqlite3_vfs *real = vfs->pAppData;
  return protfs_sqlite3_is_held(name) ? SQLITE_IOERR_DELETE : real->xDelete(real, name, syncDirectory);
}

static int protfs_sqlite3_held_access(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
  sqlite3_vfs *real = vfs->pAppData;
  if (!protfs_sqlite3_is_held(name)) return real->xAccess(real, name, flags, result);
  *result = 0;
  return SQLITE_OK;
}

static int protfs_sqlite3_held_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
  sqlite3_vfs *real = vfs->pAppData;
  if (!protfs_sqlite3_is_held(name)) return real->xFullPathname(real, name, size, out);
  if ((int)strlen(name) >= size) return SQLITE_CANTOPEN;
  strcpy(out, name);
  return SQLITE_OK;
}

/* Registers the "protfs-descriptor" VFS (not as the default); call once. SQLITE_OK, or an error. */
static inline int protfs_sqlite3_register_descriptor_vfs(void) {
  static sqlite3_vfs vfs;
  sqlite3_vfs *real = sqlite3_vfs_find(0);
  if (real == 0) return SQLITE_ERROR;
  vfs = *real;
  vfs.pNext = 0;
  vfs.zName = PROTFS_SQLITE3_DESCRIPTOR_VFS;
  vfs.pAppData = real;
  if (vfs.szOsFile < (int)sizeof(protfs_sqlite3_held_file)) vfs.szOsFile = (int)sizeof(protfs_sqlite3_held_file);
  vfs.xOpen = protfs_sqlite3_held_open;
  vfs.xDelete = protfs_sqlite3_held_delete;
  vfs.xAccess = protfs_sqlite3_held_access;
  vfs.xFullPathname = protfs_sqlite3_held_full_pathname;
  return sqlite3_vfs_register(&vfs, 0);
}

/* The settings SQLite's documentation gives for reading a database someone else wrote
 * ("Defense Against The Dark Arts"): no writes to shadow tables, and no function with side effects
 * run from the schema (a view, a trigger, a generated column). */
static inline void protfs_sqlite3_distrust(sqlite3 *db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)0);
}
