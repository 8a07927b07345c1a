// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: the frame and handshake decoders (see tcp_frame.hpp).
#include "prov/tcp/tcp_frame.hpp"

#include <rdma/fi_atomic.h>

#include <cstdio>
#include <cstring>

#include "util/atomic_ops.hpp"

namespace weft::tcp {

frame_hdr swap_hdr(const frame_hdr& h) noexcept {
  frame_hdr w = h;
  w.length = le(h.length);
  w.id = le(h.id);
  w.tag = le(h.tag);
  w.data = le(h.data);
  w.aux = le(h.aux);
  return w;
}

rma_desc swap_desc(const rma_desc& d) noexcept {
  return {le(d.addr), le(d.len), le(d.key)};
}

wire_addr swap_addr(const wire_addr& a) noexcept {
  wire_addr w = a;
  w.port = le(a.port);
  w.reserved1 = le(a.reserved1);
  w.instance = le(a.instance);
  return w;
}

namespace {

// Copies into buf[have, need) what [in + used, in + n) holds of it; true
// once the buffer is complete. The one step both incremental decoders repeat.
inline bool gather(unsigned char* buf, uint32_t& have, uint32_t need, const unsigned char* in, size_t& used,
                   size_t n) noexcept {
  const size_t k = need - have < n - used ? need - have : n - used;
  memcpy(buf + have, in + used, k);
  have += static_cast<uint32_t>(k);
  used += k;
  return have == need;
}

// Flags each op may carry; index = op.
constexpr uint8_t allowed_flags[static_cast<size_t>(op::max)] = {
    0,                                                         // none
    flag_cq_data | flag_want_ack | flag_rndv | flag_ack_arrival,  // msg
    flag_cq_data | flag_want_ack | flag_rndv | flag_ack_arrival,  // tagged
    0,                                                         // cts
    flag_last | flag_want_ack,                                 // rndv_data
    flag_cq_data | flag_want_ack,                              // write
    0,                                                         // read_req
    0,                                                         // read_resp
    flag_cq_data | flag_want_ack | flag_fetch | flag_compare,  // atomic
    0,                                                         // atomic_resp
    0,                                                         // ack
    0,                                                         // credit
    0,                                                         // shutdown
};

inline int bad(const char** why, const char* reason) noexcept {
  if (why) *why = reason;
  return err_malformed;
}

atomic_form form_of(uint8_t flags) noexcept {
  if (flags & flag_compare) return atomic_form::compare;
  if (flags & flag_fetch) return atomic_form::fetch;
  return atomic_form::base;
}

}  // namespace

uint64_t atomic_payload(const frame_hdr& h, uint64_t total) noexcept {
  switch (form_of(h.flags)) {
    case atomic_form::compare:
      return 2 * total;
    case atomic_form::fetch:
      return h.atomic_op == FI_ATOMIC_READ ? 0 : total;
    default:
      return total;
  }
}

int frame_check(const frame_hdr& h, const frame_limits& lim, const char** why) noexcept {
  if (h.op == 0 || h.op >= static_cast<uint8_t>(op::max)) return bad(why, "unknown op");
  const auto o = static_cast<op>(h.op);
  if (h.flags & ~allowed_flags[h.op]) return bad(why, "flag not allowed for op");
  if (h.reserved[0] | h.reserved[1] | h.reserved[2]) return bad(why, "reserved bytes not zero");
  if (!(h.flags & flag_cq_data) && h.data) return bad(why, "data without flag_cq_data");
  if (o != op::tagged && h.tag) return bad(why, "tag on an untagged op");
  const bool has_descs = o == op::write || o == op::read_req || o == op::atomic;
  if (has_descs) {
    if (h.iov_count == 0 || h.iov_count > lim.rma_iov_max || h.iov_count > rma_iov_max_wire)
      return bad(why, "descriptor count out of range");
  } else if (h.iov_count) {
    return bad(why, "descriptors on an op without them");
  }
  if (o != op::atomic && (h.atomic_op | h.datatype)) return bad(why, "atomic fields on a non-atomic op");

  switch (o) {
    case op::msg:
    case op::tagged:
      if ((h.flags & flag_ack_arrival) && (h.flags & (flag_rndv | flag_want_ack)))
        return bad(why, "ack_arrival with rndv or want_ack");
      if (h.flags & flag_rndv) {
        if (h.length) return bad(why, "payload on a rendezvous announcement");
        if (h.aux > lim.msg_max) return bad(why, "message larger than msg_max");
      } else {
        if (h.length > lim.eager_max) return bad(why, "eager payload larger than eager_max");
        if (h.aux != h.length) return bad(why, "eager size differs from payload length");
      }
      return 0;
    case op::cts:
      if (h.length) return bad(why, "payload on cts");
      if (h.aux > lim.msg_max) return bad(why, "cts larger than msg_max");
      return 0;
    case op::rndv_data:
      if (h.length > lim.msg_max || h.aux > lim.msg_max || h.aux + h.length > lim.msg_max)
        return bad(why, "rendezvous piece beyond msg_max");
      return 0;
    case op::write:
      if (h.aux) return bad(why, "aux on write");
      if (h.length > lim.rma_max) return bad(why, "write larger than rma_max");
      return 0;
    case op::read_req:
      if (h.aux || h.length) return bad(why, "aux or payload on read_req");
      return 0;
    case op::read_resp:
    case op::atomic_resp:
      if (h.aux >= status_max) return bad(why, "status out of range");
      if (h.aux && h.length) return bad(why, "payload on an error response");
      if (h.length > (o == op::read_resp ? lim.rma_max : lim.atomic_max))
        return bad(why, "response too large");
      return 0;
    case op::atomic: {
      if ((h.flags & flag_fetch) && (h.flags & flag_compare)) return bad(why, "fetch and compare both set");
      if (h.aux) return bad(why, "aux on atomic");
      const auto aop = static_cast<fi_op>(h.atomic_op);
      const auto dt = static_cast<fi_datatype>(h.datatype);
      if (!atomic_valid(form_of(h.flags), aop, dt)) return bad(why, "invalid atomic op/datatype/form");
      if (h.length > 2 * lim.atomic_max) return bad(why, "atomic operands too large");
      return 0;
    }
    case op::ack:
      if (h.length) return bad(why, "payload on ack");
      if (h.aux >= status_max) return bad(why, "status out of range");
      return 0;
    case op::credit:
      if (h.length) return bad(why, "payload on credit");
      if (h.aux == 0 || h.aux > lim.credit_max) return bad(why, "credit out of range");
      return 0;
    case op::shutdown:
      if (h.length || h.aux || h.id) return bad(why, "fields set on shutdown");
      return 0;
    default:
      return bad(why, "unknown op");
  }
}

int frame_check_descs(const frame_hdr& h, const rma_desc* d, const frame_limits& lim,
                      const char** why) noexcept {
  const auto o = static_cast<op>(h.op);
  uint64_t dtsize = 1, max = lim.rma_max;
  if (o == op::atomic) {
    dtsize = datatype_size(static_cast<fi_datatype>(h.datatype));
    if (dtsize == 0) return bad(why, "unknown datatype");
    max = lim.atomic_max;
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < h.iov_count; ++i) {
    // Each length is bounded first, so neither the sum nor addr + len can wrap.
    if (d[i].len > max) return bad(why, "descriptor longer than the limit");
    if (d[i].addr + d[i].len < d[i].addr) return bad(why, "descriptor wraps the address space");
    if (d[i].len % dtsize) return bad(why, "descriptor not a whole number of elements");
    total += d[i].len;
    if (total > max) return bad(why, "descriptors longer than the limit");
  }
  switch (o) {
    case op::write:
      if (total != h.length) return bad(why, "write payload differs from its descriptors");
      return 0;
    case op::read_req:
      return 0;
    case op::atomic:
      if (h.length != atomic_payload(h, total))
        return bad(why, "atomic payload differs from its descriptors");
      return 0;
    default:
      return bad(why, "descriptors on an op without them");
  }
}

// ------------------------------------------------------------ frame_decoder
frame_decoder::frame_decoder(const frame_limits& lim) noexcept : lim_(lim) {
  if (lim_.rma_iov_max > rma_iov_max_wire) lim_.rma_iov_max = rma_iov_max_wire;
  reset();
}

void frame_decoder::reset() noexcept {
  state_ = state::header;
  have_ = 0;
  need_ = sizeof(frame_hdr);
  left_ = 0;
  why_ = nullptr;
}

void frame_decoder::fail(const char* why) noexcept {
  state_ = state::failed;
  why_ = why;
}

void frame_decoder::next() noexcept {
  if (state_ != state::payload) return;
  if (left_) {
    fail("next() before the payload was taken");
    return;
  }
  state_ = state::header;
  have_ = 0;
  need_ = sizeof(frame_hdr);
}

size_t frame_decoder::feed(const void* p, size_t n) noexcept {
  const auto* in = static_cast<const unsigned char*>(p);
  size_t used = 0;
  while (used < n && (state_ == state::header || state_ == state::descs)) {
    if (!gather(buf_, have_, need_, in, used, n)) break;
    if (state_ == state::header) {
      frame_hdr w;
      memcpy(&w, buf_, sizeof w);
      hdr_ = swap_hdr(w);
      const char* why = nullptr;
      if (frame_check(hdr_, lim_, &why)) {
        fail(why);
        break;
      }
      if (hdr_.iov_count) {
        state_ = state::descs;
        need_ += static_cast<uint32_t>(hdr_.iov_count * sizeof(rma_desc));
        continue;
      }
    } else {
      for (uint32_t i = 0; i < hdr_.iov_count; ++i) {
        rma_desc w;
        memcpy(&w, buf_ + sizeof(frame_hdr) + i * sizeof(rma_desc), sizeof w);
        descs_[i] = swap_desc(w);
      }
      const char* why = nullptr;
      if (frame_check_descs(hdr_, descs_, lim_, &why)) {
        fail(why);
        break;
      }
    }
    state_ = state::payload;
    left_ = hdr_.length;
  }
  return used;
}

// ------------------------------------------------------------ handshake
size_t hs_body_size(hs_kind k) noexcept {
  switch (k) {
    case hs_kind::hello:
      return sizeof(hs_hello);
    case hs_kind::challenge:
      return sizeof(hs_challenge);
    case hs_kind::proof:
      return sizeof(hs_proof);
    case hs_kind::accept:
    case hs_kind::reject:
      return sizeof(hs_verdict);
    default:
      return 0;
  }
}

namespace {

// Host <-> wire order of a handshake body (its own inverse).
void swap_body(hs_kind k, void* body) noexcept {
  switch (k) {
    case hs_kind::hello: {
      auto& b = *static_cast<hs_hello*>(body);
      b.cm_len = le(b.cm_len);
      b.reserved = le(b.reserved);
      b.src = swap_addr(b.src);
      b.credit = le(b.credit);
      break;
    }
    case hs_kind::challenge: {
      auto& b = *static_cast<hs_challenge*>(body);
      b.reserved0 = le(b.reserved0);
      b.reserved1 = le(b.reserved1);
      b.src = swap_addr(b.src);
      break;
    }
    case hs_kind::accept:
    case hs_kind::reject: {
      auto& b = *static_cast<hs_verdict*>(body);
      b.cm_len = le(b.cm_len);
      b.reserved0 = le(b.reserved0);
      b.reserved1 = le(b.reserved1);
      b.credit = le(b.credit);
      break;
    }
    default:  // proof: bytes
      break;
  }
}

}  // namespace

int hs_check_hdr(const hs_hdr& h, const char** why) noexcept {
  if (h.magic != wire_magic) return bad(why, "bad magic");
  if (h.version != proto_version) {
    if (why) *why = "protocol version mismatch";
    return err_version;
  }
  if (h.kind == 0 || h.kind >= static_cast<uint8_t>(hs_kind::max)) return bad(why, "unknown handshake kind");
  const auto k = static_cast<hs_kind>(h.kind);
  if (k == hs_kind::reject) {
    if (h.reason == 0 || h.reason >= static_cast<uint8_t>(reject_reason::max))
      return bad(why, "bad reject reason");
  } else if (h.reason) {
    return bad(why, "reason on a message other than reject");
  }
  const size_t fixed = hs_body_size(k);
  const bool has_cm = k == hs_kind::hello || k == hs_kind::accept || k == hs_kind::reject;
  if (h.body_len < fixed || h.body_len > fixed + (has_cm ? cm_data_max : 0))
    return bad(why, "bad body length");
  return 0;
}

namespace {

// family none: an endpoint that does not listen (the active side of
// FI_EP_MSG); then address and port are zero.
bool addr_ok(const wire_addr& a) noexcept {
  if (a.reserved0 || a.reserved1) return false;
  const auto f = static_cast<wire_family>(a.family);
  if (f == wire_family::ipv6) return true;
  const int from = f == wire_family::ipv4 ? 4 : 0;
  if (f != wire_family::ipv4 && (f != wire_family::none || a.port)) return false;
  for (int i = from; i < 16; ++i)
    if (a.addr[i]) return false;
  return true;
}

bool ep_type_ok(uint8_t t) noexcept {
  return t != 0 && t < static_cast<uint8_t>(wire_ep_type::max);
}

}  // namespace

int hs_check_msg(const hs_msg& m, const char** why) noexcept {
  const auto k = static_cast<hs_kind>(m.hdr.kind);
  const size_t cm = m.hdr.body_len - hs_body_size(k);
  switch (k) {
    case hs_kind::hello: {
      const hs_hello& b = m.body.hello;
      if (!ep_type_ok(b.ep_type) || b.flags || b.reserved) return bad(why, "bad hello fields");
      if (b.cm_len != cm) return bad(why, "hello cm length differs from body length");
      if (!addr_ok(b.src)) return bad(why, "bad hello address");
      return 0;
    }
    case hs_kind::challenge: {
      const hs_challenge& b = m.body.challenge;
      if (!ep_type_ok(b.ep_type) || b.flags || b.reserved0 || b.reserved1)
        return bad(why, "bad challenge fields");
      if (!addr_ok(b.src)) return bad(why, "bad challenge address");
      return 0;
    }
    case hs_kind::proof:
      return 0;
    case hs_kind::accept:
    case hs_kind::reject: {
      const hs_verdict& b = m.body.verdict;
      if (b.reserved0 || b.reserved1) return bad(why, "bad verdict fields");
      if (b.cm_len != cm) return bad(why, "verdict cm length differs from body length");
      if (k == hs_kind::reject && b.credit) return bad(why, "credit on reject");
      return 0;
    }
    default:
      return bad(why, "unknown handshake kind");
  }
}

void hs_decoder::fail(int err, const char* why) noexcept {
  state_ = state::failed;
  error_ = err;
  why_ = why;
}

void hs_decoder::next() noexcept {
  if (state_ != state::done) return;
  state_ = state::header;
  have_ = 0;
  need_ = sizeof(hs_hdr);
}

size_t hs_decoder::feed(const void* p, size_t n) noexcept {
  const auto* in = static_cast<const unsigned char*>(p);
  size_t used = 0;
  while (used < n && (state_ == state::header || state_ == state::body)) {
    if (!gather(buf_, have_, need_, in, used, n)) break;
    if (state_ == state::header) {
      hs_hdr w;
      memcpy(&w, buf_, sizeof w);
      msg_.hdr = {le(w.magic), le(w.version), w.kind, w.reason, le(w.body_len)};
      const char* why = nullptr;
      if (int rc = hs_check_hdr(msg_.hdr, &why)) {
        fail(rc, why);
        break;
      }
      // hs_check_hdr bounded body_len by the largest body plus cm_data_max.
      state_ = state::body;
      need_ = static_cast<uint32_t>(sizeof(hs_hdr) + msg_.hdr.body_len);
      if (have_ < need_) continue;
    }
    const auto k2 = static_cast<hs_kind>(msg_.hdr.kind);
    const size_t fixed = hs_body_size(k2);
    const unsigned char* body = buf_ + sizeof(hs_hdr);
    memset(&msg_.body, 0, sizeof msg_.body);
    memcpy(&msg_.body, body, fixed);
    swap_body(k2, &msg_.body);
    msg_.cm_len = static_cast<uint16_t>(msg_.hdr.body_len - fixed);
    memcpy(msg_.cm, body + fixed, msg_.cm_len);
    const char* why = nullptr;
    if (int rc = hs_check_msg(msg_, &why)) {
      fail(rc, why);
      break;
    }
    state_ = state::done;
  }
  return used;
}

// libfabric's tcp provider (prov/tcp: tcpx, then xnet) opens a connection
// with a struct xnet_cm_msg: an ofi_ctrl_hdr (version 1 byte, type 1 byte,
// seg_size 2 bytes big-endian = the CM data that follows, at most 256,
// seg_no 4 bytes = 0, conn_id, msg_id, conn_data: 32 bytes), then the data.
// Its acceptor answers the same way (connresp, or nack to refuse).
foreign_peer classify_foreign(const unsigned char* p, size_t n) noexcept {
  foreign_peer f;
  if (!p || n < sizeof(hs_hdr)) return f;
  hs_hdr h;
  memcpy(&h, p, sizeof h);
  if (le(h.magic) == wire_magic) {
    if (le(h.version) != proto_version) {
      f.kind = foreign_kind::weft_version;
      f.version = le(h.version);
    }
    return f;  // weft's own version: malformed maybe, but weft
  }
  const unsigned seg_size = (unsigned{p[2]} << 8) | p[3];
  const bool ctrl_type = p[1] == 0 || p[1] == 1 || p[1] == 6;  // ofi_ctrl_connreq, _connresp, _nack
  if (p[0] >= 1 && p[0] <= 15 && ctrl_type && seg_size <= 256 && !p[4] && !p[5] && !p[6] && !p[7]) {
    f.kind = foreign_kind::libfabric_tcp;
    f.version = p[0];
    f.type = p[1];
    return f;
  }
  f.kind = foreign_kind::other;
  f.head_len = static_cast<uint8_t>(sizeof f.head);
  memcpy(f.head, p, sizeof f.head);
  return f;
}

const char* describe_foreign(const foreign_peer& f, char* out, size_t len) noexcept {
  if (!out || !len) return out;
  switch (f.kind) {
    case foreign_kind::weft_version:
      snprintf(out, len, "it speaks version %u", f.version);
      break;
    case foreign_kind::libfabric_tcp:
      snprintf(out, len, "it sent libfabric's tcp provider's %s, cm protocol version %u",
               f.type == 0 ? "connection request" : f.type == 1 ? "connection response" : "rejection",
               f.version);
      break;
    case foreign_kind::other: {
      int k = snprintf(out, len, "its first bytes,");
      for (uint8_t i = 0; i < f.head_len && k > 0 && static_cast<size_t>(k) < len; ++i)
        k += snprintf(out + k, len - static_cast<size_t>(k), " %02x", f.head[i]);
      if (k > 0 && static_cast<size_t>(k) < len)
        snprintf(out + k, len - static_cast<size_t>(k), ", are not weft's handshake");
      break;
    }
    case foreign_kind::closed:
      snprintf(out, len,
               "it closed the connection on weft's hello without an answer, as libfabric's tcp provider does");
      break;
    default:
      snprintf(out, len, "it speaks weft's protocol");
      break;
  }
  return out;
}

size_t hs_encode(hs_kind kind, reject_reason reason, const void* body, const void* cm, uint16_t cm_len,
                 unsigned char* out, uint16_t version) noexcept {
  const size_t fixed = hs_body_size(kind);
  if (cm_len > cm_data_max) cm_len = static_cast<uint16_t>(cm_data_max);
  hs_hdr h{le(wire_magic), le(version), static_cast<uint8_t>(kind), static_cast<uint8_t>(reason),
           le(static_cast<uint32_t>(fixed + cm_len))};
  memcpy(out, &h, sizeof h);
  unsigned char* b = out + sizeof h;
  if (!fixed) return 0;
  hs_msg m;
  memcpy(&m.body, body, fixed);
  switch (kind) {  // the cm length is the argument's, whatever the body said
    case hs_kind::hello:
      m.body.hello.cm_len = cm_len;
      break;
    case hs_kind::accept:
    case hs_kind::reject:
      m.body.verdict.cm_len = cm_len;
      break;
    default:
      break;
  }
  swap_body(kind, &m.body);
  memcpy(b, &m.body, fixed);
  if (cm_len) memcpy(b + fixed, cm, cm_len);
  return sizeof h + fixed + cm_len;
}

}  // namespace weft::tcp
