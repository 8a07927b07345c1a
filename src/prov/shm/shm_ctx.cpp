// prov/shm: scalable endpoints (several transmit and receive contexts behind
// one address) and shared transmit / receive contexts.
//
// Naming: a scalable endpoint "N" has receive context 0 at "N" itself (so a
// peer that does not use fi_rx_addr reaches it), receive context k at "N#rk"
// and transmit context k at "N#tk". fi_rx_addr(addr, k, rx_ctx_bits) selects
// "N#rk"; a message from "N#tk" reports the source "N".
#include <unistd.h>

#include <cstring>

#include "core/info.hpp"
#include "prov/shm/shm_ep.hpp"
#include "util/eq.hpp"

namespace weft::shm {

struct sep {
  fid_ep fid_;  // first; fclass FI_CLASS_SEP
  domain* dom = nullptr;
  fi_info* info = nullptr;
  weft::av* av = nullptr;
  fid_eq* eq = nullptr;
  std::string name;
  std::vector<ep*> tx, rx;  // open contexts by index
  bool enabled = false;
  std::mutex ctl;
  static sep* of(fid* f) noexcept { return from_fid<sep>(f); }
};

struct stx {
  fid_stx fid_;  // first
  domain* dom = nullptr;
  users users_;
};

namespace {

std::atomic<uint32_t> sep_counter{0};

// ------------------------------------------------------------------ scalable endpoint
int sep_close(fid* f) noexcept {
  sep* s = sep::of(f);
  {
    std::lock_guard g(s->ctl);
    for (ep* c : s->tx)
      if (c) return -FI_EBUSY;
    for (ep* c : s->rx)
      if (c) return -FI_EBUSY;
  }
  if (s->av) s->av->drop_user();
  if (s->eq) eq_drop(s->eq);
  s->dom->users_.drop();
  info_free(s->info);
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
    if (info->tx_attr) info->tx_attr->op_flags = a->op_flags;
    if (a->inject_size > inject_max) return -FI_EINVAL;
  } else if (!transmit && attr) {
    auto* a = static_cast<const fi_rx_attr*>(attr);
    if (a->caps) info->caps = (info->caps & ~(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC)) | a->caps;
    if (info->rx_attr) info->rx_attr->op_flags = a->op_flags;
  }
  std::string name = transmit     ? s.name + "#t" + std::to_string(index)
                     : index == 0 ? s.name
                                  : s.name + "#r" + std::to_string(index);
  auto e = make_ep(*s.dom, info.get(), context, transmit ? ep_role::tx_ctx : ep_role::rx_ctx, name);
  e->parent = &s;
  e->ctx_index = index;
  if (s.av) {
    e->av = s.av;
    s.av->add_user();
  }
  s.dom->users_.add();
  slots[index] = e.get();
  *out = &e.release()->fid_;
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
int sep_getopt(fid_t, int, int, void*, size_t*) noexcept {
  return -FI_ENOPROTOOPT;
}
int sep_setopt(fid_t, int, int, const void*, size_t) noexcept {
  return -FI_ENOPROTOOPT;
}
ssize_t sep_size_left(fid_ep*) noexcept {
  return -FI_ENOSYS;
}

fi_ops_ep sep_ops = {sizeof(fi_ops_ep), sep_cancel, sep_getopt,    sep_setopt,
                     sep_tx_ctx,        sep_rx_ctx, sep_size_left, sep_size_left};

int sep_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  sep* s = sep::of(f);
  if (!addrlen) return -FI_EINVAL;
  std::string a = shm_address(s->name);
  size_t need = a.size() + 1, have = *addrlen;
  *addrlen = need;
  if (!addr || have < need) return -FI_ETOOSMALL;
  memcpy(addr, a.c_str(), need);
  return 0;
}

int sep_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  sep* s = sep::of(f);
  if (!addr || !addrlen) return -FI_EINVAL;
  std::string name = shm_name_of(addr, addrlen);
  if (name.empty()) return -FI_EINVAL;
  std::lock_guard g(s->ctl);
  for (ep* c : s->tx)
    if (c) return -FI_EOPBADSTATE;
  for (ep* c : s->rx)
    if (c) return -FI_EOPBADSTATE;
  s->name = name;
  return 0;
}

fi_ops_cm sep_cm = {sizeof(fi_ops_cm),
                    sep_setname,
                    sep_getname,
                    WEFT_NOSYS(fi_ops_cm, getpeer),
                    WEFT_NOSYS(fi_ops_cm, connect),
                    WEFT_NOSYS(fi_ops_cm, listen),
                    WEFT_NOSYS(fi_ops_cm, accept),
                    WEFT_NOSYS(fi_ops_cm, reject),
                    WEFT_NOSYS(fi_ops_cm, shutdown),
                    WEFT_NOSYS(fi_ops_cm, join)};

// Data moves on the contexts, never on the scalable endpoint itself.
fi_ops_msg sep_msg = {sizeof(fi_ops_msg),
                      WEFT_NOSYS(fi_ops_msg, recv),
                      WEFT_NOSYS(fi_ops_msg, recvv),
                      WEFT_NOSYS(fi_ops_msg, recvmsg),
                      WEFT_NOSYS(fi_ops_msg, send),
                      WEFT_NOSYS(fi_ops_msg, sendv),
                      WEFT_NOSYS(fi_ops_msg, sendmsg),
                      WEFT_NOSYS(fi_ops_msg, inject),
                      WEFT_NOSYS(fi_ops_msg, senddata),
                      WEFT_NOSYS(fi_ops_msg, injectdata)};
fi_ops_tagged sep_tagged = {sizeof(fi_ops_tagged),
                            WEFT_NOSYS(fi_ops_tagged, recv),
                            WEFT_NOSYS(fi_ops_tagged, recvv),
                            WEFT_NOSYS(fi_ops_tagged, recvmsg),
                            WEFT_NOSYS(fi_ops_tagged, send),
                            WEFT_NOSYS(fi_ops_tagged, sendv),
                            WEFT_NOSYS(fi_ops_tagged, sendmsg),
                            WEFT_NOSYS(fi_ops_tagged, inject),
                            WEFT_NOSYS(fi_ops_tagged, senddata),
                            WEFT_NOSYS(fi_ops_tagged, injectdata)};

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
fi_ops_ep stx_ops = {sizeof(fi_ops_ep),
                     WEFT_NOSYS(fi_ops_ep, cancel),
                     WEFT_NOSYS(fi_ops_ep, getopt),
                     WEFT_NOSYS(fi_ops_ep, setopt),
                     WEFT_NOSYS(fi_ops_ep, tx_ctx),
                     WEFT_NOSYS(fi_ops_ep, rx_ctx),
                     WEFT_NOSYS(fi_ops_ep, rx_size_left),
                     WEFT_NOSYS(fi_ops_ep, tx_size_left)};

}  // namespace

// Receive/transmit context (or RMA on a receive context): not available.
fi_ops_rma rma_ops_none = {sizeof(fi_ops_rma),
                           WEFT_NOSYS(fi_ops_rma, read),
                           WEFT_NOSYS(fi_ops_rma, readv),
                           WEFT_NOSYS(fi_ops_rma, readmsg),
                           WEFT_NOSYS(fi_ops_rma, write),
                           WEFT_NOSYS(fi_ops_rma, writev),
                           WEFT_NOSYS(fi_ops_rma, writemsg),
                           WEFT_NOSYS(fi_ops_rma, inject),
                           WEFT_NOSYS(fi_ops_rma, writedata),
                           WEFT_NOSYS(fi_ops_rma, injectdata)};
fi_ops_atomic atomic_ops_none = {sizeof(fi_ops_atomic),
                                 WEFT_NOSYS(fi_ops_atomic, write),
                                 WEFT_NOSYS(fi_ops_atomic, writev),
                                 WEFT_NOSYS(fi_ops_atomic, writemsg),
                                 WEFT_NOSYS(fi_ops_atomic, inject),
                                 WEFT_NOSYS(fi_ops_atomic, readwrite),
                                 WEFT_NOSYS(fi_ops_atomic, readwritev),
                                 WEFT_NOSYS(fi_ops_atomic, readwritemsg),
                                 WEFT_NOSYS(fi_ops_atomic, compwrite),
                                 WEFT_NOSYS(fi_ops_atomic, compwritev),
                                 WEFT_NOSYS(fi_ops_atomic, compwritemsg),
                                 WEFT_NOSYS(fi_ops_atomic, writevalid),
                                 WEFT_NOSYS(fi_ops_atomic, readwritevalid),
                                 WEFT_NOSYS(fi_ops_atomic, compwritevalid)};

void context_closed(ep& e) noexcept {
  sep* s = e.parent;
  if (!s) return;
  std::lock_guard g(s->ctl);
  auto& slots = e.role == ep_role::tx_ctx ? s->tx : s->rx;
  if (e.ctx_index < slots.size() && slots[e.ctx_index] == &e) slots[e.ctx_index] = nullptr;
}

weft::av* context_av(ep& e) noexcept {
  return e.parent ? e.parent->av : nullptr;
}

int scalable_ep_open(domain& dom, fi_info* info, fid_ep** out, void* context) {
  if (!info || !out) return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
    return -FI_EINVAL;
  size_t txc = info->ep_attr && info->ep_attr->tx_ctx_cnt ? info->ep_attr->tx_ctx_cnt : 1;
  size_t rxc = info->ep_attr && info->ep_attr->rx_ctx_cnt ? info->ep_attr->rx_ctx_cnt : 1;
  const fi_domain_attr* da = dom.info->domain_attr;
  if (txc == FI_SHARED_CONTEXT || rxc == FI_SHARED_CONTEXT || txc > da->max_ep_tx_ctx ||
      rxc > da->max_ep_rx_ctx)
    return -FI_EINVAL;
  auto s = std::make_unique<sep>();
  s->info = info_dup(info);
  if (!s->info) return -FI_ENOMEM;
  s->dom = &dom;
  s->tx.assign(txc, nullptr);
  s->rx.assign(rxc, nullptr);
  s->name = shm_name_of(info->src_addr, info->src_addrlen);
  if (s->name.empty()) s->name = std::to_string(getpid()) + "_s" + std::to_string(sep_counter++);
  s->fid_.fid.fclass = FI_CLASS_SEP;
  s->fid_.fid.context = context;
  s->fid_.fid.ops = &sep_fi_ops;
  s->fid_.ops = &sep_ops;
  s->fid_.cm = &sep_cm;
  s->fid_.msg = &sep_msg;
  s->fid_.tagged = &sep_tagged;
  s->fid_.rma = &rma_ops_none;
  s->fid_.atomic = &atomic_ops_none;
  dom.users_.add();
  *out = &s.release()->fid_;
  return 0;
}

int stx_open(domain& dom, fi_tx_attr* attr, fid_stx** out, void* context) {
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

// A shared receive context is an ep object with no region of its own:
// receives posted to it land in queues that every bound endpoint matches
// incoming messages against; completions go to the endpoint a message
// arrived on.
int srx_open(domain& dom, fi_rx_attr* attr, fid_ep** out, void* context) {
  if (!out) return -FI_EINVAL;
  info_ptr info(info_alloc());
  if (!info) return -FI_ENOMEM;
  info->caps =
      (attr && attr->caps) ? attr->caps : (FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE);
  if (attr) *info->rx_attr = *attr;
  auto e = make_ep(dom, info.get(), context, ep_role::srx, "");
  e->own_lock.set_enabled(true);  // endpoints bound to it may progress from several threads
  e->enabled = true;              // receives may be posted at once
  dom.users_.add();
  *out = &e.release()->fid_;
  return 0;
}

int bind_shared(ep& e, fid* bfid, uint64_t flags) {
  if (flags) return -FI_EBADFLAGS;
  if (bfid->fclass == FI_CLASS_STX_CTX) {
    if (bfid->ops != &stx_fi_ops || e.shared_tx || e.role != ep_role::endpoint) return -FI_EINVAL;
    stx* s = from_fid<stx>(bfid);
    if (s->dom != e.dom) return -FI_EINVAL;
    e.shared_tx = s;
    s->users_.add();
    return 0;
  }
  if (!is_shm_ep(bfid)) return -FI_EINVAL;
  ep* srx = ep::of(bfid);
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

void unbind_shared(ep& e) noexcept {
  if (e.shared_tx) {
    e.shared_tx->users_.drop();
    e.shared_tx = nullptr;
  }
  if (e.shared_rx) {
    e.shared_rx->users_.drop();
    e.shared_rx = nullptr;
  }
}

}  // namespace weft::shm
