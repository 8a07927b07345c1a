// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Every fi_msg / fi_tagged / fi_rma / fi_atomic entry point, written once.
//
// A transport T supplies the generic operations the entry points funnel
// into, after the checks every provider makes (flags, iov counts and
// buffers, inject sizes, matching lengths, atomic combinations):
//
//   using ep = <its endpoint type, derived from weft::endpoint>;
//   static constexpr size_t iov_max, inline_max;   // injects up to inline_max: inject_small
//   template <bool Tagged> static ssize_t send(ep&, const iovec*, size_t count, fi_addr_t dest,
//                                              uint64_t tag, uint64_t data, void* ctx, uint64_t flags);
//   template <bool Tagged> static ssize_t inject_small(ep&, const void* buf, size_t len,
//                                                      fi_addr_t dest, uint64_t tag);
//   static ssize_t rma(ep&, bool write, const iovec*, void* const* desc, size_t count, fi_addr_t,
//                      const fi_rma_iov*, size_t rcount, uint64_t data, void* ctx, uint64_t flags);
//   static size_t atomic_max_count(atomic_form, fi_datatype);
//   static ssize_t atomic(ep&, const atomic_call&);
//
// ops<T> holds the tables: a plain endpoint's, a transmit context's and a
// receive context's (one direction only). Receives are the matcher's
// (util/rx.hpp) for every transport. All of it inlines into one direct call
// of T's function per entry point.
#include <rdma/fi_atomic.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "common/iov.hpp"
#include "util/atomic_ops.hpp"
#include "util/rx.hpp"

namespace weft {

inline constexpr uint64_t send_flags_ok =
    FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |
    FI_REMOTE_CQ_DATA | FI_FENCE | FI_MORE | FI_MATCH_COMPLETE | FI_TAGGED | FI_MSG | FI_SEND;
inline constexpr uint64_t rma_flags_ok =
    FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |
    FI_REMOTE_CQ_DATA | FI_FENCE | FI_MORE | FI_RMA | FI_READ | FI_WRITE | FI_COMMIT_COMPLETE;
inline constexpr uint64_t atomic_flags_ok = FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE |
                                            FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_FENCE | FI_MORE |
                                            FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_CQ_DATA;

// One atomic operation, validated: operands gathered from ioc lists, the
// remote range, the form.
struct atomic_call {
  atomic_form form;
  fi_op op;
  fi_datatype dt;
  size_t size;   // bytes per element
  size_t count;  // elements
  const fi_ioc* iov;
  size_t iov_count;
  const fi_ioc* cmp;
  size_t cmp_count;
  fi_ioc* res;
  size_t res_count;
  fi_addr_t dest;
  fi_rma_ioc remote;
  void* context;
  uint64_t flags;
};

inline size_t ioc_count(const fi_ioc* ioc, size_t n) noexcept {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += ioc[i].count;
  return c;
}
// Every non-empty operand or result piece has a buffer.
inline bool ioc_valid(const fi_ioc* ioc, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i)
    if (ioc[i].count && !ioc[i].addr) return false;
  return true;
}

// Send flags a transport takes beyond send_flags_ok (T::send_flags_extra:
// udp's FI_MULTICAST); others refuse them with -FI_EBADFLAGS.
template <class T>
constexpr uint64_t send_flags_of() noexcept {
  if constexpr (requires { T::send_flags_extra; })
    return send_flags_ok | T::send_flags_extra;
  else
    return send_flags_ok;
}

template <class T>
struct ops {
  using ep_t = typename T::ep;
  static ep_t& ep(fid_ep* f) noexcept { return static_cast<ep_t&>(ep_of(f)); }
  static iovec one(const void* buf, size_t len) noexcept { return iovec{const_cast<void*>(buf), len}; }

  // ---------------------------------------------------------------- sends
  template <bool Tagged>
  static ssize_t send(ep_t& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                      void* ctx, uint64_t flags) noexcept {
    if (!e.enabled) [[unlikely]]
      return -FI_EOPBADSTATE;
    if (count > T::iov_max || (count && !iov) || !iov_valid(iov, count)) [[unlikely]]
      return -FI_EINVAL;
    if ((flags & FI_INJECT) && iov_total(iov, count) > e.inject_size) [[unlikely]]
      return -FI_EINVAL;
    return T::template send<Tagged>(e, iov, count, dest, tag, data, ctx, flags);
  }
  template <bool Tagged>
  static ssize_t inject(ep_t& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
    if (len <= T::inline_max) [[likely]] {
      if (!e.enabled) [[unlikely]]
        return -FI_EOPBADSTATE;
      if (len > e.inject_size || (len && !buf)) [[unlikely]]
        return -FI_EINVAL;
      return T::template inject_small<Tagged>(e, buf, len, dest, tag);
    }
    iovec v = one(buf, len);
    return send<Tagged>(e, &v, 1, dest, tag, 0, nullptr, FI_INJECT | flag_no_cq);
  }

  static ssize_t m_send(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, void* ctx) noexcept {
    ep_t& e = ep(f);
    iovec v = one(buf, len);
    return send<false>(e, &v, 1, dest, 0, 0, ctx, tx_flags_of(f, e));
  }
  static ssize_t m_sendv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest,
                         void* ctx) noexcept {
    ep_t& e = ep(f);
    return send<false>(e, iov, count, dest, 0, 0, ctx, tx_flags_of(f, e));
  }
  static ssize_t m_sendmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept {
    if (!msg) return -FI_EINVAL;
    if (!only(flags, send_flags_of<T>())) return -FI_EBADFLAGS;
    return send<false>(ep(f), msg->msg_iov, msg->iov_count, msg->addr, 0, msg->data, msg->context, flags);
  }
  static ssize_t m_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest) noexcept {
    return inject<false>(ep(f), buf, len, dest, 0);
  }
  static ssize_t m_senddata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                            void* ctx) noexcept {
    ep_t& e = ep(f);
    iovec v = one(buf, len);
    return send<false>(e, &v, 1, dest, 0, data, ctx, tx_flags_of(f, e) | FI_REMOTE_CQ_DATA);
  }
  static ssize_t m_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data,
                              fi_addr_t dest) noexcept {
    iovec v = one(buf, len);
    return send<false>(ep(f), &v, 1, dest, 0, data, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA | flag_no_cq);
  }
  static ssize_t t_send(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag,
                        void* ctx) noexcept {
    ep_t& e = ep(f);
    iovec v = one(buf, len);
    return send<true>(e, &v, 1, dest, tag, 0, ctx, tx_flags_of(f, e));
  }
  static ssize_t t_sendv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t tag,
                         void* ctx) noexcept {
    ep_t& e = ep(f);
    return send<true>(e, iov, count, dest, tag, 0, ctx, tx_flags_of(f, e));
  }
  static ssize_t t_sendmsg(fid_ep* f, const fi_msg_tagged* msg, uint64_t flags) noexcept {
    if (!msg) return -FI_EINVAL;
    if (!only(flags, send_flags_of<T>())) return -FI_EBADFLAGS;
    return send<true>(ep(f), msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->data, msg->context,
                      flags);
  }
  static ssize_t t_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
    return inject<true>(ep(f), buf, len, dest, tag);
  }
  static ssize_t t_senddata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                            uint64_t tag, void* ctx) noexcept {
    ep_t& e = ep(f);
    iovec v = one(buf, len);
    return send<true>(e, &v, 1, dest, tag, data, ctx, tx_flags_of(f, e) | FI_REMOTE_CQ_DATA);
  }
  static ssize_t t_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                              uint64_t tag) noexcept {
    iovec v = one(buf, len);
    return send<true>(ep(f), &v, 1, dest, tag, data, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA | flag_no_cq);
  }

  // ---------------------------------------------------------------- RMA
  static ssize_t rma(ep_t& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
                     const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx,
                     uint64_t flags) noexcept {
    if (!e.enabled) [[unlikely]]
      return -FI_EOPBADSTATE;
    if (count > T::iov_max || rcount > T::iov_max || !rcount || (count && !iov) || !riov ||
        !iov_valid(iov, count)) [[unlikely]]
      return -FI_EINVAL;
    size_t len = iov_total(iov, count), rlen = 0;
    for (size_t i = 0; i < rcount; ++i) rlen += riov[i].len;
    if (len != rlen) return -FI_EINVAL;
    if ((flags & FI_INJECT) && (!write || len > e.inject_size)) return -FI_EINVAL;
    return T::rma(e, write, iov, desc, count, addr, riov, rcount, data, ctx, flags);
  }
  static ssize_t r_read(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t addr,
                        uint64_t key, void* ctx) noexcept {
    ep_t& e = ep(f);
    iovec v{buf, len};
    fi_rma_iov r{addr, len, key};
    return rma(e, false, &v, &desc, 1, src, &r, 1, 0, ctx, tx_flags_of(f, e));
  }
  static ssize_t r_readv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src, uint64_t addr,
                         uint64_t key, void* ctx) noexcept {
    ep_t& e = ep(f);
    fi_rma_iov r{addr, iov && count <= T::iov_max ? iov_total(iov, count) : 0, key};
    return rma(e, false, iov, desc, count, src, &r, 1, 0, ctx, tx_flags_of(f, e));
  }
  static ssize_t r_readmsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept {
    if (!msg) return -FI_EINVAL;
    if (!only(flags, rma_flags_ok)) return -FI_EBADFLAGS;
    return rma(ep(f), false, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->rma_iov,
               msg->rma_iov_count, msg->data, msg->context, flags);
  }
  static ssize_t r_write(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t dest, uint64_t addr,
                         uint64_t key, void* ctx) noexcept {
    ep_t& e = ep(f);
    iovec v = one(buf, len);
    fi_rma_iov r{addr, len, key};
    return rma(e, true, &v, &desc, 1, dest, &r, 1, 0, ctx, tx_flags_of(f, e));
  }
  static ssize_t r_writev(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest,
                          uint64_t addr, uint64_t key, void* ctx) noexcept {
    ep_t& e = ep(f);
    fi_rma_iov r{addr, iov && count <= T::iov_max ? iov_total(iov, count) : 0, key};
    return rma(e, true, iov, desc, count, dest, &r, 1, 0, ctx, tx_flags_of(f, e));
  }
  static ssize_t r_writemsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept {
    if (!msg) return -FI_EINVAL;
    if (!only(flags, rma_flags_ok)) return -FI_EBADFLAGS;
    return rma(ep(f), true, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->rma_iov,
               msg->rma_iov_count, msg->data, msg->context, flags);
  }
  static ssize_t r_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                          uint64_t key) noexcept {
    iovec v = one(buf, len);
    fi_rma_iov r{addr, len, key};
    return rma(ep(f), true, &v, nullptr, 1, dest, &r, 1, 0, nullptr, FI_INJECT | flag_no_cq);
  }
  static ssize_t r_writedata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                             fi_addr_t dest, uint64_t addr, uint64_t key, void* ctx) noexcept {
    ep_t& e = ep(f);
    iovec v = one(buf, len);
    fi_rma_iov r{addr, len, key};
    return rma(e, true, &v, &desc, 1, dest, &r, 1, data, ctx, tx_flags_of(f, e) | FI_REMOTE_CQ_DATA);
  }
  static ssize_t r_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                              uint64_t addr, uint64_t key) noexcept {
    iovec v = one(buf, len);
    fi_rma_iov r{addr, len, key};
    return rma(ep(f), true, &v, nullptr, 1, dest, &r, 1, data, nullptr,
               FI_INJECT | FI_REMOTE_CQ_DATA | flag_no_cq);
  }

  // ---------------------------------------------------------------- atomics
  static ssize_t atomic(ep_t& e, atomic_form form, const fi_ioc* iov, size_t count, const fi_ioc* cmp,
                        size_t cmp_count, fi_ioc* res, size_t res_count, fi_addr_t dest,
                        const fi_rma_ioc* riov, size_t rcount, fi_datatype dt, fi_op opc, void* context,
                        uint64_t flags) noexcept {
    if (!e.enabled) [[unlikely]]
      return -FI_EOPBADSTATE;
    if (!atomic_valid(form, opc, dt)) return -FI_EOPNOTSUPP;
    if (!riov || rcount != 1 || count > T::iov_max || (count && !iov)) return -FI_EINVAL;
    const size_t n = riov[0].count;
    // FI_ATOMIC_READ carries no operand.
    if (opc != FI_ATOMIC_READ && ioc_count(iov, count) != n) return -FI_EINVAL;
    if (form == atomic_form::compare && (!cmp || ioc_count(cmp, cmp_count) != n)) return -FI_EINVAL;
    if (form != atomic_form::base && (!res || ioc_count(res, res_count) != n || res_count > T::iov_max))
      return -FI_EINVAL;
    if (n == 0 || n > T::atomic_max_count(form, dt)) return -FI_EINVAL;
    if ((opc != FI_ATOMIC_READ && !ioc_valid(iov, count)) ||
        (form == atomic_form::compare && !ioc_valid(cmp, cmp_count)) ||
        (form != atomic_form::base && !ioc_valid(res, res_count)))
      return -FI_EINVAL;
    atomic_call call{form, opc,       dt,   datatype_size(dt), n,       iov,  count, cmp, cmp_count,
                     res,  res_count, dest, riov[0],           context, flags};
    return T::atomic(e, call);
  }
  static fi_rma_ioc R(uint64_t addr, size_t count, uint64_t key) noexcept {
    return fi_rma_ioc{addr, count, key};
  }
  static ssize_t a_write(fid_ep* f, const void* buf, size_t count, void*, fi_addr_t dest, uint64_t addr,
                         uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
    ep_t& e = ep(f);
    fi_ioc v{const_cast<void*>(buf), count};
    fi_rma_ioc r = R(addr, count, key);
    return atomic(e, atomic_form::base, &v, 1, nullptr, 0, nullptr, 0, dest, &r, 1, dt, op, ctx,
                  tx_flags_of(f, e));
  }
  static ssize_t a_writev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_addr_t dest, uint64_t addr,
                          uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
    ep_t& e = ep(f);
    fi_rma_ioc r = R(addr, iov && count <= T::iov_max ? ioc_count(iov, count) : 0, key);
    return atomic(e, atomic_form::base, iov, count, nullptr, 0, nullptr, 0, dest, &r, 1, dt, op, ctx,
                  tx_flags_of(f, e));
  }
  static ssize_t a_writemsg(fid_ep* f, const fi_msg_atomic* m, uint64_t flags) noexcept {
    if (!m) return -FI_EINVAL;
    if (!only(flags, atomic_flags_ok)) return -FI_EBADFLAGS;
    return atomic(ep(f), atomic_form::base, m->msg_iov, m->iov_count, nullptr, 0, nullptr, 0, m->addr,
                  m->rma_iov, m->rma_iov_count, m->datatype, m->op, m->context, flags);
  }
  static ssize_t a_inject(fid_ep* f, const void* buf, size_t count, fi_addr_t dest, uint64_t addr,
                          uint64_t key, fi_datatype dt, fi_op op) noexcept {
    fi_ioc v{const_cast<void*>(buf), count};
    fi_rma_ioc r = R(addr, count, key);
    return atomic(ep(f), atomic_form::base, &v, 1, nullptr, 0, nullptr, 0, dest, &r, 1, dt, op, nullptr,
                  FI_INJECT | flag_no_cq);
  }
  static ssize_t a_readwrite(fid_ep* f, const void* buf, size_t count, void*, void* result, void*,
                             fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt, fi_op op,
                             void* ctx) noexcept {
    ep_t& e = ep(f);
    fi_ioc v{const_cast<void*>(buf), count};
    fi_ioc res{result, count};
    fi_rma_ioc r = R(addr, count, key);
    return atomic(e, atomic_form::fetch, &v, buf ? 1 : 0, nullptr, 0, &res, 1, dest, &r, 1, dt, op, ctx,
                  tx_flags_of(f, e));
  }
  static ssize_t a_readwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_ioc* resv, void**,
                              size_t res_count, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt,
                              fi_op op, void* ctx) noexcept {
    ep_t& e = ep(f);
    fi_rma_ioc r = R(addr, resv && res_count <= T::iov_max ? ioc_count(resv, res_count) : 0, key);
    return atomic(e, atomic_form::fetch, iov, count, nullptr, 0, resv, res_count, dest, &r, 1, dt, op, ctx,
                  tx_flags_of(f, e));
  }
  static ssize_t a_readwritemsg(fid_ep* f, const fi_msg_atomic* m, fi_ioc* resv, void**, size_t res_count,
                                uint64_t flags) noexcept {
    if (!m) return -FI_EINVAL;
    if (!only(flags, atomic_flags_ok)) return -FI_EBADFLAGS;
    return atomic(ep(f), atomic_form::fetch, m->msg_iov, m->iov_count, nullptr, 0, resv, res_count, m->addr,
                  m->rma_iov, m->rma_iov_count, m->datatype, m->op, m->context, flags);
  }
  static ssize_t a_compwrite(fid_ep* f, const void* buf, size_t count, void*, const void* compare, void*,
                             void* result, void*, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt,
                             fi_op op, void* ctx) noexcept {
    ep_t& e = ep(f);
    fi_ioc v{const_cast<void*>(buf), count};
    fi_ioc c{const_cast<void*>(compare), count};
    fi_ioc res{result, count};
    fi_rma_ioc r = R(addr, count, key);
    return atomic(e, atomic_form::compare, &v, 1, &c, 1, &res, 1, dest, &r, 1, dt, op, ctx,
                  tx_flags_of(f, e));
  }
  static ssize_t a_compwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, const fi_ioc* cmpv, void**,
                              size_t cmp_count, fi_ioc* resv, void**, size_t res_count, fi_addr_t dest,
                              uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* ctx) noexcept {
    ep_t& e = ep(f);
    fi_rma_ioc r = R(addr, iov && count <= T::iov_max ? ioc_count(iov, count) : 0, key);
    return atomic(e, atomic_form::compare, iov, count, cmpv, cmp_count, resv, res_count, dest, &r, 1, dt, op,
                  ctx, tx_flags_of(f, e));
  }
  static ssize_t a_compwritemsg(fid_ep* f, const fi_msg_atomic* m, const fi_ioc* cmpv, void**,
                                size_t cmp_count, fi_ioc* resv, void**, size_t res_count,
                                uint64_t flags) noexcept {
    if (!m) return -FI_EINVAL;
    if (!only(flags, atomic_flags_ok)) return -FI_EBADFLAGS;
    return atomic(ep(f), atomic_form::compare, m->msg_iov, m->iov_count, cmpv, cmp_count, resv, res_count,
                  m->addr, m->rma_iov, m->rma_iov_count, m->datatype, m->op, m->context, flags);
  }
  static int valid(atomic_form form, fi_datatype dt, fi_op op, size_t* count) noexcept {
    if (!count) return -FI_EINVAL;
    if (!atomic_valid(form, op, dt)) return -FI_EOPNOTSUPP;
    *count = T::atomic_max_count(form, dt);
    return 0;
  }
  static int a_writevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
    return valid(atomic_form::base, dt, op, count);
  }
  static int a_readwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
    return valid(atomic_form::fetch, dt, op, count);
  }
  static int a_compwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept {
    return valid(atomic_form::compare, dt, op, count);
  }

  // ---------------------------------------------------------------- tables
  // Plain endpoints: both directions; transmit contexts: sends only.
  static inline fi_ops_msg msg = {sizeof(fi_ops_msg), msg_recv, msg_recvv,  msg_recvmsg, m_send, m_sendv,
                                  m_sendmsg,          m_inject, m_senddata, m_injectdata};
  static inline fi_ops_tagged tagged = {sizeof(fi_ops_tagged),
                                        tag_recv,
                                        tag_recvv,
                                        tag_recvmsg,
                                        t_send,
                                        t_sendv,
                                        t_sendmsg,
                                        t_inject,
                                        t_senddata,
                                        t_injectdata};
  static inline fi_ops_msg msg_tx = {sizeof(fi_ops_msg),
                                     WEFT_NOSYS(fi_ops_msg, recv),
                                     WEFT_NOSYS(fi_ops_msg, recvv),
                                     WEFT_NOSYS(fi_ops_msg, recvmsg),
                                     m_send,
                                     m_sendv,
                                     m_sendmsg,
                                     m_inject,
                                     m_senddata,
                                     m_injectdata};
  static inline fi_ops_tagged tagged_tx = {sizeof(fi_ops_tagged),
                                           WEFT_NOSYS(fi_ops_tagged, recv),
                                           WEFT_NOSYS(fi_ops_tagged, recvv),
                                           WEFT_NOSYS(fi_ops_tagged, recvmsg),
                                           t_send,
                                           t_sendv,
                                           t_sendmsg,
                                           t_inject,
                                           t_senddata,
                                           t_injectdata};
  static inline fi_ops_rma rma_ops = {sizeof(fi_ops_rma), r_read,     r_readv,  r_readmsg,   r_write,
                                      r_writev,           r_writemsg, r_inject, r_writedata, r_injectdata};
  static inline fi_ops_atomic atomic_ops = {
      sizeof(fi_ops_atomic), a_write,      a_writev,         a_writemsg,      a_inject,
      a_readwrite,           a_readwritev, a_readwritemsg,   a_compwrite,     a_compwritev,
      a_compwritemsg,        a_writevalid, a_readwritevalid, a_compwritevalid};

  // The collective engine's sends (util/coll.hpp): the transport's tagged
  // send itself, which reports to the engine through flag_coll.
  static ssize_t coll_send(endpoint& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, void* ctx,
                           uint64_t flags) noexcept {
    return T::template send<true>(static_cast<ep_t&>(e), iov, count, dest, tag, 0, ctx, flags);
  }

  // The tables an endpoint of `role` carries.
  static void install(endpoint& e, ep_role role) noexcept {
    switch (role) {
      case ep_role::endpoint:
        e.fid_.msg = &msg;
        e.fid_.tagged = &tagged;
        e.fid_.rma = &rma_ops;
        e.fid_.atomic = &atomic_ops;
        e.fid_.collective = &coll_ops;
        e.coll_send = coll_send;
        break;
      case ep_role::tx_ctx:
        e.fid_.msg = &msg_tx;
        e.fid_.tagged = &tagged_tx;
        e.fid_.rma = &rma_ops;
        e.fid_.atomic = &atomic_ops;
        break;
      case ep_role::rx_ctx:
      case ep_role::srx:
        e.fid_.msg = &msg_rx;
        e.fid_.tagged = &tagged_rx;
        break;
    }
  }
};

}  // namespace weft
