#define _GNU_SOURCE /* secure_getenv */

#include "CCrypto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The soname Debian's libssl3 package installs (the version the headers come from);
   $PROTFS_LIBCRYPTO names another (the tests name a missing one). */
#define LIBCRYPTO "libcrypto.so.3"

/* libcrypto's entry points, filled in once by load(). */
static struct {
  int (*sha256_init)(SHA256_CTX *);
  int (*sha256_update)(SHA256_CTX *, const void *, size_t);
  int (*sha256_final)(unsigned char *, SHA256_CTX *);
  int (*sha224_init)(SHA256_CTX *);
  int (*md5_init)(MD5_CTX *);
  int (*md5_update)(MD5_CTX *, const void *, size_t);
  int (*md5_final)(unsigned char *, MD5_CTX *);
  int (*sha1_init)(SHA_CTX *);
  int (*sha1_update)(SHA_CTX *, const void *, size_t);
  int (*sha1_final)(unsigned char *, SHA_CTX *);
  int (*sha384_init)(SHA512_CTX *);
  int (*sha512_init)(SHA512_CTX *);
  int (*sha512_update)(SHA512_CTX *, const void *, size_t);
  int (*sha512_final)(unsigned char *, SHA512_CTX *);
  EVP_MD_CTX *(*md_ctx_new)(void);
  void (*md_ctx_free)(EVP_MD_CTX *);
  const EVP_MD *(*sha256)(void);
  const EVP_MD *(*sha1)(void);
  int (*digest_init_ex)(EVP_MD_CTX *, const EVP_MD *, ENGINE *);
  int (*digest_update)(EVP_MD_CTX *, const void *, size_t);
  int (*digest_final_ex)(EVP_MD_CTX *, unsigned char *, unsigned int *);
  int (*rand_bytes)(unsigned char *, int);
  int (*memcmp)(const void *, const void *, size_t);
  int (*pbkdf2_hmac)(const char *, int, const unsigned char *, int, int, const EVP_MD *, int, unsigned char *);
  EVP_CIPHER_CTX *(*cipher_ctx_new)(void);
  void (*cipher_ctx_free)(EVP_CIPHER_CTX *);
  void (*cipher_ctx_set_flags)(EVP_CIPHER_CTX *, int);
  int (*cipher_ctx_set_padding)(EVP_CIPHER_CTX *, int);
  const EVP_CIPHER *(*aes_256_wrap)(void);
  const EVP_CIPHER *(*aes_256_cbc)(void);
  int (*decrypt_init_ex)(EVP_CIPHER_CTX *, const EVP_CIPHER *, ENGINE *, const unsigned char *, const unsigned char *);
  int (*decrypt_update)(EVP_CIPHER_CTX *, unsigned char *, int *, const unsigned char *, int);
  int (*decrypt_final_ex)(EVP_CIPHER_CTX *, unsigned char *, int *);
  const EVP_CIPHER *(*aes_256_xts)(void);
  int (*cipher_init_ex)(EVP_CIPHER_CTX *, const EVP_CIPHER *, ENGINE *, const unsigned char *, const unsigned char *, int);
  int (*cipher_update)(EVP_CIPHER_CTX *, unsigned char *, int *, const unsigned char *, int);
  int (*cipher_final_ex)(EVP_CIPHER_CTX *, unsigned char *, int *);
  unsigned char *(*hmac)(const EVP_MD *, const void *, int, const unsigned char *, size_t, unsigned char *, unsigned int *);
  EVP_PKEY *(*pkey_new_raw_private_key)(int, ENGINE *, const unsigned char *, size_t);
  EVP_PKEY *(*pkey_new_raw_public_key)(int, ENGINE *, const unsigned char *, size_t);
  int (*pkey_get_raw_public_key)(const EVP_PKEY *, unsigned char *, size_t *);
  void (*pkey_free)(EVP_PKEY *);
  EVP_PKEY_CTX *(*pkey_ctx_new)(EVP_PKEY *, ENGINE *);
  void (*pkey_ctx_free)(EVP_PKEY_CTX *);
  int (*pkey_derive_init)(EVP_PKEY_CTX *);
  int (*pkey_derive_set_peer)(EVP_PKEY_CTX *, EVP_PKEY *);
  int (*pkey_derive)(EVP_PKEY_CTX *, unsigned char *, size_t *);
} crypto;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready;
static char failure[512];

static int resolve(void *library, void **slot, const char *symbol) {
  *slot = dlsym(library, symbol);
  if (*slot) return 1;
  snprintf(failure, sizeof failure, "the library has no %s", symbol);
  return 0;
}

/* Resolves `field` as `symbol`, or returns 0 from the function using it. */
#define RESOLVE(field, symbol) \
  if (!resolve(library, (void **)&crypto.field, symbol)) return 0

/* The digests', the random bytes', the comparison's and the key derivation's entry points: 1, or
   0 with `failure` set. */
static int resolve_digests(void *library) {
  RESOLVE(sha256_init, "SHA256_Init");
  RESOLVE(sha256_update, "SHA256_Update");
  RESOLVE(sha256_final, "SHA256_Final");
  RESOLVE(sha224_init, "SHA224_Init");
  RESOLVE(md5_init, "MD5_Init");
  RESOLVE(md5_update, "MD5_Update");
  RESOLVE(md5_final, "MD5_Final");
  RESOLVE(sha1_init, "SHA1_Init");
  RESOLVE(sha1_update, "SHA1_Update");
  RESOLVE(sha1_final, "SHA1_Final");
  RESOLVE(sha384_init, "SHA384_Init");
  RESOLVE(sha512_init, "SHA512_Init");
  RESOLVE(sha512_update, "SHA512_Update");
  RESOLVE(sha512_final, "SHA512_Final");
  RESOLVE(md_ctx_new, "EVP_MD_CTX_new");
  RESOLVE(md_ctx_free, "EVP_MD_CTX_free");
  RESOLVE(sha256, "EVP_sha256");
  RESOLVE(sha1, "EVP_sha1");
  RESOLVE(digest_init_ex, "EVP_DigestInit_ex");
  RESOLVE(digest_update, "EVP_DigestUpdate");
  RESOLVE(digest_final_ex, "EVP_DigestFinal_ex");
  RESOLVE(rand_bytes, "RAND_bytes");
  RESOLVE(memcmp, "CRYPTO_memcmp");
  RESOLVE(pbkdf2_hmac, "PKCS5_PBKDF2_HMAC");
  return 1;
}

/* The ciphers', the HMAC's and the X25519 keys' entry points: 1, or 0 with `failure` set. */
static int resolve_ciphers(void *library) {
  RESOLVE(cipher_ctx_new, "EVP_CIPHER_CTX_new");
  RESOLVE(cipher_ctx_free, "EVP_CIPHER_CTX_free");
  RESOLVE(cipher_ctx_set_flags, "EVP_CIPHER_CTX_set_flags");
  RESOLVE(cipher_ctx_set_padding, "EVP_CIPHER_CTX_set_padding");
  RESOLVE(aes_256_wrap, "EVP_aes_256_wrap");
  RESOLVE(aes_256_cbc, "EVP_aes_256_cbc");
  RESOLVE(decrypt_init_ex, "EVP_DecryptInit_ex");
  RESOLVE(decrypt_update, "EVP_DecryptUpdate");
  RESOLVE(decrypt_final_ex, "EVP_DecryptFinal_ex");
  RESOLVE(aes_256_xts, "EVP_aes_256_xts");
  RESOLVE(cipher_init_ex, "EVP_CipherInit_ex");
  RESOLVE(cipher_update, "EVP_CipherUpdate");
  RESOLVE(cipher_final_ex, "EVP_CipherFinal_ex");
  RESOLVE(hmac, "HMAC");
  RESOLVE(pkey_new_raw_private_key, "EVP_PKEY_new_raw_private_key");
  RESOLVE(pkey_new_raw_public_key, "EVP_PKEY_new_raw_public_key");
  RESOLVE(pkey_get_raw_public_key, "EVP_PKEY_get_raw_public_key");
  RESOLVE(pkey_free, "EVP_PKEY_free");
  RESOLVE(pkey_ctx_new, "EVP_PKEY_CTX_new");
  RESOLVE(pkey_ctx_free, "EVP_PKEY_CTX_free");
  RESOLVE(pkey_derive_init, "EVP_PKEY_derive_init");
  RESOLVE(pkey_derive_set_peer, "EVP_PKEY_derive_set_peer");
  RESOLVE(pkey_derive, "EVP_PKEY_derive");
  return 1;
}
#undef RESOLVE

static void load(void) {
  const char *name = secure_getenv("PROTFS_LIBCRYPTO");
  if (!name || !*name) name = LIBCRYPTO;
  void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *reason = dlerror();
    snprintf(failure, sizeof failure, "%s", reason ? reason : "dlopen failed");
    return;
  }
  if (!resolve_digests(library) || !resolve_ciphers(library)) return;
  /* Before any other call: openssl.cnf is not read. protfs's algorithms and their parameters are
     fixed, and parsing the file was most of the library's first use, which every sealed lock and
     unlock (each a process of its own) pays. */
  int (*init_crypto)(uint64_t, const void *) = (int (*)(uint64_t, const void *))dlsym(library, "OPENSSL_init_crypto");
  if (init_crypto) init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
  ready = 1;
}

const char *protfs_crypto_load(void) {
  pthread_once(&once, load);
  return ready ? NULL : failure;
}

/* Every entry point: the library, or the process ends saying why (see the header). */
static void require(void) {
  if (__builtin_expect(protfs_crypto_load() == NULL, 1)) return;
  dprintf(STDERR_FILENO, "protfs: libcrypto cannot be loaded (%s); install libssl3.\n", failure);
  _exit(127);
}

int protfs_sha256_init(SHA256_CTX *context) {
  require();
  return crypto.sha256_init(context);
}
int protfs_sha256_update(SHA256_CTX *context, const void *bytes, size_t count) {
  require();
  return crypto.sha256_update(context, bytes, count);
}
int protfs_sha256_final(unsigned char *digest, SHA256_CTX *context) {
  require();
  return crypto.sha256_final(digest, context);
}

int protfs_sha224_init(SHA256_CTX *context) {
  require();
  return crypto.sha224_init(context);
}
int protfs_md5_init(MD5_CTX *context) {
  require();
  return crypto.md5_init(context);
}
int protfs_md5_update(MD5_CTX *context, const void *bytes, size_t count) {
  require();
  return crypto.md5_update(context, bytes, count);
}
int protfs_md5_final(unsigned char *digest, MD5_CTX *context) {
  require();
  return crypto.md5_final(digest, context);
}
int protfs_sha1_init(SHA_CTX *context) {
  require();
  return crypto.sha1_init(context);
}
int protfs_sha1_update(SHA_CTX *context, const void *bytes, size_t count) {
  require();
  return crypto.sha1_update(context, bytes, count);
}
int protfs_sha1_final(unsigned char *digest, SHA_CTX *context) {
  require();
  return crypto.sha1_final(digest, context);
}
int protfs_sha384_init(SHA512_CTX *context) {
  require();
  return crypto.sha384_init(context);
}
int protfs_sha512_init(SHA512_CTX *context) {
  require();
  return crypto.sha512_init(context);
}
int protfs_sha512_update(SHA512_CTX *context, const void *bytes, size_t count) {
  require();
  return crypto.sha512_update(context, bytes, count);
}
int protfs_sha512_final(unsigned char *digest, SHA512_CTX *context) {
  require();
  return crypto.sha512_final(digest, context);
}

/* A context of `digest`, initialised; NULL when out of memory. */
static EVP_MD_CTX *context_new(const EVP_MD *(*digest)(void)) {
  EVP_MD_CTX *context = crypto.md_ctx_new();
  if (context && crypto.digest_init_ex(context, digest(), NULL) != 1) {
    crypto.md_ctx_free(context);
    return NULL;
  }
  return context;
}
EVP_MD_CTX *protfs_sha256_context_new(void) {
  require();
  return context_new(crypto.sha256);
}
EVP_MD_CTX *protfs_sha1_context_new(void) {
  require();
  return context_new(crypto.sha1);
}
int protfs_sha256_context_reset(EVP_MD_CTX *context) {
  require();
  return crypto.digest_init_ex(context, crypto.sha256(), NULL);
}
int protfs_sha256_context_update(EVP_MD_CTX *context, const void *bytes, size_t count) {
  require();
  return crypto.digest_update(context, bytes, count);
}
int protfs_sha256_context_final(EVP_MD_CTX *context, unsigned char *digest, unsigned int *length) {
  require();
  return crypto.digest_final_ex(context, digest, length);
}
void protfs_sha256_context_free(EVP_MD_CTX *context) {
  require();
  crypto.md_ctx_free(context);
}

int protfs_rand_bytes(unsigned char *bytes, int count) {
  require();
  return crypto.rand_bytes(bytes, count);
}
int protfs_crypto_memcmp(const void *a, const void *b, size_t count) {
  require();
  return crypto.memcmp(a, b, count);
}
int protfs_pbkdf2_hmac_sha256(
    const char *password, int passwordLength, const unsigned char *salt, int saltLength, int iterations,
    int keyLength, unsigned char *key) {
  require();
  return crypto.pbkdf2_hmac(
      password, passwordLength, salt, saltLength, iterations, crypto.sha256(), keyLength, key);
}

int protfs_pbkdf2_hmac_sha1(
    const unsigned char *password, int passwordLength, const unsigned char *salt, int saltLength, int iterations,
    int keyLength, unsigned char *key) {
  require();
  return crypto.pbkdf2_hmac(
      (const char *)password, passwordLength, salt, saltLength, iterations, crypto.sha1(), keyLength, key);
}

int protfs_aes256_unwrap(const unsigned char *kek, const unsigned char *wrapped, int wrappedLength, unsigned char *key) {
  require();
  if (wrappedLength < 24 || wrappedLength > 136 || wrappedLength % 8 != 0) return -1;
  EVP_CIPHER_CTX *context = crypto.cipher_ctx_new();
  if (!context) return -1;
  int length = 0, last = 0, ok = 0;
  crypto.cipher_ctx_set_flags(context, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
  /* RFC 3394's default initial value (A6A6A6A6A6A6A6A6) is the check: a wrong key fails here. */
  if (crypto.decrypt_init_ex(context, crypto.aes_256_wrap(), NULL, kek, NULL) == 1
      && crypto.decrypt_update(context, key, &length, wrapped, wrappedLength) == 1
      && crypto.decrypt_final_ex(context, key + length, &last) == 1)
    ok = 1;
  crypto.cipher_ctx_free(context);
  return ok ? length + last : -1;
}

EVP_CIPHER_CTX *protfs_aes256_cbc_decryptor(const unsigned char *key) {
  require();
  static const unsigned char zero[16];
  EVP_CIPHER_CTX *context = crypto.cipher_ctx_new();
  if (!context) return NULL;
  if (crypto.decrypt_init_ex(context, crypto.aes_256_cbc(), NULL, key, zero) != 1) {
    crypto.cipher_ctx_free(context);
    return NULL;
  }
  crypto.cipher_ctx_set_padding(context, 0);
  return context;
}

int protfs_cipher_update(EVP_CIPHER_CTX *context, const unsigned char *input, int count, unsigned char *output) {
  require();
  int length = 0;
  return crypto.decrypt_update(context, output, &length, input, count) == 1 ? length : -1;
}

void protfs_cipher_free(EVP_CIPHER_CTX *context) {
  require();
  crypto.cipher_ctx_free(context);
}

int protfs_aes256_wrap(const unsigned char *kek, const unsigned char *key, int keyLength, unsigned char *wrapped) {
  require();
  if (keyLength < 16 || keyLength > 128 || keyLength % 8 != 0) return -1;
  EVP_CIPHER_CTX *context = crypto.cipher_ctx_new();
  if (!context) return -1;
  int length = 0, last = 0, ok = 0;
  crypto.cipher_ctx_set_flags(context, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
  if (crypto.cipher_init_ex(context, crypto.aes_256_wrap(), NULL, kek, NULL, 1) == 1
      && crypto.cipher_update(context, wrapped, &length, key, keyLength) == 1
      && crypto.cipher_final_ex(context, wrapped + length, &last) == 1)
    ok = 1;
  crypto.cipher_ctx_free(context);
  return ok ? length + last : -1;
}

EVP_CIPHER_CTX *protfs_aes256_xts_new(const unsigned char *key, int encrypt) {
  require();
  EVP_CIPHER_CTX *context = crypto.cipher_ctx_new();
  if (!context) return NULL;
  if (crypto.cipher_init_ex(context, crypto.aes_256_xts(), NULL, key, NULL, encrypt ? 1 : 0) != 1) {
    crypto.cipher_ctx_free(context);
    return NULL;
  }
  return context;
}

int protfs_aes256_xts(EVP_CIPHER_CTX *context, const unsigned char *tweak, const unsigned char *input, int count,
                      unsigned char *output) {
  require();
  int length = 0;
  /* XTS takes one update per data unit: the tweak is set again before each. */
  if (count < 16 || crypto.cipher_init_ex(context, NULL, NULL, NULL, tweak, -1) != 1) return -1;
  return crypto.cipher_update(context, output, &length, input, count) == 1 && length == count ? 0 : -1;
}

int protfs_hmac_sha256(const void *key, int keyLength, const void *bytes, size_t count, unsigned char *digest) {
  require();
  unsigned int length = 0;
  return crypto.hmac(crypto.sha256(), key, keyLength, bytes, count, digest, &length) && length == 32 ? 0 : -1;
}

int protfs_x25519_public_key(const unsigned char *privateKey, unsigned char *publicKey) {
  require();
  EVP_PKEY *key = crypto.pkey_new_raw_private_key(EVP_PKEY_X25519, NULL, privateKey, 32);
  if (!key) return -1;
  size_t length = 32;
  int ok = crypto.pkey_get_raw_public_key(key, publicKey, &length) == 1 && length == 32;
  crypto.pkey_free(key);
  return ok ? 0 : -1;
}

int protfs_x25519(const unsigned char *privateKey, const unsigned char *peerPublicKey, unsigned char *shared) {
  require();
  EVP_PKEY *mine = crypto.pkey_new_raw_private_key(EVP_PKEY_X25519, NULL, privateKey, 32);
  EVP_PKEY *peer = crypto.pkey_new_raw_public_key(EVP_PKEY_X25519, NULL, peerPublicKey, 32);
  EVP_PKEY_CTX *context = mine ? crypto.pkey_ctx_new(mine, NULL) : NULL;
  size_t length = 32;
  /* OpenSSL refuses an all-zero result (a peer key of small order), as RFC 7748 advises. */
  int ok = context && peer && crypto.pkey_derive_init(context) == 1 && crypto.pkey_derive_set_peer(context, peer) == 1
           && crypto.pkey_derive(context, shared, &length) == 1 && length == 32;
  if (context) crypto.pkey_ctx_free(context);
  if (peer) crypto.pkey_free(peer);
  if (mine) crypto.pkey_free(mine);
  return ok ? 0 : -1;
}
