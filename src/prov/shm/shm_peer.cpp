// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: peers — mapping the endpoints we send to, the senders we hear
// from (FI_SOURCE), and the cells we put into their queues.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "prov/shm/shm.hpp"
#include "util/peer_note.hpp"

namespace weft::shm {

namespace {

// Takes slot s of a peer table for the endpoint `name`: a free one
// (state 0), or one whose sender `dead` is gone (state 2). A dead sender's
// slot is taken with a CAS on its pid first, so two senders that found the
// same dead one cannot both take it (nor take it after one of them has).
bool take_slot(peer_slot& s, const std::string& name, int32_t dead) noexcept {
  uint32_t expect = dead ? 2u : 0u;
  const int32_t was = dead;
  if (dead && !s.pid.compare_exchange_strong(dead, -self_pid(), std::memory_order_acq_rel)) return false;
  if (!s.state.compare_exchange_strong(expect, 1, std::memory_order_acq_rel)) {
    if (was) s.pid.store(was, std::memory_order_relaxed);  // not ours after all (a broken table)
    return false;
  }
  s.pid.store(self_pid(), std::memory_order_relaxed);
  memset(s.name, 0, sizeof s.name);
  memcpy(s.name, name.c_str(), std::min(name.size(), name_max - 1));
  s.state.store(2, std::memory_order_release);
  return true;
}

// The process is gone (a zombie is not: its slot is taken once it is reaped).
// One system call: a full table is scanned with it before it grows.
bool gone(int32_t pid) noexcept {
  return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

// Makes the file of a region (fd) at least `bytes` long. The region is
// sealed against shrinking, so a racing grower that went further wins and a
// slower one cannot undo it.
bool grow_file(int fd, size_t bytes) noexcept {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  if (static_cast<size_t>(st.st_size) >= bytes) return true;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0) return true;
  return fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= bytes;
}

// Registers us in p's peer table (p.region's fd is still open): a free
// slot, else the slot of a sender that is gone, else a new chunk of slots
// (the memfd grows, then the header's count). False when the table is at
// peer_slots_max with every sender alive, or the file cannot grow.
bool register_with(ep& e, peer& p) noexcept {
  region_view r = p.view();
  peer_slot* slots = r.peers();
  const int fd = p.region.fd();
  std::atomic<uint32_t>& count = r.hdr()->peer_count;
  // Each round takes a slot or sees the table larger than the last one.
  for (uint32_t round = 0; round <= peer_slots_max / peer_chunk + 1; ++round) {
    uint32_t published = count.load(std::memory_order_acquire);
    const uint32_t n = region_table_slots(r, fd);
    for (uint32_t i = 0; i < n; ++i) {
      if (slots[i].state.load(std::memory_order_relaxed) == 0 && take_slot(slots[i], e.name, 0)) {
        p.slot = i;
        return true;
      }
    }
    for (uint32_t i = 0; i < n; ++i) {
      const int32_t pid = slots[i].pid.load(std::memory_order_relaxed);
      if (slots[i].state.load(std::memory_order_acquire) == 2 && gone(pid) && take_slot(slots[i], e.name, pid)) {
        p.slot = i;
        return true;
      }
    }
    if (n >= peer_slots_max) return false;
    const uint32_t want = std::min(n / peer_chunk * peer_chunk + peer_chunk, peer_slots_max);
    if (!grow_file(fd, region_table_bytes(want))) return false;
    if (published < want) count.compare_exchange_strong(published, want, std::memory_order_acq_rel);
  }
  return false;
}

// The holder of `name` does not speak weft's protocol: its error entries
// say so in words (util/peer_note.hpp), and the log once. `what` is the
// clause that says why.
[[gnu::cold, gnu::noinline]] reach spoke_foreign(ep& e, const std::string& base, int err,
                                                 const std::string& what) noexcept {
  try {
    const std::string text = peer_foreign_text(shm_address(base), what, err != EPROTO, proto_version);
    peer_note_log("shm", "shm>" + base + "/" + what, "shm: " + text);
    if (e.foreign.size() < static_cast<size_t>(peer_note_keys_max) || e.foreign.count(base))
      e.foreign[base] = ep::foreign_note{err, peer_note(text, 0)};
  } catch (...) {
    // No memory for the words: unreachable() still fails the send.
  }
  return reach::foreign;
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
    const std::string base = name.substr(0, name.find('#'));
    uint32_t version = 0;
    switch (open_region(name, p->region, &p->pid, &version)) {
      case found::yes:
        break;
      case found::absent: {
        // Not there yet, unless we talked to it before or its process is
        // gone, or it is another libfabric's (checked once per name).
        const int32_t owner = pid_of_name(base);
        const bool gone = it != e.by_name.end() || (owner && !pid_alive(owner));
        if (gone) return {nullptr, reach::gone};
        if (e.foreign.count(base)) return {nullptr, reach::foreign};
        if (std::string what = foreign_region(base); !what.empty())
          return {nullptr, spoke_foreign(e, base, EPROTO, what)};
        return {nullptr, reach::not_yet};
      }
      case found::refused:
        return {nullptr, reach::gone};
      case found::other_version:
        return {nullptr, spoke_foreign(e, base, FI_ENOPROTOOPT,
                                       "its region is weft's shm protocol version " + std::to_string(version))};
    }
    p->cma = p->view().hdr()->cma && e.cma;
    const bool registered = register_with(e, *p);
    p->region.close_fd();  // kept open for registering only
    if (!registered) return {nullptr, reach::gone};
    peer* raw = p.get();
    if (it != e.by_name.end()) e.retired.push_back(std::move(it->second));
    e.by_name[name] = std::move(p);
    for (auto& cached : e.by_index)
      if (cached && cached->name == name) cached = raw;
    e.last_peer = nullptr;  // it may be the one replaced
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
    if (p && peer_current(e, *p, addr)) return {p, reach::ok};
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
    case reach::foreign: {
      if (!e.av || !e.av->lookup(dest)) return -FI_EINVAL;
      ep::foreign_note f{EPROTO, 0};
      try {
        if (auto it = e.foreign.find(av_name(e, dest)); it != e.foreign.end()) f = it->second;
      } catch (...) {
      }
      tx_fail(e, context, cq_flags, op_flags, f.err, 0, f.note);
      return 0;
    }
    default:
      if (!e.av || !e.av->lookup(dest)) return -FI_EINVAL;
      tx_fail(e, context, cq_flags, op_flags, FI_EIO, 0);
      return 0;
  }
}

bool peer_slot_known(ep& e, uint32_t slot) noexcept {
  if (slot < e.peer_cap) return true;
  e.peer_cap = std::max(e.peer_cap, region_table_slots(e.me, e.region.fd()));
  return slot < e.peer_cap;
}

peer* sender_of(ep& e, uint32_t slot) noexcept {
  if (!peer_slot_known(e, slot)) return nullptr;
  peer_slot& s = e.me.peers()[slot];
  if (s.state.load(std::memory_order_acquire) != 2) return nullptr;
  char name[name_max];
  memcpy(name, s.name, name_max);
  name[name_max - 1] = 0;
  return peer_by_name(e, name).p;
}

fi_addr_t src_addr_slow(ep& e, uint32_t slot) noexcept {
  if (!e.av || !peer_slot_known(e, slot)) return FI_ADDR_NOTAVAIL;
  peer_slot& s = e.me.peers()[slot];
  const int32_t pid = s.pid.load(std::memory_order_relaxed);
  // This slot's cache entry: inline, in src_more (grown to the table's
  // size), or, with no memory to grow it, a local one (answered from the AV
  // each time).
  ep::src_entry none{};
  fi_addr_t* cached = &none.addr;
  int32_t* cached_pid = &none.pid;
  ep::src_seen* seen = &none.seen;
  if (slot < src_inline) {
    cached = &e.src_cache[slot];
    cached_pid = &e.src_pid[slot];
    seen = &e.src_seen_inline[slot];
  } else {
    const size_t i = slot - src_inline;
    try {
      if (i >= e.src_more.size()) e.src_more.resize(e.peer_cap - src_inline);
      cached = &e.src_more[i].addr;
      cached_pid = &e.src_more[i].pid;
      seen = &e.src_more[i].seen;
    } catch (...) {
      // No memory: the local entry, not kept.
    }
  }
  // Found before, for this process, and the AV entry still the one found
  // (not removed, not given to another address since).
  if (*cached != FI_ADDR_NOTAVAIL && *cached_pid == pid && av::word_now(seen->word) == seen->state)
    return *cached;
  *cached = FI_ADDR_NOTAVAIL;
  char addr[name_max + 16];
  memcpy(addr, shm_prefix, shm_prefix_len);
  size_t plen = shm_prefix_len;
  memcpy(addr + plen, s.name, name_max - 1);
  addr[plen + name_max - 1] = 0;
  // A context of a scalable endpoint ("name#t3") answers for the endpoint.
  if (char* hash = strchr(addr + plen, '#')) *hash = 0;
  size_t len = strlen(addr);
  size_t alen = len + 1;
  fi_addr_t a = e.av->find(addr, alen);
  if (a == FI_ADDR_NOTAVAIL) a = e.av->find(addr, alen = len);
  if (a == FI_ADDR_NOTAVAIL) return a;
  // The word first, then the address it stands for: an entry changed in
  // between (another thread's fi_av_remove / insert) is not cached.
  const uint32_t* word = e.av->entry_word(a);
  const uint32_t st = word ? av::word_now(word) : 0;
  size_t now_len = 0;
  const void* now = e.av->lookup(a, &now_len);
  if (!(st & 1) || !now || now_len != alen || memcmp(now, addr, alen) != 0) return FI_ADDR_NOTAVAIL;
  *cached = a;
  *cached_pid = pid;
  *seen = {word, st};
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
    ep_owing(e, true);  // our completions wait for it (util/cq.hpp, cq_hold)
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
