// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp: an RDM endpoint's connections, at most one per peer, opened on
// first use, and the rule that settles two peers connecting to each other
// at the same moment.
//
// The rule. Every endpoint has an identity (wire_addr: its listening
// address and a random instance number), sent in the handshake. When two
// connections between the same two endpoints exist at once, the one kept is
// the one opened by the endpoint with the LOWER identity (identity_cmp).
// Each side applies it when the other's connection request arrives (after
// the proofs), so both decide the same way without another message:
//   * the lower side, which still has its own connection opening, rejects
//     the incoming one with reject_reason::crossed;
//   * the higher side accepts the incoming one and moves the frames queued
//     on its own (never written: nothing is sent before a connection is
//     established) onto it, then drops its own;
//   * a higher side whose own connection is rejected as crossed before the
//     other's request arrived parks those frames until it arrives
//     (at most conn_config::handshake_bound_ns(); then they are handed back
//     to fail).
// A request that finds an established connection is one of two things.
//   * A crossing seen late: the connection is ours, the peer is the same
//     instance and we are the lower. The peer's request was sent before
//     ours reached it, and the peer (the higher) then kept ours; only the
//     handshake's last message was slow (delay, a lost segment). Ours stays;
//     the request is rejected as crossed. Should ours still turn out to be
//     gone at the peer (it dropped ours and called again), the peer parks
//     its frames for our call: when ours closes within that bound we call
//     back at once.
//   * Otherwise a replacement: the peer restarted (another instance), or it
//     closed the connection and we have not read the end yet. The old one is
//     aborted (-FI_ECONNRESET) and the new one accepted.
// A request from our own identity
// (an endpoint sending to itself) is accepted and kept apart: it only
// receives. Destroy the map before its poller.
//
// The owner (the endpoint) forwards its conn_owner callbacks on_connreq,
// on_connected and on_closed here and keeps handling frames itself.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "prov/tcp/tcp_conn.hpp"
#include "prov/tcp/tcp_progress.hpp"

namespace weft::tcp {

class peer_map {
public:
  peer_map(poller& p, conn_owner& owner, std::shared_ptr<const conn_config> cfg) noexcept;
  ~peer_map();  // releases every connection it holds (no callbacks)
  peer_map(const peer_map&) = delete;
  peer_map& operator=(const peer_map&) = delete;

  // Sends a frame to `to`, opening the connection on first use. Returns
  // what conn::send returns (1 written, 0 queued or parked: on_sent later)
  // or an error from opening the connection.
  int send(const sock_addr& to, tx_entry& e) noexcept;
  // The connection used to send to `to`, if any.
  conn* find(const sock_addr& to) const noexcept;

  // Forwarded callbacks. on_connreq accepts or rejects `c` by the rule.
  void on_connreq(conn& c) noexcept;
  // Forgets `c` (a crossed rejection parks its queue) and releases it.
  void on_closed(conn& c, int err) noexcept;

  // Parked frames whose wait is over, as a list (tx_entry::next) for the
  // owner to fail (-FI_ETIMEDOUT). Call now and then (from progress).
  tx_entry* expire(uint64_t now) noexcept;

  size_t size() const noexcept { return peers_.size(); }
  size_t parked() const noexcept;
  uint64_t late_crossings() const noexcept { return late_crossings_; }  // requests turned down as late crossings

private:
  struct key {
    uint8_t family = 0;
    uint16_t port = 0;
    uint8_t addr[16] = {};
    bool operator==(const key& o) const noexcept;
  };
  struct key_hash {
    size_t operator()(const key& k) const noexcept;
  };
  struct peer {
    conn* c = nullptr;  // the connection to send on
    tx_entry* parked_head = nullptr;
    tx_entry* parked_tail = nullptr;
    uint64_t parked_deadline = 0;
    uint64_t call_back_until = 0;  // we rejected its late crossing: call back if ours closes before
  };
  static key key_of(const wire_addr& w) noexcept;
  static key key_of(const sock_addr& a) noexcept;
  void flush(peer& p) noexcept;
  void park(peer& p, tx_entry* list) noexcept;

  poller& poller_;
  conn_owner& owner_;
  std::shared_ptr<const conn_config> cfg_;
  std::unordered_map<key, peer, key_hash> peers_;
  uint64_t late_crossings_ = 0;
};

}  // namespace weft::tcp
