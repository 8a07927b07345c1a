// SPDX-License-Identifier: BSD-3-Clause
// prov/lnx: the endpoint — two parts behind one fid_ep. Sends, RMA and
// atomics take one branch on the peer's path (decided at fi_av_insert) and
// go to the part's own data path; receives are the one matcher both parts
// feed; progress drives both parts (an idle tcp part when its ready watch
// says a socket woke, or once per the gap it names: polling it costs a
// system call, shm's costs a few loads).
#include <cstring>

#include "common/clock.hpp"
#include "core/info.hpp"
#include "core/log.hpp"
#include "prov/lnx/lnx.hpp"
#include "prov/shm/shm_part.hpp"
#include "prov/tcp/tcp_part.hpp"
#include "util/ep_ops.hpp"

namespace weft::lnx {

namespace {

constexpr size_t inject_max = std::min(shm::part_inject_max, tcp::part_inject_max);
// An idle tcp part (no connection being read eagerly) is polled when it
// says a socket woke (its io_uring completion queue's tail moved,
// tcp_progress.hpp) or something went hot, and otherwise at most once per
// the gap it names (tcp::part::round_gap_us: 1 ms while that watch is
// armed; without io_uring 20 us with connections open, 1 ms with none):
// its round is an epoll_wait system call (about 1 us on this VM), which
// every 256th round cost the shm part's 8-byte latency a third of its
// mean. What it says comes from the probe its last round left
// (part_probe: loads of words it and the kernel write, no call). The clock
// is read every idle_tcp_look_every rounds (26 ns a read here); a busy
// connection is polled every round.
constexpr uint32_t idle_tcp_look_every = 16;

// A round of the tcp part, and the probe it leaves.
void tcp_round(ep& e) noexcept {
  tcp::part::progress(*e.tcp);
  e.tcp_probe = tcp::part::probe(*e.tcp);
}

// FI_FENCE: a fenced operation waits for the earlier ones of both parts;
// the part it goes to checks its own, this checks the other.
[[gnu::cold]] bool other_part_busy(ep& e, bool local) noexcept {
  ep_guard g(e);
  if (local) {
    if (!tcp::part::busy(*e.tcp)) return false;
    tcp_round(e);
    return tcp::part::busy(*e.tcp);
  }
  if (!shm::part::busy(*e.shm)) return false;
  shm::part::progress(*e.shm);
  return shm::part::busy(*e.shm);
}

struct lnx_transport {
  using ep = lnx::ep;
  static constexpr size_t iov_max = 4;
  static constexpr size_t inline_max = inject_max;  // every inject: each part's own inject

  template <bool Tagged>
  static ssize_t send(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                      void* ctx, uint64_t flags) noexcept {
    const bool local = e.local(dest);
    if ((flags & FI_FENCE) && other_part_busy(e, local)) [[unlikely]]
      return -FI_EAGAIN;
    if (local) return shm::part::send<Tagged>(*e.shm, iov, count, dest, tag, data, ctx, flags);
    return tcp::part::send<Tagged>(*e.tcp, iov, count, dest, tag, data, ctx, flags);
  }
  template <bool Tagged>
  static ssize_t inject_small(ep& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
    if (e.local(dest)) [[likely]]
      return shm::part::inject<Tagged>(*e.shm, buf, len, dest, tag);
    return tcp::part::inject<Tagged>(*e.tcp, buf, len, dest, tag);
  }
  static ssize_t rma(ep& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
                     const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx,
                     uint64_t flags) noexcept {
    const bool local = e.local(addr);
    if ((flags & FI_FENCE) && other_part_busy(e, local)) [[unlikely]]
      return -FI_EAGAIN;
    if (local) return shm::part::rma(*e.shm, write, iov, desc, count, addr, riov, rcount, data, ctx, flags);
    return tcp::part::rma(*e.tcp, write, iov, desc, count, addr, riov, rcount, data, ctx, flags);
  }
  static size_t atomic_max_count(atomic_form form, fi_datatype dt) noexcept {
    return std::min(shm::part::atomic_max_count(form, dt), tcp::part::atomic_max_count(form, dt));
  }
  static ssize_t atomic(ep& e, const atomic_call& call) noexcept {
    const bool local = e.local(call.dest);
    if ((call.flags & FI_FENCE) && other_part_busy(e, local)) [[unlikely]]
      return -FI_EAGAIN;
    return local ? shm::part::atomic(*e.shm, call) : tcp::part::atomic(*e.tcp, call);
  }
};

// ------------------------------------------------------------------ the endpoint core's hooks
// Both parts take the whole's bindings, then enable; under ctl and the lock.
int enable(weft::endpoint& base) {
  ep& e = ep::of(base);
  mirrors m = lnx_domain::of(*e.dom).mirrors_of(*e.av);
  if (!m.shm) return -FI_EINVAL;  // an AV of another domain: bind refused it already
  if (!e.shm->av) endpoint_share(*e.shm, e, m.shm);
  if (!e.tcp->av) endpoint_share(*e.tcp, e, m.tcp);
  e.shm_av = m.shm;
  for (weft::endpoint* p : {e.shm, e.tcp}) {
    if (p->enabled) continue;
    if (int ret = p->tops->enable(*p)) return ret;
    p->enabled = true;
  }
  return 0;
}

// Whether the tcp part's round is due: every round while it is busy, or
// once its watch fired, else once per its gap (the clock read every
// idle_tcp_look_every rounds).
bool tcp_due(ep& e) noexcept {
  if (e.tcp_probe.due()) return true;
  if ((++e.rounds & (idle_tcp_look_every - 1)) != 0) return false;
  const uint64_t now = now_us();
  if (now - e.tcp_polled_us < e.tcp_probe.gap_us) return false;
  e.tcp_polled_us = now;
  return true;
}

// The tcp part's round, when it is due, comes before the shm part's: a
// round whose shm part takes a message then returns to its caller at once
// (the message's completion and the caller's answer wait for that return),
// instead of checking on tcp first.
void progress(weft::endpoint& base) noexcept {
  ep& e = ep::of(base);
  if (!e.enabled) [[unlikely]]
    return;
  if (tcp_due(e)) tcp_round(e);
  shm::part::progress(*e.shm);
}

// fi_trywait: both parts arm (each puts its own fds in the wait objects).
bool arm(weft::endpoint& base) noexcept {
  ep& e = ep::of(base);
  if (!e.enabled) return true;
  for (weft::endpoint* p : {e.shm, e.tcp})
    if (p->tops->arm && !p->tops->arm(*p)) return false;
  return true;
}

void close(weft::endpoint&) noexcept {
  // The parts close in destroy, with their own fi_close (they take the lock).
}

void destroy(weft::endpoint* base) noexcept {
  ep& e = ep::of(*base);
  for (weft::endpoint* p : {e.shm, e.tcp})
    if (p) fi_close(&p->fid_.fid);
  delete &e;
}

const ep_transport transport = {enable, progress, close, destroy, nullptr, 0, arm};

// ------------------------------------------------------------------ names
int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  return guard([&]() -> int {
    if (!addrlen) return -FI_EINVAL;
    ep& e = ep::of(ep_of(reinterpret_cast<fid_ep*>(f)));
    address a;
    a.host = lnx_domain::of(*e.dom).host;
    a.shm = shm::part_name(*e.shm);
    size_t len = sizeof a.tcp.ss;
    if (tcp::part_name(*e.tcp, &a.tcp.ss, &len) == 0 && len) a.tcp.len = static_cast<socklen_t>(len);
    const std::string s = format(a, true);
    if (s.empty()) return -FI_EINVAL;
    const size_t need = s.size() + 1, have = *addrlen;
    *addrlen = need;
    if (!addr || have < need) return -FI_ETOOSMALL;
    memcpy(addr, s.c_str(), need);
    return 0;
  });
}

fi_ops_cm cm_ops = {sizeof(fi_ops_cm),
                    WEFT_NOSYS(fi_ops_cm, setname),
                    cm_getname,
                    WEFT_NOSYS(fi_ops_cm, getpeer),
                    WEFT_NOSYS(fi_ops_cm, connect),
                    WEFT_NOSYS(fi_ops_cm, listen),
                    WEFT_NOSYS(fi_ops_cm, accept),
                    WEFT_NOSYS(fi_ops_cm, reject),
                    WEFT_NOSYS(fi_ops_cm, shutdown),
                    coll_join};  // fi_join_collective (util/coll.hpp)

// A part's fi_info: the part's template, with the whole's capabilities,
// sizes and flags and its part of the address.
info_ptr part_info(const domain& part, const fi_info& whole, uint64_t drop_caps) {
  info_ptr i(info_dup(part.info));
  if (!i) throw std::bad_alloc();
  i->caps = whole.caps & ~drop_caps;
  if (whole.tx_attr) {
    i->tx_attr->op_flags = whole.tx_attr->op_flags;
    i->tx_attr->inject_size = whole.tx_attr->inject_size;
  }
  if (whole.rx_attr) i->rx_attr->op_flags = whole.rx_attr->op_flags;
  if (whole.ep_attr && whole.ep_attr->auth_key_size && i->ep_attr) {
    free(i->ep_attr->auth_key);
    i->ep_attr->auth_key = static_cast<uint8_t*>(malloc(whole.ep_attr->auth_key_size));
    if (!i->ep_attr->auth_key) throw std::bad_alloc();
    memcpy(i->ep_attr->auth_key, whole.ep_attr->auth_key, whole.ep_attr->auth_key_size);
    i->ep_attr->auth_key_size = whole.ep_attr->auth_key_size;
  }
  free(i->src_addr);
  i->src_addr = nullptr;
  i->src_addrlen = 0;
  return i;
}

}  // namespace

size_t endpoint_inject_max() noexcept {
  return inject_max;
}

int endpoint_open(domain& dom, lnx_domain& ld, fi_info* info, fid_ep** out, void* context) {
  address a;
  if (info->src_addr && !parse(info->src_addr, info->src_addrlen, a)) return -FI_EINVAL;
  if (info->tx_attr && info->tx_attr->inject_size > inject_max) return -FI_EINVAL;
  std::unique_ptr<ep, void (*)(ep*)> e(new ep, [](ep* p) {
    info_free(p->info);  // a failed open: what ep_close would free
    destroy(p);
  });
  endpoint_init(*e, dom, info, context, ep_role::endpoint, &transport, inject_max);
  // shm: the name given, else one of its own ("l:<pid>.<n>"); tcp: the address given.
  info_ptr si = part_info(*ld.shm, *info, FI_REMOTE_COMM);
  const std::string shm_name = "fi_shm://" + (a.shm.empty() ? std::string("l") : a.shm);
  si->src_addr = dup_cstr(shm_name.c_str());
  si->src_addrlen = shm_name.size() + 1;
  info_ptr ti = part_info(*ld.tcp, *info, 0);
  if (a.tcp.family()) {
    ti->src_addr = malloc(a.tcp.len);
    if (!ti->src_addr) throw std::bad_alloc();
    memcpy(ti->src_addr, &a.tcp.ss, a.tcp.len);
    ti->src_addrlen = a.tcp.len;
  }
  e->shm = shm::part::open(*ld.shm, si.get());
  e->tcp = tcp::part::open(*ld.tcp, ti.get());
  e->fid_.cm = &cm_ops;
  ops<lnx_transport>::install(*e, ep_role::endpoint);
  dom.users_.add();
  *out = &e.release()->fid_;
  return 0;
}

}  // namespace weft::lnx
