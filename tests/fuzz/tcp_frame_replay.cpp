// SPDX-License-Identifier: BSD-3-Clause
// Replays a corpus through the tcp wire decoders (tcp_frame_target.cpp):
// replay.hpp (tests/fuzz/corpus/tcp_frame in CI).
#include <rdma/fi_atomic.h>

#include <cstdint>
#include <string>
#include <vector>

#include "prov/tcp/tcp_frame.hpp"
#include "replay.hpp"

int weft_fuzz_tcp_frame(const uint8_t* data, size_t size);

namespace {

using namespace weft::tcp;
using weft_fuzz::bytes;

void put_frame(bytes& out, frame_hdr h, std::vector<rma_desc> d = {}, size_t payload = 0) {
  h.iov_count = static_cast<uint8_t>(d.size());
  const frame_hdr w = swap_hdr(h);
  const auto* p = reinterpret_cast<const unsigned char*>(&w);
  out.insert(out.end(), p, p + sizeof w);
  for (auto& x : d) {
    const rma_desc s = swap_desc(x);
    const auto* q = reinterpret_cast<const unsigned char*>(&s);
    out.insert(out.end(), q, q + sizeof s);
  }
  for (size_t i = 0; i < payload; ++i) out.push_back(static_cast<unsigned char>(i * 7));
}

frame_hdr hdr(op o, uint8_t flags = 0) {
  frame_hdr h{};
  h.op = static_cast<uint8_t>(o);
  h.flags = flags;
  return h;
}

// Seeds: valid frames of every op, a long mixed stream, near misses, and
// every handshake message. The first two bytes are the mode and chunk seed.
std::vector<std::pair<std::string, bytes>> seeds() {
  std::vector<std::pair<std::string, bytes>> s;
  auto frames = [&](const char* name, bytes body, uint8_t chunk = 3) {
    bytes b{0, chunk};
    b.insert(b.end(), body.begin(), body.end());
    s.push_back({name, b});
  };
  bytes b;
  frame_hdr m = hdr(op::msg, flag_cq_data | flag_want_ack);
  m.length = m.aux = 16;
  m.data = 5;
  put_frame(b, m, {}, 16);
  frames("msg", b);
  b.clear();
  frame_hdr t = hdr(op::tagged);
  t.tag = 0xabcdef;
  t.length = t.aux = 8;
  put_frame(b, t, {}, 8);
  frames("tagged", b);
  b.clear();
  frame_hdr r = hdr(op::tagged, flag_rndv);
  r.aux = 100000;
  put_frame(b, r);
  frame_hdr cts = hdr(op::cts);
  cts.aux = 100000;
  put_frame(b, cts);
  frame_hdr rd = hdr(op::rndv_data, flag_last);
  rd.length = 100;
  rd.aux = 99900;
  put_frame(b, rd, {}, 100);
  frames("rndv", b);
  b.clear();
  frame_hdr w = hdr(op::write, flag_cq_data);
  w.length = 24;
  w.data = 1;
  put_frame(b, w, {{0x1000, 8, 1}, {0x2000, 16, 2}}, 24);
  frame_hdr rq = hdr(op::read_req);
  put_frame(b, rq, {{0x1000, 4096, 1}});
  frame_hdr rs = hdr(op::read_resp);
  rs.length = 32;
  put_frame(b, rs, {}, 32);
  frames("rma", b);
  b.clear();
  frame_hdr a = hdr(op::atomic, flag_compare);
  a.atomic_op = FI_CSWAP;
  a.datatype = FI_UINT64;
  a.length = 32;
  put_frame(b, a, {{0x1000, 16, 9}}, 32);
  frame_hdr f = hdr(op::atomic, flag_fetch);
  f.atomic_op = FI_ATOMIC_READ;
  f.datatype = FI_FLOAT;
  put_frame(b, f, {{0x1000, 64, 9}});
  frame_hdr ar = hdr(op::atomic_resp);
  ar.length = 16;
  put_frame(b, ar, {}, 16);
  frames("atomic", b);
  b.clear();
  frame_hdr ack = hdr(op::ack);
  ack.aux = FI_EACCES;
  put_frame(b, ack);
  frame_hdr cr = hdr(op::credit);
  cr.aux = 65536;
  put_frame(b, cr);
  put_frame(b, hdr(op::shutdown));
  frames("control", b);
  // Near misses: each valid but for one field.
  b.clear();
  m.length = m.aux = 4097;
  put_frame(b, m);
  frames("eager_too_big", b);
  b.clear();
  w.length = 25;
  put_frame(b, w, {{0x1000, 8, 1}, {0x2000, 16, 2}});
  frames("write_len_mismatch", b);
  b.clear();
  a.datatype = FI_DATATYPE_LAST;
  put_frame(b, a, {{0, 16, 0}});
  frames("bad_datatype", b);
  // A long stream of everything, cut in big chunks.
  b.clear();
  for (auto& x : s) b.insert(b.end(), x.second.begin() + 2, x.second.end());
  frames("mixed", b, 200);

  auto hs = [&](const char* name, hs_kind k, reject_reason why, const void* body, uint16_t cm) {
    bytes out(hs_msg_max + 2);
    out[0] = 1;
    out[1] = 5;
    const unsigned char data[4] = {'d', 'a', 't', 'a'};
    out.resize(2 + hs_encode(k, why, body, data, cm, out.data() + 2));
    s.push_back({name, out});
  };
  hs_hello h{};
  h.ep_type = static_cast<uint8_t>(wire_ep_type::rdm);
  h.src.family = static_cast<uint8_t>(wire_family::ipv6);
  h.src.port = 4242;
  h.src.addr[15] = 1;
  h.credit = 1 << 16;
  hs("hs_hello", hs_kind::hello, reject_reason::none, &h, 4);
  hs_challenge c{};
  c.ep_type = static_cast<uint8_t>(wire_ep_type::msg);
  c.src.family = static_cast<uint8_t>(wire_family::ipv4);
  c.src.addr[0] = 10;
  hs("hs_challenge", hs_kind::challenge, reject_reason::none, &c, 0);
  hs_proof p{};
  p.proof[0] = 1;
  hs("hs_proof", hs_kind::proof, reject_reason::none, &p, 0);
  hs_verdict v{};
  v.credit = 4096;
  hs("hs_accept", hs_kind::accept, reject_reason::none, &v, 4);
  v.credit = 0;
  hs("hs_reject", hs_kind::reject, reject_reason::crossed, &v, 2);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  return weft_fuzz::replay_main(argc, argv, weft_fuzz_tcp_frame, seeds());
}
