// prov/shm: atomics. Always executed by the target's progress (one process
// applies every remote atomic on its memory, so they are atomic with respect
// to each other): the request carries the operands in one cell, the response
// carries the fetched values.
#include <cstring>

#include "prov/shm/shm_ep.hpp"
#include "util/atomic_ops.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/mr.hpp"

namespace weft::shm {

namespace {

constexpr size_t operand_room = inject_max - sizeof(rma_desc);
constexpr uint64_t atomic_flags_ok = FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                     FI_DELIVERY_COMPLETE | FI_FENCE | FI_MORE | FI_ATOMIC | FI_READ |
                                     FI_WRITE | FI_REMOTE_CQ_DATA;

size_t max_count(atomic_form form, fi_datatype dt) {
  size_t sz = datatype_size(dt);
  if (!sz) return 0;
  return form == atomic_form::compare ? operand_room / (2 * sz) : operand_room / sz;
}

size_t ioc_count(const fi_ioc* ioc, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += ioc[i].count;
  return c;
}

// Gathers count elements of size sz from an ioc list into dst.
void gather(const fi_ioc* ioc, size_t n, size_t sz, unsigned char* dst) {
  for (size_t i = 0; i < n; ++i) {
    memcpy(dst, ioc[i].addr, ioc[i].count * sz);
    dst += ioc[i].count * sz;
  }
}

// Every non-empty operand or result piece has a buffer.
bool ioc_valid(const fi_ioc* ioc, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i)
    if (ioc[i].count && !ioc[i].addr) return false;
  return true;
}

ssize_t atomic_generic(ep& e, atomic_form form, const fi_ioc* iov, size_t count, const fi_ioc* cmp,
                       size_t cmp_count, fi_ioc* res, size_t res_count, fi_addr_t dest,
                       const fi_rma_ioc* riov, size_t rcount, fi_datatype dt, fi_op opc, void* context,
                       uint64_t flags) noexcept {
  if (!e.enabled) [[unlikely]]
    return -FI_EOPBADSTATE;
  if (!atomic_valid(form, opc, dt)) return -FI_EOPNOTSUPP;
  if (!riov || rcount != 1 || count > iov_max || (count && !iov)) return -FI_EINVAL;
  const size_t sz = datatype_size(dt);
  const size_t n = riov[0].count;
  // FI_ATOMIC_READ carries no operand.
  if (opc != FI_ATOMIC_READ && ioc_count(iov, count) != n) return -FI_EINVAL;
  if (form == atomic_form::compare && (!cmp || ioc_count(cmp, cmp_count) != n)) return -FI_EINVAL;
  if (form != atomic_form::base && (!res || ioc_count(res, res_count) != n || res_count > iov_max))
    return -FI_EINVAL;
  if (n == 0 || n > max_count(form, dt)) return -FI_EINVAL;
  if ((opc != FI_ATOMIC_READ && !ioc_valid(iov, count)) ||
      (form == atomic_form::compare && !ioc_valid(cmp, cmp_count)) ||
      (form != atomic_form::base && !ioc_valid(res, res_count)))
    return -FI_EINVAL;
  const uint64_t cq_flags = FI_ATOMIC | (form == atomic_form::base ? FI_WRITE : FI_READ);
  ep_guard g(e);
  if (fence_blocked(e, flags)) [[unlikely]]
    return -FI_EAGAIN;
  peer* p = peer_of(e, dest);
  if (!p || p->dead) {
    if (!e.av || !e.av->lookup(dest)) return -FI_EINVAL;
    tx_fail(e, context, cq_flags, flags, FI_EIO, 0);
    return 0;
  }
  const bool no_cq = flags & flag_no_cq;
  request* r = nullptr;
  if (!no_cq || form != atomic_form::base) {
    r = new_request(e);
    if (!r) return -FI_ENOMEM;
    r->kind = req_kind::atomic;
    r->context = context;
    r->flags = cq_flags;
    r->op_flags = flags;
    r->len = n * sz;
    r->peer_pid = p->pid;
    r->to = p;
    for (size_t i = 0; i < res_count && form != atomic_form::base; ++i)
      r->iov[r->iov_count++] = {res[i].addr, res[i].count * sz};
  }
  cell* c = claim_to(e, *p);
  if (!c) {
    if (r) finish_request(e, r->id);
    return -FI_EAGAIN;
  }
  c->h.opcode = op::atomic;
  c->h.atomic_op = static_cast<uint8_t>(opc);
  c->h.datatype = static_cast<uint8_t>(dt);
  c->h.id = r ? r->id : 0;
  c->h.size = n * sz;
  c->h.tag = 0;
  c->h.data = 0;
  c->h.flags = form == atomic_form::fetch ? flag_fetch : form == atomic_form::compare ? flag_compare : 0;
  rma_desc d{riov[0].addr, riov[0].key, n * sz, n};
  memcpy(c->payload, &d, sizeof d);
  size_t len = sizeof d;
  if (opc != FI_ATOMIC_READ) {
    gather(iov, count, sz, c->payload + len);
    len += n * sz;
  }
  if (form == atomic_form::compare) {
    gather(cmp, cmp_count, sz, c->payload + len);
    len += n * sz;
  }
  c->h.len = static_cast<uint32_t>(len);
  queue_commit(p->view(), c);
  if (!r) tx_done(e, context, cq_flags, flags, n * sz);  // inject: counted now
  return 0;
}

}  // namespace

void handle_atomic_cell(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  if (h.opcode == op::atomic_resp) {
    auto it = e.pending.find(h.id);
    if (it == e.pending.end()) return;
    request* r = it->second.get();
    if (h.data) {
      tx_fail(e, r->context, r->flags, r->op_flags, static_cast<int>(h.data), 0);
    } else {
      iov_copy_to(r->iov, r->iov_count, 0, c->payload, std::min<size_t>(h.len, r->len));
      if (!(r->op_flags & flag_no_cq) || r->iov_count) tx_done(e, r->context, r->flags, r->op_flags, r->len);
    }
    finish_request(e, r->id);
    return;
  }
  // A request: validate everything that came from the peer first.
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
          if (access & FI_REMOTE_WRITE && e.cntr_rwrite) cntr_inc(e.cntr_rwrite);
          if (access & FI_REMOTE_READ && e.cntr_rread) cntr_inc(e.cntr_rread);
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

int query_atomic(domain&, fi_datatype dt, fi_op opc, fi_atomic_attr* attr, uint64_t flags) {
  if (!attr) return -FI_EINVAL;
  if (!only(flags, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED)) return -FI_EBADFLAGS;
  if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)) return -FI_EINVAL;
  atomic_form form = (flags & FI_COMPARE_ATOMIC) ? atomic_form::compare
                     : (flags & FI_FETCH_ATOMIC) ? atomic_form::fetch
                                                 : atomic_form::base;
  if (!atomic_valid(form, opc, dt)) return -FI_EOPNOTSUPP;
  attr->size = datatype_size(dt);
  attr->count = max_count(form, dt);
  return 0;
}

namespace {

ep& E(fid_ep* f) {
  return ep_of(f);
}
fi_rma_ioc R(uint64_t addr, size_t count, uint64_t key) {
  return fi_rma_ioc{addr, count, key};
}

ssize_t a_write(fid_ep* f, const void* buf, size_t count, void*, fi_addr_t dest, uint64_t addr, uint64_t key,
                fi_datatype dt, fi_op op, void* ctx) noexcept {
  fi_ioc v{const_cast<void*>(buf), count};
  fi_rma_ioc r = R(addr, count, key);
  return atomic_generic(E(f), atomic_form::base, &v, 1, nullptr, 0, nullptr, 0, dest, &r, 1, dt, op, ctx,
                        tx_flags_of(f, E(f)));
}
ssize_t a_writev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_addr_t dest, uint64_t addr,
                 uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  fi_rma_ioc r = R(addr, iov ? ioc_count(iov, count) : 0, key);
  return atomic_generic(E(f), atomic_form::base, iov, count, nullptr, 0, nullptr, 0, dest, &r, 1, dt, op, ctx,
                        tx_flags_of(f, E(f)));
}
ssize_t a_writemsg(fid_ep* f, const fi_msg_atomic* m, uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  if (!only(flags, atomic_flags_ok)) return -FI_EBADFLAGS;
  return atomic_generic(E(f), atomic_form::base, m->msg_iov, m->iov_count, nullptr, 0, nullptr, 0, m->addr,
                        m->rma_iov, m->rma_iov_count, m->datatype, m->op, m->context, flags);
}
ssize_t a_inject(fid_ep* f, const void* buf, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                 fi_datatype dt, fi_op op) noexcept {
  fi_ioc v{const_cast<void*>(buf), count};
  fi_rma_ioc r = R(addr, count, key);
  return atomic_generic(E(f), atomic_form::base, &v, 1, nullptr, 0, nullptr, 0, dest, &r, 1, dt, op, nullptr,
                        FI_INJECT | flag_no_cq);
}
ssize_t a_readwrite(fid_ep* f, const void* buf, size_t count, void*, void* result, void*, fi_addr_t dest,
                    uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  fi_ioc v{const_cast<void*>(buf), count};
  fi_ioc res{result, count};
  fi_rma_ioc r = R(addr, count, key);
  return atomic_generic(E(f), atomic_form::fetch, &v, buf ? 1 : 0, nullptr, 0, &res, 1, dest, &r, 1, dt, op,
                        ctx, tx_flags_of(f, E(f)));
}
ssize_t a_readwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_ioc* resv, void**,
                     size_t res_count, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt, fi_op op,
                     void* ctx) noexcept {
  fi_rma_ioc r = R(addr, resv ? ioc_count(resv, res_count) : 0, key);
  return atomic_generic(E(f), atomic_form::fetch, iov, count, nullptr, 0, resv, res_count, dest, &r, 1, dt,
                        op, ctx, tx_flags_of(f, E(f)));
}
ssize_t a_readwritemsg(fid_ep* f, const fi_msg_atomic* m, fi_ioc* resv, void**, size_t res_count,
                       uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  if (!only(flags, atomic_flags_ok)) return -FI_EBADFLAGS;
  return atomic_generic(E(f), atomic_form::fetch, m->msg_iov, m->iov_count, nullptr, 0, resv, res_count,
                        m->addr, m->rma_iov, m->rma_iov_count, m->datatype, m->op, m->context, flags);
}
ssize_t a_compwrite(fid_ep* f, const void* buf, size_t count, void*, const void* compare, void*, void* result,
                    void*, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt, fi_op op,
                    void* ctx) noexcept {
  fi_ioc v{const_cast<void*>(buf), count};
  fi_ioc c{const_cast<void*>(compare), count};
  fi_ioc res{result, count};
  fi_rma_ioc r = R(addr, count, key);
  return atomic_generic(E(f), atomic_form::compare, &v, 1, &c, 1, &res, 1, dest, &r, 1, dt, op, ctx,
                        tx_flags_of(f, E(f)));
}
ssize_t a_compwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, const fi_ioc* cmpv, void**,
                     size_t cmp_count, fi_ioc* resv, void**, size_t res_count, fi_addr_t dest, uint64_t addr,
                     uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
  fi_rma_ioc r = R(addr, iov ? ioc_count(iov, count) : 0, key);
  return atomic_generic(E(f), atomic_form::compare, iov, count, cmpv, cmp_count, resv, res_count, dest, &r, 1,
                        dt, op, ctx, tx_flags_of(f, E(f)));
}
ssize_t a_compwritemsg(fid_ep* f, const fi_msg_atomic* m, const fi_ioc* cmpv, void**, size_t cmp_count,
                       fi_ioc* resv, void**, size_t res_count, uint64_t flags) noexcept {
  if (!m) return -FI_EINVAL;
  if (!only(flags, atomic_flags_ok)) return -FI_EBADFLAGS;
  return atomic_generic(E(f), atomic_form::compare, m->msg_iov, m->iov_count, cmpv, cmp_count, resv,
                        res_count, m->addr, m->rma_iov, m->rma_iov_count, m->datatype, m->op, m->context,
                        flags);
}

int valid(atomic_form form, fi_datatype dt, fi_op op, size_t* count) {
  if (!count) return -FI_EINVAL;
  if (!atomic_valid(form, op, dt)) return -FI_EOPNOTSUPP;
  *count = max_count(form, dt);
  return 0;
}
int a_writevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
  return valid(atomic_form::base, dt, op, count);
}
int a_readwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
  return valid(atomic_form::fetch, dt, op, count);
}
int a_compwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
  return valid(atomic_form::compare, dt, op, count);
}

}  // namespace

fi_ops_atomic atomic_ops = {
    sizeof(fi_ops_atomic), a_write,      a_writev,         a_writemsg,       a_inject,
    a_readwrite,           a_readwritev, a_readwritemsg,   a_compwrite,      a_compwritev,
    a_compwritemsg,        a_writevalid, a_readwritevalid, a_compwritevalid,
};

}  // namespace weft::shm
