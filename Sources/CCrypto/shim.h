#ifndef PROTFS_CCRYPTO_SHIM_H
#define PROTFS_CCRYPTO_SHIM_H

/* OpenSSL's libcrypto (Debian libssl-dev): SHA-256 for download verification (it uses the CPU's SHA
   extensions where present), PBKDF2-HMAC-SHA256 and random salts for the passcode hash. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#endif
