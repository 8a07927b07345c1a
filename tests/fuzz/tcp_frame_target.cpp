// SPDX-License-Identifier: BSD-3-Clause
// The tcp wire decoders under hostile input: one function, shared by the
// libFuzzer target (tcp_frame_fuzz.cpp) and the corpus replay test
// (tcp_frame_replay.cpp).
//
// Input: byte 0 picks the decoder (even: frames, odd: handshake), byte 1
// seeds how the rest is cut into chunks (the decoders must not care), the
// rest is the stream.
//
// Frames are checked differentially against a model written apart from
// tcp_frame.cpp: it reads the whole stream at once, takes fields by byte
// offset, and applies the rules of docs/tcp-protocol.md from its own
// table. Decoder and model must agree on every frame and on where the
// stream turns malformed. Handshake messages that decode must encode back
// to the same bytes.
#include <rdma/fi_atomic.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "prov/tcp/tcp_frame.hpp"
#include "util/atomic_ops.hpp"

namespace {

using namespace weft::tcp;

frame_limits fuzz_limits() {
  frame_limits l;
  l.msg_max = 1 << 20;
  l.eager_max = 4096;
  l.rma_max = 1 << 20;
  l.atomic_max = 1024;
  l.credit_max = 1 << 20;
  l.rma_iov_max = 4;
  return l;
}

struct seen {
  uint8_t op, iov_count;
  uint64_t length;
  bool operator==(const seen& o) const { return op == o.op && iov_count == o.iov_count && length == o.length; }
};

// ------------------------------------------------------------ the model
uint64_t rd64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

struct rule {
  uint8_t flags;  // allowed
  bool descs;     // carries descriptors
  bool tagged;    // may carry a tag
};
// op: 1 msg, 2 tagged, 3 cts, 4 rndv_data, 5 write, 6 read_req, 7 read_resp,
//     8 atomic, 9 atomic_resp, 10 ack, 11 credit, 12 shutdown
constexpr rule rules[13] = {
    {0, false, false},    {0x07, false, false}, {0x07, false, true},  {0, false, false}, {0x20, false, false},
    {0x03, true, false},  {0, true, false},     {0, false, false},   {0x1b, true, false}, {0, false, false},
    {0, false, false},    {0, false, false},    {0, false, false},
};

// Whether a header (48 bytes) is acceptable on its own.
bool model_hdr(const uint8_t* h, const frame_limits& l) {
  const uint8_t o = h[0], fl = h[1], n = h[2], aop = h[3], dt = h[4];
  const uint64_t len = rd64(h + 8), id = rd64(h + 16), tag = rd64(h + 24), data = rd64(h + 32), aux = rd64(h + 40);
  if (o < 1 || o > 12) return false;
  const rule& r = rules[o];
  if (fl & ~r.flags) return false;
  if (h[5] || h[6] || h[7]) return false;
  if (!(fl & 0x01) && data) return false;
  if (!r.tagged && tag) return false;
  if (r.descs ? (n < 1 || n > l.rma_iov_max) : n != 0) return false;
  if (o != 8 && (aop || dt)) return false;
  const bool st_ok = aux < (1u << 16);
  switch (o) {
    case 1:
    case 2:
      return (fl & 0x04) ? len == 0 && aux <= l.msg_max : len <= l.eager_max && aux == len;
    case 3:
      return len == 0 && aux <= l.msg_max;
    case 4:
      return len <= l.msg_max && aux <= l.msg_max && aux + len <= l.msg_max;
    case 5:
      return aux == 0 && len <= l.rma_max;
    case 6:
      return aux == 0 && len == 0;
    case 7:
      return st_ok && !(aux && len) && len <= l.rma_max;
    case 9:
      return st_ok && !(aux && len) && len <= l.atomic_max;
    case 8: {
      if ((fl & 0x18) == 0x18 || aux) return false;
      const auto form = (fl & 0x10) ? weft::atomic_form::compare
                        : (fl & 0x08) ? weft::atomic_form::fetch
                                      : weft::atomic_form::base;
      return weft::atomic_valid(form, static_cast<fi_op>(aop), static_cast<fi_datatype>(dt)) &&
             len <= 2 * l.atomic_max;
    }
    case 10:
      return len == 0 && st_ok;
    case 11:
      return len == 0 && aux >= 1 && aux <= l.credit_max;
    case 12:
      return len == 0 && aux == 0 && id == 0;
  }
  return false;
}

bool model_descs(const uint8_t* h, const uint8_t* d, const frame_limits& l) {
  const uint8_t o = h[0], n = h[2], dt = h[4], fl = h[1];
  const uint64_t len = rd64(h + 8);
  const uint64_t unit = o == 8 ? weft::datatype_size(static_cast<fi_datatype>(dt)) : 1;
  const uint64_t max = o == 8 ? l.atomic_max : l.rma_max;
  if (unit == 0) return false;
  uint64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t a = rd64(d + 24 * i), k = rd64(d + 24 * i + 8);
    if (k > max || a + k < a || k % unit) return false;
    sum += k;
    if (sum > max) return false;
  }
  if (o == 5) return sum == len;
  if (o == 6) return true;
  uint64_t want = sum;
  if (fl & 0x10) want = 2 * sum;
  if ((fl & 0x08) && h[3] == FI_ATOMIC_READ) want = 0;
  return len == want;
}

// Returns whether the stream turned malformed; `out` gets the frames before.
bool model_stream(const uint8_t* p, size_t n, const frame_limits& l, std::vector<seen>& out) {
  size_t at = 0;
  while (n - at >= 48) {
    const uint8_t* h = p + at;
    if (!model_hdr(h, l)) return true;
    const size_t dl = 24u * h[2];
    if (n - at - 48 < dl) return false;
    if (h[2] && !model_descs(h, h + 48, l)) return true;
    const uint64_t len = rd64(h + 8);
    out.push_back({h[0], h[2], len});
    at += 48 + dl;
    if (len > n - at) return false;
    at += static_cast<size_t>(len);
  }
  return false;
}

// ------------------------------------------------------------ drivers
struct chunker {
  uint32_t s;
  size_t next(size_t left) {
    s = s * 1103515245u + 12345u;
    const size_t k = 1 + (s >> 16) % 97;
    return k < left ? k : left;
  }
};

void frames(const uint8_t* p, size_t n, uint8_t seed) {
  const frame_limits l = fuzz_limits();
  frame_decoder d(l);
  chunker c{seed};
  std::vector<seen> got;
  size_t at = 0;
  while (at < n && !d.failed()) {
    const size_t k = c.next(n - at);
    const size_t used = d.feed(p + at, k);
    if (used > k) abort();
    at += used;
    if (d.failed()) break;
    if (!d.ready()) {
      if (used != k) abort();  // not ready, not failed: it must have taken everything
      continue;
    }
    const frame_hdr& h = d.hdr();
    if (h.iov_count > l.rma_iov_max) abort();
    got.push_back({h.op, h.iov_count, h.length});
    const uint64_t take = d.payload_left() < n - at ? d.payload_left() : n - at;
    d.take_payload(take);
    at += static_cast<size_t>(take);
    if (d.payload_left()) break;  // the input ended inside the payload
    d.next();
  }
  std::vector<seen> want;
  const bool bad = model_stream(p, n, l, want);
  if (bad != d.failed() || got != want) abort();
}

void handshake(const uint8_t* p, size_t n, uint8_t seed) {
  hs_decoder d;
  chunker c{seed};
  size_t at = 0;
  while (at < n && !d.failed()) {
    at += d.feed(p + at, c.next(n - at));
    if (!d.ready()) continue;
    const hs_msg& m = d.msg();
    if (m.cm_len > cm_data_max || d.raw_len() > hs_msg_max) abort();
    // Round trip: encoding what was decoded gives the bytes that came.
    unsigned char out[hs_msg_max];
    const size_t len = hs_encode(static_cast<hs_kind>(m.hdr.kind), static_cast<reject_reason>(m.hdr.reason),
                                 &m.body, m.cm, m.cm_len, out, m.hdr.version);
    if (len != d.raw_len() || memcmp(out, d.raw(), len)) abort();
    d.next();
  }
}

}  // namespace

int weft_fuzz_tcp_frame(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  if (data[0] & 1)
    handshake(data + 2, size - 2, data[1]);
  else
    frames(data + 2, size - 2, data[1]);
  return 0;
}
