#ifndef PROTFS_CCRYPTO_H
#define PROTFS_CCRYPTO_H

/* OpenSSL's libcrypto, loaded when protfs first hashes or draws random bytes instead of linked.

   Linked, libcrypto (its 17,000 relocations and its constructors) cost every protfs command
   about 1.5 ms of a 6 ms start, though most commands never use it. It serves SHA-256 for download
   verification (the CPU's SHA extensions where present), PBKDF2-HMAC-SHA256 and random salts for
   the passcode hash, and the HMAC that authenticates saved modes. That HMAC keeps a keyed
   SHA256_CTX and copies it per item: the EVP interface allocates per copy, which would double the
   cost of a lock, so the plain SHA-256 calls (deprecated in OpenSSL 3, not removed) are used.

   The header still gives the types. Every function below loads the library on its first call
   (once per process, from any thread); where it cannot be loaded, the process cannot go on
   correctly, so the call writes why on standard error and exits with status 127, as the dynamic
   loader did when the library was linked. protfs_crypto_load() asks first, for callers that can
   report the failure as an error instead. */

#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <stddef.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

/* Loads libcrypto (libcrypto.so.3, or $PROTFS_LIBCRYPTO) once per process; returns NULL when it
   is ready, else what went wrong (the loader's message). */
const char *protfs_crypto_load(void);

int protfs_sha256_init(SHA256_CTX *context);
int protfs_sha256_update(SHA256_CTX *context, const void *bytes, size_t count);
int protfs_sha256_final(unsigned char *digest, SHA256_CTX *context);

/* An EVP SHA-256 context, initialised; NULL only when out of memory. */
EVP_MD_CTX *protfs_sha256_context_new(void);
int protfs_sha256_context_reset(EVP_MD_CTX *context);
int protfs_sha256_context_update(EVP_MD_CTX *context, const void *bytes, size_t count);
int protfs_sha256_context_final(EVP_MD_CTX *context, unsigned char *digest, unsigned int *length);
void protfs_sha256_context_free(EVP_MD_CTX *context);
/* An EVP SHA-1 context (the digests of iOS backups), initialised; update, final and free it with
   the protfs_sha256_context_ functions above, which serve any EVP digest. NULL only when out of
   memory. */
EVP_MD_CTX *protfs_sha1_context_new(void);

int protfs_rand_bytes(unsigned char *bytes, int count);
int protfs_crypto_memcmp(const void *a, const void *b, size_t count);
int protfs_pbkdf2_hmac_sha256(
    const char *password, int passwordLength, const unsigned char *salt, int saltLength, int iterations,
    int keyLength, unsigned char *key);

#endif
