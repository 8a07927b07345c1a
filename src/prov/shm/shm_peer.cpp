// prov/shm: peers — mapping the endpoints we send to, the senders we hear
// from (FI_SOURCE), and the cells we put into their queues.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "prov/shm/shm.hpp"

namespace weft::shm {

namespace {

// Registers us in p's peer table; false when it is full.
bool register_with(ep& e, peer& p) noexcept {
  region_view r = p.view();
  peer_slot* slots = r.peers();
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < peer_slots; ++i) {
      peer_slot& s = slots[i];
      uint32_t expect = pass == 0 ? 0u : 2u;
      if (pass == 1 && pid_alive(s.pid)) continue;  // reclaim only slots of dead senders
      if (!s.state.compare_exchange_strong(expect, 1, std::memory_order_acq_rel)) continue;
      s.pid = getpid();
      memset(s.name, 0, sizeof s.name);
      memcpy(s.name, e.name.c_str(), std::min(e.name.size(), name_max - 1));
      s.state.store(2, std::memory_order_release);
      p.slot = i;
      return true;
    }
  }
  return false;
}

bool usable(const peer& p) noexcept {
  return !p.dead && p.view().hdr()->state.load(std::memory_order_acquire) == state_ready;
}

// The peer named `name`, mapped on first use (and again when the endpoint
// behind the name was replaced).
peer_ref peer_by_name(ep& e, const std::string& name) noexcept {
  auto it = e.by_name.find(name);
  if (it != e.by_name.end() && usable(*it->second)) return {it->second.get(), reach::ok};
  try {
    auto p = std::make_unique<peer>();
    p->name = name;
    switch (open_region(name, p->region, &p->pid)) {
      case found::yes:
        break;
      case found::absent: {
        // Not there yet, unless we talked to it before or its process is gone.
        const int32_t owner = pid_of_name(name.substr(0, name.find('#')));
        const bool gone = it != e.by_name.end() || (owner && !pid_alive(owner));
        return {nullptr, gone ? reach::gone : reach::not_yet};
      }
      case found::refused:
        return {nullptr, reach::gone};
    }
    p->cma = p->view().hdr()->cma && e.cma;
    if (!register_with(e, *p)) return {nullptr, reach::gone};
    peer* raw = p.get();
    if (it != e.by_name.end()) e.retired.push_back(std::move(it->second));
    e.by_name[name] = std::move(p);
    for (auto& cached : e.by_index)
      if (cached && cached->name == name) cached = raw;
    return {raw, reach::ok};
  } catch (...) {
    return {nullptr, reach::gone};
  }
}

// The endpoint name an AV entry holds ("" when there is none).
std::string av_name(ep& e, fi_addr_t addr) {
  size_t len = 0;
  const void* a = e.av->lookup(addr, &len);
  return a ? shm_name_of(a, len) : std::string{};
}

[[gnu::cold, gnu::noinline]] peer_ref peer_of_rx_ctx(ep& e, fi_addr_t addr, uint64_t rx) noexcept {
  try {
    std::string name = av_name(e, addr);
    if (name.empty()) return {nullptr, reach::not_in_av};
    return peer_by_name(e, name + "#r" + std::to_string(rx));
  } catch (...) {
    return {nullptr, reach::gone};
  }
}

// For the warning about a name nobody holds: the names on this host that
// differ from it only in the node part ("localhost:9228" and ":9228" are
// two names; fi_getinfo makes [node]:service the name as it is given).
std::string similar_names(std::string_view addr) {
  const std::string name(addr.substr(std::min(addr.size(), shm_prefix_len)));
  const size_t colon = name.rfind(':');
  if (colon == std::string::npos) return {};
  const std::string service = name.substr(colon);
  std::string out;
  for (const std::string& n : names_on_host())
    if (n != name && n.size() >= service.size() && n.compare(n.size() - service.size(), service.size(), service) == 0)
      out += (out.empty() ? "" : ", ") + shm_address(n);
  if (out.empty())
    return "No endpoint of this user on this host has a name ending in '" + service + "'.";
  return "Endpoints on this host whose names differ only in the node part: " + out +
         " (a name must match exactly; a server given no node is named ':service').";
}

// A send found no endpoint named as `dest`: -FI_EAGAIN, and once it has
// lasted a while, the warning (absent_peers).
[[gnu::cold, gnu::noinline]] void note_absent(ep& e, fi_addr_t dest) noexcept {
  note_absent(
      e, "shm", dest, [&] { return shm_address(av_name(e, dest)); },
      "each returned -FI_EAGAIN: nobody holds that name", similar_names);
}

}  // namespace

peer_ref peer_of_slow(ep& e, fi_addr_t addr) noexcept {
  if (!e.av) return {nullptr, reach::not_in_av};
  if (uint64_t rx = e.av->rx_index(addr)) [[unlikely]]
    return peer_of_rx_ctx(e, addr, rx);  // fi_rx_addr: receive context rx of a scalable endpoint
  uint64_t idx = e.av->index(addr);
  uint32_t gen = e.av->generation(addr);
  if (idx < e.by_index.size()) {
    peer* p = e.by_index[idx];
    if (p && p->av_gen == gen && !p->dead) return {p, reach::ok};
  }
  peer_ref ref;
  try {
    std::string name = av_name(e, addr);
    if (name.empty()) return {nullptr, reach::not_in_av};
    ref = peer_by_name(e, name);
  } catch (...) {
    return {nullptr, reach::gone};
  }
  if (!ref.p) return ref;
  ref.p->av_gen = gen;
  try {
    if (idx >= e.by_index.size()) e.by_index.resize(idx + 1, nullptr);
    e.by_index[idx] = ref.p;
  } catch (...) {
    // Not cached: the next send looks it up again.
  }
  return ref;
}

ssize_t unreachable(ep& e, fi_addr_t dest, reach why, void* context, uint64_t cq_flags,
                    uint64_t op_flags) noexcept {
  switch (why) {
    case reach::not_in_av:
      return -FI_EINVAL;
    case reach::not_yet:
      note_absent(e, dest);
      return -FI_EAGAIN;  // as libfabric: the peer has not enabled its endpoint yet
    default:
      if (!e.av || !e.av->lookup(dest)) return -FI_EINVAL;
      tx_fail(e, context, cq_flags, op_flags, FI_EIO, 0);
      return 0;
  }
}

peer* sender_of(ep& e, uint32_t slot) noexcept {
  if (slot >= peer_slots) return nullptr;
  peer_slot& s = e.me.peers()[slot];
  if (s.state.load(std::memory_order_acquire) != 2) return nullptr;
  char name[name_max];
  memcpy(name, s.name, name_max);
  name[name_max - 1] = 0;
  return peer_by_name(e, name).p;
}

fi_addr_t src_addr_slow(ep& e, uint32_t slot) noexcept {
  if (slot >= peer_slots || !e.av) return FI_ADDR_NOTAVAIL;
  peer_slot& s = e.me.peers()[slot];
  int32_t pid = s.pid;
  if (e.src_cache[slot] != FI_ADDR_NOTAVAIL && e.src_pid[slot] == pid) return e.src_cache[slot];
  char addr[name_max + 16];
  memcpy(addr, shm_prefix, shm_prefix_len);
  size_t plen = shm_prefix_len;
  memcpy(addr + plen, s.name, name_max - 1);
  addr[plen + name_max - 1] = 0;
  // A context of a scalable endpoint ("name#t3") answers for the endpoint.
  if (char* hash = strchr(addr + plen, '#')) *hash = 0;
  size_t len = strlen(addr);
  fi_addr_t a = e.av->find(addr, len + 1);
  if (a == FI_ADDR_NOTAVAIL) a = e.av->find(addr, len);
  if (a != FI_ADDR_NOTAVAIL) {
    e.src_cache[slot] = a;
    e.src_pid[slot] = pid;
  }
  return a;
}

cell* claim_to_slow(ep& e, peer& p) noexcept {
  progress(e);  // make room on our side: the peer may be waiting for us
  cell* c = queue_claim(p.view());
  if (c) c->h.src = static_cast<uint16_t>(p.slot);
  return c;
}

void abandon_cell(peer& p, cell* c) noexcept {
  c->h.opcode = op::nop;
  c->h.flags = 0;
  c->h.len = 0;
  queue_commit(p.view(), c);
}

void post_cell(peer& p, cell* c, const hdr_fields& h, const void* payload, size_t len) noexcept {
  c->h.opcode = h.opcode;
  c->h.atomic_op = h.atomic_op;
  c->h.datatype = h.datatype;
  c->h.src = static_cast<uint16_t>(p.slot);
  c->h.tag = h.tag;
  c->h.data = h.data;
  c->h.size = h.size;
  c->h.id = h.id;
  c->h.flags = static_cast<uint16_t>(h.flags);
  c->h.len = static_cast<uint32_t>(len);
  if (len) memcpy(c->payload, payload, len);
  queue_commit(p.view(), c);
}

bool send_cell(ep& e, peer& p, const hdr_fields& h, const void* payload, size_t len) noexcept {
  cell* c = e.backlog.empty() ? queue_claim(p.view()) : nullptr;
  if (c) {
    post_cell(p, c, h, payload, len);
    return true;
  }
  try {
    ep::pending_cell pc{&p, h, {}};
    pc.payload.assign(static_cast<const unsigned char*>(payload),
                      static_cast<const unsigned char*>(payload) + len);
    e.backlog.push_back(std::move(pc));
    return true;
  } catch (...) {
    return false;
  }
}

void send_ack(ep& e, uint32_t slot, uint64_t id, int err) noexcept {
  peer* p = sender_of(e, slot);
  if (!p) return;
  hdr_fields h{};
  h.opcode = op::ack;
  h.id = id;
  h.data = static_cast<uint64_t>(err);
  send_cell(e, *p, h, nullptr, 0);
}

}  // namespace weft::shm
