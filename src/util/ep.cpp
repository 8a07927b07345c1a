// SPDX-License-Identifier: BSD-3-Clause
// The endpoint core: bind, enable, control (op flags, aliases), options,
// cancel, close; completions and progress.
#include "util/ep.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>

#include "core/fabric2.hpp"
#include "core/info.hpp"
#include "core/log.hpp"
#include "util/addr.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/eq.hpp"
#include "util/rx.hpp"

namespace weft {

namespace {

void stop_progress_thread(endpoint& e) {
  if (e.progress_thread.joinable()) {
    e.stop.store(true);
    e.progress_thread.join();
  }
}

void unbind_all(endpoint& e) noexcept {
  if (e.tx_cq) cq_del_poller(e.tx_cq, endpoint_poller, &e);
  if (e.rx_cq && e.rx_cq != e.tx_cq) cq_del_poller(e.rx_cq, endpoint_poller, &e);
  ep_owing(e, false);  // no poller runs now: what it owed goes with it
  if (e.tx_cq) cq_drop(e.tx_cq);
  if (e.rx_cq) cq_drop(e.rx_cq);
  fid_cntr* cntrs[] = {e.cntr_send, e.cntr_recv, e.cntr_read, e.cntr_write, e.cntr_rread, e.cntr_rwrite};
  for (size_t i = 0; i < 6; ++i) {
    fid_cntr* c = cntrs[i];
    if (!c) continue;
    bool first = true;
    for (size_t j = 0; j < i; ++j)
      if (cntrs[j] == c) first = false;
    if (first) cntr_del_poller(c, endpoint_poller, &e);
    cntr_drop(c);
  }
  if (e.av) e.av->drop_user();
  if (e.eq) {
    if (e.tops->eq_progress) eq_del_poller(e.eq, endpoint_poller, &e);
    eq_forget(e.eq, &e.fid_.fid);
    eq_drop(e.eq);
  }
}

void unbind_shared(endpoint& e) noexcept {
  if (e.shared_tx) {
    e.shared_tx->users_.drop();
    e.shared_tx = nullptr;
  }
  if (e.shared_rx) {
    e.shared_rx->users_.drop();
    e.shared_rx = nullptr;
  }
}

int ep_close(fid* f) noexcept {
  endpoint* e = endpoint::of(f);
  if (e->users_.busy()) return -FI_EBUSY;  // bound endpoints (srx) or aliases
  stop_progress_thread(*e);
  {
    std::lock_guard c(e->ctl);
    {
      ep_guard g(*e);
      e->tops->close(*e);
      e->enabled = false;
      // Messages that arrived here and wait in shared queues go with us.
      if (e->rx != &e->own_rx) ux_drop_owned(*e);
    }
    coll_close(*e);  // the engine and its pollers go; groups still open wait for their fi_close
    unbind_all(*e);  // without the endpoint lock: see endpoint::ctl
    unbind_shared(*e);
  }
  if (e->parent) sep_context_closed(*e);
  e->dom->users_.drop();
  info_free(e->info);
  e->info = nullptr;
  e->tops->destroy(e);
  return 0;
}

int bind_cq(endpoint& e, fid_cq* cq, uint64_t flags) {
  if (!only(flags, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) return -FI_EBADFLAGS;
  if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EINVAL;
  if (((flags & FI_TRANSMIT) && e.tx_cq) || ((flags & FI_RECV) && e.rx_cq)) return -FI_EINVAL;
  bool registered = (e.tx_cq == cq) || (e.rx_cq == cq);
  if (!registered && cq_add_poller(cq, endpoint_poller, &e, endpoint_arm)) return -FI_ENOMEM;
  if (flags & FI_TRANSMIT) {
    e.tx_cq = cq;
    e.tx_selective = flags & FI_SELECTIVE_COMPLETION;
    cq_take(cq);
  }
  if (flags & FI_RECV) {
    e.rx_cq = cq;
    e.rx_selective = flags & FI_SELECTIVE_COMPLETION;
    cq_take(cq);
  }
  return 0;
}

int bind_cntr(endpoint& e, fid_cntr* c, uint64_t flags) {
  constexpr uint64_t ok = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  if (!only(flags, ok)) return -FI_EBADFLAGS;
  if (!flags) return -FI_EINVAL;
  struct {
    uint64_t flag;
    fid_cntr** slot;
  } map[] = {{FI_SEND, &e.cntr_send},   {FI_RECV, &e.cntr_recv},         {FI_READ, &e.cntr_read},
             {FI_WRITE, &e.cntr_write}, {FI_REMOTE_READ, &e.cntr_rread}, {FI_REMOTE_WRITE, &e.cntr_rwrite}};
  for (auto& m : map)
    if ((flags & m.flag) && *m.slot) return -FI_EINVAL;
  bool registered = false;
  for (auto& m : map)
    if (*m.slot == c) registered = true;
  if (!registered && cntr_add_poller(c, endpoint_poller, &e, endpoint_arm)) return -FI_ENOMEM;
  for (auto& m : map)
    if (flags & m.flag) {
      *m.slot = c;
      cntr_take(c);
    }
  return 0;
}

int ep_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  return guard([&]() -> int {
    endpoint& e = *endpoint::of(f);
    if (!bfid) return -FI_EINVAL;
    std::lock_guard c(e.ctl);
    if (e.enabled) return -FI_EOPBADSTATE;
    switch (bfid->fclass) {
      case FI_CLASS_AV: {
        if (flags) return -FI_EBADFLAGS;
        if (e.av) return -FI_EINVAL;
        weft::av* a = weft::av::from(bfid);
        if (!a || &a->dom() != e.dom) return -FI_EINVAL;
        e.av = a;
        a->add_user();
        return 0;
      }
      case FI_CLASS_CQ:
        if (!is_cq(bfid)) return -FI_EINVAL;
        return bind_cq(e, reinterpret_cast<fid_cq*>(bfid), flags);
      case FI_CLASS_CNTR:
        if (!is_cntr(bfid)) return -FI_EINVAL;
        return bind_cntr(e, reinterpret_cast<fid_cntr*>(bfid), flags);
      case FI_CLASS_EQ:
        if (!is_eq(bfid)) return -FI_EINVAL;
        if (flags) return -FI_EBADFLAGS;
        if (e.eq) return -FI_EINVAL;
        if (e.tops->eq_progress && eq_add_poller(reinterpret_cast<fid_eq*>(bfid), endpoint_poller, &e))
          return -FI_ENOMEM;
        e.eq = reinterpret_cast<fid_eq*>(bfid);
        eq_take(e.eq);
        return 0;
      case FI_CLASS_STX_CTX:
      case FI_CLASS_SRX_CTX:
        return bind_shared(e, bfid, flags);
      default:
        return -FI_EINVAL;
    }
  });
}

int enable(endpoint& e) {
  if (e.enabled) return 0;
  if (!e.av && e.parent && e.parent->av) {
    e.av = e.parent->av;  // the scalable endpoint's AV, bound after the context was made
    e.av->add_user();
  }
  // Connected endpoints (FI_EP_MSG) address their one peer without an AV.
  const bool connected = e.info && e.info->ep_attr && e.info->ep_attr->type == FI_EP_MSG;
  if (!e.av && !connected) return -FI_ENOAV;
  if (e.shared_rx && !e.shared_rx->av && e.av) {  // a connected endpoint has no AV to lend it
    e.shared_rx->av = e.av;
    e.av->add_user();
  }
  // "All active endpoints must be bound to completion queues": counters
  // alone do not make an endpoint that may transmit or receive enableable
  // (Debian's libfabric refuses them too).
  // A direction is needed when a capability asks for it (FI_MSG with
  // FI_SEND, FI_RMA with FI_READ ...) or names no direction at all.
  auto needs = [&](uint64_t kinds, uint64_t mine, uint64_t theirs) {
    return (e.caps & kinds) && ((e.caps & mine) || !(e.caps & theirs));
  };
  const bool tx = e.role != ep_role::rx_ctx &&
                  (needs(FI_MSG | FI_TAGGED, FI_SEND, FI_RECV) ||
                   needs(FI_RMA | FI_ATOMIC, FI_READ | FI_WRITE, FI_REMOTE_READ | FI_REMOTE_WRITE));
  if (tx && !e.tx_cq) return -FI_ENOCQ;
  const bool rx = e.role != ep_role::tx_ctx && needs(FI_MSG | FI_TAGGED, FI_RECV, FI_SEND);
  if (rx && !e.rx_cq) return -FI_ENOCQ;
  // "Passive and connection-oriented endpoints must be bound to an event queue."
  if (connected && !e.eq) return -FI_ENOEQ;
  if (int ret = e.tops->enable(e)) return ret;
  e.enabled = true;
  if (e.dom->data_progress == FI_PROGRESS_AUTO) {
    e.progress_thread = std::thread([&e] {
      while (!e.stop.load(std::memory_order_relaxed)) {
        endpoint_poller(&e);
        usleep(50);
      }
    });
  }
  return 0;
}

int ep_control(fid* f, int command, void* arg) noexcept {
  return guard([&]() -> int {
    endpoint& e = *endpoint::of(f);
    if (command == FI_ENABLE) {
      std::lock_guard c(e.ctl);
      ep_guard g(e);
      return enable(e);
    }
    ep_guard g(e);
    switch (command) {
      case FI_GETOPSFLAG: {
        if (!arg) return -FI_EINVAL;
        uint64_t* flags = static_cast<uint64_t*>(arg);
        if ((*flags & FI_TRANSMIT) && (*flags & FI_RECV)) return -FI_EINVAL;
        if (*flags & FI_TRANSMIT)
          *flags = FI_TRANSMIT | e.tx_op_flags;
        else if (*flags & FI_RECV)
          *flags = FI_RECV | e.rx_op_flags;
        else
          return -FI_EINVAL;
        return 0;
      }
      case FI_SETOPSFLAG: {
        if (!arg) return -FI_EINVAL;
        uint64_t flags = *static_cast<uint64_t*>(arg);
        if ((flags & FI_TRANSMIT) && (flags & FI_RECV)) return -FI_EINVAL;
        if (flags & FI_TRANSMIT)
          e.tx_op_flags = flags & ~FI_TRANSMIT;
        else if (flags & FI_RECV)
          e.rx_op_flags = flags & ~FI_RECV;
        else
          return -FI_EINVAL;
        return 0;
      }
      case FI_ALIAS: {
        auto* a = static_cast<struct fi_alias*>(arg);
        if (!a || !a->fid) return -FI_EINVAL;
        uint64_t dir = a->flags & (FI_TRANSMIT | FI_RECV);
        if (!dir) return -FI_EINVAL;
        auto al = std::make_unique<alias>();
        al->base = &e;
        al->tx_flags = (dir & FI_TRANSMIT) ? (a->flags & ~(FI_TRANSMIT | FI_RECV)) : e.tx_op_flags;
        al->rx_flags = (dir & FI_RECV) ? (a->flags & ~(FI_TRANSMIT | FI_RECV)) : e.rx_op_flags;
        al->fid_ = e.fid_;  // the same ops tables: they resolve the alias
        al->fid_.fid.ops = &alias_fi_ops;
        e.users_.add();
        *a->fid = &al.release()->fid_.fid;
        return 0;
      }
      default:
        return -FI_ENOSYS;
    }
  });
}

fi_ops ep_fi_ops = {sizeof(fi_ops),  ep_close,     ep_bind,       ep_control,
                    fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

// ------------------------------------------------------------------ fi_ops_ep
ssize_t ep_cancel(fid_t f, void* context) noexcept {
  endpoint& e = ep_of(reinterpret_cast<fid_ep*>(f));
  if (!context) return -FI_EINVAL;
  ep_guard g(e);
  return cancel_recv(e, context);
}

opt_target opt_target_of(endpoint& e) noexcept {
  opt_target t;
  // Receives posted to an endpoint bound to a shared receive context go to
  // the shared context's queues, and take its minimum.
  if (e.role != ep_role::tx_ctx) t.min_multi_recv = &e.rx->min_multi_recv;
  t.has_cm_data = e.role == ep_role::endpoint;
  t.cm_data_size = e.tops->cm_data_size;
  return t;
}

int ep_getopt(fid_t f, int level, int optname, void* optval, size_t* optlen) noexcept {
  endpoint& e = ep_of(reinterpret_cast<fid_ep*>(f));
  ep_guard g(e);
  return opt_get(opt_target_of(e), level, optname, optval, optlen);
}

int ep_setopt(fid_t f, int level, int optname, const void* optval, size_t optlen) noexcept {
  endpoint& e = ep_of(reinterpret_cast<fid_ep*>(f));
  ep_guard g(e);
  return opt_set(opt_target_of(e), level, optname, optval, optlen);
}

fi_ops_ep ep_ops = {sizeof(fi_ops_ep),
                    ep_cancel,
                    ep_getopt,
                    ep_setopt,
                    WEFT_NOSYS(fi_ops_ep, tx_ctx),
                    WEFT_NOSYS(fi_ops_ep, rx_ctx),
                    WEFT_NOSYS(fi_ops_ep, rx_size_left),
                    WEFT_NOSYS(fi_ops_ep, tx_size_left)};

// ------------------------------------------------------------------ aliases
int alias_close(fid* f) noexcept {
  alias* a = from_fid<alias>(f);
  a->base->users_.drop();
  delete a;
  return 0;
}
// An alias changes only its own default flags; binding goes to the endpoint.
int alias_control(fid* f, int command, void* arg) noexcept {
  alias* a = from_fid<alias>(f);
  if (command != FI_GETOPSFLAG && command != FI_SETOPSFLAG) return -FI_ENOSYS;
  if (!arg) return -FI_EINVAL;
  uint64_t* flags = static_cast<uint64_t*>(arg);
  bool tx = *flags & FI_TRANSMIT, rx = *flags & FI_RECV;
  if (tx == rx) return -FI_EINVAL;
  uint64_t& own = tx ? a->tx_flags : a->rx_flags;
  if (command == FI_GETOPSFLAG)
    *flags = (tx ? FI_TRANSMIT : FI_RECV) | own;
  else
    own = *flags & ~(FI_TRANSMIT | FI_RECV);
  return 0;
}
int alias_bind(fid*, fid*, uint64_t) noexcept {
  return -FI_EINVAL;
}

// ------------------------------------------------------------------ completions
fid_cntr* tx_counter(endpoint& e, uint64_t cq_flags) noexcept {
  if (cq_flags & FI_READ) return e.cntr_read;
  if (cq_flags & FI_WRITE) return e.cntr_write;
  return e.cntr_send;
}

}  // namespace

fi_ops alias_fi_ops = {sizeof(fi_ops),  alias_close,  alias_bind,    alias_control,
                       fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

void endpoint_init(endpoint& e, domain& dom, const fi_info* info, void* context, ep_role role,
                   const ep_transport* tops, size_t inject_max) {
  e.info = info_dup(info, domain_attr_size_for(dom.api_version));
  if (!e.info) throw std::bad_alloc();
  e.tops = tops;
  e.dom = &dom;
  e.role = role;
  e.caps = info->caps ? info->caps : (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC);
  if (!(e.caps & (FI_SEND | FI_RECV))) e.caps |= FI_SEND | FI_RECV;
  // Bits 45, 46 and 48 are capabilities of 2.x only (1.x: two registration
  // flags and FI_VARIABLE_MSG, which weft does not offer).
  if (!api_v2(dom.api_version)) e.caps &= ~(FI_TAGGED_DIRECTED_RECV | FI_TAGGED_MULTI_RECV | FI_EXACT_DIRECTED_RECV);
  e.inject_size = inject_max;
  if (info->tx_attr) {
    e.tx_op_flags = info->tx_attr->op_flags;
    if (info->tx_attr->inject_size) e.inject_size = std::min(info->tx_attr->inject_size, inject_max);
  }
  if (info->rx_attr) e.rx_op_flags = info->rx_attr->op_flags;
  // FI_THREAD_DOMAIN / FI_THREAD_COMPLETION: the application serialises
  // access to the endpoint and the CQs that progress it, so no lock is taken
  // (with FI_THREAD_ENDPOINT another thread's CQ read may progress it).
  e.own_lock.set_locking(!((dom.threading == FI_THREAD_DOMAIN || dom.threading == FI_THREAD_COMPLETION) &&
                           dom.data_progress != FI_PROGRESS_AUTO));
  e.fid_.fid.fclass = role == ep_role::tx_ctx   ? FI_CLASS_TX_CTX
                      : role == ep_role::rx_ctx ? FI_CLASS_RX_CTX
                      : role == ep_role::srx    ? FI_CLASS_SRX_CTX
                                                : FI_CLASS_EP;
  e.fid_.fid.context = context;
  e.fid_.fid.ops = &ep_fi_ops;
  e.fid_.ops = &ep_ops;
  e.fid_.cm = &cm_ops_none;
  e.fid_.msg = &msg_ops_none;
  e.fid_.tagged = &tagged_ops_none;
  e.fid_.rma = &rma_ops_none;
  e.fid_.atomic = &atomic_ops_none;
  e.fid_.collective = &coll_ops_none;
}

namespace {
int size_option(void* optval, size_t* optlen, size_t value) noexcept {
  if (*optlen < sizeof(size_t)) {
    *optlen = sizeof(size_t);
    return -FI_ETOOSMALL;
  }
  *static_cast<size_t*>(optval) = value;
  *optlen = sizeof(size_t);
  return 0;
}
}  // namespace

int opt_get(const opt_target& t, int level, int optname, void* optval, size_t* optlen) noexcept {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (!optval || !optlen) return -FI_EINVAL;
  switch (optname) {
    case FI_OPT_MIN_MULTI_RECV:
      if (!t.min_multi_recv) return -FI_ENOPROTOOPT;
      return size_option(optval, optlen, *t.min_multi_recv);
    case FI_OPT_CM_DATA_SIZE:
      if (!t.has_cm_data) return -FI_ENOPROTOOPT;
      return size_option(optval, optlen, t.cm_data_size);
    case FI_OPT_XPU_TRIGGER:
      return -FI_EOPNOTSUPP;  // no device triggers operations here (man fi_endpoint)
    default:
      // FI_OPT_BUFFERED_MIN/LIMIT (no FI_BUFFERED_RECV mode), FI_OPT_FI_HMEM_P2P
      // (no FI_HMEM), the buffer and queue sizes the header names: none apply.
      return -FI_ENOPROTOOPT;
  }
}

int opt_set(const opt_target& t, int level, int optname, const void* optval, size_t optlen) noexcept {
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (!optval) return -FI_EINVAL;
  switch (optname) {
    case FI_OPT_MIN_MULTI_RECV:
      if (!t.min_multi_recv) return -FI_ENOPROTOOPT;
      if (optlen != sizeof(size_t)) return -FI_EINVAL;
      *t.min_multi_recv = *static_cast<const size_t*>(optval);
      return 0;
    default:  // FI_OPT_CM_DATA_SIZE is read only; FI_OPT_XPU_TRIGGER is for fi_getopt only
      return -FI_ENOPROTOOPT;
  }
}

void ux_drop_owned(endpoint& e) noexcept {
  for (bool tagged : {false, true}) {
    auto& list = ux_list(e, tagged);
    for (auto it = list.begin(); it != list.end();) {
      auto next = std::next(it);
      if (it->owner == &e) ux_drop(e, list, it);
      it = next;
    }
  }
}

void note_absent_in_whole(endpoint& part, fi_addr_t dest, const char* how) noexcept {
  endpoint& w = *part.whole;
  w.absent.note(
      w.dom->prov->name(),
      [&] {
        size_t len = 0;
        const void* a = w.av && dest != FI_ADDR_NOTAVAIL ? w.av->lookup(dest, &len) : nullptr;
        return a ? addr::to_string(w.av->addr_format(), a, len) : "fi_addr " + std::to_string(dest);
      },
      how);
}

void endpoint_share(endpoint& part, endpoint& whole, av* part_av) {
  if (part.enabled || part.av || part.tx_cq || part.rx_cq) fail(FI_EINVAL, "part endpoint already bound");
  part.tx_cq = whole.tx_cq;
  part.rx_cq = whole.rx_cq;
  part.tx_selective = whole.tx_selective;
  part.rx_selective = whole.rx_selective;
  if (part.tx_cq) cq_take(part.tx_cq);
  if (part.rx_cq) cq_take(part.rx_cq);
  fid_cntr* endpoint::*cntrs[] = {&endpoint::cntr_send,  &endpoint::cntr_recv,  &endpoint::cntr_read,
                                  &endpoint::cntr_write, &endpoint::cntr_rread, &endpoint::cntr_rwrite};
  for (auto m : cntrs) {
    part.*m = whole.*m;
    if (part.*m) cntr_take(part.*m);
  }
  part.av = part_av;
  if (part_av) part_av->add_user();
  part.rx = whole.rx;
  part.lock = whole.lock;
  part.whole = &whole;
}

bool is_endpoint(const fid* f) noexcept {
  return f && f->ops == &ep_fi_ops;
}

void endpoint_poller(void* arg) noexcept {
  endpoint& e = *static_cast<endpoint*>(arg);
  {
    ep_guard g(e);
    e.tops->progress(e);
  }
  // The collective engine moves on what the transport just completed.
  if (coll_engine* c = e.coll.load(std::memory_order_acquire)) [[unlikely]]
    coll_progress(*c);
}

bool endpoint_arm(void* arg) noexcept {
  endpoint& e = *static_cast<endpoint*>(arg);
  if (coll_engine* c = e.coll.load(std::memory_order_acquire)) [[unlikely]]
    if (!coll_arm(*c)) return false;
  if (!e.tops->arm) return true;
  ep_guard g(e);
  return e.tops->arm(e);
}

int ep_watch_fd(endpoint& e, int fd, bool add) noexcept {
  int taken = 0;
  fid_cq* cqs[] = {e.tx_cq, e.rx_cq};
  for (size_t i = 0; i < 2; ++i) {
    if (!cqs[i] || (i == 1 && cqs[1] == cqs[0])) continue;
    taken += (add ? cq_add_wait_fd(cqs[i], fd, EPOLLIN) : cq_del_wait_fd(cqs[i], fd)) == 0;
  }
  fid_cntr* cntrs[] = {e.cntr_send, e.cntr_recv, e.cntr_read, e.cntr_write, e.cntr_rread, e.cntr_rwrite};
  for (size_t i = 0; i < 6; ++i) {
    bool first = cntrs[i] != nullptr;
    for (size_t j = 0; j < i && first; ++j) first = cntrs[j] != cntrs[i];
    if (!first) continue;
    taken += (add ? cntr_add_wait_fd(cntrs[i], fd, EPOLLIN) : cntr_del_wait_fd(cntrs[i], fd)) == 0;
  }
  return taken;
}

void ep_owing_slow(endpoint& e, bool on) noexcept {
  if (on && !e.enabled) return;  // closing (unbind_all let go of its CQs) or not started
  e.owing = on;
  if (e.tx_cq) cq_hold(e.tx_cq, on);
  if (e.rx_cq && e.rx_cq != e.tx_cq) cq_hold(e.rx_cq, on);
}

void tx_done(endpoint& e, void* context, uint64_t cq_flags, uint64_t op_flags, size_t) noexcept {
  if (op_flags & flag_coll) [[unlikely]]
    return coll_tx_done(context, 0);
  if (e.tx_cq && (!e.tx_selective || (op_flags & FI_COMPLETION)) && !(op_flags & flag_no_cq))
    cq_write(e.tx_cq, context, cq_flags, 0, nullptr, 0, 0);
  if (fid_cntr* c = tx_counter(e, cq_flags)) cntr_inc(c);
}

void tx_fail(endpoint& e, void* context, uint64_t cq_flags, uint64_t op_flags, int err, size_t len,
             int prov_errno) noexcept {
  if (op_flags & flag_coll) [[unlikely]]
    return coll_tx_done(context, err ? err : FI_EIO);
  if (e.tx_cq && !(op_flags & flag_no_cq)) {
    fi_cq_err_entry ee{};
    ee.op_context = context;
    ee.flags = cq_flags;
    ee.len = len;
    ee.err = err;
    ee.prov_errno = prov_errno ? prov_errno : -err;
    cq_write_error(e.tx_cq, ee);
  }
  if (fid_cntr* c = tx_counter(e, cq_flags)) cntr_err_inc(c);
}

void rx_done_slow(endpoint& e, const posted_recv& r, uint64_t cq_flags, size_t len, void* buf, uint64_t data,
                  uint64_t tag, fi_addr_t src) noexcept {
  if (r.flags & flag_coll) [[unlikely]]
    return coll_rx_done(r.context, len, 0);
  if (e.rx_cq && (!e.rx_selective || (r.flags & FI_COMPLETION)))
    cq_write(e.rx_cq, r.context, cq_flags, len, buf, data, tag, src);
  if (e.cntr_recv) cntr_inc(e.cntr_recv);
}

void rx_finish(endpoint& e, const posted_recv& r, uint64_t cq_flags, size_t n, uint64_t size, int err,
               void* buf, uint64_t data, uint64_t tag, fi_addr_t src) noexcept {
  if (r.flags & flag_coll) [[unlikely]]
    return coll_rx_done(r.context, n, err ? err : n < size ? FI_ETRUNC : 0);
  if (!err && n >= size) {
    rx_done(e, r, cq_flags, n, buf, data, tag, src);
    return;
  }
  if (e.rx_cq) {
    fi_cq_err_entry ee{};
    ee.op_context = r.context;
    ee.flags = cq_flags;
    ee.data = data;
    ee.tag = tag;
    if (!err) {  // the message was longer than the buffer
      err = FI_ETRUNC;
      ee.len = n;
      ee.olen = size - n;
    }
    ee.err = err;
    ee.prov_errno = -err;
    cq_write_error(e.rx_cq, ee, src);
  }
  if (e.cntr_recv) cntr_err_inc(e.cntr_recv);
}

void remote_write_done(endpoint& e, bool remote_cq_data, uint64_t len, uint64_t data) noexcept {
  if (e.cntr_rwrite) cntr_inc(e.cntr_rwrite);
  if (remote_cq_data && e.rx_cq)
    cq_write(e.rx_cq, nullptr, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, len, nullptr, data, 0);
}

void remote_read_done(endpoint& e) noexcept {
  if (e.cntr_rread) cntr_inc(e.cntr_rread);
}

// ------------------------------------------------------------------ tables for what an object does not do
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
fi_ops_msg msg_ops_none = {sizeof(fi_ops_msg),
                           WEFT_NOSYS(fi_ops_msg, recv),
                           WEFT_NOSYS(fi_ops_msg, recvv),
                           WEFT_NOSYS(fi_ops_msg, recvmsg),
                           WEFT_NOSYS(fi_ops_msg, send),
                           WEFT_NOSYS(fi_ops_msg, sendv),
                           WEFT_NOSYS(fi_ops_msg, sendmsg),
                           WEFT_NOSYS(fi_ops_msg, inject),
                           WEFT_NOSYS(fi_ops_msg, senddata),
                           WEFT_NOSYS(fi_ops_msg, injectdata)};
fi_ops_tagged tagged_ops_none = {sizeof(fi_ops_tagged),
                                 WEFT_NOSYS(fi_ops_tagged, recv),
                                 WEFT_NOSYS(fi_ops_tagged, recvv),
                                 WEFT_NOSYS(fi_ops_tagged, recvmsg),
                                 WEFT_NOSYS(fi_ops_tagged, send),
                                 WEFT_NOSYS(fi_ops_tagged, sendv),
                                 WEFT_NOSYS(fi_ops_tagged, sendmsg),
                                 WEFT_NOSYS(fi_ops_tagged, inject),
                                 WEFT_NOSYS(fi_ops_tagged, senddata),
                                 WEFT_NOSYS(fi_ops_tagged, injectdata)};
fi_ops_cm cm_ops_none = {sizeof(fi_ops_cm),
                         WEFT_NOSYS(fi_ops_cm, setname),
                         WEFT_NOSYS(fi_ops_cm, getname),
                         WEFT_NOSYS(fi_ops_cm, getpeer),
                         WEFT_NOSYS(fi_ops_cm, connect),
                         WEFT_NOSYS(fi_ops_cm, listen),
                         WEFT_NOSYS(fi_ops_cm, accept),
                         WEFT_NOSYS(fi_ops_cm, reject),
                         WEFT_NOSYS(fi_ops_cm, shutdown),
                         WEFT_NOSYS(fi_ops_cm, join)};

}  // namespace weft
