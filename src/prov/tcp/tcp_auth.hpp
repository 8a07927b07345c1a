// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp: what the handshake needs to use auth_key as a shared secret
// without sending it: SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104), a
// constant-time comparison, and random bytes from the kernel. Control path
// only (a few hashes per connection).
#include <cstddef>
#include <cstdint>

namespace weft::tcp {

class sha256 {
public:
  static constexpr size_t digest_size = 32;
  static constexpr size_t block_size = 64;

  sha256() noexcept { reset(); }
  void reset() noexcept;
  void update(const void* p, size_t n) noexcept;
  void finish(uint8_t out[digest_size]) noexcept;

private:
  void block(const uint8_t* p) noexcept;
  uint32_t h_[8];
  uint64_t bytes_ = 0;
  uint8_t buf_[block_size];
  size_t fill_ = 0;
};

// One piece of an HMAC message.
struct byte_span {
  const void* p;
  size_t n;
};

// HMAC-SHA-256(key, parts[0] || parts[1] || ...).
void hmac_sha256(const void* key, size_t key_len, const byte_span* parts, size_t count,
                 uint8_t out[sha256::digest_size]) noexcept;

// Equal in time independent of where the inputs differ.
bool ct_equal(const void* a, const void* b, size_t n) noexcept;

// Fills p with n bytes from getrandom(2). 0 or a negative FI_E* code.
int random_bytes(void* p, size_t n) noexcept;

}  // namespace weft::tcp
