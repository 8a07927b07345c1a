// SPDX-License-Identifier: BSD-3-Clause
// prov/udp: the endpoint's transport part — its socket (opened at fi_enable),
// progress (reading datagrams), names, multicast groups (fi_join), and the
// domain's fi_endpoint.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/log.hpp"
#include "prov/udp/udp.hpp"
#include "util/eq.hpp"
#include "util/rx.hpp"

namespace weft::udp {

namespace {

int set_int(int fd, int level, int name, int value) noexcept {
  return setsockopt(fd, level, name, &value, sizeof value) ? -errno : 0;
}

// A non-blocking datagram socket bound to `at` that never fragments what it
// sends (IP_PMTUDISC_DO: a datagram too large for the route fails with
// EMSGSIZE). `reuse`: several sockets may bind the address (multicast).
int open_socket(const sockaddr_in& at, bool reuse, int& out) noexcept {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int ret = set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
  if (!ret && reuse) ret = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
  if (!ret && ::bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at)) ret = -errno;
  if (ret) {
    ::close(fd);
    return ret;
  }
  out = fd;
  return 0;
}

int enable(endpoint& base) {
  ep& e = ep::of(base);
  e.stage.reset(new (std::nothrow) unsigned char[udp_payload_max]);
  if (!e.stage) return -FI_ENOMEM;
  const sockaddr_in at = e.named ? e.name : default_addr(nullptr);
  int fd = -1;
  if (int ret = open_socket(at, false, fd)) {
    WEFT_WARN(FI_LOG_EP_CTRL, "udp: cannot bind %s: %s", addr_str(at).c_str(), strerror(-ret));
    return ret;
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len)) {
    const int ret = -errno;
    ::close(fd);
    return ret;
  }
  if (bound.sin_addr.s_addr == htonl(INADDR_ANY)) {
    // Bound to every interface: peers are told the default one's address.
    const uint16_t port = bound.sin_port;
    bound = default_addr(nullptr);
    bound.sin_port = port;
  }
  sockaddr_in name;
  addr_from(&bound, sizeof bound, name);
  // Multicast leaves through the endpoint's own interface (loopback by
  // default), never through whatever the routing table prefers; and only a
  // group's own socket receives it (a socket bound to every interface would
  // otherwise get the datagrams of any group joined on this host at its port).
  int ret = setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &name.sin_addr, sizeof name.sin_addr) ? -errno : 0;
  if (!ret) ret = set_int(fd, IPPROTO_IP, IP_MULTICAST_ALL, 0);
  if (ret) {
    ::close(fd);
    return ret;
  }
  e.sock = fd;
  e.name = name;
  e.named = true;
  (void)ep_watch_fd(e, fd, true);
  WEFT_DEBUG(FI_LOG_EP_CTRL, "udp: endpoint enabled at %s, max_msg_size %zu", addr_str(e.name).c_str(),
             e.max_msg);
  return 0;
}

void progress_hook(endpoint& e) noexcept {
  progress(ep::of(e));
}

void close_hook(endpoint& base) noexcept {
  ep& e = ep::of(base);
  // Groups the application has not closed: the endpoint may close first
  // (fi_endpoint(3) gives -FI_EBUSY for a scalable endpoint's contexts
  // only). Each leaves its group now; its fid lives on until its fi_close.
  for (mc*& m : e.groups) {
    if (!m) continue;
    if (m->sock >= 0) {
      (void)ep_watch_fd(e, m->sock, false);
      ::close(m->sock);
      m->sock = -1;
    }
    m->owner = nullptr;
    m = nullptr;
  }
  if (e.sock < 0) return;
  (void)ep_watch_fd(e, e.sock, false);
  ::close(e.sock);
  e.sock = -1;
}

void destroy(endpoint* e) noexcept {
  delete &ep::of(*e);
}

const ep_transport transport = {enable, progress_hook, close_hook, destroy, &rx_answers, 0};

// Reads what waits on `fd` (at most recv_budget datagrams).
void drain(ep& e, int fd, bool multicast) noexcept {
  for (int i = 0; i < recv_budget; ++i) {
    sockaddr_in from{};
    iovec v{e.stage.get(), udp_payload_max};
    msghdr mh{};
    mh.msg_name = &from;
    mh.msg_namelen = sizeof from;
    mh.msg_iov = &v;
    mh.msg_iovlen = 1;
    const ssize_t n = ::recvmsg(fd, &mh, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      continue;  // EINTR, or an error queued by an ICMP message: the next one
    }
    message m;
    if ((mh.msg_flags & MSG_TRUNC) || mh.msg_namelen != sizeof from || from.sin_family != AF_INET ||
        !decode(e.stage.get(), static_cast<size_t>(n), m)) [[unlikely]] {
      ++e.malformed;
      continue;
    }
    arrive(e, m, from, multicast);
  }
}

// ------------------------------------------------------------------ names
int cm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  if (!addrlen) return -FI_EINVAL;
  ep& e = ep::of(ep_of(reinterpret_cast<fid_ep*>(f)));
  std::lock_guard c(e.ctl);
  if (!e.named) return -FI_EADDRNOTAVAIL;  // no address given and not enabled yet
  const size_t have = *addrlen;
  *addrlen = sizeof e.name;
  if (!addr || have < sizeof e.name) return -FI_ETOOSMALL;
  memcpy(addr, &e.name, sizeof e.name);
  return 0;
}

int cm_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  ep& e = ep::of(ep_of(reinterpret_cast<fid_ep*>(f)));
  std::lock_guard c(e.ctl);
  if (e.enabled) return -FI_EOPBADSTATE;
  sockaddr_in a;
  if (addr_from(addr, addrlen, a)) return -FI_EINVAL;
  e.name = a;
  e.named = true;
  return 0;
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
                    join};

// ------------------------------------------------------------------ multicast groups
int mc_close(fid* f) noexcept {
  mc* m = from_fid<mc>(f);
  if (!m->owner) {  // its endpoint closed first and left the group
    delete m;
    return 0;
  }
  ep& e = *m->owner;
  {
    std::lock_guard c(e.ctl);
    if (m->sock >= 0) (void)ep_watch_fd(e, m->sock, false);
    {
      ep_guard g(e);
      e.groups[m->slot] = nullptr;
    }
    if (m->sock >= 0) ::close(m->sock);  // leaves the group
    if (e.eq) eq_forget(e.eq, &m->fid_.fid);
  }
  delete m;
  return 0;
}

fi_ops mc_fi_ops = {sizeof(fi_ops),  mc_close,     fid_no_bind,   fid_no_control,
                    fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

// A receiving member's socket: bound to the group's address and port (so
// it sees only that group's datagrams), a member on the endpoint's
// interface.
int open_member(const ep& e, const sockaddr_in& group, int& out) noexcept {
  int fd = -1;
  if (int ret = open_socket(group, true, fd)) return ret;
  ip_mreq mreq{};
  mreq.imr_multiaddr = group.sin_addr;
  mreq.imr_interface = e.name.sin_addr;
  int ret = 0;
  if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq)) ret = -errno;
  if (!ret) ret = set_int(fd, IPPROTO_IP, IP_MULTICAST_ALL, 0);  // only the group it joined
  if (ret) {
    ::close(fd);
    return ret;
  }
  out = fd;
  return 0;
}

}  // namespace

int join(fid_ep* f, const void* addr, uint64_t flags, fid_mc** out, void* context) noexcept {
  return guard([&]() -> int {
    if (!f || !addr || !out) return -FI_EINVAL;
    if (!only(flags, FI_SEND | FI_RECV)) return -FI_EBADFLAGS;
    ep& e = ep::of(ep_of(f));
    if (!(e.caps & FI_MULTICAST)) return -FI_EOPNOTSUPP;  // not asked for at fi_getinfo
    // By default, as the endpoint's capabilities allow; FI_SEND / FI_RECV
    // restrict it, and must be among them.
    const uint64_t can = e.caps & (FI_SEND | FI_RECV);
    if (flags & ~can) return -FI_EINVAL;
    const uint64_t dir = flags ? flags : can;
    sockaddr_in group;
    if (addr_from(addr, sizeof group, group) || !IN_MULTICAST(ntohl(group.sin_addr.s_addr)) || !group.sin_port)
      return -FI_EINVAL;  // an IPv4 group address with a port
    std::lock_guard c(e.ctl);
    if (!e.enabled) return -FI_EOPBADSTATE;
    if (!e.eq) return -FI_ENOEQ;  // fi_join(3): the completion is an event
    for (mc* m : e.groups)
      if (m && m->group.sin_addr.s_addr == group.sin_addr.s_addr && m->group.sin_port == group.sin_port)
        return -FI_EALREADY;
    auto m = std::make_unique<mc>();
    m->fid_.fid.fclass = FI_CLASS_MC;
    m->fid_.fid.context = context;
    m->fid_.fid.ops = &mc_fi_ops;
    m->owner = &e;
    m->group = group;
    m->flags = dir;
    if ((dir & FI_RECV) && (e.caps & FI_RECV)) {
      if (int ret = open_member(e, group, m->sock)) {
        WEFT_WARN(FI_LOG_EP_CTRL, "udp: cannot join %s on %s: %s", addr_str(group).c_str(),
                  addr_str(e.name).c_str(), strerror(-ret));
        return ret;
      }
    }
    {
      ep_guard g(e);
      size_t slot = 0;
      while (slot < e.groups.size() && e.groups[slot]) ++slot;
      try {
        if (slot == e.groups.size()) e.groups.push_back(nullptr);
      } catch (...) {
        if (m->sock >= 0) ::close(m->sock);
        throw;
      }
      m->slot = slot;
      m->fid_.fi_addr = (static_cast<uint64_t>(e.next_gen++) << 32) | slot;
      e.groups[slot] = m.get();
    }
    if (m->sock >= 0) (void)ep_watch_fd(e, m->sock, true);
    fi_eq_entry ev{&m->fid_.fid, context, 0};
    if (eq_post(e.eq, FI_JOIN_COMPLETE, &ev, sizeof ev, 0) < 0)
      WEFT_WARN(FI_LOG_EP_CTRL, "udp: the join of %s could not be reported", addr_str(group).c_str());
    *out = &m.release()->fid_;
    return 0;
  });
}

mc* group_of(ep& e, fi_addr_t a) noexcept {
  const uint64_t slot = a & 0xffffffffu;
  if (slot >= e.groups.size()) return nullptr;
  mc* m = e.groups[slot];
  return m && m->fid_.fi_addr == a && (m->flags & FI_SEND) ? m : nullptr;
}

// ------------------------------------------------------------------ progress
void progress(ep& e) noexcept {
  if (!e.enabled || e.sock < 0) [[unlikely]]
    return;
  drain(e, e.sock, false);
  for (mc* m : e.groups)
    if (m && m->sock >= 0) [[unlikely]]
      drain(e, m->sock, true);
}

fi_addr_t source_of(ep& e, const sockaddr_in& from) noexcept {
  if (!e.av) return FI_ADDR_NOTAVAIL;
  const uint64_t key = (static_cast<uint64_t>(from.sin_addr.s_addr) << 16) | from.sin_port | (uint64_t{1} << 63);
  ep::src_entry& c = e.src_cache[(key ^ (key >> 16) ^ (key >> 37)) & 15];
  sockaddr_in a;
  addr_from(&from, sizeof from, a);
  if (c.key == key) {
    // Still the entry the AV holds at that index (it may have been removed).
    size_t len = 0;
    const void* p = e.av->lookup(c.addr, &len);
    if (p && len == sizeof a && !memcmp(p, &a, sizeof a)) return c.addr;
  }
  const fi_addr_t found = e.av->find(&a, sizeof a);
  if (found != FI_ADDR_NOTAVAIL) c = {key, found};
  return found;
}

// ------------------------------------------------------------------ the domain's part
int domain_part::endpoint(fi_info* info, fid_ep** out, void* context) {
  if (!info || !out) return -FI_EINVAL;
  if (info->fabric_attr && info->fabric_attr->prov_name && !names_provider(info->fabric_attr->prov_name, "udp"))
    return -FI_EINVAL;
  const fi_ep_attr* ea = info->ep_attr;
  if (ea && ea->type != FI_EP_DGRAM && ea->type != FI_EP_UNSPEC) return -FI_EINVAL;
  if (ea && (ea->tx_ctx_cnt > 1 || ea->rx_ctx_cnt > 1 || ea->max_msg_size > cfg.max_msg)) return -FI_EINVAL;
  if (info->tx_attr && (info->tx_attr->inject_size > cfg.max_msg ||
                        (info->tx_attr->op_flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE))))
    return -FI_EINVAL;  // nothing comes back from the target to tell
  sockaddr_in name{};
  const bool named = info->src_addr && info->src_addrlen;
  if (named && addr_from(info->src_addr, info->src_addrlen, name)) return -FI_EINVAL;
  auto e = std::make_unique<ep>();
  e->max_msg = ea && ea->max_msg_size ? ea->max_msg_size : cfg.max_msg;
  e->name = name;
  e->named = named;
  endpoint_init(*e, dom, info, context, ep_role::endpoint, &transport, e->max_msg);
  e->fid_.cm = &cm_ops;
  install_ops(*e);
  dom.users_.add();
  *out = &e.release()->fid_;
  return 0;
}

}  // namespace weft::udp
