// The confined spawn's mount namespace (CProtFSSpawnInternal.h): an app's sandbox, and the detach
// of every protfs mount the program must not reach. Run by the spawn's child: no allocation.
#define _GNU_SOURCE
#include "CProtFSSys.h"
#include "CProtFSSpawn.h"
#include "CProtFSSpawnInternal.h"

#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* The id of the mount `fd` is on, as /proc/self/fdinfo gives it (which asks nothing of the file
   system, so a dead FUSE mount has one too), or 0. No allocation. */
static uint64_t protfs_fd_mount_id(int fd) {
  char path[40];
  protfs_fd_path(fd, path); /* "/proc/self/fd/N" becomes "/proc/self/fdinfo/N" */
  char info[40] = "/proc/self/fdinfo/";
  memcpy(info + 18, path + 14, strlen(path + 14) + 1);
  int file = open(info, O_RDONLY | O_CLOEXEC);
  if (file < 0) return 0;
  char text[512];
  ssize_t length = read(file, text, sizeof(text) - 1);
  close(file);
  if (length <= 0) return 0;
  text[length] = 0;
  const char *found = strstr(text, "mnt_id:");
  if (found == NULL) return 0;
  found += 7;
  while (*found == ' ' || *found == '\t') found++;
  uint64_t id = 0;
  for (; *found >= '0' && *found <= '9'; found++) id = id * 10 + (uint64_t)(*found - '0');
  return id;
}

/* One line of /proc/self/mountinfo, as much of it as the detach needs. */
struct protfs_mount_line {
  uint64_t id;
  unsigned major, minor;
  char mountpoint[4096]; /* decoded (the kernel writes space, tab, newline and \ as \ooo) */
  int too_long;
  char type[64];
};

/* Where the reading of mountinfo is: the line so far, the field being read, the mount point's
   escape being decoded. */
struct protfs_mount_reader {
  struct protfs_mount_line line;
  char field[64];
  int field_length, index, after_dash, escape, escaped, length;
};

/* Takes the field that `c` (a space or a line end) ends into the line; at a line's end, calls
   `each` with the line when it was whole, and starts the next. */
static void protfs_mount_end_field(struct protfs_mount_reader *reader, char c,
                                   void (*each)(const struct protfs_mount_line *, void *), void *context) {
  struct protfs_mount_line *line = &reader->line;
  char *field = reader->field;
  int field_length = reader->field_length;
  field[field_length < (int)sizeof(reader->field) ? field_length : (int)sizeof(reader->field) - 1] = 0;
  if (reader->index == 0) {
    line->id = 0;
    for (int k = 0; k < field_length && field[k] >= '0' && field[k] <= '9'; k++) {
      line->id = line->id * 10 + (uint64_t)(field[k] - '0');
    }
  } else if (reader->index == 2) {
    unsigned *part = &line->major;
    line->major = line->minor = 0;
    for (int k = 0; k < field_length && field[k] != 0; k++) {
      if (field[k] == ':') part = &line->minor;
      else if (field[k] >= '0' && field[k] <= '9') *part = *part * 10 + (unsigned)(field[k] - '0');
    }
  } else if (reader->index == 4) {
    line->mountpoint[reader->length] = 0;
  } else if (reader->index >= 6 && reader->after_dash == 0 && field_length == 1 && field[0] == '-') {
    reader->after_dash = 1;
  } else if (reader->after_dash == 1) {
    /* A type as long as the field's room is none the detach looks for. */
    if (field_length < (int)sizeof(reader->field)) memcpy(line->type, field, (size_t)field_length + 1);
    reader->after_dash = 2;
  }
  reader->index++;
  reader->field_length = 0;
  if (c == '\n') {
    if (reader->after_dash == 2) each(line, context);
    memset(line, 0, sizeof(*line));
    reader->index = reader->after_dash = reader->escape = reader->length = 0;
  }
}

/* Takes `c`, a character of a field: into the mount point, decoded, or into the field. */
static void protfs_mount_take(struct protfs_mount_reader *reader, char c) {
  if (reader->index == 4) {
    if (reader->escape > 0) {
      reader->escaped = reader->escaped * 8 + (c - '0');
      if (++reader->escape == 4) {
        c = (char)reader->escaped;
        reader->escape = 0;
      } else {
        return;
      }
    } else if (c == '\\') {
      reader->escape = 1;
      reader->escaped = 0;
      return;
    }
    if (reader->length < (int)sizeof(reader->line.mountpoint) - 1) reader->line.mountpoint[reader->length++] = c;
    else reader->line.too_long = 1;
  } else if (reader->field_length < (int)sizeof(reader->field)) {
    reader->field[reader->field_length++] = c;
  } else {
    reader->field_length = (int)sizeof(reader->field); /* longer than any field read here: ignored */
  }
}

/* Reads the fields of mountinfo's lines from `file` one character at a time (no allocation, no
   line too long for it), calling `each` with every whole line. -1 when the file cannot be read.
   ProtFSSystem's MountInfo reads the same table in Swift; the forked child cannot call it (it
   allocates), hence this reader. */
static int protfs_each_mount(int file, void (*each)(const struct protfs_mount_line *, void *), void *context) {
  struct protfs_mount_reader reader;
  memset(&reader, 0, sizeof(reader));
  char buffer[4096];
  for (;;) {
    ssize_t count = read(file, buffer, sizeof(buffer));
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) return -1;
    if (count == 0) return 0;
    for (ssize_t i = 0; i < count; i++) {
      if (buffer[i] == ' ' || buffer[i] == '\n') protfs_mount_end_field(&reader, buffer[i], each, context);
      else protfs_mount_take(&reader, buffer[i]);
    }
  }
}

/* What a pass of the detach spares and how far it got. */
struct protfs_detach_pass {
  uint64_t spared_id;     /* a mount kept by its id, or 0 */
  dev_t spared_device;    /* mounts of this file system kept, or 0 */
  int detached;
};

/* Detaches the mount of `line` when it is a protfs mount the pass does not spare: taken by a
   descriptor first, and detached only when that descriptor is on that very mount (its id), so a
   path swapped for a link after the kernel wrote it leads the detach nowhere else. */
static void protfs_detach_one(const struct protfs_mount_line *line, void *context) {
  struct protfs_detach_pass *pass = context;
  /* MountRegistry.filesystemType, the type every protfs mount has. */
  if (strcmp(line->type, "fuse.protfs") != 0 || line->too_long) return;
  if (line->id == pass->spared_id) return;
  if (pass->spared_device != 0 && makedev(line->major, line->minor) == pass->spared_device) return;
  int fd = open(line->mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  if (protfs_fd_mount_id(fd) == line->id) {
    char link[32];
    protfs_fd_path(fd, link);
    if (umount2(link, MNT_DETACH) == 0) pass->detached++;
  }
  close(fd);
}

/* Detaches from this process's mount namespace, which must take nothing more from the system's,
   every protfs mount (other devices', other apps', the device's own) but those it is told to
   keep: `keep_mount`, the mount at `target` by its id (an app's sandbox keeps its container's copy
   and drops the mount it was taken from), or else every mount of the file system at `target`
   (`protfs exec` keeps its device's mount). The namespace's own table says which mounts there are,
   read after the namespace was made, so none made since the parent looked is missed; the table is
   read again until a pass detaches nothing (stacked mounts come off one at a time). A mount that
   no path reaches (covered by another) stays, out of reach. 0, or -1 with errno set. No
   allocation. */
int protfs_spawn_detach(const char *target, int keep_mount) {
  int kept = open(target, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (kept < 0) return -1;
  struct protfs_detach_pass pass = {0, 0, 0};
  struct stat bound;
  if (keep_mount) {
    pass.spared_id = protfs_fd_mount_id(kept);
  } else if (fstat(kept, &bound) == 0) {
    pass.spared_device = bound.st_dev;
  }
  close(kept);
  if (pass.spared_id == 0 && pass.spared_device == 0) {
    errno = EIO;
    return -1;
  }
  for (int round = 0; round < 64; round++) {
    int table = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (table < 0) return -1;
    pass.detached = 0;
    int read_all = protfs_each_mount(table, protfs_detach_one, &pass);
    int error = errno;
    close(table);
    if (read_all != 0) {
      errno = error;
      return -1;
    }
    if (pass.detached == 0) return 0;
  }
  return 0;
}

/* Makes `target` a read-only tmpfs holding `tree` (a detached mount) alone at `point`, or nothing
   when `tree` is -1. The tmpfs allows no exec; a program in `tree` runs, as its own mount allows.
   0, or -1 with errno set. No allocation. */
static int protfs_spawn_sole_mount(const char *target, int tree, const char *point) {
  const unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (mount("protfs-sandbox", target, "tmpfs", flags, "mode=0755,size=4k,nr_inodes=4") != 0) return -1;
  if (tree >= 0) {
    if (mkdir(point, 0755) != 0) return -1;
    if (syscall(429 /* move_mount */, tree, "", AT_FDCWD, point, 0x04 /* MOVE_MOUNT_F_EMPTY_PATH */) != 0) {
      return -1;
    }
  }
  return mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, NULL);
}

/* An app's sandbox (`spawn->sandbox_tree`): enters a mount namespace of its own in which
   `mount_target`, the device's Containers/, is a read-only tmpfs with the app's own container
   alone at `sandbox_point`: the detached copy the parent took of it by descriptors, so that no
   path to the container is resolved here. No other app's container has a path there, nor (with
   `bundles_target`) another app's bundle. 0, or -1 with errno set. No allocation. */
int protfs_spawn_sandbox(const struct protfs_spawn *spawn) {
  if (syscall(SYS_unshare, PROTFS_CLONE_NEWNS) != 0) return -1;
  /* Private: a mount made later elsewhere (another protfs mount, say) never shows here. */
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
  if (protfs_spawn_sole_mount(spawn->mount_target, spawn->sandbox_tree, spawn->sandbox_point) != 0) return -1;
  if (spawn->bundles_target == NULL) return 0;
  return protfs_spawn_sole_mount(spawn->bundles_target, spawn->bundle_tree, spawn->bundle_point);
}
