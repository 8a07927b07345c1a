// prov/shm: endpoint control path — open, bind, enable, names, options, close.
#include <unistd.h>

#include <cstring>

#include "core/info.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "prov/shm/shm_ep.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/eq.hpp"

namespace weft::shm {

namespace {

std::atomic<uint32_t> ep_counter{0};

void stop_progress_thread(ep& e) {
  if (e.progress_thread.joinable()) {
    e.stop.store(true);
    e.progress_thread.join();
  }
}

void unbind_all(ep& e) noexcept {
  if (e.tx_cq) {
    cq_del_poller(e.tx_cq, progress_poller, &e);
    cq_drop(e.tx_cq);
  }
  if (e.rx_cq) {
    if (e.rx_cq != e.tx_cq) cq_del_poller(e.rx_cq, progress_poller, &e);
    cq_drop(e.rx_cq);
  }
  fid_cntr* cntrs[] = {e.cntr_send, e.cntr_recv, e.cntr_read, e.cntr_write, e.cntr_rread, e.cntr_rwrite};
  for (size_t i = 0; i < 6; ++i) {
    fid_cntr* c = cntrs[i];
    if (!c) continue;
    bool first = true;
    for (size_t j = 0; j < i; ++j)
      if (cntrs[j] == c) first = false;
    if (first) cntr_del_poller(c, progress_poller, &e);
    cntr_drop(c);
  }
  if (e.av) e.av->drop_user();
  if (e.eq) eq_drop(e.eq);
}

int ep_close(fid* f) noexcept {
  ep* e = ep::of(f);
  if (e->users_.busy()) return -FI_EBUSY;  // bound endpoints (srx) or aliases
  stop_progress_thread(*e);
  {
    std::lock_guard c(e->ctl);
    {
      ep_guard g(*e);
      // Give queued responses a last chance.
      if (e->enabled) progress(*e);
      if (e->enabled && e->me.base) e->me.hdr()->state.store(state_closed, std::memory_order_release);
      e->enabled = false;
      if (e->shared_rx) {
        // Messages that arrived here and wait in the shared queues go with us.
        for (auto* list : {&e->rx->ux_msg, &e->rx->ux_tagged})
          list->remove_if([e](const unexpected& u) { return u.owner == e; });
      }
    }
    unbind_all(*e);  // without the endpoint lock: see ep::ctl
    unbind_shared(*e);
  }
  if (e->parent) context_closed(*e);
  e->dom->users_.drop();
  info_free(e->info);
  delete e;
  return 0;
}

int bind_cq(ep& e, fid_cq* cq, uint64_t flags) {
  if (!only(flags, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) return -FI_EBADFLAGS;
  if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EINVAL;
  if (((flags & FI_TRANSMIT) && e.tx_cq) || ((flags & FI_RECV) && e.rx_cq)) return -FI_EINVAL;
  bool registered = (e.tx_cq == cq) || (e.rx_cq == cq);
  if (!registered && cq_add_poller(cq, progress_poller, &e)) return -FI_ENOMEM;
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

int bind_cntr(ep& e, fid_cntr* c, uint64_t flags) {
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
  if (!registered && cntr_add_poller(c, progress_poller, &e)) return -FI_ENOMEM;
  for (auto& m : map)
    if (flags & m.flag) {
      *m.slot = c;
      cntr_take(c);
    }
  return 0;
}

int ep_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  return guard([&]() -> int {
    ep& e = *ep::of(f);
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

int enable(ep& e) {
  if (e.enabled) return 0;
  if (!e.av && e.parent && context_av(e)) {
    e.av = context_av(e);  // the scalable endpoint's AV, bound after the context was made
    e.av->add_user();
  }
  if (!e.av) return -FI_ENOAV;
  if (e.shared_rx && !e.shared_rx->av) {
    e.shared_rx->av = e.av;
    e.av->add_user();
  }
  bool tx = e.role != ep_role::rx_ctx && (e.caps & (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC));
  if (tx && !e.tx_cq && !e.cntr_send && !e.cntr_read && !e.cntr_write) return -FI_ENOCQ;
  bool rx = e.role != ep_role::tx_ctx && (e.caps & (FI_MSG | FI_TAGGED)) &&
            (e.caps & FI_RECV || !(e.caps & FI_SEND));
  if (rx && !e.rx_cq && !e.cntr_recv) return -FI_ENOCQ;
  shm_domain& sd = shm_domain::of(*e.dom);
  e.cma = cma_usable();
  e.split_enabled = e.cma && param_bool("shm", "split_copy").value_or(true);
  e.map_mr = sd.map_mr;
  e.region.create(region_file(e.name), region_size);
  region_init(e.region.base(), e.name, sd.file, e.cma);
  e.me = region_view{e.region.base()};
  // Initiators send a notify after each RMA only when something here counts
  // it: remote counters (remote CQ data always comes with a notify).
  if (e.cntr_rwrite || e.cntr_rread) e.me.hdr()->rma_events.store(1, std::memory_order_release);
  e.enabled = true;
  if (e.dom->data_progress == FI_PROGRESS_AUTO) {
    e.progress_thread = std::thread([&e] {
      while (!e.stop.load(std::memory_order_relaxed)) {
        {
          ep_guard g(e);
          progress(e);
        }
        usleep(50);
      }
    });
  }
  WEFT_DEBUG(FI_LOG_EP_CTRL, "shm: endpoint %s enabled (cma %d)", e.name.c_str(), e.cma);
  return 0;
}

int ep_control(fid* f, int command, void* arg) noexcept {
  return guard([&]() -> int {
    ep& e = *ep::of(f);
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
  ep& e = ep_of(reinterpret_cast<fid_ep*>(f));
  if (!context) return -FI_EINVAL;
  ep_guard g(e);
  for (auto* list : {&e.rx->posted_msg, &e.rx->posted_tagged}) {
    for (auto it = list->begin(); it != list->end(); ++it) {
      if (it->context != context) continue;
      posted_recv r = *it;
      recv_drop(e, *list, it);
      if (e.rx_cq) {
        fi_cq_err_entry err{};
        err.op_context = context;
        err.flags = FI_RECV | (r.tagged ? FI_TAGGED : FI_MSG);
        err.err = FI_ECANCELED;
        err.prov_errno = -FI_ECANCELED;
        err.tag = r.tag;
        cq_write_error(e.rx_cq, err);
      }
      if (e.cntr_recv) cntr_err_inc(e.cntr_recv);
      return 0;
    }
  }
  return -FI_ENOENT;
}

int ep_getopt(fid_t f, int level, int optname, void* optval, size_t* optlen) noexcept {
  ep& e = ep_of(reinterpret_cast<fid_ep*>(f));
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (!optval || !optlen) return -FI_EINVAL;
  switch (optname) {
    case FI_OPT_MIN_MULTI_RECV:
      if (*optlen < sizeof(size_t)) {
        *optlen = sizeof(size_t);
        return -FI_ETOOSMALL;
      }
      *static_cast<size_t*>(optval) = e.min_multi_recv;
      *optlen = sizeof(size_t);
      return 0;
    case FI_OPT_CM_DATA_SIZE:
      if (*optlen < sizeof(size_t)) {
        *optlen = sizeof(size_t);
        return -FI_ETOOSMALL;
      }
      *static_cast<size_t*>(optval) = 0;
      *optlen = sizeof(size_t);
      return 0;
    default:
      return -FI_ENOPROTOOPT;
  }
}

int ep_setopt(fid_t f, int level, int optname, const void* optval, size_t optlen) noexcept {
  ep& e = ep_of(reinterpret_cast<fid_ep*>(f));
  if (level != FI_OPT_ENDPOINT) return -FI_ENOPROTOOPT;
  if (!optval) return -FI_EINVAL;
  switch (optname) {
    case FI_OPT_MIN_MULTI_RECV:
      if (optlen != sizeof(size_t)) return -FI_EINVAL;
      e.min_multi_recv = *static_cast<const size_t*>(optval);
      return 0;
    default:
      return -FI_ENOPROTOOPT;
  }
}

int ep_tx_ctx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*) noexcept {
  return -FI_ENOSYS;
}
int ep_rx_ctx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*) noexcept {
  return -FI_ENOSYS;
}
ssize_t ep_rx_size_left(fid_ep*) noexcept {
  return -FI_ENOSYS;
}
ssize_t ep_tx_size_left(fid_ep*) noexcept {
  return -FI_ENOSYS;
}

fi_ops_ep ep_ops = {sizeof(fi_ops_ep), ep_cancel, ep_getopt,       ep_setopt,
                    ep_tx_ctx,         ep_rx_ctx, ep_rx_size_left, ep_tx_size_left};

// ------------------------------------------------------------------ fi_ops_cm
int cm_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  return guard([&]() -> int {
    ep& e = *ep::of(f);
    ep_guard g(e);
    if (e.enabled) return -FI_EOPBADSTATE;
    std::string name = shm_name_of(addr, addrlen);
    if (name.empty()) return -FI_EINVAL;
    e.name = name;
    return 0;
  });
}

int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  ep& e = ep_of(reinterpret_cast<fid_ep*>(f));
  if (!addrlen) return -FI_EINVAL;
  std::string a = shm_address(e.name);
  size_t need = a.size() + 1;
  size_t have = *addrlen;
  *addrlen = need;
  if (!addr || have < need) {
    if (addr && have) {
      memcpy(addr, a.c_str(), have - 1);
      static_cast<char*>(addr)[have - 1] = 0;
    }
    return -FI_ETOOSMALL;
  }
  memcpy(addr, a.c_str(), need);
  return 0;
}

int cm_getpeer(fid_ep*, void*, size_t*) noexcept {
  return -FI_ENOSYS;
}
int cm_connect(fid_ep*, const void*, const void*, size_t) noexcept {
  return -FI_ENOSYS;
}
int cm_listen(fid_pep*) noexcept {
  return -FI_ENOSYS;
}
int cm_accept(fid_ep*, const void*, size_t) noexcept {
  return -FI_ENOSYS;
}
int cm_reject(fid_pep*, fid_t, const void*, size_t) noexcept {
  return -FI_ENOSYS;
}
int cm_shutdown(fid_ep*, uint64_t) noexcept {
  return -FI_ENOSYS;
}
int cm_join(fid_ep*, const void*, uint64_t, fid_mc**, void*) noexcept {
  return -FI_ENOSYS;
}

fi_ops_cm cm_ops = {sizeof(fi_ops_cm), cm_setname, cm_getname, cm_getpeer,  cm_connect,
                    cm_listen,         cm_accept,  cm_reject,  cm_shutdown, cm_join};

}  // namespace

std::unique_ptr<ep> make_ep(domain& dom, const fi_info* info, void* context, ep_role role, std::string name) {
  auto e = std::make_unique<ep>();
  e->info = info_dup(info);
  if (!e->info) throw std::bad_alloc();
  e->dom = &dom;
  e->role = role;
  e->caps = info->caps ? info->caps : (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC);
  if (!(e->caps & (FI_SEND | FI_RECV))) e->caps |= FI_SEND | FI_RECV;
  if (info->tx_attr) {
    e->tx_op_flags = info->tx_attr->op_flags;
    if (info->tx_attr->inject_size) e->inject_size = info->tx_attr->inject_size;
  }
  if (info->rx_attr) e->rx_op_flags = info->rx_attr->op_flags;
  if (auto v = param_int("shm", "inject_size"); v && *v >= 0)
    e->inject_size = std::min<size_t>(static_cast<size_t>(*v), inject_max);
  e->name = std::move(name);
  for (auto& s : e->src_cache) s = FI_ADDR_NOTAVAIL;
  // FI_THREAD_DOMAIN / FI_THREAD_COMPLETION: the application serialises
  // access to the endpoint and the CQs that progress it, so no lock is taken
  // (with FI_THREAD_ENDPOINT another thread's CQ read may progress it).
  e->own_lock.set_enabled(!((dom.threading == FI_THREAD_DOMAIN || dom.threading == FI_THREAD_COMPLETION) &&
                            dom.data_progress != FI_PROGRESS_AUTO));

  e->fid_.fid.fclass = role == ep_role::tx_ctx   ? FI_CLASS_TX_CTX
                       : role == ep_role::rx_ctx ? FI_CLASS_RX_CTX
                       : role == ep_role::srx    ? FI_CLASS_SRX_CTX
                                                 : FI_CLASS_EP;
  e->fid_.fid.context = context;
  e->fid_.fid.ops = &ep_fi_ops;
  e->fid_.ops = &ep_ops;
  e->fid_.cm = &cm_ops;
  e->fid_.msg = role == ep_role::tx_ctx ? &msg_ops_tx : role == ep_role::endpoint ? &msg_ops : &msg_ops_rx;
  e->fid_.tagged = role == ep_role::tx_ctx     ? &tagged_ops_tx
                   : role == ep_role::endpoint ? &tagged_ops
                                               : &tagged_ops_rx;
  e->fid_.rma = role == ep_role::endpoint || role == ep_role::tx_ctx ? &rma_ops : &rma_ops_none;
  e->fid_.atomic = role == ep_role::endpoint || role == ep_role::tx_ctx ? &atomic_ops : &atomic_ops_none;
  e->fid_.collective = nullptr;
  return e;
}

namespace {
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
}  // namespace

fi_ops alias_fi_ops = {sizeof(fi_ops),  alias_close,  alias_bind,    alias_control,
                       fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

bool is_shm_ep(const fid* f) noexcept {
  return f && f->ops == &ep_fi_ops;
}

int endpoint_open(domain& dom, fi_info* info, fid_ep** out, void* context) {
  if (!info || !out) return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
    return -FI_EINVAL;
  if (info->fabric_attr && info->fabric_attr->prov_name && strcmp(info->fabric_attr->prov_name, "shm"))
    return -FI_EINVAL;
  if (info->tx_attr && info->tx_attr->inject_size > inject_max) return -FI_EINVAL;
  if (info->ep_attr && ((info->ep_attr->tx_ctx_cnt > 1 && info->ep_attr->tx_ctx_cnt != FI_SHARED_CONTEXT) ||
                        (info->ep_attr->rx_ctx_cnt > 1 && info->ep_attr->rx_ctx_cnt != FI_SHARED_CONTEXT)))
    return -FI_EINVAL;  // several contexts: fi_scalable_ep
  std::string name = shm_name_of(info->src_addr, info->src_addrlen);
  if (name.empty()) name = std::to_string(getpid()) + "_" + std::to_string(ep_counter++);
  auto e = make_ep(dom, info, context, ep_role::endpoint, name);
  dom.users_.add();
  *out = &e.release()->fid_;
  return 0;
}

}  // namespace weft::shm
