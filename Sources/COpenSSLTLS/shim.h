// OpenSSL libssl, for the one TLS client Relais runs itself: the tunnel that gives hiredis 0.14
// (which has no TLS) a rediss:// connection. Wrappers for what libssl exposes only as macros.
#ifndef RELAIS_COPENSSLTLS_SHIM_H
#define RELAIS_COPENSSLTLS_SHIM_H

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static inline int relais_ssl_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

static inline int relais_ssl_ctx_require_tls12(SSL_CTX *context) {
    return (int)SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
}

// Partial writes, and a retried write may come from a different buffer address: the tunnel's
// pump keeps its own buffers and retries with what is left.
static inline void relais_ssl_ctx_allow_partial_writes(SSL_CTX *context) {
    SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

#endif
