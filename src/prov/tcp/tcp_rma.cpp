// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: RMA and atomics. The initiator sends one frame (write: the
// data from the user's buffers; read: the request; atomic: the operands);
// the target validates every descriptor against its own registrations (key,
// range, access) before a byte moves, and always answers: an ack with a
// status for writes and base atomics, the data or the result otherwise. An
// operation completes at the initiator when its answer arrived, so an access
// the target refuses completes in error there and leaves target memory
// untouched.
#include <cstring>

#include "prov/tcp/tcp.hpp"
#include "util/ep_ops.hpp"
#include "util/mr.hpp"

namespace weft::tcp {

namespace {

// The registration pieces a list of descriptors covers, with `access`:
// 0, or FI_EACCES (unknown key, outside the registration, no right) or
// FI_EINVAL (more pieces than a frame can take).
int resolve_descs(ep& e, const rma_desc* d, size_t n, uint64_t access, iovec* out, size_t* count) noexcept {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    iovec pieces[mr_iov_max];
    size_t np = 0;
    if (!e.dom->mrs || e.dom->mrs->resolve(d[i].key, d[i].addr, d[i].len, access, pieces, &np)) return FI_EACCES;
    for (size_t j = 0; j < np; ++j) {
      if (k == rx_iov_max) return FI_EINVAL;
      out[k++] = pieces[j];
    }
  }
  *count = k;
  return 0;
}

// Sends an operation's frame; the request completes with the answer.
ssize_t issue(ep& e, request* r, fi_addr_t dest, const frame_hdr& h, const rma_desc* descs, const iovec* payload,
              size_t count) noexcept {
  if (r->out.tx.prepare(swap_hdr(h), descs, payload, count)) {
    e.requests.release(r);
    return -FI_EINVAL;
  }
  conn* used = nullptr;
  const int ret = send_frame(e, dest, r->out.tx, &used);
  if (ret < 0) {
    const void* ctx = r->context;
    const uint64_t flags = r->cq_flags, op_flags = r->op_flags;
    e.requests.release(r);
    if (ret == -FI_EINVAL || ret == -FI_ENOTCONN) return ret;
    if (ret == -FI_EAGAIN || ret == -FI_ENOMEM) return -FI_EAGAIN;
    tx_fail(e, const_cast<void*>(ctx), flags, op_flags, -ret, 0);
    return 0;
  }
  r->c = used;
  if (ret == 1) r->written = true;
  return 0;
}

}  // namespace

ssize_t rma(ep& e, bool write, const iovec* iov, void* const*, size_t count, fi_addr_t addr, const fi_rma_iov* riov,
            size_t rcount, uint64_t data, void* context, uint64_t flags) noexcept {
  const size_t len = iov_total(iov, count);
  const uint64_t cq_flags = FI_RMA | (write ? FI_WRITE : FI_READ);
  ep_guard g(e);
  if (fence_blocked(e, flags, [&e] { return ops_outstanding(e); })) [[unlikely]]
    return -FI_EAGAIN;
  request* r = new_request(e, write ? req_kind::write : req_kind::read, context, cq_flags, flags, len);
  if (!r) return -FI_EAGAIN;
  if (write && (flags & FI_INJECT)) {
    iov_copy_from(iov, count, 0, r->inline_buf, len);
    r->iov[0] = {r->inline_buf, len};
    r->iov_count = 1;
  } else {
    for (size_t i = 0; i < count; ++i) r->iov[i] = iov[i];
    r->iov_count = count;
  }
  rma_desc d[iov_max];
  for (size_t i = 0; i < rcount; ++i) d[i] = rma_desc{riov[i].addr, riov[i].len, riov[i].key};
  frame_hdr h{};
  h.op = static_cast<uint8_t>(write ? op::write : op::read_req);
  h.flags = static_cast<uint8_t>(write ? (flag_want_ack | ((flags & FI_REMOTE_CQ_DATA) ? flag_cq_data : 0)) : 0);
  h.iov_count = static_cast<uint8_t>(rcount);
  h.length = write ? len : 0;
  h.id = r->id;
  h.data = (write && (flags & FI_REMOTE_CQ_DATA)) ? data : 0;
  return issue(e, r, addr, h, d, write ? r->iov : nullptr, write ? r->iov_count : 0);
}

size_t atomic_max_count(atomic_form form, fi_datatype dt) noexcept {
  const size_t sz = datatype_size(dt);
  if (!sz) return 0;
  // The operands travel in the request's inject buffer (compare values too).
  return (form == atomic_form::compare ? inject_max / 2 : inject_max) / sz;
}

int tcp_domain::query_atomic(fi_datatype dt, fi_op opc, fi_atomic_attr* attr, uint64_t flags) {
  if (!attr) return -FI_EINVAL;
  if (!only(flags, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED)) return -FI_EBADFLAGS;
  if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)) return -FI_EINVAL;
  const atomic_form form = (flags & FI_COMPARE_ATOMIC) ? atomic_form::compare
                           : (flags & FI_FETCH_ATOMIC) ? atomic_form::fetch
                                                       : atomic_form::base;
  if (!atomic_valid(form, opc, dt)) return -FI_EOPNOTSUPP;
  attr->size = datatype_size(dt);
  attr->count = atomic_max_count(form, dt);
  return 0;
}

ssize_t atomic(ep& e, const atomic_call& a) noexcept {
  const uint64_t cq_flags = FI_ATOMIC | (a.form == atomic_form::base ? FI_WRITE : FI_READ);
  const size_t bytes = a.count * a.size;
  ep_guard g(e);
  if (fence_blocked(e, a.flags, [&e] { return ops_outstanding(e); })) [[unlikely]]
    return -FI_EAGAIN;
  request* r = new_request(e, req_kind::atomic, a.context, cq_flags, a.flags, bytes);
  if (!r) return -FI_EAGAIN;
  // Results land in the caller's buffers.
  for (size_t i = 0; i < a.res_count && a.form != atomic_form::base; ++i)
    r->iov[r->iov_count++] = {a.res[i].addr, a.res[i].count * a.size};
  // Operands (and compare values): gathered into the request, so an
  // injected atomic's buffers are the caller's again on return.
  size_t off = 0;
  if (a.op != FI_ATOMIC_READ)
    for (size_t i = 0; i < a.iov_count; ++i) {
      memcpy(r->inline_buf + off, a.iov[i].addr, a.iov[i].count * a.size);
      off += a.iov[i].count * a.size;
    }
  if (a.form == atomic_form::compare)
    for (size_t i = 0; i < a.cmp_count; ++i) {
      memcpy(r->inline_buf + off, a.cmp[i].addr, a.cmp[i].count * a.size);
      off += a.cmp[i].count * a.size;
    }
  frame_hdr h{};
  h.op = static_cast<uint8_t>(op::atomic);
  h.flags = static_cast<uint8_t>(flag_want_ack | (a.form == atomic_form::fetch     ? flag_fetch
                                                  : a.form == atomic_form::compare ? flag_compare
                                                                                   : 0));
  h.iov_count = 1;
  h.atomic_op = static_cast<uint8_t>(a.op);
  h.datatype = static_cast<uint8_t>(a.dt);
  h.length = off;
  h.id = r->id;
  const rma_desc d{a.remote.addr, bytes, a.remote.key};
  const iovec operands{r->inline_buf, off};
  return issue(e, r, a.dest, h, &d, off ? &operands : nullptr, off ? 1 : 0);
}

static_assert(inject_max <= atomic_max_bytes, "an operand array fits the receiver's limit");

// ------------------------------------------------------------------ target side
rx_target write_frame(ep& e, link& lk, const frame_hdr& h, const rma_desc* d) noexcept {
  lk.kind = rx_kind::write;
  lk.status = resolve_descs(e, d, h.iov_count, FI_REMOTE_WRITE, lk.iov, &lk.iov_count);
  if (lk.status) return rx_target{rx_action::discard, nullptr, 0};
  return rx_target{rx_action::deliver, lk.iov, lk.iov_count};
}

void write_payload(ep& e, link& lk, const frame_hdr& h, uint64_t) noexcept {
  if (!lk.status) remote_write_done(e, h.flags & flag_cq_data, h.length, h.data);
  ack(e, lk, h.id, lk.status);
}

void read_req_frame(ep& e, link& lk, const frame_hdr& h, const rma_desc* d) noexcept {
  frame_hdr r{};
  r.op = static_cast<uint8_t>(op::read_resp);
  r.id = h.id;
  iovec pieces[rx_iov_max];
  size_t count = 0;
  const int status = resolve_descs(e, d, h.iov_count, FI_REMOTE_READ, pieces, &count);
  if (status == 0 && count > tx_iov_max - 1) {
    r.aux = FI_EINVAL;
  } else if (status) {
    r.aux = static_cast<uint64_t>(status);
  } else {
    for (size_t i = 0; i < h.iov_count; ++i) r.length += d[i].len;
    remote_read_done(e);
  }
  // The data leaves straight from the registration.
  respond(e, lk, r, r.aux ? nullptr : pieces, r.aux ? 0 : count);
}

rx_target read_resp_frame(ep& e, link& lk, const frame_hdr& h) noexcept {
  request* r = e.requests.find(h.id);
  const req_kind want = h.op == static_cast<uint8_t>(op::read_resp) ? req_kind::read : req_kind::atomic;
  if (!r || r->kind != want || (r->c && r->c != lk.c)) return rx_target{rx_action::discard, nullptr, 0};
  lk.kind = h.op == static_cast<uint8_t>(op::read_resp) ? rx_kind::read_resp : rx_kind::atomic_resp;
  lk.req = r;
  if (h.aux) {
    r->err = static_cast<int>(h.aux);
    return rx_target{rx_action::discard, nullptr, 0};
  }
  return rx_target{rx_action::deliver, r->iov, r->iov_count};
}

void read_resp_payload(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept {
  request* r = lk.req;
  lk.req = nullptr;
  if (!r) return;
  if (!r->err && landed < h.length) r->err = FI_EIO;
  r->answered = true;
  r->written = true;  // an answer means the request was out
  finish(e, r);
}

rx_target atomic_resp_frame(ep& e, link& lk, const frame_hdr& h) noexcept {
  return read_resp_frame(e, lk, h);
}

rx_target atomic_frame(ep& e, link& lk, const frame_hdr& h, const rma_desc* d) noexcept {
  lk.kind = rx_kind::atomic;
  lk.desc = d[0];
  lk.status = 0;
  lk.resp = nullptr;
  if (h.length > sizeof(response::operands)) {
    lk.status = FI_EINVAL;
    return rx_target{rx_action::discard, nullptr, 0};
  }
  lk.resp = new_response(e);
  if (!lk.resp) {
    lk.status = FI_ENOMEM;
    return rx_target{rx_action::discard, nullptr, 0};
  }
  lk.iov[0] = {lk.resp->operands, h.length};
  return rx_target{rx_action::deliver, lk.iov, 1};
}

void atomic_payload_done(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept {
  response* resp = lk.resp;
  lk.resp = nullptr;
  const atomic_form form = (h.flags & flag_compare) ? atomic_form::compare
                           : (h.flags & flag_fetch) ? atomic_form::fetch
                                                    : atomic_form::base;
  const auto opc = static_cast<fi_op>(h.atomic_op);
  const auto dt = static_cast<fi_datatype>(h.datatype);
  const size_t sz = datatype_size(dt);
  int status = lk.status;
  size_t count = 0;
  if (!status && (!sz || landed != h.length)) status = FI_EINVAL;
  if (!status) {
    count = lk.desc.len / sz;  // the decoder checked: whole elements, operands of that size
    const uint64_t access = opc == FI_ATOMIC_READ       ? FI_REMOTE_READ
                            : form == atomic_form::base ? FI_REMOTE_WRITE
                                                        : (FI_REMOTE_READ | FI_REMOTE_WRITE);
    void* target = nullptr;
    if (!e.dom->mrs || e.dom->mrs->check(lk.desc.key, lk.desc.addr, lk.desc.len, access, &target)) {
      status = FI_EACCES;
    } else {
      const unsigned char* operands = resp->operands;
      const unsigned char* compare = operands + (opc == FI_ATOMIC_READ ? 0 : lk.desc.len);
      if (atomic_apply(form, opc, dt, target, operands, form == atomic_form::compare ? compare : nullptr,
                       form == atomic_form::base ? nullptr : resp->result, count))
        status = FI_EINVAL;
      else {
        if (access & FI_REMOTE_WRITE) remote_write_done(e, false, lk.desc.len, 0);
        if (access & FI_REMOTE_READ) remote_read_done(e);
      }
    }
  }
  if (form == atomic_form::base || status) {
    if (resp) e.responses.release(resp);
    ack(e, lk, h.id, status);
    return;
  }
  frame_hdr r{};
  r.op = static_cast<uint8_t>(op::atomic_resp);
  r.id = h.id;
  r.length = lk.desc.len;
  const iovec result{resp->result, lk.desc.len};
  respond(e, lk, r, &result, 1, resp);
}

void ack_frame(ep& e, link& lk, const frame_hdr& h) noexcept {
  request* r = e.requests.find(h.id);
  if (!r || (r->c && r->c != lk.c)) return;  // an answer from another peer is not its
  if (h.aux) r->err = static_cast<int>(h.aux);
  r->answered = true;
  if (r->written || r->err) {
    r->written = true;
    finish(e, r);
  }
}

}  // namespace weft::tcp
