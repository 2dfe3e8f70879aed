#define _GNU_SOURCE /* secure_getenv */

#include "CCurl.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>

/* The soname Debian's libcurl4 package installs (the OpenSSL flavour the headers come from);
   $PROTFS_LIBCURL names another (the tests name a missing one). */
#define LIBCURL "libcurl.so.4"

/* libcurl's entry points, filled in once by load(). */
static struct {
  CURLcode (*global_init)(long);
  CURL *(*easy_init)(void);
  void (*easy_cleanup)(CURL *);
  void (*easy_reset)(CURL *);
  const char *(*easy_strerror)(CURLcode);
  CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_cleanup)(CURLM *);
  CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
  CURLMcode (*multi_add_handle)(CURLM *, CURL *);
  CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
  CURLMcode (*multi_perform)(CURLM *, int *);
  CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
  CURLMcode (*multi_wakeup)(CURLM *);
  CURLMcode (*multi_timeout)(CURLM *, long *);
  CURLMsg *(*multi_info_read)(CURLM *, int *);
  struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
  void (*slist_free_all)(struct curl_slist *);
} curl;

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
  const char *name = secure_getenv("PROTFS_LIBCURL");
  if (!name || !*name) name = LIBCURL;
  void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *reason = dlerror();
    snprintf(failure, sizeof failure, "%s", reason ? reason : "dlopen failed");
    return;
  }
#define RESOLVE(field) \
  if (!resolve(library, (void **)&curl.field, "curl_" #field)) return
  RESOLVE(global_init);
  RESOLVE(easy_init);
  RESOLVE(easy_cleanup);
  RESOLVE(easy_reset);
  RESOLVE(easy_strerror);
  RESOLVE(easy_setopt);
  RESOLVE(easy_getinfo);
  RESOLVE(multi_init);
  RESOLVE(multi_cleanup);
  RESOLVE(multi_setopt);
  RESOLVE(multi_add_handle);
  RESOLVE(multi_remove_handle);
  RESOLVE(multi_perform);
  RESOLVE(multi_poll);
  RESOLVE(multi_wakeup);
  RESOLVE(multi_timeout);
  RESOLVE(multi_info_read);
  RESOLVE(slist_append);
  RESOLVE(slist_free_all);
#undef RESOLVE
  /* Not thread-safe, and must come before any handle: once, here. */
  CURLcode code = curl.global_init(CURL_GLOBAL_ALL);
  if (code != CURLE_OK) {
    snprintf(failure, sizeof failure, "curl_global_init failed (%s)", curl.easy_strerror(code));
    return;
  }
  ready = 1;
}

const char *protfs_curl_load(void) {
  pthread_once(&once, load);
  return ready ? NULL : failure;
}

CURL *protfs_curl_easy_init(void) { return curl.easy_init(); }
void protfs_curl_easy_cleanup(CURL *handle) { curl.easy_cleanup(handle); }
void protfs_curl_easy_reset(CURL *handle) { curl.easy_reset(handle); }
const char *protfs_curl_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }

CURLcode protfs_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
  return curl.easy_setopt(handle, option, value);
}
CURLcode protfs_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
  return curl.easy_setopt(handle, option, value);
}
CURLcode protfs_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
  return curl.easy_setopt(handle, option, value);
}
CURLcode protfs_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
  return curl.easy_setopt(handle, option, value);
}
CURLcode protfs_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
  return curl.easy_setopt(handle, option, value);
}
CURLcode protfs_curl_easy_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback value) {
  return curl.easy_setopt(handle, option, value);
}
CURLcode protfs_curl_easy_setopt_seek_callback(CURL *handle, curl_seek_callback value) {
  return curl.easy_setopt(handle, CURLOPT_SEEKFUNCTION, value);
}

CURLcode protfs_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
  return curl.easy_getinfo(handle, info, value);
}
CURLcode protfs_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
  return curl.easy_getinfo(handle, info, value);
}
CURLcode protfs_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
  return curl.easy_getinfo(handle, info, value);
}

CURLM *protfs_curl_multi_init(void) { return curl.multi_init(); }
CURLMcode protfs_curl_multi_cleanup(CURLM *multi) { return curl.multi_cleanup(multi); }
CURLMcode protfs_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
  return curl.multi_setopt(multi, option, value);
}
CURLMcode protfs_curl_multi_add_handle(CURLM *multi, CURL *handle) { return curl.multi_add_handle(multi, handle); }
CURLMcode protfs_curl_multi_remove_handle(CURLM *multi, CURL *handle) {
  return curl.multi_remove_handle(multi, handle);
}
CURLMcode protfs_curl_multi_perform(CURLM *multi, int *running) { return curl.multi_perform(multi, running); }
CURLMcode protfs_curl_multi_poll(CURLM *multi, struct curl_waitfd *extra, unsigned int count, int timeout_ms,
                                 int *ready_count) {
  return curl.multi_poll(multi, extra, count, timeout_ms, ready_count);
}
CURLMcode protfs_curl_multi_wakeup(CURLM *multi) { return curl.multi_wakeup(multi); }
CURLMcode protfs_curl_multi_timeout(CURLM *multi, long *timeout_ms) { return curl.multi_timeout(multi, timeout_ms); }
CURLMsg *protfs_curl_multi_info_read(CURLM *multi, int *left) { return curl.multi_info_read(multi, left); }

struct curl_slist *protfs_curl_slist_append(struct curl_slist *list, const char *line) {
  return curl.slist_append(list, line);
}
void protfs_curl_slist_free_all(struct curl_slist *list) { curl.slist_free_all(list); }
