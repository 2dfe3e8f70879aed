#define _GNU_SOURCE /* secure_getenv */

#include "CZip.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* The soname Debian's libzip4 package installs; $PROTFS_LIBZIP names another (the tests name a
   missing one). */
#define LIBZIP "libzip.so.4"

/* libzip's entry points, filled in once by load(). */
static struct {
  zip_t *(*fdopen)(int, int, int *);
  void (*discard)(zip_t *);
  zip_int64_t (*get_num_entries)(zip_t *, zip_flags_t);
  const char *(*get_name)(zip_t *, zip_uint64_t, zip_flags_t);
  int (*stat_index)(zip_t *, zip_uint64_t, zip_flags_t, zip_stat_t *);
  int (*file_get_external_attributes)(zip_t *, zip_uint64_t, zip_flags_t, zip_uint8_t *, zip_uint32_t *);
  zip_file_t *(*fopen_index)(zip_t *, zip_uint64_t, zip_flags_t);
  zip_int64_t (*fread)(zip_file_t *, void *, zip_uint64_t);
  int (*fclose)(zip_file_t *);
  const char *(*strerror)(zip_t *);
  const char *(*file_strerror)(zip_file_t *);
  void (*error_init_with_code)(zip_error_t *, int);
  const char *(*error_strerror)(zip_error_t *);
  void (*error_fini)(zip_error_t *);
} zip;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready;
static char failure[512];

static int resolve(void *library, void **slot, const char *symbol) {
  *slot = dlsym(library, symbol);
  if (*slot) return 1;
  snprintf(failure, sizeof failure, "the library has no %s", symbol);
  return 0;
}

static void load(void) {
  const char *name = secure_getenv("PROTFS_LIBZIP");
  if (!name || !*name) name = LIBZIP;
  void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *reason = dlerror();
    snprintf(failure, sizeof failure, "%s", reason ? reason : "dlopen failed");
    return;
  }
#define RESOLVE(field) \
  if (!resolve(library, (void **)&zip.field, "zip_" #field)) return
  RESOLVE(fdopen);
  RESOLVE(discard);
  RESOLVE(get_num_entries);
  RESOLVE(get_name);
  RESOLVE(stat_index);
  RESOLVE(file_get_external_attributes);
  RESOLVE(fopen_index);
  RESOLVE(fread);
  RESOLVE(fclose);
  RESOLVE(strerror);
  RESOLVE(file_strerror);
  RESOLVE(error_init_with_code);
  RESOLVE(error_strerror);
  RESOLVE(error_fini);
#undef RESOLVE
  ready = 1;
}

const char *protfs_zip_load(void) {
  pthread_once(&once, load);
  return ready ? NULL : failure;
}

zip_t *protfs_zip_fdopen(int fd, int flags, int *error) { return zip.fdopen(fd, flags, error); }
void protfs_zip_discard(zip_t *archive) { zip.discard(archive); }
zip_int64_t protfs_zip_get_num_entries(zip_t *archive, zip_flags_t flags) {
  return zip.get_num_entries(archive, flags);
}
const char *protfs_zip_get_name(zip_t *archive, zip_uint64_t index, zip_flags_t flags) {
  return zip.get_name(archive, index, flags);
}
int protfs_zip_stat_index(zip_t *archive, zip_uint64_t index, zip_flags_t flags, zip_stat_t *stat) {
  return zip.stat_index(archive, index, flags, stat);
}
int protfs_zip_file_get_external_attributes(
    zip_t *archive, zip_uint64_t index, zip_flags_t flags, zip_uint8_t *system, zip_uint32_t *attributes) {
  return zip.file_get_external_attributes(archive, index, flags, system, attributes);
}
zip_file_t *protfs_zip_fopen_index(zip_t *archive, zip_uint64_t index, zip_flags_t flags) {
  return zip.fopen_index(archive, index, flags);
}
zip_int64_t protfs_zip_fread(zip_file_t *file, void *buffer, zip_uint64_t count) {
  return zip.fread(file, buffer, count);
}
int protfs_zip_fclose(zip_file_t *file) { return zip.fclose(file); }
const char *protfs_zip_strerror(zip_t *archive) { return zip.strerror(archive); }
const char *protfs_zip_file_strerror(zip_file_t *file) { return zip.file_strerror(file); }

void protfs_zip_error_message(int code, char *buffer, size_t size) {
  zip_error_t error;
  zip.error_init_with_code(&error, code);
  snprintf(buffer, size, "%s", zip.error_strerror(&error));
  zip.error_fini(&error);
}
