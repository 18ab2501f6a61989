// libqrencode 4.1 (Debian 12: libqrencode-dev). Its functions are plain C and callable from Swift
// as they are; this header only names the library for the module map.
#ifndef RELAIS_CQRENCODE_SHIM_H
#define RELAIS_CQRENCODE_SHIM_H

#include <qrencode.h>

#endif
