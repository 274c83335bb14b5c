// Hashing and authentication primitives (backed by OpenSSL's libcrypto):
// SHA-1 for group names, HMAC-SHA256 for the store's challenge-response,
// and a CSPRNG for nonces.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshcomm {

// Lowercase hex of n bytes (2n characters).
std::string hexOf(const uint8_t* data, size_t n);

// Lowercase hex SHA-1 of data (40 characters).
std::string sha1Hex(std::string_view data);

// HMAC-SHA256(key, message): 32 bytes.
std::vector<uint8_t> hmacSha256(std::string_view key,
                                const std::vector<uint8_t>& message);

// n bytes from the system CSPRNG. Throws Error if none are available.
std::vector<uint8_t> randomBytes(size_t n);

// Compares without leaking, through timing, where the inputs differ.
bool constantTimeEqual(const std::vector<uint8_t>& a,
                       const std::vector<uint8_t>& b);

}  // namespace meshcomm
