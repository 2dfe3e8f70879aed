// OpenSSL's libcrypto (Debian libssl-dev): PBKDF2-HMAC-SHA256 for the passcode hash, random salts.
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
