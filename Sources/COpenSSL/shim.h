// OpenSSL 3 libcrypto. Function-like macros that Swift cannot import get a static inline wrapper.
#ifndef RELAIS_COPENSSL_SHIM_H
#define RELAIS_COPENSSL_SHIM_H

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

static inline void relais_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

#endif
