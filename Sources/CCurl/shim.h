// Thin shims: curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call.
// One typed wrapper per argument kind; nothing else lives here.
#ifndef RELAIS_CCURL_SHIM_H
#define RELAIS_CCURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*relais_curl_data_callback)(char *, size_t, size_t, void *);

static inline CURLcode relais_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode relais_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode relais_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode relais_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode relais_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode relais_curl_setopt_callback(CURL *handle, CURLoption option, relais_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode relais_curl_setopt_opensocket_callback(CURL *handle, curl_opensocket_callback value) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, value);
}

// libcurl's sockets are closed by the client, which keeps track of those an event loop carries.
static inline CURLcode relais_curl_setopt_closesocket_callback(CURL *handle, curl_closesocket_callback value) {
    return curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, value);
}

static inline CURLcode relais_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode relais_curl_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

// The multi and share interfaces, for the reactor: curl_multi_setopt and curl_share_setopt are
// variadic as well.
static inline CURLMcode relais_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode relais_curl_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode relais_curl_multi_setopt_socket_callback(CURLM *multi, CURLMoption option, curl_socket_callback value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLMcode relais_curl_multi_setopt_timer_callback(CURLM *multi, CURLMoption option, curl_multi_timer_callback value) {
    return curl_multi_setopt(multi, option, value);
}

static inline CURLSHcode relais_curl_share_setopt_lock_data(CURLSH *share, CURLSHoption option, curl_lock_data value) {
    return curl_share_setopt(share, option, value);
}

// The reactor waits on libcurl's sockets with epoll, for libcurl's timer with a timerfd, and is
// woken through an eventfd; Glibc's Swift module includes none of these headers.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#endif
