#ifndef PROTFS_CCURL_H
#define PROTFS_CCURL_H

/* libcurl, loaded when the first transfer needs it instead of linked.

   Linking it made every protfs command load libcurl and the forty libraries it depends on (TLS,
   Kerberos, LDAP, SSH...) before main, about three quarters of a command's start-up, though most
   commands never transfer anything. Only the download engine and a data task's transfer
   (DataTransfer) call these functions, each on its own thread, after protfs_curl_load() succeeded; libcurl's header still gives the types and
   constants. curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift
   cannot call: each has one typed wrapper per argument type the engine passes. */

#include <curl/curl.h>

/* Loads libcurl (libcurl.so.4) and runs curl_global_init, once per process; returns NULL when
   libcurl is ready, else what went wrong (the loader's message). Safe from any thread. */
const char *protfs_curl_load(void);

CURL *protfs_curl_easy_init(void);
void protfs_curl_easy_cleanup(CURL *handle);
void protfs_curl_easy_reset(CURL *handle);
const char *protfs_curl_easy_strerror(CURLcode code);

CURLcode protfs_curl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode protfs_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
CURLcode protfs_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode protfs_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode protfs_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode protfs_curl_easy_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback value);
CURLcode protfs_curl_easy_setopt_seek_callback(CURL *handle, curl_seek_callback value);

CURLcode protfs_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode protfs_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value);
CURLcode protfs_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value);

CURLM *protfs_curl_multi_init(void);
CURLMcode protfs_curl_multi_cleanup(CURLM *multi);
CURLMcode protfs_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode protfs_curl_multi_add_handle(CURLM *multi, CURL *handle);
CURLMcode protfs_curl_multi_remove_handle(CURLM *multi, CURL *handle);
CURLMcode protfs_curl_multi_perform(CURLM *multi, int *running);
CURLMcode protfs_curl_multi_poll(CURLM *multi, struct curl_waitfd *extra, unsigned int count, int timeout_ms,
                                 int *ready);
CURLMcode protfs_curl_multi_wakeup(CURLM *multi);
CURLMcode protfs_curl_multi_timeout(CURLM *multi, long *timeout_ms);
CURLMsg *protfs_curl_multi_info_read(CURLM *multi, int *left);

struct curl_slist *protfs_curl_slist_append(struct curl_slist *list, const char *line);
void protfs_curl_slist_free_all(struct curl_slist *list);

/* CURLMsg keeps its result in a union. */
static inline CURLcode protfs_curlmsg_result(const CURLMsg *message) { return message->data.result; }

#endif
