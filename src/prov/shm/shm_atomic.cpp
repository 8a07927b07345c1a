// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: atomics. Always executed by the target's progress (one process
// applies every remote atomic on its memory, so they are atomic with respect
// to each other): the request carries the operands in one cell, the response
// carries the fetched values.
#include <cstring>

#include "prov/shm/shm.hpp"
#include "util/atomic_ops.hpp"
#include "util/ep_ops.hpp"
#include "util/mr.hpp"

namespace weft::shm {

namespace {

constexpr size_t operand_room = inject_max - sizeof(rma_desc);

// Gathers count elements of size sz from an ioc list into dst.
void gather(const fi_ioc* ioc, size_t n, size_t sz, unsigned char* dst) noexcept {
  for (size_t i = 0; i < n; ++i) {
    memcpy(dst, ioc[i].addr, ioc[i].count * sz);
    dst += ioc[i].count * sz;
  }
}

}  // namespace

size_t atomic_max_count(atomic_form form, fi_datatype dt) noexcept {
  size_t sz = datatype_size(dt);
  if (!sz) return 0;
  return form == atomic_form::compare ? operand_room / (2 * sz) : operand_room / sz;
}

ssize_t atomic(ep& e, const atomic_call& a) noexcept {
  const uint64_t cq_flags = FI_ATOMIC | (a.form == atomic_form::base ? FI_WRITE : FI_READ);
  const size_t bytes = a.count * a.size;
  ep_guard g(e);
  if (fence_blocked(e, a.flags, [&e] { return ops_outstanding(e); })) [[unlikely]]
    return -FI_EAGAIN;
  peer_ref to = peer_of(e, a.dest);
  if (!to.p) [[unlikely]]
    return unreachable(e, a.dest, to.why, a.context, cq_flags, a.flags);
  peer& p = *to.p;
  cell* c = claim_to(e, p);
  if (!c) return -FI_EAGAIN;
  // An injected base atomic needs no answer; everything else waits for one.
  request* r = nullptr;
  if (!(a.flags & flag_no_cq) || a.form != atomic_form::base) {
    r = new_request(e, &p, req_kind::atomic, a.context, cq_flags, a.flags, bytes);
    if (!r) {
      abandon_cell(p, c);
      return -FI_ENOMEM;
    }
    for (size_t i = 0; i < a.res_count && a.form != atomic_form::base; ++i)
      r->iov[r->iov_count++] = {a.res[i].addr, a.res[i].count * a.size};
  }
  c->h.opcode = op::atomic;
  c->h.atomic_op = static_cast<uint8_t>(a.op);
  c->h.datatype = static_cast<uint8_t>(a.dt);
  c->h.id = r ? r->id : 0;
  c->h.size = bytes;
  c->h.tag = 0;
  c->h.data = 0;
  c->h.flags = a.form == atomic_form::fetch ? flag_fetch : a.form == atomic_form::compare ? flag_compare : 0;
  rma_desc d{a.remote.addr, a.remote.key, bytes, a.count};
  memcpy(c->payload, &d, sizeof d);
  size_t len = sizeof d;
  if (a.op != FI_ATOMIC_READ) {
    gather(a.iov, a.iov_count, a.size, c->payload + len);
    len += bytes;
  }
  if (a.form == atomic_form::compare) {
    gather(a.cmp, a.cmp_count, a.size, c->payload + len);
    len += bytes;
  }
  c->h.len = static_cast<uint32_t>(len);
  queue_commit(p.view(), c);
  if (!r) tx_done(e, a.context, cq_flags, a.flags, bytes);  // inject: counted now
  return 0;
}

void handle_atomic_resp(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  request* r = e.requests.find(h.id);
  if (!r || r->kind != req_kind::atomic) return;
  if (h.data) {
    tx_fail(e, r->context, r->flags, r->op_flags, static_cast<int>(h.data), 0);
  } else {
    iov_copy_to(r->iov, r->iov_count, 0, c->payload, std::min<size_t>(h.len, r->len));
    if (!(r->op_flags & flag_no_cq) || r->iov_count) tx_done(e, r->context, r->flags, r->op_flags, r->len);
  }
  finish_request(e, r);
}

// A request: everything that came from the peer is validated first.
void handle_atomic(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  rma_desc d;
  uint64_t err = 0;
  unsigned char result[inject_max];
  size_t result_len = 0;
  atomic_form form = (h.flags & flag_compare) ? atomic_form::compare
                     : (h.flags & flag_fetch) ? atomic_form::fetch
                                              : atomic_form::base;
  auto opc = static_cast<fi_op>(h.atomic_op);
  auto dt = static_cast<fi_datatype>(h.datatype);
  size_t sz = datatype_size(dt);
  if (h.len < sizeof d || !sz || !atomic_valid(form, opc, dt)) {
    err = FI_EINVAL;
  } else {
    memcpy(&d, c->payload, sizeof d);
    size_t operands = (opc == FI_ATOMIC_READ ? 0 : 1) + (form == atomic_form::compare ? 1 : 0);
    if (d.count == 0 || d.count > operand_room / sz || d.len != d.count * sz ||
        h.len != sizeof d + operands * d.len) {
      err = FI_EINVAL;
    } else {
      uint64_t access = (opc == FI_ATOMIC_READ)     ? FI_REMOTE_READ
                        : form == atomic_form::base ? FI_REMOTE_WRITE
                                                    : (FI_REMOTE_READ | FI_REMOTE_WRITE);
      void* target = nullptr;
      int ret = e.dom->mrs->check(d.key, d.addr, d.len, access, &target);
      if (ret) {
        err = FI_EACCES;
      } else {
        const unsigned char* buf = c->payload + sizeof d;
        const unsigned char* cmp = buf + (opc == FI_ATOMIC_READ ? 0 : d.len);
        ret = atomic_apply(form, opc, dt, target, buf, form == atomic_form::compare ? cmp : nullptr,
                           form == atomic_form::base ? nullptr : result, d.count);
        if (ret) err = FI_EINVAL;
        result_len = form == atomic_form::base ? 0 : d.len;
        if (!ret) {
          if (access & FI_REMOTE_WRITE) remote_write_done(e, false, d.len, 0);
          if (access & FI_REMOTE_READ) remote_read_done(e);
        }
      }
    }
  }
  if (!h.id) return;  // injected: nobody waits for the answer
  peer* p = sender_of(e, h.src);
  if (!p) return;
  hdr_fields rh{};
  rh.opcode = op::atomic_resp;
  rh.id = h.id;
  rh.data = err;
  send_cell(e, *p, rh, result, err ? 0 : result_len);
}

int query_atomic(fi_datatype dt, fi_op opc, fi_atomic_attr* attr, uint64_t flags) {
  if (!attr) return -FI_EINVAL;
  if (!only(flags, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED)) return -FI_EBADFLAGS;
  if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)) return -FI_EINVAL;
  atomic_form form = (flags & FI_COMPARE_ATOMIC) ? atomic_form::compare
                     : (flags & FI_FETCH_ATOMIC) ? atomic_form::fetch
                                                 : atomic_form::base;
  if (!atomic_valid(form, opc, dt)) return -FI_EOPNOTSUPP;
  attr->size = datatype_size(dt);
  attr->count = atomic_max_count(form, dt);
  return 0;
}

}  // namespace weft::shm
