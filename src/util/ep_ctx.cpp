// Scalable endpoints (several transmit and receive contexts behind one
// address) and shared transmit / receive contexts.
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

namespace {

// ------------------------------------------------------------------ scalable endpoint
int sep_close(fid* f) noexcept {
  sep* s = sep::of(f);
  {
    std::lock_guard g(s->ctl);
    if (s->has_contexts()) return -FI_EBUSY;
  }
  if (s->av) s->av->drop_user();
  if (s->eq) eq_drop(s->eq);
  s->dom->users_.drop();
  info_free(s->info);
  s->tops->destroy(s->prov);
  delete s;
  return 0;
}

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
  // CQs and counters are bound to the contexts.
  return -FI_EINVAL;
}

int sep_control(fid* f, int command, void*) noexcept {
  sep* s = sep::of(f);
  if (command != FI_ENABLE) return -FI_ENOSYS;
  std::lock_guard g(s->ctl);
  if (!s->av) return -FI_ENOAV;
  s->enabled = true;
  return 0;
}

fi_ops sep_fi_ops = {sizeof(fi_ops),  sep_close,    sep_bind,      sep_control,
                     fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

int open_context(sep& s, bool transmit, int index, const void* attr, fid_ep** out, void* context) {
  auto& slots = transmit ? s.tx : s.rx;
  if (!out || index < 0 || static_cast<size_t>(index) >= slots.size()) return -FI_EINVAL;
  std::lock_guard g(s.ctl);
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

int sep_tx_ctx(fid_ep* f, int index, fi_tx_attr* attr, fid_ep** tx, void* context) noexcept {
  return guard([&] { return open_context(*sep::of(&f->fid), true, index, attr, tx, context); });
}
int sep_rx_ctx(fid_ep* f, int index, fi_rx_attr* attr, fid_ep** rx, void* context) noexcept {
  return guard([&] { return open_context(*sep::of(&f->fid), false, index, attr, rx, context); });
}

ssize_t sep_cancel(fid_t, void*) noexcept {
  return -FI_ENOENT;
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
  s->info = info_dup(info);
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
  // Data moves on the contexts, never on the scalable endpoint itself.
  s->fid_.msg = &msg_ops_none;
  s->fid_.tagged = &tagged_ops_none;
  s->fid_.rma = &rma_ops_none;
  s->fid_.atomic = &atomic_ops_none;
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
