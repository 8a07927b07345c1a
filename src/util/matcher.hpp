// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The receive side's data: posted receives and unexpected messages.
//
// One matcher serves every transport (the shape of libfabric's util_srx,
// man fi_peer): a transport asks it for the receive an arriving message
// matches (match_posted), parks a message nobody waits for yet (ux_add),
// and answers when a receive posted later matches a parked message
// (rx_transport::deliver / adopt / discard). Queues, tags with ignore bits,
// directed receives, FI_PEEK/FI_CLAIM/FI_DISCARD and multi-receive buffers
// live here only. Each unexpected entry names the endpoint it arrived on, so
// a shared receive context (or a provider over two transports) can feed one
// set of queues from several endpoints. Functions: util/rx.hpp.
#include <rdma/fabric.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <vector>

#include "common/node_list.hpp"

namespace weft {

struct endpoint;

inline constexpr size_t recv_iov_max = 4;  // iov_limit of every weft provider

// A posted receive.
struct posted_recv {
  iovec iov[recv_iov_max] = {};
  size_t iov_count = 0;
  size_t total = 0;
  fi_addr_t src = FI_ADDR_UNSPEC;
  uint64_t tag = 0;
  uint64_t ignore = 0;
  void* context = nullptr;
  uint64_t flags = 0;  // FI_COMPLETION, FI_MULTI_RECV, ...
  bool tagged = false;
  size_t multi_off = 0;  // FI_MULTI_RECV: bytes consumed so far
};

// Where the next message lands in a posted receive: the whole buffer, or the
// unused tail of a multi-receive buffer.
struct landing {
  iovec iov[recv_iov_max];
  size_t count;
  size_t room;
  void* buf;  // the completion's buf (multi-receive only)
};

inline landing landing_of(const posted_recv& r) noexcept {
  landing l{};
  if (r.flags & FI_MULTI_RECV) {
    l.iov[0].iov_base = static_cast<unsigned char*>(r.iov[0].iov_base) + r.multi_off;
    l.iov[0].iov_len = r.iov[0].iov_len - r.multi_off;
    l.count = 1;
    l.room = l.iov[0].iov_len;
    l.buf = l.iov[0].iov_base;
  } else {
    memcpy(l.iov, r.iov, sizeof l.iov);
    l.count = r.iov_count;
    l.room = r.total;
    l.buf = nullptr;
  }
  return l;
}

// A message that arrived before its receive.
struct unexpected {
  endpoint* owner = nullptr;         // the endpoint it arrived on
  uint64_t peer = 0;                 // the transport's name for the sender
  fi_addr_t src = FI_ADDR_NOTAVAIL;  // the sender, once known (else ask rx_transport::source)
  uint64_t tag = 0;
  uint64_t data = 0;
  uint64_t size = 0;  // the whole message
  uint64_t id = 0;    // the sender's id for it (acks)
  bool remote_cq_data = false;
  bool complete = true;  // all bytes present (else still arriving: adopt)
  bool claimed = false;  // FI_CLAIM'd by a peek
  uint32_t kind = 0;     // the transport's kind of entry
  void* claim_context = nullptr;
  std::vector<unsigned char> bytes;  // buffered payload (bytes_held counts toward the bound)
  size_t filled = 0;
  size_t bytes_held = 0;
  alignas(8) unsigned char desc[96] = {};  // the transport's descriptor (where the data is)
};

// Posted receives, in lists whose nodes move between lists by relinking
// (common/node_list.hpp): no allocation once warm, no call per move.
using recv_list = node_list<posted_recv>;

// Posted and unexpected queues: an endpoint's own, or a shared receive
// context's. Posted receives move between lists by splicing: no allocation
// once warm.
struct rx_queues {
  recv_list posted_msg, posted_tagged;
  recv_list free_recvs;  // spare nodes
  std::list<unexpected> ux_msg, ux_tagged;
  size_t ux_count = 0;
  size_t ux_bytes = 0;
  // FI_OPT_MIN_MULTI_RECV of the receives posted to these queues.
  size_t min_multi_recv = 64;
  // A collective engine posts receives here: messages in its tag space
  // (util/coll.hpp) match its receives only.
  bool coll = false;
};

// Bounds on what waits unexpected: past them the transport leaves arriving
// messages where they are (flow control), never drops them.
inline constexpr size_t ux_max_count = 4096;
inline constexpr size_t ux_max_bytes = size_t{256} << 20;

// A transport's answers about the unexpected messages it parked.
inline constexpr int rx_pending = -1;  // deliver: the transport completes the receive later
struct rx_transport {
  // Moves the first n bytes of complete message u into l, acknowledges it
  // to the sender as the protocol requires, and returns 0 or a positive
  // FI_E* code (the matcher then writes the completion), or rx_pending when
  // the data moves later: the transport then calls rx_finish itself with
  // cq_flags.
  int (*deliver)(endpoint& owner, posted_recv& r, const landing& l, unexpected& u, size_t n,
                 uint64_t cq_flags) noexcept;
  // u is still arriving: the transport takes receive r over (r whole; with
  // FI_MULTI_RECV it posts what remains back when done) and forgets u; it
  // returns false when u will never complete (its sender is gone): the
  // matcher drops u and goes on.
  bool (*adopt)(endpoint& owner, posted_recv& r, unexpected& u) noexcept;
  // u is dropped unread (FI_DISCARD): tell the sender it was delivered.
  void (*discard)(endpoint& owner, unexpected& u) noexcept;
  // The sender `peer` as an fi_addr_t of owner's AV (FI_ADDR_NOTAVAIL).
  fi_addr_t (*source)(endpoint& owner, uint64_t peer) noexcept;
};

}  // namespace weft
