#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: the one option the task store sets.
 * Closing the last connection then leaves the write-ahead log for the next open to use instead
 * of checkpointing it, which would flush the log and the database to disk (milliseconds at the
 * end of every protfs command that touched the store). */
static inline int protfs_sqlite3_no_checkpoint_on_close(sqlite3 *db) {
  return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}
