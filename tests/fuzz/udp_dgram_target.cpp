// SPDX-License-Identifier: BSD-3-Clause
// The udp datagram decoder under hostile input: one function, shared by
// the libFuzzer target (udp_dgram_fuzz.cpp) and the corpus replay test
// (udp_dgram_replay.cpp).
//
// Input: byte 0 shapes the receive the message lands in (up to four iovecs
// of a buffer with guard bytes around each), the rest is one datagram.
//
// decode() is checked differentially against a model written apart from
// udp_proto.hpp: it takes fields by byte offset and applies the rules of
// docs/udp-protocol.md. Both must agree on whether the datagram is a
// message and on every field; an accepted message is then copied into the
// receive as the provider does (min(length, room) bytes), and nothing
// outside the iovecs may change.
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/iov.hpp"
#include "prov/udp/udp_proto.hpp"

namespace {

uint64_t rd64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

struct model_msg {
  bool tagged, cq_data;
  uint64_t tag, data;
  size_t len;
};

bool model(const uint8_t* d, size_t n, model_msg& m) {
  if (n < 24) return false;                                 // a whole header
  if (d[0] != 'W' || d[1] != 'D' || d[2] != 1) return false;  // magic, version
  const uint8_t flags = d[3];
  if (flags & ~0x03) return false;  // 0x01 tagged, 0x02 CQ data
  if (d[4] | d[5] | d[6] | d[7]) return false;
  m.tagged = flags & 0x01;
  m.cq_data = flags & 0x02;
  m.tag = rd64(d + 8);
  m.data = rd64(d + 16);
  if ((!m.tagged && m.tag) || (!m.cq_data && m.data)) return false;
  m.len = n - 24;
  return true;
}

constexpr unsigned char guard = 0xa5;

}  // namespace

int weft_fuzz_udp_dgram(const uint8_t* in, size_t size) {
  if (size < 1) return 0;
  const uint8_t shape = in[0];
  const uint8_t* d = in + 1;
  const size_t n = size - 1;
  // The datagram as the provider holds it (its own buffer, as recvmsg fills it).
  std::vector<unsigned char> dgram(d, d + n);
  weft::udp::message got{};
  model_msg want{};
  const bool ok = weft::udp::decode(dgram.data(), dgram.size(), got);
  if (ok != model(d, n, want)) abort();
  if (!ok) return 0;
  if (got.tagged != want.tagged || got.cq_data != want.cq_data || got.tag != want.tag || got.data != want.data ||
      got.len != want.len || got.payload != dgram.data() + 24)
    abort();
  // The receive: 1-4 iovecs of 0-63 bytes each (from the shape byte), 8
  // guard bytes before and after each.
  const size_t count = 1 + (shape & 3);
  std::vector<unsigned char> buf(count * (64 + 16), guard);
  iovec iov[4];
  size_t room = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t len = ((shape >> 2) * (i + 1) * 7) & 63;
    iov[i] = {buf.data() + i * 80 + 8, len};
    room += len;
  }
  const size_t copied = std::min(got.len, room);
  if (weft::iov_copy_to(iov, count, 0, got.payload, copied) != copied) abort();
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    const auto* base = static_cast<const unsigned char*>(iov[i].iov_base);
    for (size_t j = 0; j < iov[i].iov_len; ++j, ++at)
      if (base[j] != (at < copied ? d[24 + at] : guard)) abort();
    for (size_t j = 0; j < 8; ++j)
      if (base[-1 - static_cast<ptrdiff_t>(j)] != guard || base[iov[i].iov_len + j] != guard) abort();
  }
  return 0;
}
