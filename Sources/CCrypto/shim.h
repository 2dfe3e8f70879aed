#ifndef PROTFS_CCRYPTO_SHIM_H
#define PROTFS_CCRYPTO_SHIM_H

/* OpenSSL's libcrypto (Debian libssl-dev): SHA-256 for download verification (it uses the CPU's SHA
   extensions where present), PBKDF2-HMAC-SHA256 and random salts for the passcode hash, and the
   HMAC that authenticates saved modes. That HMAC keeps a keyed SHA256_CTX and copies it per item:
   the EVP interface allocates per copy, which would double the cost of a lock, so the plain
   SHA-256 calls (deprecated in OpenSSL 3, not removed) are used without their warnings. */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#endif
