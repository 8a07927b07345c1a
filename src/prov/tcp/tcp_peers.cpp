// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: connections per peer and the simultaneous-connect rule (see tcp_peers.hpp).
#include "prov/tcp/tcp_peers.hpp"

#include <rdma/fi_errno.h>

#include <cstring>

namespace weft::tcp {

bool peer_map::key::operator==(const key& o) const noexcept {
  return family == o.family && port == o.port && memcmp(addr, o.addr, sizeof addr) == 0;
}

size_t peer_map::key_hash::operator()(const key& k) const noexcept {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  auto mix = [&h](uint8_t b) { h = (h ^ b) * 0x100000001b3ull; };
  mix(k.family);
  mix(static_cast<uint8_t>(k.port));
  mix(static_cast<uint8_t>(k.port >> 8));
  for (uint8_t b : k.addr) mix(b);
  return static_cast<size_t>(h);
}

peer_map::key peer_map::key_of(const wire_addr& w) noexcept {
  key k;
  k.family = w.family;
  k.port = w.port;
  memcpy(k.addr, w.addr, sizeof k.addr);
  return k;
}

peer_map::key peer_map::key_of(const sock_addr& a) noexcept {
  return key_of(to_wire(a, 0));
}

peer_map::peer_map(poller& p, conn_owner& owner, std::shared_ptr<const conn_config> cfg) noexcept
    : poller_(p), owner_(owner), cfg_(std::move(cfg)) {}

peer_map::~peer_map() {
  for (auto& [k, p] : peers_)
    if (p.c) p.c->release();
}

conn* peer_map::find(const sock_addr& to) const noexcept {
  const auto it = peers_.find(key_of(to));
  return it == peers_.end() ? nullptr : it->second.c;
}

size_t peer_map::parked() const noexcept {
  size_t n = 0;
  for (const auto& [k, p] : peers_)
    for (tx_entry* e = p.parked_head; e; e = e->next) ++n;
  return n;
}

void peer_map::park(peer& p, tx_entry* list) noexcept {
  if (!list) return;
  if (p.parked_tail)
    p.parked_tail->next = list;
  else
    p.parked_head = list;
  tx_entry* t = list;
  while (t->next) t = t->next;
  p.parked_tail = t;
  if (!p.parked_deadline) p.parked_deadline = now_ns() + cfg_->handshake_bound_ns();
}

void peer_map::flush(peer& p) noexcept {
  tx_entry* e = p.parked_head;
  p.parked_head = p.parked_tail = nullptr;
  p.parked_deadline = 0;
  while (e) {
    tx_entry* next = e->next;
    e->next = nullptr;
    p.c->send(*e);  // the connection is not established yet: it queues
    e = next;
  }
}

int peer_map::send(const sock_addr& to, tx_entry& e) noexcept {
  peer* p;
  try {
    p = &peers_[key_of(to)];
  } catch (...) {
    return -FI_ENOMEM;
  }
  if (!p->c) {
    if (p->parked_head) {
      // Our connection lost a crossing: the peer's is on its way.
      e.next = nullptr;
      park(*p, &e);
      return 0;
    }
    conn* c = nullptr;
    if (int rc = poller_.connect(owner_, cfg_, to, nullptr, 0, &c)) return rc;
    p->c = c;
  }
  return p->c->send(e);
}

void peer_map::on_connreq(conn& c) noexcept {
  const wire_addr& id = c.peer().id;
  const wire_addr& self = cfg_->self;
  if (identity_cmp(id, self) == 0) {
    c.accept(nullptr, 0);  // ourselves: the receiving end of our own connection
    return;
  }
  peer* p;
  try {
    p = &peers_[key_of(id)];
  } catch (...) {
    c.reject(nullptr, 0, reject_reason::busy);
    return;
  }
  conn* old = p->c;
  if (!old) {
    p->c = &c;
    c.accept(nullptr, 0);
    flush(*p);
    return;
  }
  if (old->established()) {
    if (old->is_connector() && old->peer().id.instance == id.instance && identity_cmp(self, id) < 0) {
      // A crossing seen late (see tcp_peers.hpp): ours is the one kept.
      p->call_back_until = now_ns() + cfg_->handshake_bound_ns();
      ++late_crossings_;
      c.reject(nullptr, 0, reject_reason::crossed);
      return;
    }
    // The one we hold is stale (the peer restarted, or closed it and we
    // have not read the end yet). The new one replaces it.
    old->abort(-FI_ECONNRESET);
    p->c = &c;
    c.accept(nullptr, 0);
    return;
  }
  if (identity_cmp(self, id) > 0) {
    // Crossed, and we are the higher: keep theirs, move our queue onto it.
    tx_entry* q = old->take_unsent();
    old->release();
    p->c = &c;
    c.accept(nullptr, 0);
    park(*p, q);
    flush(*p);
    return;
  }
  // Crossed and we are the lower: ours is kept.
  c.reject(nullptr, 0, reject_reason::crossed);
}

void peer_map::on_closed(conn& c, int err) noexcept {
  (void)err;
  const key k = c.is_connector() ? key_of(c.peer().addr) : key_of(c.peer().id);
  auto it = peers_.find(k);
  if (it != peers_.end() && it->second.c == &c) {
    peer& p = it->second;
    p.c = nullptr;
    if (c.rejected() == reject_reason::crossed) park(p, c.take_unsent());
    if (p.call_back_until && c.is_connector() && now_ns() < p.call_back_until) {
      // We turned down its call because of this connection, which is gone
      // now: the peer waits for ours with its frames parked.
      p.call_back_until = 0;
      conn* n = nullptr;
      if (poller_.connect(owner_, cfg_, c.peer().addr, nullptr, 0, &n) == 0) p.c = n;
    }
    if (!p.c && !p.parked_head) peers_.erase(it);
  }
  c.release();
}

tx_entry* peer_map::expire(uint64_t now) noexcept {
  tx_entry* out = nullptr;
  for (auto it = peers_.begin(); it != peers_.end();) {
    peer& p = it->second;
    if (p.parked_head && now >= p.parked_deadline) {
      p.parked_tail->next = out;
      out = p.parked_head;
      p.parked_head = p.parked_tail = nullptr;
      p.parked_deadline = 0;
    }
    if (!p.c && !p.parked_head)
      it = peers_.erase(it);
    else
      ++it;
  }
  return out;
}

}  // namespace weft::tcp
