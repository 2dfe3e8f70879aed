#ifndef PROTFS_CCRYPTO_SHIM_H
#define PROTFS_CCRYPTO_SHIM_H

/* OpenSSL's libcrypto, for SHA-256 (it uses the CPU's SHA extensions where present). */
#include <openssl/evp.h>

#endif
