/*
 * The system calls alone: what the lock, the unlock and the audit cost in the kernel when nothing
 * else runs, on the same tree and the same threads as protfs (benchmarks/floors.sh times it beside
 * protfs and the peer tool).
 *
 *   floors lock ROOT     per item: its class (getxattrat by name); per item the locked state
 *                        withdraws (class complete or complete-unless-open, own or inherited):
 *                        openat (no symlink followed), statx of the descriptor (type, links,
 *                        identity), the saved mode (fsetxattr, one 74-byte value for all, so
 *                        that ext4 shares its block as it shares protfs's records), fchmodat2 to
 *                        0000, close; files only (protfs also restricts the 40 directories of
 *                        class complete among 200: 0.04% of the items)
 *   floors unlock ROOT   per item: is there a saved mode (getxattrat by name); per item with one:
 *                        openat, statx, fgetxattr, fchmodat2 back, fremovexattr, close
 *   floors audit ROOT    per item: its class (getxattrat by name); per file, fstatat by name
 *                        (links, set-id bits, mode)
 *   floors journal-lock ROOT, floors journal-unlock ROOT
 *                        the same as lock and unlock with the saved modes kept in one journal per
 *                        thread instead of an attribute per item (a design the issue rules out,
 *                        measured for what it would leave): the lock writes each directory's
 *                        entries (inode, mode) in one write before its chmods and no attribute;
 *                        the unlock reads the journals, walks the tree and, for each entry whose
 *                        inode (from getdents64) is in them, opens, statxes, chmods and closes
 *
 * These are the calls protfs makes for each item (strace -c counts them, RESULTS.md), without
 * anything protfs does around them: no path strings, no checks, no output. Directories are read
 * with getdents64 through one descriptor each, on as many threads as the machine has cores.
 * The saved mode goes in `user.protfs.floor-mode`, a name as long as protfs's own, so that a run
 * never touches protfs's records. The calls go through protfs's own wrappers (CProtFSSys.h and
 * CProtFSItem.h: getxattrat, the descriptor's statx, its chmod), so that both make the same ones;
 * floors.sh compiles it from the repository's root with `-I.`. Prints the seconds it took.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "Sources/CProtFSSys/include/CProtFSItem.h"
#include "Sources/CProtFSSys/include/CProtFSSys.h"

static const char *CLASS = "user.protfs.class";
static const char *SAVED = "user.protfs.floor-mode";
/* As long as a protfs record: "0644 0 0 " and 64 hex digits, plus one. */
static const char RECORD[] = "0644 0 0 00000000000000000000000000000000000000000000000000000000000000000";

enum mode { LOCK, UNLOCK, AUDIT, JOURNAL_LOCK, JOURNAL_UNLOCK };
static enum mode mode;

/* Whether the locked state withdraws class `value` (`length` bytes; -1: none of its own). */
static int withdrawn(const char *value, long length, int inherited) {
  if (length < 0) return inherited;
  return (length == 24 && memcmp(value, "NSFileProtectionComplete", 24) == 0) ||
         (length == 34 && memcmp(value, "NSFileProtectionCompleteUnlessOpen", 34) == 0);
}

/* The work queue: directories to read, each with whether its children inherit a withdrawn class. */
struct job {
  int fd;
  int inherited;
};
static struct job *jobs;
static size_t queued, taken, capacity;
static int busy;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

static void push(int fd, int inherited) {
  pthread_mutex_lock(&lock);
  if (queued == capacity) {
    capacity = capacity ? capacity * 2 : 1024;
    jobs = realloc(jobs, capacity * sizeof *jobs);
    if (!jobs) abort();
  }
  jobs[queued++] = (struct job){fd, inherited};
  pthread_cond_signal(&changed);
  pthread_mutex_unlock(&lock);
}

static int pop(struct job *out) {
  pthread_mutex_lock(&lock);
  while (taken == queued && busy > 0) pthread_cond_wait(&changed, &lock);
  if (taken == queued) {
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    return 0;
  }
  *out = jobs[taken++];
  busy++;
  pthread_mutex_unlock(&lock);
  return 1;
}

static void done(void) {
  pthread_mutex_lock(&lock);
  busy--;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
}

/* The journal: one file per thread under the tree's parent, and the inodes read back for unlock. */
static const char *journalDirectory;
static __thread int journal = -1;
static uint64_t *journaled;
static size_t journaledCount;

static int compareInodes(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int isJournaled(uint64_t inode) {
  return bsearch(&inode, journaled, journaledCount, sizeof inode, compareInodes) != NULL;
}

static void fail(const char *what, const char *name) {
  fprintf(stderr, "floors: %s %s: %s\n", what, name, strerror(errno));
  exit(1);
}

static void lock_item(int dirfd, const char *name, int isDirectory) {
  int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("open", name);
  struct protfs_item_status status;
  if (protfs_item_status(fd, &status) != 0) fail("statx", name);
  if (fsetxattr(fd, SAVED, RECORD, sizeof RECORD - 1, XATTR_CREATE) != 0 && errno != EEXIST) fail("save", name);
  mode_t restricted = isDirectory ? (status.mode & 0555) : 0;
  if (protfs_item_chmod(fd, restricted) != 0) fail("chmod", name);
  close(fd);
}

static void unlock_item(int dirfd, const char *name, int isDirectory) {
  char value[128];
  if (protfs_getxattrat(dirfd, name, AT_SYMLINK_NOFOLLOW, SAVED, value, sizeof value) < 0) {
    if (errno == ENODATA) return;
    fail("probe", name);
  }
  int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("open", name);
  struct protfs_item_status status;
  if (protfs_item_status(fd, &status) != 0) fail("statx", name);
  if (fgetxattr(fd, SAVED, value, sizeof value) < 0) fail("read", name);
  if (protfs_item_chmod(fd, isDirectory ? 0755 : 0644) != 0) fail("chmod", name);
  if (fremovexattr(fd, SAVED) != 0) fail("remove", name);
  close(fd);
}

static void journal_lock_item(int dirfd, const char *name, uint64_t *entries, size_t *count) {
  int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("open", name);
  struct protfs_item_status status;
  if (protfs_item_status(fd, &status) != 0) fail("statx", name);
  entries[(*count)++] = status.inode;
  entries[(*count)++] = status.mode;
  if (protfs_item_chmod(fd, 0) != 0) fail("chmod", name);
  close(fd);
}

static void journal_unlock_item(int dirfd, const char *name) {
  int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("open", name);
  struct protfs_item_status status;
  if (protfs_item_status(fd, &status) != 0) fail("statx", name);
  if (protfs_item_chmod(fd, 0644) != 0) fail("chmod", name);
  close(fd);
}

static void visit(struct job job) {
  char buffer[32768], value[128];
  /* A directory's journal entries, written in one go before its chmods take effect (the chmods
     here come first only because they are counted per entry; the write is the same). */
  static __thread uint64_t entries[2 * 4096];
  size_t pending = 0;
  for (;;) {
    long count = syscall(SYS_getdents64, job.fd, buffer, sizeof buffer);
    if (count < 0) fail("read directory", "");
    if (count == 0) break;
    for (long offset = 0; offset < count;) {
      struct dirent64 *entry = (struct dirent64 *)(buffer + offset);
      offset += entry->d_reclen;
      const char *name = entry->d_name;
      if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
      int isDirectory = entry->d_type == DT_DIR;
      if (entry->d_type != DT_REG && !isDirectory) continue;
      int withdraws = job.inherited;
      if (mode == JOURNAL_UNLOCK) {
        if (!isDirectory && isJournaled(entry->d_ino)) journal_unlock_item(job.fd, name);
      } else if (mode == AUDIT && !isDirectory) {
        struct stat st;
        if (fstatat(job.fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) fail("stat", name);
      }
      if (mode != UNLOCK && mode != JOURNAL_UNLOCK) {
        long length = protfs_getxattrat(job.fd, name, AT_SYMLINK_NOFOLLOW, CLASS, value, sizeof value);
        if (length < 0 && errno != ENODATA) fail("class", name);
        withdraws = withdrawn(value, length, job.inherited);
      }
      if (mode == LOCK && withdraws && !isDirectory) lock_item(job.fd, name, isDirectory);
      if (mode == UNLOCK) unlock_item(job.fd, name, isDirectory);
      if (mode == JOURNAL_LOCK && withdraws && !isDirectory) {
        if (pending + 2 > sizeof entries / sizeof *entries) abort();
        journal_lock_item(job.fd, name, entries, &pending);
      }
      if (isDirectory) {
        int child = openat(job.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child < 0) fail("open directory", name);
        push(child, withdraws);
      }
    }
  }
  if (pending > 0) {
    if (journal < 0) {
      char path[4096];
      snprintf(path, sizeof path, "%s/floors-journal.%ld", journalDirectory, (long)syscall(SYS_gettid));
      journal = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (journal < 0) fail("open journal", path);
    }
    if (write(journal, entries, pending * sizeof *entries) < 0) fail("write journal", "");
  }
  close(job.fd);
}

/* Reads every thread's journal into `journaled` (sorted inode numbers) and removes the files. */
static void load_journals(void) {
  DIR *directory = opendir(journalDirectory);
  if (!directory) fail("open", journalDirectory);
  size_t capacity = 0;
  struct dirent *entry;
  while ((entry = readdir(directory))) {
    if (strncmp(entry->d_name, "floors-journal.", 15) != 0) continue;
    int fd = openat(dirfd(directory), entry->d_name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("open journal", entry->d_name);
    struct stat st;
    fstat(fd, &st);
    size_t pairs = (size_t)st.st_size / (2 * sizeof(uint64_t));
    uint64_t *data = malloc((size_t)st.st_size + 1);
    if (read(fd, data, (size_t)st.st_size) != st.st_size) fail("read journal", entry->d_name);
    if (journaledCount + pairs > capacity) {
      capacity = (journaledCount + pairs) * 2;
      journaled = realloc(journaled, capacity * sizeof *journaled);
    }
    for (size_t i = 0; i < pairs; i++) journaled[journaledCount++] = data[2 * i];
    free(data);
    close(fd);
    unlinkat(dirfd(directory), entry->d_name, 0);
  }
  closedir(directory);
  qsort(journaled, journaledCount, sizeof *journaled, compareInodes);
}

static void *worker(void *unused) {
  (void)unused;
  struct job job;
  while (pop(&job)) {
    visit(job);
    done();
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: floors lock|unlock|audit|journal-lock|journal-unlock ROOT\n");
    return 64;
  }
  if (strcmp(argv[1], "lock") == 0) mode = LOCK;
  else if (strcmp(argv[1], "unlock") == 0) mode = UNLOCK;
  else if (strcmp(argv[1], "audit") == 0) mode = AUDIT;
  else if (strcmp(argv[1], "journal-lock") == 0) mode = JOURNAL_LOCK;
  else if (strcmp(argv[1], "journal-unlock") == 0) mode = JOURNAL_UNLOCK;
  else {
    fprintf(stderr, "floors: unknown mode %s\n", argv[1]);
    return 64;
  }
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int root = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) fail("open", argv[2]);
  char parent[4096];
  snprintf(parent, sizeof parent, "%s/..", argv[2]);
  journalDirectory = parent;
  if (mode == JOURNAL_UNLOCK) load_journals();
  push(root, 0);
  long threads = sysconf(_SC_NPROCESSORS_ONLN);
  if (threads < 1) threads = 1;
  pthread_t ids[64];
  if (threads > 64) threads = 64;
  for (long i = 0; i < threads; i++) pthread_create(&ids[i], NULL, worker, NULL);
  for (long i = 0; i < threads; i++) pthread_join(ids[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &end);
  printf("%.4f\n", (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9);
  return 0;
}
