#include "common/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "meshcomm/error.h"

namespace meshcomm {

std::string hexOf(const uint8_t* data, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 15]);
  }
  return out;
}

std::string sha1Hex(std::string_view data) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
       digest);
  return hexOf(digest, SHA_DIGEST_LENGTH);
}

std::vector<uint8_t> hmacSha256(std::string_view key,
                                const std::vector<uint8_t>& message) {
  std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           message.data(), message.size(), out.data(), &len) == nullptr) {
    throw Error("HMAC-SHA256 failed");
  }
  out.resize(len);
  return out;
}

std::vector<uint8_t> randomBytes(size_t n) {
  std::vector<uint8_t> out(n);
  if (RAND_bytes(out.data(), static_cast<int>(n)) != 1) {
    throw Error("no random bytes available from the system CSPRNG");
  }
  return out;
}

bool constantTimeEqual(const std::vector<uint8_t>& a,
                       const std::vector<uint8_t>& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace meshcomm
