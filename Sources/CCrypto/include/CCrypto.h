#ifndef PROTFS_CCRYPTO_H
#define PROTFS_CCRYPTO_H

/* OpenSSL's libcrypto, loaded when protfs first hashes or draws random bytes instead of linked.

   Linked, libcrypto (its 17,000 relocations and its constructors) cost every protfs command
   about 1.5 ms of a 6 ms start, though most commands never use it. It serves SHA-256 for download
   verification (the CPU's SHA extensions where present), PBKDF2-HMAC-SHA256 and random salts for
   the passcode hash, the keys and ciphers of encrypted iOS backups, the HMAC that authenticates
   saved modes, and CommonCrypto's digests for apps (ProtFSKit's CC_MD5, CC_SHA1, CC_SHA256,
   CC_SHA512), and sealed devices' keys and contents (AES key wrap, AES-XTS, X25519, HMAC-SHA256
   through EVP). The saved modes' HMAC keeps a keyed SHA256_CTX and copies it per item: the EVP
   interface allocates per copy, which would double the cost of a lock, so the plain SHA-256
   calls (deprecated in OpenSSL 3, not removed) are used. CommonCrypto's contexts are values an
   app copies (a digest of a prefix, then more bytes), which EVP's allocated contexts cannot be:
   they use the plain calls too.

   The header still gives the types. Every function below loads the library on its first call
   (once per process, from any thread); where it cannot be loaded, the process cannot go on
   correctly, so the call writes why on standard error and exits with status 127, as the dynamic
   loader did when the library was linked. protfs_crypto_load() asks first, for callers that can
   report the failure as an error instead. */

#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <stddef.h>
#include <openssl/evp.h>
#include <openssl/md5.h>
#include <openssl/sha.h>

/* Loads libcrypto (libcrypto.so.3, or $PROTFS_LIBCRYPTO) once per process; returns NULL when it
   is ready, else what went wrong (the loader's message). */
const char *protfs_crypto_load(void);

int protfs_sha256_init(SHA256_CTX *context);
int protfs_sha256_update(SHA256_CTX *context, const void *bytes, size_t count);
int protfs_sha256_final(unsigned char *digest, SHA256_CTX *context);

/* MD5, SHA-1, SHA-512 and the truncated SHA-224 and SHA-384 on values, as SHA-256 above
   (CommonCrypto's CC_ calls in ProtFSKit). SHA-224 goes on with the SHA-256 calls and SHA-384
   with the SHA-512 ones: the context says how long the digest is. */
int protfs_sha224_init(SHA256_CTX *context);
int protfs_md5_init(MD5_CTX *context);
int protfs_md5_update(MD5_CTX *context, const void *bytes, size_t count);
int protfs_md5_final(unsigned char *digest, MD5_CTX *context);
int protfs_sha1_init(SHA_CTX *context);
int protfs_sha1_update(SHA_CTX *context, const void *bytes, size_t count);
int protfs_sha1_final(unsigned char *digest, SHA_CTX *context);
int protfs_sha384_init(SHA512_CTX *context);
int protfs_sha512_init(SHA512_CTX *context);
int protfs_sha512_update(SHA512_CTX *context, const void *bytes, size_t count);
int protfs_sha512_final(unsigned char *digest, SHA512_CTX *context);

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


/* PBKDF2-HMAC-SHA1 (the second derivation of an iOS backup's passcode key). */
int protfs_pbkdf2_hmac_sha1(
    const unsigned char *password, int passwordLength, const unsigned char *salt, int saltLength, int iterations,
    int keyLength, unsigned char *key);

/* AES key unwrap (RFC 3394) of `wrapped` (24 to 136 bytes, a multiple of 8) with the 256-bit `kek`
   into `key` (wrappedLength - 8 bytes): the key's length, or -1 when `kek` does not unwrap it (the
   integrity check fails: a wrong password or a damaged key). */
int protfs_aes256_unwrap(const unsigned char *kek, const unsigned char *wrapped, int wrappedLength, unsigned char *key);

/* An AES-256-CBC decryption with a zero IV and no padding removed (iOS backups' files and
   Manifest.db; the caller trims to the recorded size); NULL when out of memory. Feed it with
   protfs_cipher_update (whole 16-byte blocks give as many bytes back; `output` holds count + 16),
   then protfs_cipher_free. */
EVP_CIPHER_CTX *protfs_aes256_cbc_decryptor(const unsigned char *key);
int protfs_cipher_update(EVP_CIPHER_CTX *context, const unsigned char *input, int count, unsigned char *output);
void protfs_cipher_free(EVP_CIPHER_CTX *context);

/* Sealed devices (ProtFSSeal). */

/* AES key wrap (RFC 3394, default initial value) of `key` (16 to 128 bytes, a multiple of 8) with the
   256-bit `kek` into `wrapped` (keyLength + 8 bytes): the wrapped length, or -1. */
int protfs_aes256_wrap(const unsigned char *kek, const unsigned char *key, int keyLength, unsigned char *wrapped);

/* An AES-256-XTS context for the 64-byte `key` (two AES-256 keys, which must differ), encrypting or
   decrypting; NULL when OpenSSL refuses the key or memory runs out. Free it with protfs_cipher_free. */
EVP_CIPHER_CTX *protfs_aes256_xts_new(const unsigned char *key, int encrypt);
/* One XTS data unit of `count` bytes (at least 16; ciphertext stealing covers a partial last AES block)
   under the 16-byte `tweak`, from `input` to `output` (the same buffer is allowed): 0, or -1. */
int protfs_aes256_xts(EVP_CIPHER_CTX *context, const unsigned char *tweak, const unsigned char *input, int count,
                      unsigned char *output);

/* HMAC-SHA256 of `count` bytes with a key of `keyLength` bytes into the 32-byte `digest`: 0, or -1. */
int protfs_hmac_sha256(const void *key, int keyLength, const void *bytes, size_t count, unsigned char *digest);

/* X25519 (RFC 7748): the 32-byte public key of a 32-byte private key, and the 32-byte shared secret of a
   private key and a peer's public key. 0, or -1 (a refused key: one of small order gives no secret). */
int protfs_x25519_public_key(const unsigned char *privateKey, unsigned char *publicKey);
int protfs_x25519(const unsigned char *privateKey, const unsigned char *peerPublicKey, unsigned char *shared);

#endif
