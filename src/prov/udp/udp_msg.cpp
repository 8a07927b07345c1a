// SPDX-License-Identifier: BSD-3-Clause
// prov/udp: messages. A send is one sendmsg (header + the caller's iovecs,
// straight from its buffers) and completes when the kernel took it; an
// arriving datagram is matched against the posted receives (util's
// matcher) and copied once, from the receive buffer into the receive.
//
// Return values: 0 when the datagram left (its completion is written at
// once), -FI_EAGAIN when the socket's send buffer is full, -FI_EMSGSIZE for
// a message larger than max_msg_size (or than the route carries unfragmented),
// -FI_EOPNOTSUPP for completion levels an unreliable endpoint cannot give,
// another -FI_E* when nothing was sent and retrying cannot help.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "prov/udp/udp.hpp"
#include "util/ep_ops.hpp"

namespace weft::udp {

namespace {

// unexpected::kind: the message came to a multicast group.
constexpr uint32_t ux_multicast = 1;

// The sender, as unexpected::peer: IPv4 address and port (host order).
uint64_t pack(const sockaddr_in& a) noexcept {
  return (static_cast<uint64_t>(ntohl(a.sin_addr.s_addr)) << 16) | ntohs(a.sin_port);
}
sockaddr_in unpack(uint64_t peer) noexcept {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(static_cast<uint32_t>(peer >> 16));
  a.sin_port = htons(static_cast<uint16_t>(peer));
  return a;
}

ssize_t send_error(int err) noexcept {
  switch (err) {
    case EAGAIN:
    case ENOBUFS:
    case EINTR:
      return -FI_EAGAIN;  // the socket's buffer is full for now
    case EMSGSIZE:
      return -FI_EMSGSIZE;  // the route's MTU is smaller than FI_UDP_MTU says
    default:
      return -err;  // no route, refused by a firewall, ...: libfabric's values are errno's
  }
}

// One datagram to `dest` (an AV entry, or with FI_MULTICAST a joined group).
template <bool Tagged>
inline ssize_t post(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, bool cq_data,
                    uint64_t data, bool multicast) noexcept {
  sockaddr_in to;
  if (multicast) [[unlikely]] {
    const mc* m = group_of(e, dest);
    if (!m) return -FI_EINVAL;
    to = m->group;
  } else {
    size_t len = 0;
    const void* a = e.av->lookup(dest, &len);
    if (!a || len != sizeof to) [[unlikely]]
      return -FI_EINVAL;
    memcpy(&to, a, sizeof to);
  }
  const header h = encode(Tagged, tag, cq_data, data);
  iovec v[iov_max + 1];
  v[0].iov_base = const_cast<header*>(&h);
  v[0].iov_len = sizeof h;
  for (size_t i = 0; i < count; ++i) v[i + 1] = iov[i];
  msghdr mh{};
  mh.msg_name = &to;
  mh.msg_namelen = sizeof to;
  mh.msg_iov = v;
  mh.msg_iovlen = count + 1;
  if (::sendmsg(e.sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) [[unlikely]]
    return send_error(errno);
  return 0;
}

constexpr uint64_t tx_cq_flags(bool tagged, bool multicast) noexcept {
  return FI_SEND | (tagged ? FI_TAGGED : FI_MSG) | (multicast ? FI_MULTICAST : 0);
}

template <bool Tagged>
ssize_t send(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data, void* context,
             uint64_t flags) noexcept {
  // Nothing comes back from the target: no completion can say it got there.
  if (flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE)) [[unlikely]]
    return -FI_EOPNOTSUPP;
  const size_t len = iov_total(iov, count);
  if (len > e.max_msg) [[unlikely]]
    return -FI_EMSGSIZE;
  const bool multicast = flags & FI_MULTICAST;
  ep_guard g(e);
  if (ssize_t ret = post<Tagged>(e, iov, count, dest, tag, flags & FI_REMOTE_CQ_DATA, data, multicast))
    return ret;
  tx_done(e, context, tx_cq_flags(Tagged, multicast), flags, len);
  return 0;
}

// fi_inject / fi_tinject: the same datagram, no completion.
template <bool Tagged>
ssize_t inject_small(ep& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
  const iovec v{const_cast<void*>(buf), len};
  const bool multicast = e.tx_op_flags & FI_MULTICAST;  // fi_endpoint(3): the default for every transfer
  ep_guard g(e);
  if (ssize_t ret = post<Tagged>(e, &v, 1, dest, tag, false, 0, multicast)) return ret;
  if (e.cntr_send) [[unlikely]]
    tx_done(e, nullptr, tx_cq_flags(Tagged, multicast), FI_INJECT | flag_no_cq, len);
  return 0;
}

// The transport as util/ep_ops.hpp sees it (messages and tagged messages only).
struct udp_transport {
  using ep = udp::ep;
  static constexpr size_t iov_max = udp::iov_max;
  static constexpr size_t inline_max = msg_size_ceiling;  // every inject: e.inject_size bounds it
  static constexpr uint64_t send_flags_extra = FI_MULTICAST;
  template <bool Tagged>
  static ssize_t send(ep& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
                      void* ctx, uint64_t flags) noexcept {
    return udp::send<Tagged>(e, iov, count, dest, tag, data, ctx, flags);
  }
  template <bool Tagged>
  static ssize_t inject_small(ep& e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept {
    return udp::inject_small<Tagged>(e, buf, len, dest, tag);
  }
};

// ------------------------------------------------------------------ the matcher's questions
fi_addr_t rx_source(endpoint& owner, uint64_t peer) noexcept {
  return source_of(ep::of(owner), unpack(peer));
}

int rx_deliver(endpoint& owner, posted_recv& r, const landing& l, unexpected& u, size_t n,
               uint64_t cq_flags) noexcept {
  if (n) iov_copy_to(l.iov, l.count, 0, u.bytes.data(), n);
  if (!(u.kind & ux_multicast)) return 0;
  // The matcher's completion would not say FI_MULTICAST: write it here.
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  if (owner.caps & FI_SOURCE) src = u.src != FI_ADDR_NOTAVAIL ? u.src : rx_source(owner, u.peer);
  rx_finish(owner, r, cq_flags | FI_MULTICAST, n, u.size, 0, l.buf, u.data, u.tag, src);
  return rx_pending;
}

bool rx_adopt(endpoint&, posted_recv&, unexpected&) noexcept {
  return false;  // every entry is complete: never asked
}

void rx_discard(endpoint&, unexpected&) noexcept {}  // nobody waits to hear

}  // namespace

const rx_transport rx_answers = {rx_deliver, rx_adopt, rx_discard, rx_source};

void arrive(ep& e, const message& m, const sockaddr_in& from, bool multicast) noexcept {
  // What the endpoint was not opened to receive is dropped.
  if (!(e.caps & FI_RECV) || !(e.caps & (m.tagged ? FI_TAGGED : FI_MSG))) [[unlikely]] {
    ++e.dropped;
    return;
  }
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  auto& list = posted_list(e, m.tagged);
  auto it = match_posted(e, m.tagged, m.tag, &src, [&] { return source_of(e, from); });
  if (it != list.end()) [[likely]] {
    if ((e.caps & FI_SOURCE) && src == FI_ADDR_NOTAVAIL) src = source_of(e, from);
    const posted_recv r = *it;
    const landing l = landing_of(r);
    const size_t n = std::min(m.len, l.room);
    iov_copy_to(l.iov, l.count, 0, m.payload, n);
    const uint64_t flags =
        recv_cq_flags(m.tagged, m.cq_data) | (multicast ? FI_MULTICAST : 0) | consume(e, list, it, n);
    rx_finish(e, r, flags, n, m.len, 0, l.buf, m.data, m.tag, (e.caps & FI_SOURCE) ? src : FI_ADDR_NOTAVAIL);
    return;
  }
  // Nobody waits for it yet: it waits within the matcher's bounds, past
  // which it is lost (a datagram endpoint gives no flow control).
  try {
    unexpected* u = ux_add(e, m.tagged, m.len);
    if (!u) {
      ++e.dropped;
      return;
    }
    u->peer = pack(from);
    u->src = src;
    u->tag = m.tag;
    u->data = m.data;
    u->remote_cq_data = m.cq_data;
    u->size = m.len;
    u->kind = multicast ? ux_multicast : 0;
    try {
      u->bytes.assign(m.payload, m.payload + m.len);
    } catch (...) {
      ux_drop(e, ux_list(e, m.tagged), ux_find(e, m.tagged, u));
      throw;
    }
  } catch (...) {
    ++e.dropped;  // no memory: lost
  }
}

void install_ops(endpoint& e) noexcept {
  e.fid_.msg = &ops<udp_transport>::msg;
  e.fid_.tagged = &ops<udp_transport>::tagged;
}

}  // namespace weft::udp
