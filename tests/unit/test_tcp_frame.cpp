// SPDX-License-Identifier: BSD-3-Clause
// White-box: the tcp wire format's decoders (tcp_frame) and the handshake's
// HMAC (tcp_auth). Every rule of frame_check has a case that breaks it.
#include <gtest/gtest.h>
#include <rdma/fi_atomic.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "prov/tcp/tcp_auth.hpp"
#include "prov/tcp/tcp_frame.hpp"

namespace {

using namespace weft::tcp;

frame_limits small_limits() {
  frame_limits l;
  l.msg_max = 1 << 20;
  l.eager_max = 4096;
  l.rma_max = 1 << 20;
  l.atomic_max = 1024;
  l.credit_max = 1 << 20;
  l.rma_iov_max = 4;
  return l;
}

frame_hdr hdr(op o) {
  frame_hdr h{};
  h.op = static_cast<uint8_t>(o);
  return h;
}

// The wire bytes of a header and its descriptors.
std::vector<unsigned char> wire(const frame_hdr& h, const std::vector<rma_desc>& d = {}) {
  std::vector<unsigned char> out(sizeof(frame_hdr) + d.size() * sizeof(rma_desc));
  const frame_hdr w = swap_hdr(h);
  memcpy(out.data(), &w, sizeof w);
  for (size_t i = 0; i < d.size(); ++i) {
    const rma_desc x = swap_desc(d[i]);
    memcpy(out.data() + sizeof w + i * sizeof x, &x, sizeof x);
  }
  return out;
}

// Decodes one frame prefix fed in chunks of `chunk` bytes: 0 (ready), or the error.
int decode(const std::vector<unsigned char>& bytes, size_t chunk, frame_decoder& d) {
  size_t at = 0;
  while (at < bytes.size() && !d.ready() && !d.failed()) {
    const size_t n = std::min(chunk, bytes.size() - at);
    const size_t used = d.feed(bytes.data() + at, n);
    at += used;
    if (used < n) break;
  }
  if (d.failed()) return d.error();
  return d.ready() ? 0 : -1;
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* x = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += x[p[i] >> 4];
    s += x[p[i] & 15];
  }
  return s;
}

TEST(TcpFrame, LayoutIsPinned) {
  EXPECT_EQ(sizeof(frame_hdr), 48u);
  EXPECT_EQ(sizeof(rma_desc), 24u);
  EXPECT_EQ(sizeof(hs_hdr), 16u);
  EXPECT_EQ(sizeof(wire_addr), 32u);
  // The magic reads "weft-tcp" on the wire.
  const uint64_t m = le(wire_magic);
  EXPECT_EQ(0, memcmp(&m, "weft-tcp", 8));
  // Little-endian fields: a header's length 0x0102 is bytes 02 01 at offset 8.
  frame_hdr h = hdr(op::msg);
  h.length = h.aux = 0x0102;
  auto b = wire(h);
  EXPECT_EQ(b[8], 0x02);
  EXPECT_EQ(b[9], 0x01);
}

TEST(TcpFrame, EveryValidOpDecodesInAnySplit) {
  std::vector<std::pair<frame_hdr, std::vector<rma_desc>>> ok;
  frame_hdr m = hdr(op::msg);
  m.length = m.aux = 100;
  m.flags = flag_cq_data | flag_want_ack;
  m.data = 0xdeadbeef;
  m.id = 7;
  ok.push_back({m, {}});
  frame_hdr t = hdr(op::tagged);
  t.length = t.aux = 0;
  t.tag = 0x123456789abcdefull;
  ok.push_back({t, {}});
  frame_hdr r = hdr(op::tagged);
  r.flags = flag_rndv;
  r.aux = 1 << 20;
  ok.push_back({r, {}});
  frame_hdr tx = hdr(op::tagged);  // transmit complete: acked on arrival
  tx.flags = flag_ack_arrival;
  tx.length = tx.aux = 64;
  tx.id = 11;
  ok.push_back({tx, {}});
  frame_hdr cts = hdr(op::cts);
  cts.aux = 5000;
  cts.id = 9;
  ok.push_back({cts, {}});
  frame_hdr rd = hdr(op::rndv_data);
  rd.aux = 4096;
  rd.length = 8192;
  rd.flags = flag_last;
  ok.push_back({rd, {}});
  frame_hdr w = hdr(op::write);
  w.iov_count = 2;
  w.length = 300;
  ok.push_back({w, {{0x1000, 100, 1}, {0x9000, 200, 2}}});
  frame_hdr rq = hdr(op::read_req);
  rq.iov_count = 1;
  ok.push_back({rq, {{0x1000, 1 << 20, 3}}});
  frame_hdr rs = hdr(op::read_resp);
  rs.length = 64;
  ok.push_back({rs, {}});
  frame_hdr a = hdr(op::atomic);
  a.atomic_op = FI_SUM;
  a.datatype = FI_UINT64;
  a.iov_count = 1;
  a.length = 64;
  ok.push_back({a, {{0x1000, 64, 4}}});
  frame_hdr cs = hdr(op::atomic);
  cs.flags = flag_compare;
  cs.atomic_op = FI_CSWAP;
  cs.datatype = FI_INT32;
  cs.iov_count = 2;
  cs.length = 2 * 16;
  ok.push_back({cs, {{0x1000, 8, 4}, {0x2000, 8, 4}}});
  frame_hdr fr = hdr(op::atomic);
  fr.flags = flag_fetch;
  fr.atomic_op = FI_ATOMIC_READ;
  fr.datatype = FI_DOUBLE;
  fr.iov_count = 1;
  ok.push_back({fr, {{0x1000, 80, 4}}});
  frame_hdr ar = hdr(op::atomic_resp);
  ar.length = 80;
  ok.push_back({ar, {}});
  frame_hdr ack = hdr(op::ack);
  ack.aux = FI_EACCES;
  ok.push_back({ack, {}});
  frame_hdr cr = hdr(op::credit);
  cr.aux = 4096;
  ok.push_back({cr, {}});
  ok.push_back({hdr(op::shutdown), {}});

  for (auto& [h, d] : ok) {
    const auto bytes = wire(h, d);
    for (size_t chunk : {size_t{1}, size_t{7}, size_t{48}, bytes.size()}) {
      frame_decoder dec(small_limits());
      ASSERT_EQ(decode(bytes, chunk, dec), 0)
          << "op " << int(h.op) << " chunk " << chunk << ": " << dec.why();
      EXPECT_EQ(0, memcmp(&dec.hdr(), &h, sizeof h));
      for (size_t i = 0; i < d.size(); ++i) {
        EXPECT_EQ(dec.descs()[i].addr, d[i].addr);
        EXPECT_EQ(dec.descs()[i].len, d[i].len);
        EXPECT_EQ(dec.descs()[i].key, d[i].key);
      }
      EXPECT_EQ(dec.payload_left(), h.length);
    }
  }
}

TEST(TcpFrame, FramesBackToBackAndPayloadHandOff) {
  frame_hdr a = hdr(op::msg);
  a.length = a.aux = 5;
  frame_hdr b = hdr(op::tagged);
  b.tag = 42;
  std::vector<unsigned char> s = wire(a);
  for (char c : std::string("hello")) s.push_back(static_cast<unsigned char>(c));
  auto wb = wire(b);
  s.insert(s.end(), wb.begin(), wb.end());

  frame_decoder d(small_limits());
  size_t at = d.feed(s.data(), s.size());
  ASSERT_TRUE(d.ready());
  EXPECT_EQ(at, sizeof(frame_hdr));  // stops where the payload starts
  EXPECT_EQ(d.payload_left(), 5u);
  EXPECT_EQ(0, memcmp(s.data() + at, "hello", 5));
  d.take_payload(2);
  d.take_payload(3);
  EXPECT_EQ(d.payload_left(), 0u);
  d.next();
  at += 5;
  at += d.feed(s.data() + at, s.size() - at);
  ASSERT_TRUE(d.ready());
  EXPECT_EQ(d.hdr().tag, 42u);
  EXPECT_EQ(at, s.size());
}

TEST(TcpFrame, NextBeforePayloadTakenFails) {
  frame_hdr a = hdr(op::msg);
  a.length = a.aux = 5;
  frame_decoder d(small_limits());
  auto w = wire(a);
  d.feed(w.data(), w.size());
  ASSERT_TRUE(d.ready());
  d.next();
  EXPECT_TRUE(d.failed());
}

TEST(TcpFrame, EveryRuleRejects) {
  std::vector<std::pair<const char*, std::pair<frame_hdr, std::vector<rma_desc>>>> bad;
  auto add = [&](const char* what, frame_hdr h, std::vector<rma_desc> d = {}) {
    bad.push_back({what, {h, d}});
  };
  add("op 0", hdr(op::none));
  add("op max", hdr(op::max));
  frame_hdr x = hdr(op::msg);
  x.op = 255;
  add("op 255", x);
  x = hdr(op::msg);
  x.flags = flag_fetch;
  add("msg with fetch flag", x);
  x = hdr(op::msg);
  x.flags = 0x80;
  add("undefined flag bit", x);
  x = hdr(op::ack);
  x.reserved[1] = 1;
  add("reserved byte", x);
  x = hdr(op::msg);
  x.data = 1;
  add("data without flag", x);
  x = hdr(op::msg);
  x.tag = 1;
  add("tag on msg", x);
  x = hdr(op::msg);
  x.iov_count = 1;
  add("descriptors on msg", x);
  x = hdr(op::msg);
  x.datatype = 1;
  add("datatype on msg", x);
  x = hdr(op::msg);
  x.length = x.aux = 4097;
  add("eager beyond eager_max", x);
  x = hdr(op::msg);
  x.length = 10;
  x.aux = 11;
  add("eager size differs", x);
  x = hdr(op::msg);
  x.flags = flag_rndv;
  x.length = 1;
  x.aux = 1;
  add("payload on rndv", x);
  x = hdr(op::msg);
  x.flags = flag_rndv;
  x.aux = (1 << 20) + 1;
  add("rndv beyond msg_max", x);
  x = hdr(op::msg);
  x.flags = flag_ack_arrival | flag_rndv;
  x.aux = 100;
  add("ack_arrival on an announcement", x);
  x = hdr(op::msg);
  x.flags = flag_ack_arrival | flag_want_ack;
  add("ack_arrival with want_ack", x);
  x = hdr(op::write);
  x.iov_count = 1;
  x.length = 8;
  x.flags = flag_ack_arrival;
  add("ack_arrival on write", x, {{0, 8, 0}});
  x = hdr(op::cts);
  x.length = 1;
  add("payload on cts", x);
  x = hdr(op::rndv_data);
  x.aux = 1 << 20;
  x.length = 1;
  add("rndv piece beyond msg_max", x);
  x = hdr(op::rndv_data);
  x.aux = ~0ull;
  x.length = 2;
  add("rndv offset wraps", x);
  x = hdr(op::write);
  add("write without descriptors", x);
  x = hdr(op::write);
  x.iov_count = 5;
  add("write with 5 descriptors (limit 4)", x);
  x = hdr(op::write);
  x.iov_count = 200;
  add("write with 200 descriptors", x);
  x = hdr(op::write);
  x.iov_count = 1;
  x.length = 10;
  add("write payload differs", x, {{0, 11, 0}});
  x = hdr(op::write);
  x.iov_count = 1;
  x.length = 10;
  add("descriptor wraps", x, {{~0ull - 4, 10, 0}});
  x = hdr(op::write);
  x.iov_count = 2;
  x.length = 0;
  add("descriptor beyond rma_max", x, {{0, ~0ull, 0}, {0, 1, 0}});
  x = hdr(op::write);
  x.iov_count = 2;
  x.length = 0;
  add("descriptors sum beyond rma_max", x, {{0, 1 << 20, 0}, {0, 1, 0}});
  x = hdr(op::read_req);
  x.iov_count = 1;
  x.length = 8;
  add("payload on read_req", x, {{0, 8, 0}});
  x = hdr(op::read_req);
  x.iov_count = 1;
  x.flags = flag_cq_data;
  add("cq data on read_req", x, {{0, 8, 0}});
  x = hdr(op::read_resp);
  x.aux = FI_EACCES;
  x.length = 8;
  add("payload on an error response", x);
  x = hdr(op::read_resp);
  x.aux = status_max;
  add("status out of range", x);
  x = hdr(op::atomic_resp);
  x.length = 1025;
  add("atomic response beyond atomic_max", x);
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.atomic_op = FI_ATOMIC_OP_LAST;
  x.datatype = FI_INT8;
  add("atomic op out of range", x, {{0, 1, 0}});
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.atomic_op = FI_SUM;
  x.datatype = FI_DATATYPE_LAST;
  add("datatype out of range", x, {{0, 1, 0}});
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.atomic_op = FI_BOR;
  x.datatype = FI_DOUBLE;
  x.length = 8;
  add("BOR on double", x, {{0, 8, 0}});
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.atomic_op = FI_CSWAP;
  x.datatype = FI_INT32;
  x.length = 4;
  add("CSWAP in base form", x, {{0, 4, 0}});
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.flags = flag_fetch | flag_compare;
  x.atomic_op = FI_CSWAP;
  x.datatype = FI_INT32;
  x.length = 8;
  add("fetch and compare", x, {{0, 4, 0}});
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.atomic_op = FI_SUM;
  x.datatype = FI_INT32;
  x.length = 6;
  add("partial element", x, {{0, 6, 0}});
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.flags = flag_compare;
  x.atomic_op = FI_CSWAP;
  x.datatype = FI_INT32;
  x.length = 4;
  add("compare operands missing", x, {{0, 4, 0}});
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.atomic_op = FI_SUM;
  x.datatype = FI_INT8;
  x.length = 1025;
  add("atomic beyond atomic_max", x, {{0, 1025, 0}});
  x = hdr(op::atomic);
  x.iov_count = 1;
  x.atomic_op = FI_SUM;
  x.datatype = FI_INT8;
  x.aux = 1;
  x.length = 1;
  add("aux on atomic", x, {{0, 1, 0}});
  x = hdr(op::ack);
  x.length = 1;
  add("payload on ack", x);
  x = hdr(op::credit);
  add("credit 0", x);
  x = hdr(op::credit);
  x.aux = (1 << 20) + 1;
  add("credit beyond credit_max", x);
  x = hdr(op::shutdown);
  x.id = 1;
  add("id on shutdown", x);

  for (auto& [what, hd] : bad) {
    frame_decoder d(small_limits());
    EXPECT_EQ(decode(wire(hd.first, hd.second), 1000, d), err_malformed) << what;
    EXPECT_TRUE(d.failed()) << what;
    EXPECT_NE(d.why(), nullptr) << what;
    // Sticky: nothing more is consumed.
    unsigned char more[64] = {};
    EXPECT_EQ(d.feed(more, sizeof more), 0u) << what;
  }
}

TEST(TcpFrame, RandomBytesNeverReadOutOfBounds) {
  // Not a fuzzer (tests/fuzz has one): a quick deterministic sweep so the
  // unit tests alone exercise random input under the sanitizers.
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 20000; ++i) {
    std::vector<unsigned char> b(static_cast<size_t>(rng() % 600));
    for (auto& c : b) c = static_cast<unsigned char>(rng());
    if (!b.empty()) b[0] = static_cast<unsigned char>(rng() % 14);  // mostly known ops
    frame_decoder d(small_limits());
    size_t at = 0;
    while (at < b.size() && !d.failed()) {
      at += d.feed(b.data() + at, b.size() - at);
      if (d.ready()) {
        const uint64_t k = std::min<uint64_t>(d.payload_left(), b.size() - at);
        d.take_payload(k);
        at += static_cast<size_t>(k);
        if (d.payload_left()) break;
        d.next();
      }
    }
  }
}

// ------------------------------------------------------------ handshake
std::vector<unsigned char> hello_bytes(uint16_t cm_len = 3, uint16_t version = proto_version) {
  hs_hello b{};
  b.ep_type = static_cast<uint8_t>(wire_ep_type::rdm);
  b.src.family = static_cast<uint8_t>(wire_family::ipv4);
  b.src.addr[0] = 127;
  b.src.addr[3] = 1;
  b.src.port = 5000;
  b.src.instance = 99;
  b.credit = 65536;
  std::vector<unsigned char> out(hs_msg_max);
  const unsigned char cm[3] = {1, 2, 3};
  out.resize(hs_encode(hs_kind::hello, reject_reason::none, &b, cm, cm_len, out.data(), version));
  return out;
}

int hs_decode(const std::vector<unsigned char>& bytes, size_t chunk, hs_decoder& d) {
  size_t at = 0;
  while (at < bytes.size() && !d.ready() && !d.failed()) {
    const size_t n = std::min(chunk, bytes.size() - at);
    at += d.feed(bytes.data() + at, n);
  }
  if (d.failed()) return d.error();
  return d.ready() ? 0 : -1;
}

TEST(TcpHandshake, HelloRoundTripsInAnySplit) {
  const auto bytes = hello_bytes();
  for (size_t chunk : {size_t{1}, size_t{5}, bytes.size()}) {
    hs_decoder d;
    ASSERT_EQ(hs_decode(bytes, chunk, d), 0) << d.why();
    const hs_msg& m = d.msg();
    EXPECT_EQ(m.hdr.kind, static_cast<uint8_t>(hs_kind::hello));
    EXPECT_EQ(m.body.hello.src.port, 5000);
    EXPECT_EQ(m.body.hello.src.instance, 99u);
    EXPECT_EQ(m.body.hello.credit, 65536u);
    ASSERT_EQ(m.cm_len, 3);
    EXPECT_EQ(m.cm[2], 3);
    EXPECT_EQ(d.raw_len(), bytes.size());
    EXPECT_EQ(0, memcmp(d.raw(), bytes.data(), bytes.size()));
  }
}

TEST(TcpHandshake, MalformedMessagesFail) {
  auto poke = [](std::vector<unsigned char> b, size_t at, unsigned char v) {
    b[at] = v;
    return b;
  };
  const auto good = hello_bytes();
  struct {
    const char* what;
    std::vector<unsigned char> bytes;
    int err;
  } cases[] = {
      {"bad magic", poke(good, 0, 'x'), err_malformed},
      {"other version", hello_bytes(3, proto_version + 1), err_version},
      {"kind 0", poke(good, 10, 0), err_malformed},
      {"kind beyond", poke(good, 10, 9), err_malformed},
      {"reason on hello", poke(good, 11, 1), err_malformed},
      {"body too long", poke(good, 13, 0x10), err_malformed},
      {"ep type 0", poke(good, 16, 0), err_malformed},
      {"ep type 3", poke(good, 16, 3), err_malformed},
      {"flags", poke(good, 17, 1), err_malformed},
      {"cm length differs", poke(good, 18, 4), err_malformed},
      {"address family 5", poke(good, 24, 5), err_malformed},
      {"ipv4 tail not zero", poke(good, 24 + 8 + 15, 1), err_malformed},
  };
  for (auto& c : cases) {
    hs_decoder d;
    EXPECT_EQ(hs_decode(c.bytes, 1000, d), c.err) << c.what;
  }
}

TEST(TcpHandshake, RejectNeedsAReasonAndNoCredit) {
  hs_verdict v{};
  unsigned char out[hs_msg_max];
  size_t n = hs_encode(hs_kind::reject, reject_reason::crossed, &v, "ab", 2, out);
  hs_decoder d;
  std::vector<unsigned char> b(out, out + n);
  ASSERT_EQ(hs_decode(b, 1000, d), 0);
  EXPECT_EQ(d.msg().hdr.reason, static_cast<uint8_t>(reject_reason::crossed));
  EXPECT_EQ(d.msg().cm_len, 2);
  b[11] = 0;  // reason none
  hs_decoder d2;
  EXPECT_EQ(hs_decode(b, 1000, d2), err_malformed);
  v.credit = 1;
  n = hs_encode(hs_kind::reject, reject_reason::app, &v, nullptr, 0, out);
  hs_decoder d3;
  EXPECT_EQ(hs_decode(std::vector<unsigned char>(out, out + n), 1000, d3), err_malformed);
}

// The first bytes of a peer that is not weft (or another version of it)
// are told apart for the message that names it; weft's own, malformed or
// not, are not "foreign".
TEST(TcpHandshake, ForeignFirstBytesAreRecognised) {
  // libfabric 1.17's tcp connection request, as a tcp;ofi_rxm endpoint sent it.
  const std::vector<unsigned char> xnet = {3, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                           0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  hs_decoder d;
  ASSERT_EQ(hs_decode(xnet, 1000, d), err_malformed);
  foreign_peer f = classify_foreign(d.raw(), d.raw_len());
  EXPECT_EQ(f.kind, foreign_kind::libfabric_tcp);
  EXPECT_EQ(f.version, 3);
  char text[160];
  EXPECT_STREQ(describe_foreign(f, text, sizeof text),
               "it sent libfabric's tcp provider's connection request, cm protocol version 3");
  auto first = [](std::vector<unsigned char> b) { return classify_foreign(b.data(), b.size()); };
  auto xnet_as = [&](size_t at, unsigned char v) {
    auto b = xnet;
    b[at] = v;
    return first(b);
  };
  EXPECT_EQ(xnet_as(1, 1).type, 1);                        // its answer
  EXPECT_EQ(xnet_as(1, 6).kind, foreign_kind::libfabric_tcp);  // its rejection
  EXPECT_EQ(xnet_as(1, 3).kind, foreign_kind::other);      // a data header is no first message
  EXPECT_EQ(xnet_as(2, 2).kind, foreign_kind::other);      // more CM data than it allows
  EXPECT_EQ(xnet_as(5, 1).kind, foreign_kind::other);      // a segment number
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  f = first(std::vector<unsigned char>(http.begin(), http.end()));
  EXPECT_EQ(f.kind, foreign_kind::other);
  EXPECT_STREQ(describe_foreign(f, text, sizeof text),
               "its first bytes, 47 45 54 20 2f 20 48 54, are not weft's handshake");
  // weft's magic: another version is named, this one never is.
  f = first(hello_bytes(3, proto_version + 1));
  EXPECT_EQ(f.kind, foreign_kind::weft_version);
  EXPECT_EQ(f.version, proto_version + 1);
  EXPECT_STREQ(describe_foreign(f, text, sizeof text), ("it speaks version " + std::to_string(proto_version + 1)).c_str());
  EXPECT_EQ(first(hello_bytes()).kind, foreign_kind::none);
  auto bad_kind = hello_bytes();
  bad_kind[10] = 0;
  EXPECT_EQ(first(bad_kind).kind, foreign_kind::none);
  EXPECT_EQ(classify_foreign(xnet.data(), 15).kind, foreign_kind::none);  // too little to tell
  EXPECT_EQ(classify_foreign(nullptr, 0).kind, foreign_kind::none);
}

// ------------------------------------------------------------ auth
TEST(TcpAuth, Sha256Vectors) {
  uint8_t out[32];
  sha256 s;
  s.finish(out);
  EXPECT_EQ(hex(out, 32), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  s.update("abc", 3);
  s.finish(out);
  EXPECT_EQ(hex(out, 32), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string a(1000, 'a');
  for (size_t i = 0; i < a.size(); i += 37) s.update(a.data() + i, std::min<size_t>(37, a.size() - i));
  s.finish(out);
  EXPECT_EQ(hex(out, 32), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(TcpAuth, HmacRfc4231) {
  uint8_t out[32];
  std::vector<uint8_t> k1(20, 0x0b);
  byte_span p1{"Hi There", 8};
  hmac_sha256(k1.data(), k1.size(), &p1, 1, out);
  EXPECT_EQ(hex(out, 32), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // The message in two pieces gives the same MAC.
  byte_span p2[2] = {{"what do ya want ", 16}, {"for nothing?", 12}};
  hmac_sha256("Jefe", 4, p2, 2, out);
  EXPECT_EQ(hex(out, 32), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::vector<uint8_t> k6(131, 0xaa);
  const char* m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  byte_span p6{m6, strlen(m6)};
  hmac_sha256(k6.data(), k6.size(), &p6, 1, out);
  EXPECT_EQ(hex(out, 32), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(TcpAuth, ConstantTimeEqualAndRandom) {
  EXPECT_TRUE(ct_equal("abcd", "abcd", 4));
  EXPECT_FALSE(ct_equal("abcd", "abce", 4));
  uint64_t a = 0, b = 0;
  ASSERT_EQ(random_bytes(&a, sizeof a), 0);
  ASSERT_EQ(random_bytes(&b, sizeof b), 0);
  EXPECT_NE(a, b);
}

}  // namespace
