#ifndef PROTFS_CZIP_H
#define PROTFS_CZIP_H

/* libzip, loaded when protfs first reads an .ipa instead of linked.

   Linked, libzip would make every protfs command load it and what it links (libcrypto among
   them, which CCrypto loads only when first used) before main, though only `inspect` and the
   `--from-app` options read an archive. Only the app package reader (ProtFSAppBundle) calls these
   functions, after protfs_zip_load() succeeded; libzip's header still gives the types and
   constants. */

#include <zip.h>

/* Loads libzip (libzip.so.4, or $PROTFS_LIBZIP) once per process; returns NULL when it is ready,
   else what went wrong (the loader's message). Safe from any thread. */
const char *protfs_zip_load(void);

/* zip_fdopen: takes `fd` over on success only. */
zip_t *protfs_zip_fdopen(int fd, int flags, int *error);
void protfs_zip_discard(zip_t *archive);
zip_int64_t protfs_zip_get_num_entries(zip_t *archive, zip_flags_t flags);
const char *protfs_zip_get_name(zip_t *archive, zip_uint64_t index, zip_flags_t flags);
int protfs_zip_stat_index(zip_t *archive, zip_uint64_t index, zip_flags_t flags, zip_stat_t *stat);
int protfs_zip_file_get_external_attributes(
    zip_t *archive, zip_uint64_t index, zip_flags_t flags, zip_uint8_t *system, zip_uint32_t *attributes);
zip_file_t *protfs_zip_fopen_index(zip_t *archive, zip_uint64_t index, zip_flags_t flags);
zip_int64_t protfs_zip_fread(zip_file_t *file, void *buffer, zip_uint64_t count);
int protfs_zip_fclose(zip_file_t *file);
const char *protfs_zip_strerror(zip_t *archive);
const char *protfs_zip_file_strerror(zip_file_t *file);

/* The message of libzip's error `code` (from zip_fdopen), copied into `buffer`. */
void protfs_zip_error_message(int code, char *buffer, size_t size);

#endif
