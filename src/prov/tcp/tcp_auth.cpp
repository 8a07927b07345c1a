// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: SHA-256, HMAC-SHA-256, constant-time compare, random bytes.
#include "prov/tcp/tcp_auth.hpp"

#include <rdma/fi_errno.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace weft::tcp {
namespace {

// FIPS 180-4 §4.2.2: the first 32 bits of the fractional parts of the cube
// roots of the first 64 primes.
constexpr uint32_t k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

uint32_t load_be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

}  // namespace

void sha256::reset() noexcept {
  static constexpr uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(h_, init, sizeof h_);
  bytes_ = 0;
  fill_ = 0;
}

void sha256::block(const uint8_t* p) noexcept {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) w[i] = load_be32(p + 4 * i);
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a;
  h_[1] += b;
  h_[2] += c;
  h_[3] += d;
  h_[4] += e;
  h_[5] += f;
  h_[6] += g;
  h_[7] += h;
}

void sha256::update(const void* data, size_t n) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  bytes_ += n;
  while (n) {
    if (fill_ == 0 && n >= block_size) {
      block(p);
      p += block_size;
      n -= block_size;
      continue;
    }
    const size_t take = block_size - fill_ < n ? block_size - fill_ : n;
    memcpy(buf_ + fill_, p, take);
    fill_ += take;
    p += take;
    n -= take;
    if (fill_ == block_size) {
      block(buf_);
      fill_ = 0;
    }
  }
}

void sha256::finish(uint8_t out[digest_size]) noexcept {
  const uint64_t bits = bytes_ * 8;
  const uint8_t pad = 0x80;
  update(&pad, 1);
  const uint8_t zero[block_size] = {};
  update(zero, (fill_ <= 56 ? 56 - fill_ : block_size + 56 - fill_));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(len, 8);
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = static_cast<uint8_t>(h_[i] >> 24);
    out[4 * i + 1] = static_cast<uint8_t>(h_[i] >> 16);
    out[4 * i + 2] = static_cast<uint8_t>(h_[i] >> 8);
    out[4 * i + 3] = static_cast<uint8_t>(h_[i]);
  }
  reset();
}

void hmac_sha256(const void* key, size_t key_len, const byte_span* parts, size_t count,
                 uint8_t out[sha256::digest_size]) noexcept {
  uint8_t k0[sha256::block_size] = {};
  sha256 s;
  if (key_len > sha256::block_size) {
    s.update(key, key_len);
    s.finish(k0);
  } else if (key_len) {
    memcpy(k0, key, key_len);
  }
  uint8_t pad[sha256::block_size];
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = k0[i] ^ 0x36;
  s.update(pad, sizeof pad);
  for (size_t i = 0; i < count; ++i) s.update(parts[i].p, parts[i].n);
  uint8_t inner[sha256::digest_size];
  s.finish(inner);
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = k0[i] ^ 0x5c;
  s.update(pad, sizeof pad);
  s.update(inner, sizeof inner);
  s.finish(out);
}

bool ct_equal(const void* a, const void* b, size_t n) noexcept {
  const auto* x = static_cast<const volatile uint8_t*>(a);
  const auto* y = static_cast<const volatile uint8_t*>(b);
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<uint8_t>(x[i] ^ y[i]);
  return diff == 0;
}

int random_bytes(void* p, size_t n) noexcept {
  auto* out = static_cast<uint8_t*>(p);
  while (n) {
    const ssize_t r = getrandom(out, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -FI_EIO;
    }
    out += r;
    n -= static_cast<size_t>(r);
  }
  return 0;
}

}  // namespace weft::tcp
