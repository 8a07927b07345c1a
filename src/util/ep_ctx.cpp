// SPDX-License-Identifier: BSD-3-Clause
// Scalable endpoints (several transmit and receive contexts behind one
// address) and shared transmit / receive contexts.
#include "core/fabric2.hpp"
#include "core/info.hpp"
#include "util/ep.hpp"
#include "util/eq.hpp"
#include "util/rx.hpp"

namespace weft {

bool sep::has_contexts() const noexcept {
  for (endpoint* c : tx)
    if (c) return true;
  for (endpoint* c : rx)
    if (c) return true;
  return false;
}

bool sep::has_opened_contexts() const noexcept {
  for (endpoint* c : tx)
    if (c && c != implicit_tx) return true;
  for (endpoint* c : rx)
    if (c && c != implicit_rx) return true;
  return false;
}

namespace {

// ------------------------------------------------------------------ scalable endpoint
int sep_close(fid* f) noexcept {
  sep* s = sep::of(f);
  endpoint* implicit[2];
  {
    std::lock_guard g(s->ctl);
    if (s->has_opened_contexts()) return -FI_EBUSY;
    implicit[0] = s->implicit_tx;
    implicit[1] = s->implicit_rx;
    s->implicit_tx = s->implicit_rx = nullptr;
  }
  for (endpoint* c : implicit)  // not under ctl: closing a context takes it
    if (c) fi_close(&c->fid_.fid);
  if (s->av) s->av->drop_user();
  if (s->eq) eq_drop(s->eq);
  s->dom->users_.drop();
  info_free(s->info);
  s->tops->destroy(s->prov);
  delete s;
  return 0;
}

int bind_implicit(sep& s, fid* bfid, uint64_t flags);

int sep_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  sep* s = sep::of(f);
  if (!bfid) return -FI_EINVAL;
  std::lock_guard g(s->ctl);
  if (s->enabled) return -FI_EOPBADSTATE;
  if (bfid->fclass == FI_CLASS_AV) {
    if (flags) return -FI_EBADFLAGS;
    weft::av* a = weft::av::from(bfid);
    if (!a || &a->dom() != s->dom || s->av) return -FI_EINVAL;
    s->av = a;
    a->add_user();
    return 0;
  }
  if (bfid->fclass == FI_CLASS_EQ) {
    if (flags) return -FI_EBADFLAGS;
    if (!is_eq(bfid) || s->eq) return -FI_EINVAL;
    s->eq = reinterpret_cast<fid_eq*>(bfid);
    eq_take(s->eq);
    return 0;
  }
  if (bfid->fclass == FI_CLASS_CQ || bfid->fclass == FI_CLASS_CNTR) return bind_implicit(*s, bfid, flags);
  return -FI_EINVAL;
}

int sep_control(fid* f, int command, void*) noexcept {
  sep* s = sep::of(f);
  if (command != FI_ENABLE) return -FI_ENOSYS;
  std::lock_guard g(s->ctl);
  if (s->enabled) return 0;
  if (!s->av) return -FI_ENOAV;
  // The contexts opened by binding to the scalable endpoint are enabled
  // with it; those the application opened, by the application.
  for (endpoint* c : {s->implicit_tx, s->implicit_rx})
    if (c)
      if (int ret = fi_enable(&c->fid_)) return ret;
  s->enabled = true;
  return 0;
}

fi_ops sep_fi_ops = {sizeof(fi_ops),  sep_close,    sep_bind,      sep_control,
                     fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

int open_context_locked(sep& s, bool transmit, int index, const void* attr, fid_ep** out, void* context) {
  auto& slots = transmit ? s.tx : s.rx;
  if (!out || index < 0 || static_cast<size_t>(index) >= slots.size()) return -FI_EINVAL;
  if (slots[index]) return -FI_EBUSY;
  info_ptr info(info_dup(s.info));
  if (!info) return -FI_ENOMEM;
  if (transmit && attr) {
    auto* a = static_cast<const fi_tx_attr*>(attr);
    if (a->caps) info->caps = (info->caps & ~(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC)) | a->caps;
    if (info->tx_attr) {
      info->tx_attr->op_flags = a->op_flags;
      if (a->inject_size) info->tx_attr->inject_size = a->inject_size;
    }
  } else if (!transmit && attr) {
    auto* a = static_cast<const fi_rx_attr*>(attr);
    if (a->caps) info->caps = (info->caps & ~(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC)) | a->caps;
    if (info->rx_attr) info->rx_attr->op_flags = a->op_flags;
  }
  endpoint* e = s.tops->make_context(s, transmit, index, info.get(), context);
  e->parent = &s;
  e->ctx_index = index;
  if (!transmit) e->rx->min_multi_recv = s.min_multi_recv;
  if (s.av) {
    e->av = s.av;
    s.av->add_user();
  }
  s.dom->users_.add();
  slots[index] = e;
  *out = &e->fid_;
  return 0;
}

int open_context(sep& s, bool transmit, int index, const void* attr, fid_ep** out, void* context) {
  std::lock_guard g(s.ctl);
  return open_context_locked(s, transmit, index, attr, out, context);
}

// A CQ or counter bound to the scalable endpoint itself: "if the endpoint
// only has a single transmit context, then all transmit operations are
// posted directly to the scalable endpoint" (likewise receive). It goes to
// context 0 of each direction its flags name, opened for the purpose
// (implicit_tx / implicit_rx). Under s.ctl.
int bind_implicit(sep& s, fid* bfid, uint64_t flags) {
  const bool cq = bfid->fclass == FI_CLASS_CQ;
  const uint64_t bits[2] = {cq ? uint64_t{FI_TRANSMIT} : uint64_t{FI_SEND | FI_READ | FI_WRITE},
                            cq ? uint64_t{FI_RECV} : uint64_t{FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE}};
  const uint64_t common = cq ? FI_SELECTIVE_COMPLETION : 0;
  if (!only(flags, bits[0] | bits[1] | common)) return -FI_EBADFLAGS;
  if (!(flags & (bits[0] | bits[1]))) return -FI_EINVAL;
  for (int d = 0; d < 2; ++d) {
    if (!(flags & bits[d])) continue;
    auto& slots = d == 0 ? s.tx : s.rx;
    endpoint* imp = d == 0 ? s.implicit_tx : s.implicit_rx;
    if (slots.size() != 1) return -FI_EINVAL;  // several contexts: bind each of them
    if (slots[0] && slots[0] != imp) return -FI_EINVAL;  // the application opened it: bind it there
  }
  for (int d = 0; d < 2; ++d) {
    if (!(flags & bits[d])) continue;
    endpoint*& imp = d == 0 ? s.implicit_tx : s.implicit_rx;
    if (!imp) {
      fid_ep* out = nullptr;
      if (int ret = open_context_locked(s, d == 0, 0, nullptr, &out, s.fid_.fid.context)) return ret;
      imp = endpoint::of(out);
    }
    if (int ret = fi_ep_bind(&imp->fid_, bfid, (flags & (bits[d] | common)))) return ret;
  }
  return 0;
}

// The data path of a scalable endpoint with one context of a direction:
// each entry point passes the call to that context (-FI_ENOSYS with
// several: data moves on the contexts then; -FI_EOPBADSTATE before the
// context exists).
template <auto Table, auto Member, bool Tx, class F>
struct to_context;
template <auto Table, auto Member, bool Tx, class R, class... A>
struct to_context<Table, Member, Tx, R (*)(fid_ep*, A...)> {
  static R fn(fid_ep* f, A... a) noexcept {
    sep* s = sep::of(&f->fid);
    const auto& slots = Tx ? s->tx : s->rx;
    if (slots.size() != 1) return static_cast<R>(-FI_ENOSYS);
    endpoint* c = slots[0];
    if (!c) return static_cast<R>(-FI_EOPBADSTATE);
    return ((c->fid_.*Table)->*Member)(&c->fid_, a...);
  }
};
#define WEFT_TO_CTX(table, type, member, tx) \
  to_context<&fid_ep::table, &type::member, tx, decltype(type::member)>::fn

fi_ops_msg sep_msg = {sizeof(fi_ops_msg),
                      WEFT_TO_CTX(msg, fi_ops_msg, recv, false),
                      WEFT_TO_CTX(msg, fi_ops_msg, recvv, false),
                      WEFT_TO_CTX(msg, fi_ops_msg, recvmsg, false),
                      WEFT_TO_CTX(msg, fi_ops_msg, send, true),
                      WEFT_TO_CTX(msg, fi_ops_msg, sendv, true),
                      WEFT_TO_CTX(msg, fi_ops_msg, sendmsg, true),
                      WEFT_TO_CTX(msg, fi_ops_msg, inject, true),
                      WEFT_TO_CTX(msg, fi_ops_msg, senddata, true),
                      WEFT_TO_CTX(msg, fi_ops_msg, injectdata, true)};
fi_ops_tagged sep_tagged = {sizeof(fi_ops_tagged),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, recv, false),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, recvv, false),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, recvmsg, false),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, send, true),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, sendv, true),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, sendmsg, true),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, inject, true),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, senddata, true),
                            WEFT_TO_CTX(tagged, fi_ops_tagged, injectdata, true)};
fi_ops_rma sep_rma = {sizeof(fi_ops_rma),
                      WEFT_TO_CTX(rma, fi_ops_rma, read, true),
                      WEFT_TO_CTX(rma, fi_ops_rma, readv, true),
                      WEFT_TO_CTX(rma, fi_ops_rma, readmsg, true),
                      WEFT_TO_CTX(rma, fi_ops_rma, write, true),
                      WEFT_TO_CTX(rma, fi_ops_rma, writev, true),
                      WEFT_TO_CTX(rma, fi_ops_rma, writemsg, true),
                      WEFT_TO_CTX(rma, fi_ops_rma, inject, true),
                      WEFT_TO_CTX(rma, fi_ops_rma, writedata, true),
                      WEFT_TO_CTX(rma, fi_ops_rma, injectdata, true)};
fi_ops_atomic sep_atomic = {sizeof(fi_ops_atomic),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, write, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, writev, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, writemsg, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, inject, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, readwrite, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, readwritev, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, readwritemsg, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, compwrite, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, compwritev, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, compwritemsg, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, writevalid, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, readwritevalid, true),
                            WEFT_TO_CTX(atomic, fi_ops_atomic, compwritevalid, true)};
#undef WEFT_TO_CTX

int sep_tx_ctx(fid_ep* f, int index, fi_tx_attr* attr, fid_ep** tx, void* context) noexcept {
  return guard([&] { return open_context(*sep::of(&f->fid), true, index, attr, tx, context); });
}
int sep_rx_ctx(fid_ep* f, int index, fi_rx_attr* attr, fid_ep** rx, void* context) noexcept {
  return guard([&] { return open_context(*sep::of(&f->fid), false, index, attr, rx, context); });
}

// A receive posted to the scalable endpoint itself is its one receive
// context's.
ssize_t sep_cancel(fid_t f, void* context) noexcept {
  sep* s = sep::of(f);
  if (s->rx.size() != 1 || !s->rx[0]) return -FI_ENOENT;
  return fi_cancel(&s->rx[0]->fid_.fid, context);
}
// A scalable endpoint has an address but no connection data; its
// FI_OPT_MIN_MULTI_RECV is its receive contexts'.
int sep_getopt(fid_t f, int level, int optname, void* optval, size_t* optlen) noexcept {
  sep* s = sep::of(f);
  std::lock_guard g(s->ctl);
  return opt_get(opt_target{&s->min_multi_recv, true, 0}, level, optname, optval, optlen);
}
int sep_setopt(fid_t f, int level, int optname, const void* optval, size_t optlen) noexcept {
  sep* s = sep::of(f);
  std::lock_guard g(s->ctl);
  if (int ret = opt_set(opt_target{&s->min_multi_recv, true, 0}, level, optname, optval, optlen)) return ret;
  for (endpoint* c : s->rx)
    if (c) {
      ep_guard cg(*c);
      c->rx->min_multi_recv = s->min_multi_recv;
    }
  return 0;
}

fi_ops_ep sep_ops = {sizeof(fi_ops_ep),
                     sep_cancel,
                     sep_getopt,
                     sep_setopt,
                     sep_tx_ctx,
                     sep_rx_ctx,
                     WEFT_NOSYS(fi_ops_ep, rx_size_left),
                     WEFT_NOSYS(fi_ops_ep, tx_size_left)};

// ------------------------------------------------------------------ shared transmit context
int stx_close(fid* f) noexcept {
  stx* s = from_fid<stx>(f);
  if (s->users_.busy()) return -FI_EBUSY;
  s->dom->users_.drop();
  delete s;
  return 0;
}
fi_ops stx_fi_ops = {sizeof(fi_ops),  stx_close,    fid_no_bind,   fid_no_control,
                     fid_no_ops_open, fid_no_tostr, fid_no_ops_set};
// A shared transmit context has no option of its own.
int stx_getopt(fid_t, int level, int optname, void* optval, size_t* optlen) noexcept {
  return opt_get(opt_target{}, level, optname, optval, optlen);
}
int stx_setopt(fid_t, int level, int optname, const void* optval, size_t optlen) noexcept {
  return opt_set(opt_target{}, level, optname, optval, optlen);
}
fi_ops_ep stx_ops = {sizeof(fi_ops_ep),
                     WEFT_NOSYS(fi_ops_ep, cancel),
                     stx_getopt,
                     stx_setopt,
                     WEFT_NOSYS(fi_ops_ep, tx_ctx),
                     WEFT_NOSYS(fi_ops_ep, rx_ctx),
                     WEFT_NOSYS(fi_ops_ep, rx_size_left),
                     WEFT_NOSYS(fi_ops_ep, tx_size_left)};

// A shared receive context has no transport of its own.
int srx_enable(endpoint&) {
  return 0;
}
void srx_progress(endpoint&) noexcept {}
void srx_close(endpoint&) noexcept {}
void srx_destroy(endpoint* e) noexcept {
  delete e;
}

}  // namespace

void sep_context_closed(endpoint& e) noexcept {
  sep* s = e.parent;
  if (!s) return;
  std::lock_guard g(s->ctl);
  auto& slots = e.role == ep_role::tx_ctx ? s->tx : s->rx;
  if (e.ctx_index < slots.size() && slots[e.ctx_index] == &e) slots[e.ctx_index] = nullptr;
}

int scalable_ep_open(domain& dom, fi_info* info, fid_ep** out, void* context, const sep_transport* tops,
                     void* prov, size_t inject_max) {
  if (!info || !out) return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
    return -FI_EINVAL;
  size_t txc = info->ep_attr && info->ep_attr->tx_ctx_cnt ? info->ep_attr->tx_ctx_cnt : 1;
  size_t rxc = info->ep_attr && info->ep_attr->rx_ctx_cnt ? info->ep_attr->rx_ctx_cnt : 1;
  const fi_domain_attr* da = dom.info->domain_attr;
  if (txc == FI_SHARED_CONTEXT || rxc == FI_SHARED_CONTEXT || txc > da->max_ep_tx_ctx ||
      rxc > da->max_ep_rx_ctx)
    return -FI_EINVAL;
  if (info->tx_attr && info->tx_attr->inject_size > inject_max) return -FI_EINVAL;
  auto s = std::make_unique<sep>();
  s->info = info_dup(info, domain_attr_size_for(dom.api_version));
  if (!s->info) return -FI_ENOMEM;
  s->tops = tops;
  s->prov = prov;
  s->dom = &dom;
  s->tx.assign(txc, nullptr);
  s->rx.assign(rxc, nullptr);
  s->fid_.fid.fclass = FI_CLASS_SEP;
  s->fid_.fid.context = context;
  s->fid_.fid.ops = &sep_fi_ops;
  s->fid_.ops = &sep_ops;
  s->fid_.cm = tops->cm;
  // Data moves on the contexts; with one context of a direction, also
  // through the scalable endpoint (to_context).
  const bool direct = txc == 1 || rxc == 1;
  s->fid_.msg = direct ? &sep_msg : &msg_ops_none;
  s->fid_.tagged = direct ? &sep_tagged : &tagged_ops_none;
  s->fid_.rma = direct ? &sep_rma : &rma_ops_none;
  s->fid_.atomic = direct ? &sep_atomic : &atomic_ops_none;
  dom.users_.add();
  *out = &s.release()->fid_;
  return 0;
}

int stx_open(domain& dom, fi_tx_attr* attr, fid_stx** out, void* context, size_t inject_max) {
  if (!out) return -FI_EINVAL;
  if (attr && attr->inject_size > inject_max) return -FI_EINVAL;
  auto s = std::make_unique<stx>();
  s->dom = &dom;
  s->fid_.fid.fclass = FI_CLASS_STX_CTX;
  s->fid_.fid.context = context;
  s->fid_.fid.ops = &stx_fi_ops;
  s->fid_.ops = &stx_ops;
  dom.users_.add();
  *out = &s.release()->fid_;
  return 0;
}

int srx_open(domain& dom, fi_rx_attr* attr, fid_ep** out, void* context) {
  if (!out) return -FI_EINVAL;
  info_ptr info(info_alloc());
  if (!info) return -FI_ENOMEM;
  info->caps =
      (attr && attr->caps) ? attr->caps : (FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE);
  if (attr) *info->rx_attr = *attr;
  static const ep_transport srx_tops = {srx_enable, srx_progress, srx_close, srx_destroy, nullptr, 0};
  auto e = std::make_unique<endpoint>();
  endpoint_init(*e, dom, info.get(), context, ep_role::srx, &srx_tops, 0);
  e->fid_.msg = &msg_rx;
  e->fid_.tagged = &tagged_rx;
  e->own_lock.set_locking(true);  // endpoints bound to it may progress from several threads
  e->enabled = true;              // receives may be posted at once
  dom.users_.add();
  *out = &e.release()->fid_;
  return 0;
}

int bind_shared(endpoint& e, fid* bfid, uint64_t flags) {
  if (flags) return -FI_EBADFLAGS;
  if (bfid->fclass == FI_CLASS_STX_CTX) {
    if (bfid->ops != &stx_fi_ops || e.shared_tx || e.role != ep_role::endpoint) return -FI_EINVAL;
    stx* s = from_fid<stx>(bfid);
    if (s->dom != e.dom) return -FI_EINVAL;
    e.shared_tx = s;
    s->users_.add();
    return 0;
  }
  if (!is_endpoint(bfid)) return -FI_EINVAL;
  endpoint* srx = endpoint::of(bfid);
  if (srx->role != ep_role::srx || srx->dom != e.dom || e.shared_rx || e.role != ep_role::endpoint)
    return -FI_EINVAL;
  e.shared_rx = srx;
  e.rx = &srx->own_rx;
  e.lock = &srx->own_lock;
  srx->users_.add();
  if (!srx->av && e.av) {
    srx->av = e.av;  // for directed receives posted to the shared context
    srx->av->add_user();
  }
  return 0;
}

}  // namespace weft
