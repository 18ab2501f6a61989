// hiredis 0.14 (Debian 12). redisCommandArgv is callable from Swift directly; only the
// fixed-size errstr array reads more simply through a pointer.
#ifndef RELAIS_CHIREDIS_SHIM_H
#define RELAIS_CHIREDIS_SHIM_H

#include <hiredis/hiredis.h>

static inline const char *relais_redis_errstr(const redisContext *context) {
    return context->errstr;
}

#endif
