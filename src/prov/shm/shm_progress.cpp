// prov/shm: peers, completions, and progress — draining our receive queue.
#include <unistd.h>

#include <bit>

#include <cstring>

#include "core/log.hpp"
#include "prov/shm/shm_ep.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"

namespace weft::shm {

// ------------------------------------------------------------------ iov helpers
size_t iov_total(const iovec* iov, size_t count) noexcept {
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

size_t iov_copy_to(const iovec* iov, size_t count, size_t offset, const void* src, size_t len) noexcept {
  size_t done = 0;
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count && done < len; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min(iov[i].iov_len - offset, len - done);
    memcpy(static_cast<unsigned char*>(iov[i].iov_base) + offset, s + done, n);
    done += n;
    offset = 0;
  }
  return done;
}

size_t iov_copy_from(const iovec* iov, size_t count, size_t offset, void* dst, size_t len) noexcept {
  size_t done = 0;
  auto* d = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < count && done < len; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    size_t n = std::min(iov[i].iov_len - offset, len - done);
    memcpy(d + done, static_cast<const unsigned char*>(iov[i].iov_base) + offset, n);
    done += n;
    offset = 0;
  }
  return done;
}

// ------------------------------------------------------------------ peers
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

}  // namespace

peer* peer_by_name(ep& e, const std::string& name) noexcept {
  auto it = e.by_name.find(name);
  if (it != e.by_name.end()) {
    peer* p = it->second.get();
    // A peer that went away and came back under the same name is re-mapped.
    if (p->view().hdr()->state.load(std::memory_order_acquire) != state_closed && !p->dead) return p;
  }
  try {
    auto p = std::make_unique<peer>();
    p->name = name;
    if (!p->region.open(region_file(name), region_size)) return nullptr;
    region_hdr* h = p->view().hdr();
    if (h->magic != region_magic || h->version != proto_version ||
        h->state.load(std::memory_order_acquire) != state_ready)
      return nullptr;
    p->pid = h->pid;
    if (!pid_alive(p->pid)) return nullptr;  // a region left by a dead process
    p->cma = h->cma && e.cma;
    if (!register_with(e, *p)) return nullptr;
    peer* raw = p.get();
    if (it != e.by_name.end()) e.retired.push_back(std::move(it->second));
    e.by_name[name] = std::move(p);
    for (auto& cached : e.by_index)
      if (cached && cached->name == name) cached = raw;
    return raw;
  } catch (...) {
    return nullptr;
  }
}

// The endpoint name an AV entry holds ("" when there is none).
std::string av_name(ep& e, fi_addr_t addr) {
  size_t len = 0;
  const void* a = e.av->lookup(addr, &len);
  return a ? shm_name_of(a, len) : std::string{};
}

[[gnu::cold, gnu::noinline]] peer* peer_of_rx_ctx(ep& e, fi_addr_t addr, uint64_t rx) noexcept {
  try {
    std::string name = av_name(e, addr);
    return name.empty() ? nullptr : peer_by_name(e, name + "#r" + std::to_string(rx));
  } catch (...) {
    return nullptr;
  }
}

peer* peer_of_slow(ep& e, fi_addr_t addr) noexcept {
  if (!e.av) return nullptr;
  if (uint64_t rx = e.av->rx_index(addr)) [[unlikely]]
    return peer_of_rx_ctx(e, addr, rx);  // fi_rx_addr: receive context rx of a scalable endpoint
  uint64_t idx = e.av->index(addr);
  uint32_t gen = e.av->generation(addr);
  if (idx < e.by_index.size()) {
    peer* p = e.by_index[idx];
    if (p && p->av_gen == gen && !p->dead) return p;
  }
  peer* p;
  try {
    std::string name = av_name(e, addr);
    p = name.empty() ? nullptr : peer_by_name(e, name);
  } catch (...) {
    return nullptr;
  }
  if (!p) return nullptr;
  p->av_gen = gen;
  try {
    if (idx >= e.by_index.size()) e.by_index.resize(idx + 1, nullptr);
  } catch (...) {
    return p;
  }
  e.by_index[idx] = p;
  return p;
}

peer* sender_of(ep& e, uint32_t slot) noexcept {
  if (slot >= peer_slots) return nullptr;
  peer_slot& s = e.me.peers()[slot];
  if (s.state.load(std::memory_order_acquire) != 2) return nullptr;
  char name[name_max];
  memcpy(name, s.name, name_max);
  name[name_max - 1] = 0;
  return peer_by_name(e, name);
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

[[gnu::noinline]] uint32_t arm_split(ep& e, uint32_t* gen) noexcept {
  uint32_t s = static_cast<uint32_t>(std::countr_one(e.split_busy));
  uint32_t g = (++e.split_gen[s]) & 0x1fffffff;
  if (!g) g = e.split_gen[s] = 1;
  e.me.splits()[s].word.store(split_word(g, split_armed), std::memory_order_release);
  e.split_busy |= uint64_t{1} << s;
  *gen = g;
  return s;
}

cell* claim_to_slow(ep& e, peer& p) noexcept {
  progress(e);  // make room on our side: the peer may be waiting for us
  cell* c = queue_claim(p.view());
  if (c) c->h.src = static_cast<uint16_t>(p.slot);
  return c;
}

void fill_src(ep&, peer& p, cell* c) noexcept {
  c->h.src = p.slot;
}

namespace {
// Fills a claimed cell of p's queue from h and the payload, and commits it.
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
}  // namespace

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

request* new_request(ep& e) noexcept {
  try {
    auto r = std::make_unique<request>();
    r->id = e.next_id++;
    request* raw = r.get();
    e.pending.emplace(raw->id, std::move(r));
    return raw;
  } catch (...) {
    return nullptr;
  }
}

void finish_request(ep& e, uint64_t id) noexcept {
  e.outgoing.remove_if([id](request* r) { return r->id == id; });
  e.pending.erase(id);
}

// ------------------------------------------------------------------ completions
namespace {
fid_cntr* tx_counter(ep& e, uint64_t cq_flags) noexcept {
  if (cq_flags & FI_READ) return e.cntr_read;
  if (cq_flags & FI_WRITE) return e.cntr_write;
  if (cq_flags & FI_ATOMIC) return (cq_flags & FI_READ) ? e.cntr_read : e.cntr_write;
  return e.cntr_send;
}
}  // namespace

void tx_done(ep& e, void* context, uint64_t cq_flags, uint64_t op_flags, size_t len) noexcept {
  if (e.tx_cq && (!e.tx_selective || (op_flags & FI_COMPLETION)) && !(op_flags & flag_no_cq))
    cq_write(e.tx_cq, context, cq_flags, 0, nullptr, 0, 0);
  (void)len;
  if (fid_cntr* c = tx_counter(e, cq_flags)) cntr_inc(c);
}

void tx_fail(ep& e, void* context, uint64_t cq_flags, uint64_t op_flags, int err, size_t len) noexcept {
  (void)op_flags;
  if (e.tx_cq) {
    fi_cq_err_entry ee{};
    ee.op_context = context;
    ee.flags = cq_flags;
    ee.len = len;
    ee.err = err;
    ee.prov_errno = -err;
    cq_write_error(e.tx_cq, ee);
  }
  if (fid_cntr* c = tx_counter(e, cq_flags)) cntr_err_inc(c);
}

void rx_done(ep& e, const posted_recv& r, uint64_t cq_flags, size_t len, void* buf, uint64_t data,
             uint64_t tag, fi_addr_t src) noexcept {
  if (e.rx_cq && (!e.rx_selective || (r.flags & FI_COMPLETION)))
    cq_write(e.rx_cq, r.context, cq_flags, len, buf, data, tag, src);
  if (e.cntr_recv) cntr_inc(e.cntr_recv);
}

void rx_fail(ep& e, const posted_recv& r, uint64_t cq_flags, int err, size_t len, size_t olen, uint64_t data,
             uint64_t tag, fi_addr_t src) noexcept {
  if (e.rx_cq) {
    fi_cq_err_entry ee{};
    ee.op_context = r.context;
    ee.flags = cq_flags;
    ee.len = len;
    ee.data = data;
    ee.tag = tag;
    ee.olen = olen;
    ee.err = err;
    ee.prov_errno = -err;
    cq_write_error(e.rx_cq, ee, src);
  }
  if (e.cntr_recv) cntr_err_inc(e.cntr_recv);
}

// ------------------------------------------------------------------ receive side
namespace {

constexpr size_t ux_max_count = 4096;
constexpr size_t ux_max_bytes = size_t{256} << 20;

bool addr_match(ep& e, fi_addr_t want, fi_addr_t have) noexcept {
  if (want == FI_ADDR_UNSPEC || !(e.caps & FI_DIRECTED_RECV)) return true;
  if (have == FI_ADDR_NOTAVAIL) return false;
  return e.av->index(want) == e.av->index(have);
}

bool recv_matches(ep& e, const posted_recv& r, bool tagged, uint64_t tag, fi_addr_t src) noexcept {
  if (tagged && ((r.tag ^ tag) & ~r.ignore)) return false;
  return addr_match(e, r.src, src);
}

std::list<posted_recv>::iterator find_recv(ep& e, bool tagged, uint64_t tag, uint32_t slot, fi_addr_t* src) {
  auto& list = tagged ? e.rx->posted_tagged : e.rx->posted_msg;
  bool need_src = (e.caps & FI_DIRECTED_RECV);
  if (need_src && *src == FI_ADDR_NOTAVAIL) *src = src_addr_of(e, slot);
  for (auto it = list.begin(); it != list.end(); ++it)
    if (recv_matches(e, *it, tagged, tag, *src)) return it;
  return list.end();
}

uint64_t recv_flags(bool tagged, uint32_t cell_flags) {
  return FI_RECV | (tagged ? FI_TAGGED : FI_MSG) |
         ((cell_flags & flag_remote_cq_data) ? FI_REMOTE_CQ_DATA : 0);
}

// Where the next message lands in a posted receive: the whole buffer, or the
// unused tail of a multi-receive buffer.
struct landing {
  iovec iov[iov_max];
  size_t count;
  size_t room;
  void* buf;  // completion's buf (multi-receive only)
};

landing landing_of(const posted_recv& r) {
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

// After a message landed in `it`: consume the receive, or for a
// multi-receive buffer advance and release it when too little is left.
void retire(ep& e, std::list<posted_recv>& list, std::list<posted_recv>::iterator it, size_t used,
            uint64_t* cq_flags) {
  if (it->flags & FI_MULTI_RECV) {
    it->multi_off += used;
    if (it->iov[0].iov_len - it->multi_off < e.min_multi_recv) {
      *cq_flags |= FI_MULTI_RECV;
      recv_drop(e, list, it);
    }
  } else {
    recv_drop(e, list, it);
  }
}

void deliver_bytes(ep& e, std::list<posted_recv>& list, std::list<posted_recv>::iterator it, bool tagged,
                   const void* data, uint64_t size, uint32_t cflags, uint64_t tag, uint64_t cq_data,
                   fi_addr_t src) {
  posted_recv r = *it;
  landing l = landing_of(r);
  size_t n = std::min<uint64_t>(size, l.room);
  iov_copy_to(l.iov, l.count, 0, data, n);
  uint64_t flags = recv_flags(tagged, cflags);
  retire(e, list, it, n, &flags);
  if (n < size)
    rx_fail(e, r, flags, FI_ETRUNC, n, size - n, cq_data, tag, src);
  else
    rx_done(e, r, flags, n, l.buf, cq_data, tag, src);
}

void finish_split(ep& e, split_recv& s, int err) {
  e.split_busy &= ~(uint64_t{1} << s.slot);
  send_ack(e, s.src_slot, s.id, err);
  if (err)
    rx_fail(e, s.recv, s.cq_flags, err, 0, 0, s.data, s.tag, s.src);
  else if (s.n < s.size)
    rx_fail(e, s.recv, s.cq_flags, FI_ETRUNC, s.n, s.size - s.n, s.data, s.tag, s.src);
  else
    rx_done(e, s.recv, s.cq_flags, s.n, s.buf, s.data, s.tag, s.src);
}

// How long the receiver leaves the second part to a sender that has not
// started on it: past this, it copies the part itself.
constexpr uint64_t split_patience_us = 200;

void poll_splits(ep& e) {
  for (auto it = e.splits.begin(); it != e.splits.end();) {
    split_recv& s = *it;
    std::atomic<uint32_t>& word = e.me.splits()[s.slot].word;
    uint32_t w = word.load(std::memory_order_acquire);
    uint32_t st = w & 7;
    bool mine = false, done = false;
    if (st == split_done) {
      done = true;
    } else if (st == split_failed) {
      mine = true;
    } else if (st == split_armed && now_us() - s.armed_at_us > split_patience_us) {
      uint32_t expect = split_word(s.gen, split_armed);
      mine =
          word.compare_exchange_strong(expect, split_word(s.gen, split_receiver), std::memory_order_acq_rel);
      if (!mine) {
        ++it;
        continue;  // the sender took it just now
      }
    } else if (st == split_sender) {
      peer_slot& ps = e.me.peers()[s.src_slot];
      if (!pid_alive(ps.pid)) {  // died while copying: the part may be torn
        finish_split(e, s, FI_EIO);
        it = e.splits.erase(it);
        continue;
      }
    }
    if (mine) {
      int err = s.err ? s.err : pull_desc(s.desc, s.iov, s.count, s.first, s.n - s.first);
      finish_split(e, s, err);
      it = e.splits.erase(it);
    } else if (done) {
      finish_split(e, s, s.err);
      it = e.splits.erase(it);
    } else {
      ++it;
    }
  }
}

// Sender side of a split copy: push the part the receiver asked for.
void handle_cts(ep& e, cell* c) {
  const cell_hdr& h = c->h;
  cts_desc d;
  memcpy(&d, c->payload, sizeof d);
  auto it = e.pending.find(h.id);
  if (it == e.pending.end() || d.slot >= split_slots || d.iov_count > iov_max) return;
  request* r = it->second.get();
  peer* p = r->to;
  if (!p || r->kind != req_kind::send || d.offset > r->len || d.len > r->len - d.offset) return;
  std::atomic<uint32_t>& word = p->view().splits()[d.slot].word;
  uint32_t expect = split_word(d.gen, split_armed);
  if (!word.compare_exchange_strong(expect, split_word(d.gen, split_sender), std::memory_order_acq_rel))
    return;  // the receiver took it back
  iovec remote[iov_max];
  for (size_t i = 0; i < d.iov_count; ++i) remote[i] = {reinterpret_cast<void*>(d.iov[i].base), d.iov[i].len};
  int err = cma_copy(true, d.pid, r->iov, r->iov_count, remote, d.iov_count, d.offset, d.len);
  word.store(split_word(d.gen, err ? split_failed : split_done), std::memory_order_release);
}

void deliver_rndv(ep& e, std::list<posted_recv>& list, std::list<posted_recv>::iterator it, bool tagged,
                  const rndv_desc& d, uint64_t size, uint32_t cflags, uint64_t tag, uint64_t cq_data,
                  fi_addr_t src, uint32_t slot, uint64_t id) {
  posted_recv r = *it;
  landing l = landing_of(r);
  size_t n = std::min<uint64_t>(size, l.room);
  uint64_t flags = recv_flags(tagged, cflags);
  uint64_t first = (n / 2) & ~uint64_t{4095};
  peer* from = nullptr;
  if (e.split_enabled && n >= split_min && first && e.split_busy != ~uint64_t{0} &&
      (from = sender_of(e, slot)) && from->cma) {
    // Split: ask the sender for [first, n), pull [0, first) meanwhile.
    uint32_t gen;
    uint32_t s = arm_split(e, &gen);
    cts_desc cd{};
    cd.slot = s;
    cd.gen = gen;
    cd.pid = self_pid();
    cd.iov_count = static_cast<uint32_t>(l.count);
    cd.offset = first;
    cd.len = n - first;
    for (size_t i = 0; i < l.count; ++i) {
      cd.iov[i].base = reinterpret_cast<uint64_t>(l.iov[i].iov_base);
      cd.iov[i].len = l.iov[i].iov_len;
    }
    hdr_fields h{};
    h.opcode = op::cts;
    h.id = id;
    send_cell(e, *from, h, &cd, sizeof cd);
    split_recv sr{};
    sr.recv = r;
    memcpy(sr.iov, l.iov, sizeof sr.iov);
    sr.count = l.count;
    sr.buf = l.buf;
    sr.desc = d;
    sr.first = first;
    sr.n = n;
    sr.size = size;
    sr.slot = s;
    sr.gen = gen;
    sr.src_slot = slot;
    sr.id = id;
    sr.tag = tag;
    sr.data = cq_data;
    sr.src = src;
    retire(e, list, it, n, &flags);
    sr.cq_flags = flags;
    sr.err = pull_desc(d, l.iov, l.count, 0, first);
    sr.armed_at_us = now_us();
    e.splits.push_back(sr);
    poll_splits(e);
    return;
  }
  int err = pull_desc(d, l.iov, l.count, 0, n);
  retire(e, list, it, n, &flags);
  send_ack(e, slot, id, err);
  if (err)
    rx_fail(e, r, flags, err, 0, 0, cq_data, tag, src);
  else if (n < size)
    rx_fail(e, r, flags, FI_ETRUNC, n, size - n, cq_data, tag, src);
  else
    rx_done(e, r, flags, n, l.buf, cq_data, tag, src);
}

// Every length and count in a cell came from another process: check them
// before anything indexes memory with them (a hostile or broken peer gets
// its cell dropped, never an out-of-bounds access).
[[gnu::cold, gnu::noinline]] bool cell_sane_slow(const cell_hdr& h) noexcept {
  if (h.src >= peer_slots) return false;
  switch (h.opcode) {
    case op::msg:
      return (h.flags & flag_inline) ? h.size <= inline_max : (h.len == h.size && h.size <= inject_max);
    case op::rndv: {
      if (h.len < sizeof(rndv_desc)) return false;
      return true;  // iov_count is clamped where it is read
    }
    case op::frag:
      return h.len <= inject_max;
    case op::cts:
      return h.len == sizeof(cts_desc);
    case op::write_help:
      return h.len == sizeof(help_desc);
    case op::write:
    case op::read_req:
    case op::notify:
    case op::atomic:
      return h.len >= sizeof(rma_desc) && h.len <= inject_max;
    case op::read_resp:
    case op::atomic_resp:
    case op::ack:
    case op::nop:
      return h.len <= inject_max || h.opcode == op::ack || h.opcode == op::nop;
    default:
      return false;
  }
}

inline bool cell_sane(const cell_hdr& h) noexcept {
  if ((h.flags & flag_inline) && h.opcode == op::msg) [[likely]]
    return h.size <= inline_max && h.src < peer_slots;
  return cell_sane_slow(h);
}

// The common case on the hot path: a small message inline in the header,
// matched by the first posted receive of one plain buffer, no source needed.
// Returns false when the general path must handle it.
[[gnu::always_inline]] inline bool fast_small(ep& e, cell* c) {
  const cell_hdr& h = c->h;
  bool tagged = h.flags & flag_tagged;
  auto& list = tagged ? e.rx->posted_tagged : e.rx->posted_msg;
  if (list.empty()) return false;
  auto it = list.begin();
  posted_recv& r = *it;
  if (r.iov_count != 1 || (r.flags & FI_MULTI_RECV) || r.total < h.size) return false;
  if (tagged && ((r.tag ^ h.tag) & ~r.ignore)) return false;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  if (e.caps & (FI_SOURCE | FI_DIRECTED_RECV)) {
    src = src_addr_of(e, h.src);  // cached per sender slot
    if (r.src != FI_ADDR_UNSPEC && (e.caps & FI_DIRECTED_RECV) &&
        (src == FI_ADDR_NOTAVAIL || e.av->index(src) != e.av->index(r.src)))
      return false;
    if (!(e.caps & FI_SOURCE)) src = FI_ADDR_NOTAVAIL;
  }
  copy_small(r.iov[0].iov_base, h.inl, h.size);
  uint64_t flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
  uint64_t data = 0;
  if (h.flags & flag_remote_cq_data) {
    flags |= FI_REMOTE_CQ_DATA;
    data = h.data;
  }
  rx_done(e, r, flags, h.size, nullptr, data, h.tag, src);
  recv_drop(e, list, it);
  return true;
}

// A message cell (msg, rndv, or first fragment). Returns false when it must
// stay in the queue (unexpected buffer full).
bool handle_message(ep& e, cell* c) {
  const cell_hdr& h = c->h;
  bool tagged = h.flags & flag_tagged;
  fi_addr_t src = (e.caps & FI_SOURCE) ? src_addr_of(e, h.src) : FI_ADDR_NOTAVAIL;
  auto& list = tagged ? e.rx->posted_tagged : e.rx->posted_msg;
  auto it = find_recv(e, tagged, h.tag, h.src, &src);
  uint64_t data = (h.flags & flag_remote_cq_data) ? h.data : 0;
  if (it != list.end()) {
    switch (h.opcode) {
      case op::msg:
        deliver_bytes(e, list, it, tagged, (h.flags & flag_inline) ? h.inl : c->payload, h.size, h.flags,
                      h.tag, data, src);
        if (h.flags & flag_want_ack) send_ack(e, h.src, h.id, 0);
        return true;
      case op::rndv: {
        rndv_desc d;
        memcpy(&d, c->payload, sizeof d);
        deliver_rndv(e, list, it, tagged, d, h.size, h.flags, h.tag, data, src, h.src, h.id);
        return true;
      }
      default: {  // first fragment
        assembly a;
        a.recv = *it;
        a.src_slot = h.src;
        a.id = h.id;
        a.size = h.size;
        a.tag = h.tag;
        a.data = data;
        a.flags = h.flags;
        a.src = src;
        recv_drop(e, list, it);
        e.assemblies.push_back(a);
        return false;  // fall through to fragment handling by caller
      }
    }
  }
  // Unexpected.
  size_t bytes = h.opcode == op::rndv ? 0 : h.size;
  if (e.rx->ux_count >= ux_max_count || e.rx->ux_bytes + bytes > ux_max_bytes) return false;
  auto& ux = tagged ? e.rx->ux_tagged : e.rx->ux_msg;
  unexpected u;
  u.owner = &e;
  u.src_slot = h.src;
  u.src = src;
  u.tag = h.tag;
  u.data = data;
  u.flags = h.flags;
  u.size = h.size;
  u.id = h.id;
  if (h.opcode == op::rndv) {
    u.rndv = true;
    memcpy(&u.desc, c->payload, sizeof u.desc);
  } else {
    u.bytes.resize(h.size);
    if (h.opcode == op::msg) {
      if (h.size) memcpy(u.bytes.data(), (h.flags & flag_inline) ? h.inl : c->payload, h.size);
    } else {
      u.complete = false;
    }
  }
  e.rx->ux_count++;
  e.rx->ux_bytes += bytes;
  ux.push_back(std::move(u));
  if (h.opcode == op::frag) {
    assembly a;
    a.src_slot = h.src;
    a.id = h.id;
    a.size = h.size;
    a.to_unexpected = true;
    a.ux = &ux.back();
    e.assemblies.push_back(a);
  }
  return true;
}

void handle_fragment(ep& e, cell* c) {
  const cell_hdr& h = c->h;
  for (auto it = e.assemblies.begin(); it != e.assemblies.end(); ++it) {
    if (it->src_slot != h.src || it->id != h.id) continue;
    uint64_t off = h.tag;  // fragments carry their offset in `tag` after the first
    if (h.flags & flag_first) off = 0;
    size_t n = std::min<size_t>(h.len, it->size > off ? it->size - off : 0);
    if (it->to_unexpected) {
      memcpy(it->ux->bytes.data() + off, c->payload, n);
      it->ux->filled += n;
      if (it->ux->filled >= it->ux->size) {
        it->ux->complete = true;
        e.assemblies.erase(it);
      }
      return;
    }
    landing l = landing_of(it->recv);
    if (off < l.room) iov_copy_to(l.iov, l.count, off, c->payload, std::min<size_t>(n, l.room - off));
    it->filled += n;
    if (it->filled >= it->size) {
      assembly a = *it;
      e.assemblies.erase(it);
      bool tagged = a.flags & flag_tagged;
      uint64_t flags = recv_flags(tagged, a.flags);
      size_t got = std::min<size_t>(a.size, l.room);
      if (a.recv.flags & FI_MULTI_RECV) {
        // The buffer was taken off the list when matched; put what remains back.
        posted_recv rest = a.recv;
        rest.multi_off += got;
        if (rest.iov[0].iov_len - rest.multi_off >= e.min_multi_recv)
          recv_push(e, tagged ? e.rx->posted_tagged : e.rx->posted_msg, rest);
        else
          flags |= FI_MULTI_RECV;
      }
      send_ack(e, a.src_slot, a.id, 0);
      if (got < a.size)
        rx_fail(e, a.recv, flags, FI_ETRUNC, got, a.size - got, a.data, a.tag, a.src);
      else
        rx_done(e, a.recv, flags, got, l.buf, a.data, a.tag, a.src);
    }
    return;
  }
  // No assembly: the receive was cancelled or the sender is unknown; drop.
}

void handle_ack(ep& e, cell* c) {
  auto it = e.pending.find(c->h.id);
  if (it == e.pending.end()) return;
  request* r = it->second.get();
  int err = static_cast<int>(c->h.data);
  if (err)
    tx_fail(e, r->context, r->flags, r->op_flags, err, 0);
  else if (r->needs_completion)
    tx_done(e, r->context, r->flags, r->op_flags, r->len);
  finish_request(e, r->id);
}

void push_outgoing(ep& e) {
  // Responses first, in order.
  while (!e.backlog.empty()) {
    auto& pc = e.backlog.front();
    cell* c = queue_claim(pc.to->view());
    if (!c) break;
    post_cell(*pc.to, c, pc.h, pc.payload.data(), pc.payload.size());
    e.backlog.pop_front();
  }
  // Fragment streams of large messages / writes without CMA.
  for (auto it = e.outgoing.begin(); it != e.outgoing.end();) {
    request* r = *it;
    peer* p = r->to;
    bool full = false;
    while (r->sent < r->len) {
      cell* c = queue_claim(p->view());
      if (!c) {
        full = true;
        break;
      }
      size_t n = std::min(r->len - r->sent, inject_max);
      c->h.opcode = r->tmpl.opcode;
      c->h.atomic_op = 0;
      c->h.datatype = 0;
      c->h.src = p->slot;
      c->h.tag = r->sent;  // offset
      c->h.data = r->tmpl.data;
      c->h.size = r->len;
      c->h.id = r->id;
      c->h.flags = r->tmpl.flags & ~flag_first;
      c->h.len = static_cast<uint32_t>(n);
      size_t off = 0;
      if (r->tmpl.opcode == op::write) {
        rma_desc d = r->rma;
        memcpy(c->payload, &d, sizeof d);
        off = sizeof d;
        n = std::min(n, inject_max - sizeof d);
        c->h.len = static_cast<uint32_t>(n + off);
      }
      iov_copy_from(r->iov, r->iov_count, r->sent, c->payload + off, n);
      r->sent += n;
      if (r->sent >= r->len) c->h.flags |= flag_last;
      queue_commit(p->view(), c);
    }
    if (full) break;  // keep order: later streams wait for this one
    it = e.outgoing.erase(it);
  }
}

void check_liveness(ep& e) {
  uint64_t now = now_ms();
  if (now - e.last_liveness_check < 100) return;
  e.last_liveness_check = now;
  queue_stalled(e.me);
  std::vector<uint64_t> dead;
  for (auto& [id, r] : e.pending)
    if (r->peer_pid && !pid_alive(r->peer_pid)) dead.push_back(id);
  for (uint64_t id : dead) {
    request* r = e.pending[id].get();
    tx_fail(e, r->context, r->flags, r->op_flags, FI_EIO, 0);
    finish_request(e, id);
  }
  for (auto& kv : e.by_name)
    if (!pid_alive(kv.second->pid)) kv.second->dead = true;
  // Receives being filled by a sender that died.
  for (auto it = e.assemblies.begin(); it != e.assemblies.end();) {
    peer_slot& s = e.me.peers()[it->src_slot];
    if (!pid_alive(s.pid)) {
      if (!it->to_unexpected)
        rx_fail(e, it->recv, recv_flags(it->flags & flag_tagged, it->flags), FI_EIO, 0, 0, it->data, it->tag,
                it->src);
      it = e.assemblies.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

void progress(ep& e) noexcept {
  if (!e.enabled || !e.me.base) [[unlikely]]
    return;
  try {
    if (e.unreleased) {
      queue_release_n(e.me, e.unreleased);
      e.unreleased = 0;
    }
    if (!e.backlog.empty() || !e.outgoing.empty()) [[unlikely]]
      push_outgoing(e);
    for (int n = 0; n < 64; ++n) {
      cell* c = queue_peek(e.me, e.unreleased);
      if (!c) break;
      if (!cell_sane(c->h)) [[unlikely]] {
        WEFT_WARN(FI_LOG_EP_DATA, "shm: dropped a malformed cell (op %d) from slot %u",
                  static_cast<int>(c->h.opcode), static_cast<unsigned>(c->h.src));
        e.unreleased++;
        continue;
      }
      if (c->h.opcode == op::msg && (c->h.flags & flag_inline) && fast_small(e, c)) [[likely]] {
        e.unreleased++;
        continue;
      }
      switch (c->h.opcode) {
        case op::msg:
        case op::rndv:
          if (!handle_message(e, c)) return;  // unexpected buffer full: leave it queued
          break;
        case op::frag:
          if (c->h.flags & flag_first) {
            size_t before = e.assemblies.size();
            bool handled = handle_message(e, c);
            if (!handled && e.assemblies.size() == before) return;  // buffer full
          }
          handle_fragment(e, c);
          break;
        case op::ack:
          handle_ack(e, c);
          break;
        case op::write:
        case op::read_req:
        case op::read_resp:
        case op::notify:
        case op::write_help:
          handle_rma_cell(e, c);
          break;
        case op::atomic:
        case op::atomic_resp:
          handle_atomic_cell(e, c);
          break;
        case op::cts:
          handle_cts(e, c);
          break;
        default:
          break;  // nop, or an opcode from a newer peer: dropped
      }
      e.unreleased++;
    }
    if (!e.splits.empty()) [[unlikely]]
      poll_splits(e);
    // Periodic checks (peers that died, cells abandoned by dead producers):
    // paced so the polling path stays a few loads.
    // Every 64th call while something waits on a peer, every 256th otherwise:
    // the clock is read there, not on every poll.
    const uint32_t pace = (e.pending.empty() && e.assemblies.empty()) ? 255 : 63;
    if ((++e.polls & pace) == 0) {
      check_liveness(e);
    }
  } catch (...) {
    WEFT_WARN(FI_LOG_EP_DATA, "shm: progress ran out of memory");
  }
}

void progress_poller(void* arg) noexcept {
  ep& e = *static_cast<ep*>(arg);
  ep_guard g(e);
  progress(e);
}

}  // namespace weft::shm
