// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: the endpoint's transport part — its region and name, what the
// endpoint core asks of it (enable, progress, close), names (fi_getname,
// fi_setname), and the contexts of scalable endpoints.
//
// Naming of scalable endpoints: a scalable endpoint "N" has receive context
// 0 at "N" itself (so a peer that does not use fi_rx_addr reaches it),
// receive context k at "N#rk" and transmit context k at "N#tk".
// fi_rx_addr(addr, k, rx_ctx_bits) selects "N#rk"; a message from "N#tk"
// reports the source "N".
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstring>

#include "core/log.hpp"
#include "prov/shm/shm.hpp"
#include "prov/shm/shm_part.hpp"
#include "util/ep_ops.hpp"

namespace weft::shm {

namespace {

// A bell (and its timer) only where a CQ or counter has an fd to wake.
void open_bell(ep& e) noexcept {
  e.bell = bell_open(e.name);
  if (e.bell < 0) {
    WEFT_WARN(FI_LOG_EP_CTRL, "shm: no bell for %s: FD waits see remote arrivals late", e.name.c_str());
    return;
  }
  if (ep_watch_fd(e, e.bell, true) == 0) {  // no FD wait object: waits poll
    ::close(e.bell);
    e.bell = -1;
    return;
  }
  e.timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (e.timer >= 0) (void)ep_watch_fd(e, e.timer, true);
}

void close_bell(ep& e) noexcept {
  if (e.armed) unarm(e);
  for (int* fd : {&e.bell, &e.timer}) {
    if (*fd < 0) continue;
    (void)ep_watch_fd(e, *fd, false);
    ::close(*fd);
    *fd = -1;
  }
}

int enable(endpoint& base) {
  ep& e = ep::of(base);
  const config& cfg = e.cfg;
  e.cma = cfg.cma;
  e.split_enabled = cfg.split;
  e.map_mr = cfg.map_mr;
  e.peer_cap = peer_chunk;
  region_create(e.region, e.name);
  region_init(e.region.base(), e.name, shm_domain::of(*e.dom).region.fd(), e.cma);
  e.me = region_view{e.region.base()};
  // Initiators send a notify after each RMA only when something here counts
  // it: remote counters (remote CQ data always comes with a notify).
  if (e.cntr_rwrite || e.cntr_rread) e.me.hdr()->rma_events.store(1, std::memory_order_release);
  // The name last: a sender finds the region through it, so it must find
  // the region ready (before, one that came between the claim and
  // region_init was refused, and its send failed with FI_EIO).
  try {
    e.claim.claim(e.name);  // -FI_EADDRINUSE when another endpoint has the name
  } catch (...) {
    e.me = region_view{};
    e.region.reset();
    throw;
  }
  open_bell(e);
  WEFT_DEBUG(FI_LOG_EP_CTRL, "shm: endpoint %s enabled (cma %d)", e.name.c_str(), e.cma);
  return 0;
}

void progress_hook(endpoint& e) noexcept {
  progress(ep::of(e));
}

bool arm_hook(endpoint& e) noexcept {
  return arm(ep::of(e));
}

void close(endpoint& base) noexcept {
  ep& e = ep::of(base);
  if (!e.enabled || !e.me.base) return;
  close_bell(e);
  progress(e);  // queued responses get a last chance
  e.me.hdr()->state.store(state_closed, std::memory_order_release);
  e.claim.reset();
}

void destroy(endpoint* e) noexcept {
  delete &ep::of(*e);
}

// ------------------------------------------------------------------ names
int copy_name(const std::string& name, void* addr, size_t* addrlen) noexcept {
  if (!addrlen) return -FI_EINVAL;
  std::string a = shm_address(name);
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

int cm_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  return guard([&]() -> int {
    ep& e = ep::of(*endpoint::of(f));
    std::lock_guard c(e.ctl);
    if (e.enabled) return -FI_EOPBADSTATE;
    std::string name = shm_name_of(addr, addrlen);
    if (name.empty()) return -FI_EINVAL;
    e.name = name;
    return 0;
  });
}

int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  return guard([&] { return copy_name(ep::of(ep_of(reinterpret_cast<fid_ep*>(f))).name, addr, addrlen); });
}

fi_ops_cm cm_ops = {sizeof(fi_ops_cm),
                    cm_setname,
                    cm_getname,
                    WEFT_NOSYS(fi_ops_cm, getpeer),
                    WEFT_NOSYS(fi_ops_cm, connect),
                    WEFT_NOSYS(fi_ops_cm, listen),
                    WEFT_NOSYS(fi_ops_cm, accept),
                    WEFT_NOSYS(fi_ops_cm, reject),
                    WEFT_NOSYS(fi_ops_cm, shutdown),
                    coll_join};  // fi_join_collective (util/coll.hpp)

// ------------------------------------------------------------------ scalable endpoints
struct sep_state {
  std::string name;
};
std::string& sep_name(sep& s) noexcept {
  return static_cast<sep_state*>(s.prov)->name;
}

endpoint* make_context(sep& s, bool transmit, int index, const fi_info* info, void* context) {
  const std::string& n = sep_name(s);
  std::string name = transmit     ? n + "#t" + std::to_string(index)
                     : index == 0 ? n
                                  : n + "#r" + std::to_string(index);
  return make_ep(*s.dom, info, context, transmit ? ep_role::tx_ctx : ep_role::rx_ctx, name).release();
}

int sep_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  return guard([&] { return copy_name(sep_name(*sep::of(f)), addr, addrlen); });
}

int sep_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  return guard([&]() -> int {
    sep* s = sep::of(f);
    if (!addr || !addrlen) return -FI_EINVAL;
    std::string name = shm_name_of(addr, addrlen);
    if (name.empty()) return -FI_EINVAL;
    std::lock_guard g(s->ctl);
    if (s->has_contexts()) return -FI_EOPBADSTATE;
    sep_name(*s) = name;
    return 0;
  });
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

void sep_destroy(void* state) noexcept {
  delete static_cast<sep_state*>(state);
}

const sep_transport sep_tops = {make_context, &sep_cm, sep_destroy};

}  // namespace

const ep_transport transport = {enable, progress_hook, close, destroy, &rx_answers, 0, arm_hook};

std::unique_ptr<ep> make_ep(domain& dom, const fi_info* info, void* context, ep_role role, std::string name) {
  auto e = std::make_unique<ep>();
  const config& cfg = shm_domain::of(dom).cfg;
  endpoint_init(*e, dom, info, context, role, &transport, cfg.inject_size);
  e->cfg = cfg;
  e->name = std::move(name);
  e->dgram = info->ep_attr && info->ep_attr->type == FI_EP_DGRAM;
  e->fid_.cm = &cm_ops;
  install_ops(*e, role);
  return e;
}

int shm_domain::scalable_ep(fi_info* info, fid_ep** out, void* context) {
  if (info && info->ep_attr && info->ep_attr->type == FI_EP_DGRAM) return -FI_EINVAL;  // RDM only
  auto state = std::make_unique<sep_state>();
  state->name = endpoint_name(info, "s");
  int ret = scalable_ep_open(dom, info, out, context, &sep_tops, state.get(), inject_max);
  if (ret == 0) state.release();  // the scalable endpoint owns it now (sep_destroy)
  return ret;
}

std::string part_name(endpoint& e) {
  return ep::of(e).name;
}
}  // namespace weft::shm

namespace weft {

// ------------------------------------------------------------------ as a part (shm_part.hpp)
template <>
endpoint* part<shm::part_tag>::open(domain& part_domain, const fi_info* info) {
  auto e = shm::make_ep(part_domain, info, nullptr, ep_role::endpoint, shm::endpoint_name(info, ""));
  part_domain.users_.add();
  return e.release();
}
template <>
ssize_t part<shm::part_tag>::rma(endpoint& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
                  const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx, uint64_t flags) noexcept {
  return shm::rma(shm::ep::of(e), write, iov, desc, count, addr, riov, rcount, data, ctx, flags);
}
template <>
ssize_t part<shm::part_tag>::atomic(endpoint& e, const atomic_call& call) noexcept {
  return shm::atomic(shm::ep::of(e), call);
}
template <>
size_t part<shm::part_tag>::atomic_max_count(atomic_form form, fi_datatype dt) noexcept {
  return shm::atomic_max_count(form, dt);
}
template <>
bool part<shm::part_tag>::busy(endpoint& e) noexcept {
  return shm::ops_outstanding(shm::ep::of(e));
}
template <>
void part<shm::part_tag>::progress(endpoint& e) noexcept {
  shm::progress(shm::ep::of(e));
}

template <>
uint64_t part<shm::part_tag>::round_gap_us(endpoint&) noexcept {
  return 0;  // a round is a few loads
}
template <>
part_probe part<shm::part_tag>::probe(endpoint&) noexcept {
  return {};  // gap 0: every round
}

}  // namespace weft
