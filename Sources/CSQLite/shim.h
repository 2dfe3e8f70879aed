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
