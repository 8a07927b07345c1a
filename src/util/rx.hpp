// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The matcher's functions (data in util/matcher.hpp): what a transport calls
// when a message arrives, and the receive calls every provider shares.
#include <rdma/fi_tagged.h>

#include "common/iov.hpp"
#include "core/fabric2.hpp"
#include "util/ep.hpp"

namespace weft {

inline void recv_push(endpoint& e, recv_list& list, const posted_recv& r) {
  auto& spare = e.rx->free_recvs;
  if (spare.empty()) [[unlikely]] {
    list.push_back(r);
  } else {
    list.splice(list.end(), spare, spare.begin());
    list.back() = r;
  }
}
inline void recv_drop(endpoint& e, recv_list& list,
                      recv_list::iterator it) noexcept {
  e.rx->free_recvs.splice(e.rx->free_recvs.begin(), list, it);
}
inline recv_list& posted_list(endpoint& e, bool tagged) noexcept {
  return tagged ? e.rx->posted_tagged : e.rx->posted_msg;
}
inline std::list<unexpected>& ux_list(endpoint& e, bool tagged) noexcept {
  return tagged ? e.rx->ux_tagged : e.rx->ux_msg;
}

// Directed receives: FI_DIRECTED_RECV, or 2.x's FI_TAGGED_DIRECTED_RECV
// (tagged ones only: post_recv drops an untagged receive's source). An
// endpoint of a 1.x caller never has bit 45 (endpoint_init).
inline constexpr uint64_t directed_caps = FI_DIRECTED_RECV | FI_TAGGED_DIRECTED_RECV;

// The one matching rule: tags under the ignore mask, and for directed
// receives (directed_caps on `e`, the endpoint the message arrived on) the
// sender's AV entry.
inline bool recv_matches(const endpoint& e, const posted_recv& r, bool tagged, uint64_t tag,
                         fi_addr_t src) noexcept {
  if (tagged && ((r.tag ^ tag) & ~r.ignore)) return false;
  // The collective engine's messages are for its receives only.
  if (tagged && (tag & coll_tag_bit) && e.rx->coll && !(r.flags & flag_coll)) [[unlikely]]
    return false;
  if (r.src == FI_ADDR_UNSPEC || !(e.caps & directed_caps)) return true;
  return src != FI_ADDR_NOTAVAIL && e.av->index(src) == e.av->index(r.src);
}
inline bool needs_source(const endpoint& e) noexcept {
  return e.caps & directed_caps;
}

// The first posted receive an arriving message matches, or end(). *src is
// the sender when known; resolve() gives it (called once, only when a
// directed receive needs it) and the result is stored in *src.
template <class Resolve>
inline recv_list::iterator match_posted(endpoint& e, bool tagged, uint64_t tag, fi_addr_t* src,
                                                     Resolve&& resolve) {
  auto& list = posted_list(e, tagged);
  if (needs_source(e) && *src == FI_ADDR_NOTAVAIL) *src = resolve();
  for (auto it = list.begin(); it != list.end(); ++it)
    if (recv_matches(e, *it, tagged, tag, *src)) return it;
  return list.end();
}

// The completion flags of a received message.
inline uint64_t recv_cq_flags(bool tagged, bool remote_cq_data) noexcept {
  return FI_RECV | (tagged ? FI_TAGGED : FI_MSG) | (remote_cq_data ? FI_REMOTE_CQ_DATA : 0);
}

// After `used` bytes of a message landed in posted receive `it`: consume
// it, or for a multi-receive buffer advance and release it once too little
// is left. Returns FI_MULTI_RECV when the buffer was released (for the
// message's completion flags), else 0.
inline uint64_t consume(endpoint& e, recv_list& list, recv_list::iterator it,
                        size_t used) noexcept {
  if (!(it->flags & FI_MULTI_RECV)) {
    recv_drop(e, list, it);
    return 0;
  }
  it->multi_off += used;
  if (it->iov[0].iov_len - it->multi_off >= e.rx->min_multi_recv) return 0;
  recv_drop(e, list, it);
  return FI_MULTI_RECV;
}
// The same for a receive taken off the list earlier (a message that arrived
// in pieces): what remains of a multi-receive buffer goes back on the list.
uint64_t consume_taken(endpoint& e, const posted_recv& r, size_t used);

// Parks a message nobody waits for yet: a new entry at the tail of the
// unexpected queue, owned by e, or nullptr when the bounds are reached
// (the transport leaves the message where it is and retries later).
unexpected* ux_add(endpoint& e, bool tagged, size_t bytes);
void ux_drop(endpoint& e, std::list<unexpected>& list, std::list<unexpected>::iterator it) noexcept;
// The entry `u` points to, in its list (after an incomplete one completed).
std::list<unexpected>::iterator ux_find(endpoint& e, bool tagged, const unexpected* u) noexcept;

// Posts a receive (every fi_recv/fi_trecv variant ends here, after the
// entry points validated flags). Unexpected messages that match are
// delivered at once through their transports. Returns 0 or -FI_E*.
template <bool Tagged>
ssize_t post_recv(endpoint& e, const iovec* iov, size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
                  void* context, uint64_t flags) noexcept;
ssize_t post_recv_slow(endpoint& e, const posted_recv& r) noexcept;

template <bool Tagged>
inline ssize_t post_recv(endpoint& e, const iovec* iov, size_t count, fi_addr_t src, uint64_t tag,
                         uint64_t ignore, void* context, uint64_t flags) noexcept {
  if (!e.enabled) [[unlikely]]
    return -FI_EOPBADSTATE;
  if (count > recv_iov_max || (count && !iov) || !iov_valid(iov, count)) [[unlikely]]
    return -FI_EINVAL;
  if ((flags & FI_MULTI_RECV) && (count != 1 || Tagged)) [[unlikely]]
    return -FI_EINVAL;
  // The source address only matters for directed receives; with 2.x's
  // FI_EXACT_DIRECTED_RECV a receive must name one.
  if (!(e.caps & (Tagged ? directed_caps : FI_DIRECTED_RECV)))
    src = FI_ADDR_UNSPEC;
  else if (src == FI_ADDR_UNSPEC && (e.caps & FI_EXACT_DIRECTED_RECV)) [[unlikely]]
    return -FI_EINVAL;
  if (src != FI_ADDR_UNSPEC && e.av) [[unlikely]] {
    size_t len = 0;
    if (!e.av->lookup(src, &len)) return -FI_EINVAL;
    if (!len) src = FI_ADDR_UNSPEC;  // an "any" entry (fi_av_insert of NULL): every sender
  }
  ep_guard g(e);
  auto& ux = ux_list(e, Tagged);
  auto& spare = e.rx->free_recvs;
  // Hot path: nothing unexpected is waiting, a spare node exists: fill it in
  // place at the tail of the posted list.
  if (ux.empty() && !spare.empty() && !(flags & (FI_PEEK | FI_CLAIM))) [[likely]] {
    auto& list = posted_list(e, Tagged);
    list.splice(list.end(), spare, spare.begin());
    posted_recv& n = list.back();
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) {
      n.iov[i] = iov[i];
      total += iov[i].iov_len;
    }
    n.iov_count = count;
    n.total = total;
    n.src = src;
    n.tag = tag;
    n.ignore = ignore;
    n.context = context;
    n.flags = flags;
    n.tagged = Tagged;
    n.multi_off = 0;
    return 0;
  }
  posted_recv r;
  for (size_t i = 0; i < count; ++i) r.iov[i] = iov[i];
  r.iov_count = count;
  r.total = iov_total(iov, count);
  r.src = src;
  r.tag = tag;
  r.ignore = ignore;
  r.context = context;
  r.flags = flags;
  r.tagged = Tagged;
  return post_recv_slow(e, r);
}

// The receive entry points of every provider (fi_recv, fi_trecv and their
// v/msg forms), and the tables of objects that only receive (receive
// contexts, shared receive contexts).
ssize_t msg_recv(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t src, void* ctx) noexcept;
ssize_t msg_recvv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src, void* ctx) noexcept;
ssize_t msg_recvmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept;
ssize_t tag_recv(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t tag, uint64_t ignore,
                 void* ctx) noexcept;
ssize_t tag_recvv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src, uint64_t tag,
                  uint64_t ignore, void* ctx) noexcept;
ssize_t tag_recvmsg(fid_ep* f, const fi_msg_tagged* msg, uint64_t flags) noexcept;
extern fi_ops_msg msg_rx;
extern fi_ops_tagged tagged_rx;

// fi_cancel of a posted receive: an FI_ECANCELED entry. 0 or -FI_ENOENT.
ssize_t cancel_recv(endpoint& e, void* context) noexcept;

}  // namespace weft
