#ifndef PROTFS_CCURL_SHIM_H
#define PROTFS_CCURL_SHIM_H

#include <curl/curl.h>

/* curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift cannot call:
   one typed wrapper per argument type the download engine passes. */

static inline CURLcode protfs_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode protfs_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode protfs_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode protfs_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode protfs_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode protfs_curl_easy_setopt_write_callback(CURL *handle, CURLoption option,
                                                              curl_write_callback value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode protfs_curl_easy_setopt_seek_callback(CURL *handle, curl_seek_callback value) {
  return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, value);
}

static inline CURLcode protfs_curl_easy_setopt_xferinfo_callback(CURL *handle, curl_xferinfo_callback value) {
  return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

static inline CURLMcode protfs_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
  return curl_multi_setopt(multi, option, value);
}

static inline CURLcode protfs_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode protfs_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode protfs_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode protfs_curl_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
  return curl_easy_getinfo(handle, info, value);
}

/* CURLMsg keeps its result in a union. */
static inline CURLcode protfs_curlmsg_result(const CURLMsg *message) { return message->data.result; }

#endif
