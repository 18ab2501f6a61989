// OpenSSL 3 libcrypto. Function-like macros that Swift cannot import get a static inline wrapper.
#ifndef RELAIS_COPENSSL_SHIM_H
#define RELAIS_COPENSSL_SHIM_H

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

static inline int relais_evp_pkey_public_key_selection(void) {
    return EVP_PKEY_PUBLIC_KEY;
}

static inline int relais_evp_pkey_keypair_selection(void) {
    return EVP_PKEY_KEYPAIR;
}

static inline int relais_bn_num_bytes(const BIGNUM *number) {
    return BN_num_bytes(number);
}

#endif
