// SPDX-License-Identifier: BSD-3-Clause
// The collective engine: groups (fi_join_collective), operations and their
// progress, completions, and what happens when a member fails. One engine
// per endpoint, made by its first join; the algorithms are in coll_alg.cpp,
// AV sets in av_set.cpp. docs/design.md ("Collectives") has the rules.
//
// Locking: the engine's own lock (a policy lock, on where the endpoint's
// is) serialises the entry points and progress; the transport reports the
// engine's transfers under the endpoint's lock through coll_tx_done /
// coll_rx_done, which only touch atomics. Order: engine lock, then the
// endpoint's lock (taken by the sends and receives it issues).
#include <cstring>
#include <string>
#include <unordered_set>

#include "common/clock.hpp"
#include "core/info.hpp"
#include "core/log.hpp"
#include "util/atomic_ops.hpp"
#include "util/coll_int.hpp"
#include "util/cq.hpp"
#include "util/eq.hpp"
#include "util/rx.hpp"

namespace weft {

namespace {

// A member we wait on is probed after this long without progress, then
// this often: a send to a member that died fails (the transport's dead-peer
// detection), and the failure ends the operation everywhere.
constexpr uint64_t probe_after_ms = 100;
constexpr uint64_t probe_every_ms = 100;
// A failed operation waits this long for its transfers to end before its
// error entry is written anyway.
constexpr uint64_t drain_ms = 2000;
// Operations of one group in flight.
constexpr uint32_t max_pending = 4096;
constexpr uint64_t mc_magic = uint64_t{0xC011} << 48;

constexpr uint64_t ctl_ignore = (uint64_t{1} << tag_cid_shift) - 1;

// ------------------------------------------------------------------ tags of an operation
uint64_t join_tag(const coll_op& o, uint32_t src, uint32_t num) noexcept {
  const uint32_t key = o.g->key;
  return coll_tag(cid_join, uint16_t(key >> 13), src, (key & 0x1fff) << join_step_bits | (num & 63));
}
uint64_t send_tag(const coll_op& o, const xfer& x) noexcept {
  if (o.kind == coll_kind::join) return join_tag(o, o.g->rank, x.num);
  return coll_tag(o.g->remote_cid[x.peer], o.seq, o.g->rank, x.num);
}
uint64_t recv_tag(const coll_op& o, const xfer& x) noexcept {
  if (o.kind == coll_kind::join) return join_tag(o, x.peer, x.num);
  return coll_tag(o.g->cid, o.seq, x.peer, x.num);
}
uint16_t tag_cid(uint64_t tag) noexcept {
  return uint16_t((tag >> tag_cid_shift) & 0xfff);
}

uint64_t fnv(uint64_t h, const void* p, size_t n) noexcept {
  auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ULL;
  }
  return h;
}

coll_group* find_group(coll_engine& c, fi_addr_t a) noexcept {
  if ((a & (uint64_t{0xffff} << 48)) != mc_magic) return nullptr;
  const uint64_t cid = a & 0xffff;
  if (cid == cid_join || cid >= c.groups.size()) return nullptr;
  coll_group* g = c.groups[cid].get();
  if (!g || g->closed || g->instance != uint32_t(a >> 16)) return nullptr;
  return g;
}

// The rank of AV address `a` in the group, or -1.
int64_t rank_of(const coll_group& g, const av& table, fi_addr_t a) noexcept {
  const uint64_t idx = table.index(a);
  for (uint32_t i = 0; i < g.size; ++i)
    if (table.index(g.members[i]) == idx) return i;
  return -1;
}

// ------------------------------------------------------------------ failures
// Drops the unexpected messages addressed to group g (they will never be
// received): their senders then see them delivered, so no send of theirs
// waits forever on a receiver that gave up.
void discard_unexpected(coll_engine& c, const coll_group& g) noexcept {
  endpoint& e = c.e;
  ep_guard lk(e);
  auto& list = ux_list(e, true);
  for (auto it = list.begin(); it != list.end();) {
    auto next = std::next(it);
    const uint64_t t = it->tag;
    bool ours = (t & coll_tag_bit) && it->complete && !it->claimed;
    if (ours) {
      const uint16_t cid = tag_cid(t);
      if (g.st == coll_group::state::joining)
        ours = cid == cid_join && ((t >> tag_seq_shift) & 0xffff) == (g.key >> 13) &&
               ((t & tag_step_mask) >> join_step_bits) == (g.key & 0x1fff);
      else
        ours = cid == g.cid;
    }
    if (ours) {
      endpoint& o = *it->owner;
      o.tops->rx->discard(o, *it);
      ux_drop(e, list, it);
    }
    it = next;
  }
}

// Takes back the receives of `o` no message matched yet; they count as done.
void cancel_receives(coll_engine& c, coll_op& o) noexcept {
  if (o.cancelled) return;
  o.cancelled = true;
  endpoint& e = c.e;
  ep_guard lk(e);
  auto& list = posted_list(e, true);
  uint32_t n = 0;
  for (auto it = list.begin(); it != list.end();) {
    auto next = std::next(it);
    if ((it->flags & flag_coll) && it->context == &o) {
      recv_drop(e, list, it);
      ++n;
    }
    it = next;
  }
  if (n) o.recvs_done.fetch_add(n, std::memory_order_release);
}

bool try_send_ctl(coll_engine& c, uint16_t cid, uint32_t instance, fi_addr_t dest, const ctl_msg& m);

// Tells member `peer` of g that the group is broken (abort), or asks
// whether it is there (probe).
void send_ctl(coll_engine& c, coll_group& g, uint32_t peer, uint16_t type, int err) noexcept {
  ctl_msg m{};
  m.magic = ctl_magic;
  m.type = type;
  m.cid = g.st == coll_group::state::joined ? g.remote_cid[peer] : uint16_t(0);
  m.key = g.key;
  m.err = err;
  m.from = g.rank;
  const fi_addr_t dest = g.members[peer];
  if (!try_send_ctl(c, g.cid, g.instance, dest, m) && type == ctl_abort) {
    try {
      c.ctl_pending.push_back({dest, m, g.cid, g.instance});
    } catch (...) {
    }
  }
}

// The group can no longer be used: its operations end in error entries, now
// and later. `local`: we found out ourselves (not from an abort), so the
// other members are told.
void break_group(coll_engine& c, coll_group& g, int err, bool local) noexcept {
  if (g.broken) return;
  g.broken = err ? err : FI_EIO;
  WEFT_LOG(FI_LOG_WARN, FI_LOG_EP_DATA, c.e.dom->prov->name(),
           "collective group of %u members (this endpoint is rank %u) is broken (error %d): %s", g.size, g.rank,
           g.broken, local ? "found here" : "a member told us");
  if (local)
    for (uint32_t p = 0; p < g.size; ++p)
      if (p != g.rank) send_ctl(c, g, p, ctl_abort, g.broken);
  discard_unexpected(c, g);
}

void start_failing(coll_engine& c, coll_op& o, int err, bool local) noexcept {
  if (o.failing) return;
  o.failing = true;
  o.err = err ? err : FI_EIO;
  o.failed_ms = now_ms();
  break_group(c, *o.g, o.err, local);
  cancel_receives(c, o);
}

// ------------------------------------------------------------------ completions
void finish_join(coll_engine& c, coll_op& o) noexcept {
  coll_group& g = *o.g;
  int err = 0;
  try {
    g.remote_cid.resize(g.size);
  } catch (...) {
    err = FI_ENOMEM;
  }
  for (uint32_t j = 0; j < g.size && !err; ++j) {
    const uint8_t* rec = o.join_buf.data() + size_t(j) * 16;
    uint64_t hash;
    uint16_t cid, rank;
    uint32_t size;
    memcpy(&hash, rec, 8);
    memcpy(&cid, rec + 8, 2);
    memcpy(&rank, rec + 10, 2);
    memcpy(&size, rec + 12, 4);
    if (hash != g.hash || rank != j || size != g.size || cid == cid_join || cid > cid_max)
      err = FI_EIO;  // the members do not agree on the set, or a hostile record
    else
      g.remote_cid[j] = cid;
  }
  if (err) {
    g.st = coll_group::state::failed;
    if (!g.closed) eq_post_error(c.e.eq, &g.mc.fid, g.join_context, 0, err, -err, nullptr, 0);
    return;
  }
  g.st = coll_group::state::joined;
  if (g.closed) return;
  fi_eq_entry ev{};
  ev.fid = &g.mc.fid;
  ev.context = g.join_context;
  eq_post(c.e.eq, FI_JOIN_COMPLETE, &ev, sizeof ev, 0);
}

void report(coll_engine& c, coll_op& o) noexcept {
  coll_group& g = *o.g;
  endpoint& e = c.e;
  if (o.reported) return;
  o.reported = true;
  g.pending--;
  if (o.kind == coll_kind::join) {
    if (!o.failing) return finish_join(c, o);
    g.st = coll_group::state::failed;
    if (!g.closed) eq_post_error(e.eq, &g.mc.fid, g.join_context, 0, o.err, -o.err, nullptr, 0);
    return;
  }
  if (o.failing) {
    fi_cq_err_entry ee{};
    ee.op_context = o.context;
    ee.flags = FI_COLLECTIVE;
    ee.err = o.err;
    ee.prov_errno = -o.err;
    cq_write_error(e.tx_cq, ee);
    return;
  }
  if (!e.tx_selective || (o.flags & FI_COMPLETION)) cq_write(e.tx_cq, o.context, FI_COLLECTIVE, 0, nullptr, 0, 0);
}

void destroy_group(coll_engine& c, coll_group* g) noexcept {
  for (size_t i = 0; i < c.zombies.size(); ++i)
    if (c.zombies[i] == g) {
      c.zombies[i] = c.zombies.back();
      c.zombies.pop_back();
      break;
    }
  delete g;
}

void release(coll_engine& c, coll_op& o) noexcept {
  coll_group* g = o.g;
  c.ops.release(&o);
  if (--g->active == 0 && g->closed) destroy_group(c, g);
}

// ------------------------------------------------------------------ advancing an operation
ssize_t issue(coll_engine& c, coll_op& o, const xfer& x) noexcept {
  endpoint& e = c.e;
  iovec v{x.buf, x.len};
  if (x.send) return e.coll_send(e, &v, 1, o.g->members[x.peer], send_tag(o, x), &o, flag_coll);
  return post_recv<true>(e, &v, 1, FI_ADDR_UNSPEC, recv_tag(o, x), 0, &o, flag_coll);
}

// While an operation waits, the members it waits on are probed now and then.
void note_wait(coll_engine& c, coll_op& o, const xfer* xs, size_t n) noexcept {
  const uint64_t now = c.now_ms;
  if (!o.wait_since_ms) {
    o.wait_since_ms = now ? now : 1;
    return;
  }
  if (now < o.wait_since_ms + probe_after_ms || now < o.probed_ms + probe_every_ms) return;
  o.probed_ms = now;
  for (size_t i = 0; i < n; ++i) {
    if (xs[i].send) continue;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = !xs[j].send && xs[j].peer == xs[i].peer;
    if (!seen) send_ctl(c, *o.g, xs[i].peer, ctl_probe, 0);
  }
}

// A failed operation: once its transfers ended (or the drain bound passed),
// its error entry; once they ended, it goes.
bool drain(coll_engine& c, coll_op& o) noexcept {
  const bool drained = o.sends_done.load(std::memory_order_acquire) >= o.sends &&
                       o.recvs_done.load(std::memory_order_acquire) >= o.recvs;
  if (!o.reported && (drained || now_ms() >= o.failed_ms + drain_ms)) report(c, o);
  return drained;
}

// Moves `o` as far as it goes. True when it is done (its completion written
// and every transfer ended): the caller releases it.
bool advance(coll_engine& c, coll_op& o) noexcept {
  coll_group& g = *o.g;
  if (!o.failing) {
    if (int xe = o.xfer_err.load(std::memory_order_acquire))
      start_failing(c, o, xe, true);
    else if (g.broken)
      start_failing(c, o, g.broken, false);
  }
  if (o.failing) return drain(c, o);
  for (;;) {
    if (o.step == o.nsteps) {
      alg_finish(o);
      report(c, o);
      return true;
    }
    xfer xs[max_xfers];
    const size_t n = alg_plan(o, o.step, xs);
    while (o.issued < n) {
      const xfer& x = xs[o.issued];
      const ssize_t r = issue(c, o, x);
      if (r == -FI_EAGAIN) {
        c.eagain = true;
        return false;
      }
      if (r) {
        start_failing(c, o, int(-r), true);
        return drain(c, o);
      }
      ++o.issued;
      if (x.send) {
        ++o.sends;
      } else {
        ++o.recvs;
        o.expect += x.len;
      }
    }
    if (o.sends_done.load(std::memory_order_acquire) < o.sends ||
        o.recvs_done.load(std::memory_order_acquire) < o.recvs) {
      note_wait(c, o, xs, n);
      return false;
    }
    if (int xe = o.xfer_err.load(std::memory_order_acquire)) {
      start_failing(c, o, xe, true);
      return drain(c, o);
    }
    if (o.recv_bytes.load(std::memory_order_relaxed) != o.expect) {
      // A member sent less than this step expects: the members' arguments
      // differ (count, datatype, root).
      start_failing(c, o, FI_EMSGSIZE, true);
      return drain(c, o);
    }
    alg_after(o, o.step);
    ++o.step;
    o.issued = o.sends = o.recvs = 0;
    o.expect = 0;
    o.sends_done.store(0, std::memory_order_relaxed);
    o.recvs_done.store(0, std::memory_order_relaxed);
    o.recv_bytes.store(0, std::memory_order_relaxed);
    o.wait_since_ms = 0;
  }
}

// ------------------------------------------------------------------ control messages
bool try_send_ctl(coll_engine& c, uint16_t cid, uint32_t instance, fi_addr_t dest, const ctl_msg& m) {
  coll_ctl* x = c.ctls.alloc();
  if (!x) return false;
  x->cid = cid;
  x->instance = instance;
  x->probe = m.type == ctl_probe;
  x->msg = m;
  try {
    c.ctl_live.reserve(c.ctl_live.size() + 1);
  } catch (...) {
    c.ctls.release(x);
    return false;
  }
  iovec v{&x->msg, sizeof x->msg};
  const ssize_t r = c.e.coll_send(c.e, &v, 1, dest, coll_tag(cid_ctl, 0, 0, 0), x, flag_coll);
  if (r == 0) {
    c.ctl_live.push_back(x);
    return true;
  }
  c.ctls.release(x);
  if (r == -FI_EAGAIN) {
    c.eagain = true;
    return false;
  }
  // Unreachable: for a probe, that is the answer.
  if (x->probe && cid < c.groups.size() && c.groups[cid] && c.groups[cid]->instance == instance)
    break_group(c, *c.groups[cid], int(-r), true);
  return true;
}

void post_sink(coll_engine& c) noexcept {
  iovec v{c.sink_buf, sizeof c.sink_buf};
  c.sink_state.store(0, std::memory_order_release);
  const ssize_t r = post_recv<true>(c.e, &v, 1, FI_ADDR_UNSPEC, coll_tag(cid_ctl, 0, 0, 0), ctl_ignore,
                                    &c.sink, flag_coll);
  if (r) c.sink_state.store(3, std::memory_order_release);
}

coll_group* group_of_ctl(coll_engine& c, const ctl_msg& m) noexcept {
  if (m.cid != cid_join) {
    if (m.cid >= c.groups.size() || !c.groups[m.cid]) return nullptr;
    coll_group* g = c.groups[m.cid].get();
    return g->key == m.key && g->st != coll_group::state::joining ? g : nullptr;
  }
  for (auto& g : c.groups)
    if (g && g->st == coll_group::state::joining && g->key == m.key) return g.get();
  return nullptr;
}

void handle_ctl(coll_engine& c) noexcept {
  for (int round = 0; round < 16; ++round) {
    const int st = c.sink_state.load(std::memory_order_acquire);
    if (st == 0) return;
    if (st == 1 && c.sink_len.load(std::memory_order_relaxed) == sizeof(ctl_msg)) {
      ctl_msg m;
      memcpy(&m, c.sink_buf, sizeof m);
      if (m.magic == ctl_magic && m.type == ctl_abort) {
        coll_group* g = group_of_ctl(c, m);
        const int err = m.err > 0 && m.err < 0x10000 ? m.err : FI_EIO;
        if (g) break_group(c, *g, err, false);
      }
    }
    post_sink(c);
  }
}

void handle_ctl_done(coll_engine& c) noexcept {
  for (size_t i = 0; i < c.ctl_live.size();) {
    coll_ctl* x = c.ctl_live[i];
    const int st = x->state.load(std::memory_order_acquire);
    if (!st) {
      ++i;
      continue;
    }
    if (st > 1 && x->probe && x->cid < c.groups.size() && c.groups[x->cid] &&
        c.groups[x->cid]->instance == x->instance)
      break_group(c, *c.groups[x->cid], st - 1, true);
    c.ctl_live[i] = c.ctl_live.back();
    c.ctl_live.pop_back();
    c.ctls.release(x);
  }
  for (size_t i = 0; i < c.ctl_pending.size();) {
    auto& p = c.ctl_pending[i];
    if (!try_send_ctl(c, p.cid, p.instance, p.dest, p.msg)) break;
    c.ctl_pending.erase(c.ctl_pending.begin() + long(i));
  }
}

void run(coll_engine& c) noexcept {
  c.eagain = false;
  if (c.sink_state.load(std::memory_order_acquire)) handle_ctl(c);
  if (!c.ctl_live.empty() || !c.ctl_pending.empty()) handle_ctl_done(c);
  if (c.active.empty()) return;
  if ((++c.polls & 31) == 0 || !c.now_ms) c.now_ms = now_ms();
  for (size_t i = 0; i < c.active.size();) {
    coll_op* o = c.active[i];
    if (advance(c, *o)) {
      c.active[i] = c.active.back();
      c.active.pop_back();
      release(c, *o);
    } else {
      ++i;
    }
  }
}

// ------------------------------------------------------------------ the engine
struct engine_lock {
  explicit engine_lock(coll_engine& c) : c_(c) { c_.lock.lock(); }
  ~engine_lock() { c_.lock.unlock(); }
  coll_engine& c_;
};

void eq_poller(void* arg) noexcept {
  endpoint_poller(arg);
}

coll_engine& engine_for(endpoint& e) {
  if (coll_engine* c = e.coll.load(std::memory_order_acquire)) return *c;
  auto c = std::make_unique<coll_engine>(e);
  c->lock.set_locking(e.lock->locking());
  c->groups.resize(cid_max + 1);
  c->sink.eng = c.get();
  {
    ep_guard lk(e);
    e.rx->coll = true;
  }
  post_sink(*c);
  if (c->sink_state.load() == 3) fail(FI_ENOMEM, "collective control receive");
  if (eq_add_poller(e.eq, eq_poller, &e)) fail(FI_ENOMEM, "EQ poller");
  e.coll.store(c.get(), std::memory_order_release);
  return *c.release();
}

int mc_close(fid* f) noexcept;
fi_ops mc_fi_ops = {sizeof(fi_ops), mc_close, fid_no_bind, fid_no_control, fid_no_ops_open, fid_no_tostr,
                    fid_no_ops_set};

coll_op* new_op(coll_engine& c, coll_group& g, coll_kind kind) {
  coll_op* o = c.ops.alloc();
  if (!o) fail(FI_ENOMEM, "collective operation");
  o->g = &g;
  o->kind = kind;
  return o;
}

// Starts `o` (alg_start done): it joins the active list and makes its first moves.
void launch(coll_engine& c, coll_op& o) {
  coll_group& g = *o.g;
  c.active.reserve(c.active.size() + 1);
  c.active.push_back(&o);
  ++g.active;
  ++g.pending;
  if (advance(c, o)) {
    c.active.pop_back();
    release(c, o);
  }
}

int mc_close(fid* f) noexcept {
  coll_group* g = from_fid<coll_group>(f);
  if (!g->eng) {  // its endpoint closed first and took the group down
    delete g;
    return 0;
  }
  coll_engine& c = *g->eng;
  endpoint& e = c.e;
  {
    engine_lock lk(c);
    if (g->closed) return -FI_EINVAL;
    if (g->st != coll_group::state::joining && g->pending) return -FI_EBUSY;
    for (coll_op* o : c.active)
      if (o->g == g && o->kind == coll_kind::join) start_failing(c, *o, FI_ECANCELED, false);
    g->closed = true;
    discard_unexpected(c, *g);
    auto& slot = c.groups[g->cid];
    if (g->active) {
      try {
        c.zombies.push_back(slot.release());
      } catch (...) {
        // Left where it is: its slot stays taken until the endpoint closes.
        g->cid = cid_max + 1;
      }
    } else {
      slot.reset();
    }
  }
  eq_forget(e.eq, f);
  return 0;
}

// ------------------------------------------------------------------ entry points
struct op_args {
  coll_kind kind;
  const void* buf;
  size_t count;
  void* result;
  fi_addr_t coll_addr;
  fi_addr_t root_addr;
  fi_datatype dt;
  fi_op op;
  uint64_t flags;
  void* context;
};

bool sliced(coll_kind k) noexcept {
  return k == coll_kind::allgather || k == coll_kind::reduce_scatter || k == coll_kind::alltoall ||
         k == coll_kind::scatter || k == coll_kind::gather;
}
bool rooted(coll_kind k) noexcept {
  return k == coll_kind::broadcast || k == coll_kind::reduce || k == coll_kind::scatter ||
         k == coll_kind::gather;
}
bool reducing(coll_kind k) noexcept {
  return k == coll_kind::allreduce || k == coll_kind::reduce_scatter || k == coll_kind::reduce;
}

ssize_t start(fid_ep* f, const op_args& a) noexcept {
  endpoint& e = ep_of(f);
  if (!only(a.flags, FI_COMPLETION)) return -FI_EBADFLAGS;
  size_t esize = 0;
  if (a.kind != coll_kind::barrier) {
    esize = datatype_size(a.dt);
    if (!esize) return -FI_EINVAL;  // not a datatype
    if (reducing(a.kind) && !reduce_valid(a.op, a.dt)) return -FI_EOPNOTSUPP;
  }
  coll_engine* cp = e.coll.load(std::memory_order_acquire);
  if (!cp) return -FI_EINVAL;  // no group joined: coll_addr names none
  coll_engine& c = *cp;
  try {
    engine_lock lk(c);
    coll_group* g = find_group(c, a.coll_addr);
    if (!g) return -FI_EINVAL;
    if (g->st != coll_group::state::joined) return -FI_EOPBADSTATE;
    const uint64_t n = g->size;
    // Bytes of the largest buffer involved, without overflow.
    if (esize && a.count > (SIZE_MAX / 2) / esize / (sliced(a.kind) ? n : 1)) return -FI_EMSGSIZE;
    uint32_t root = 0;
    if (rooted(a.kind)) {
      const int64_t rr = rank_of(*g, *e.av, a.root_addr);
      if (rr < 0 || !e.av->lookup(a.root_addr)) return -FI_EINVAL;  // not a member
      root = uint32_t(rr);
    }
    const bool is_root = g->rank == root;
    if (a.count) {
      const bool need_buf = a.kind != coll_kind::barrier && (a.kind != coll_kind::scatter || is_root);
      const bool need_res = a.kind != coll_kind::barrier && a.kind != coll_kind::broadcast &&
                            ((a.kind != coll_kind::gather && a.kind != coll_kind::reduce) || is_root);
      if ((need_buf && !a.buf) || (need_res && !a.result)) return -FI_EINVAL;
    }
    if (g->pending >= max_pending) return -FI_EAGAIN;
    coll_op& o = *new_op(c, *g, a.kind);
    o.seq = g->next_seq;
    o.context = a.context;
    o.flags = a.flags | (tx_flags_of(f, e) & FI_COMPLETION);
    o.src = static_cast<const uint8_t*>(a.buf);
    o.res = static_cast<uint8_t*>(a.kind == coll_kind::broadcast ? const_cast<void*>(a.buf) : a.result);
    o.count = a.kind == coll_kind::barrier ? 0 : a.count;
    o.esize = esize;
    o.dt = a.dt;
    o.op = a.op;
    o.root = root;
    try {
      alg_start(o);
    } catch (...) {
      c.ops.release(&o);
      return -FI_ENOMEM;
    }
    ++g->next_seq;
    launch(c, o);
    return 0;
  } catch (const error& err) {
    return -err.code();
  } catch (...) {
    return -FI_ENOMEM;
  }
}

ssize_t op_barrier(fid_ep* ep, fi_addr_t coll_addr, void* context) noexcept {
  return start(ep, {coll_kind::barrier, nullptr, 0, nullptr, coll_addr, 0, FI_INT8, FI_NOOP, 0, context});
}
ssize_t op_barrier2(fid_ep* ep, fi_addr_t coll_addr, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::barrier, nullptr, 0, nullptr, coll_addr, 0, FI_INT8, FI_NOOP, flags, context});
}
ssize_t op_broadcast(fid_ep* ep, void* buf, size_t count, void*, fi_addr_t coll_addr, fi_addr_t root_addr,
                     fi_datatype dt, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::broadcast, buf, count, nullptr, coll_addr, root_addr, dt, FI_NOOP, flags, context});
}
ssize_t op_alltoall(fid_ep* ep, const void* buf, size_t count, void*, void* result, void*, fi_addr_t coll_addr,
                    fi_datatype dt, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::alltoall, buf, count, result, coll_addr, 0, dt, FI_NOOP, flags, context});
}
ssize_t op_allreduce(fid_ep* ep, const void* buf, size_t count, void*, void* result, void*, fi_addr_t coll_addr,
                     fi_datatype dt, fi_op op, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::allreduce, buf, count, result, coll_addr, 0, dt, op, flags, context});
}
ssize_t op_allgather(fid_ep* ep, const void* buf, size_t count, void*, void* result, void*, fi_addr_t coll_addr,
                     fi_datatype dt, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::allgather, buf, count, result, coll_addr, 0, dt, FI_NOOP, flags, context});
}
ssize_t op_reduce_scatter(fid_ep* ep, const void* buf, size_t count, void*, void* result, void*,
                          fi_addr_t coll_addr, fi_datatype dt, fi_op op, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::reduce_scatter, buf, count, result, coll_addr, 0, dt, op, flags, context});
}
ssize_t op_reduce(fid_ep* ep, const void* buf, size_t count, void*, void* result, void*, fi_addr_t coll_addr,
                  fi_addr_t root_addr, fi_datatype dt, fi_op op, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::reduce, buf, count, result, coll_addr, root_addr, dt, op, flags, context});
}
ssize_t op_scatter(fid_ep* ep, const void* buf, size_t count, void*, void* result, void*, fi_addr_t coll_addr,
                   fi_addr_t root_addr, fi_datatype dt, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::scatter, buf, count, result, coll_addr, root_addr, dt, FI_NOOP, flags, context});
}
ssize_t op_gather(fid_ep* ep, const void* buf, size_t count, void*, void* result, void*, fi_addr_t coll_addr,
                  fi_addr_t root_addr, fi_datatype dt, uint64_t flags, void* context) noexcept {
  return start(ep, {coll_kind::gather, buf, count, result, coll_addr, root_addr, dt, FI_NOOP, flags, context});
}

// fi_msg_collective: one operand ioc (none for a barrier) and at most one
// result ioc, whose counts must be what the operation reads and writes.
ssize_t op_msg(fid_ep* ep, const fi_msg_collective* msg, fi_ioc* resultv, void**, size_t result_count,
               uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (msg->iov_count > 1 || result_count > 1 || (msg->iov_count && !msg->msg_iov) || (result_count && !resultv))
    return -FI_EINVAL;
  const void* buf = msg->iov_count ? msg->msg_iov[0].addr : nullptr;
  const size_t count = msg->iov_count ? msg->msg_iov[0].count : 0;
  void* result = result_count ? resultv[0].addr : nullptr;
  const size_t rcount = result_count ? resultv[0].count : 0;
  switch (msg->coll) {
    case FI_BARRIER:
      if (msg->iov_count || result_count) return -FI_EINVAL;
      return op_barrier2(ep, msg->coll_addr, flags, msg->context);
    case FI_BROADCAST:
      if (result_count) return -FI_EINVAL;
      return op_broadcast(ep, const_cast<void*>(buf), count, nullptr, msg->coll_addr, msg->root_addr,
                          msg->datatype, flags, msg->context);
    case FI_ALLREDUCE:
      if (rcount != count) return -FI_EINVAL;
      return op_allreduce(ep, buf, count, nullptr, result, nullptr, msg->coll_addr, msg->datatype, msg->op,
                          flags, msg->context);
    case FI_REDUCE:
      if (result_count && rcount != count) return -FI_EINVAL;
      return op_reduce(ep, buf, count, nullptr, result, nullptr, msg->coll_addr, msg->root_addr, msg->datatype,
                       msg->op, flags, msg->context);
    case FI_ALLGATHER:
    case FI_REDUCE_SCATTER:
    case FI_ALLTOALL:
    case FI_SCATTER:
    case FI_GATHER:
      // The per-member slice is the smaller of the two: checked against the
      // group's size by the operation below (sizes differ by n).
      break;
    default:
      return -FI_EINVAL;
  }
  // Sliced operations: count is the slice; the other side holds n slices.
  endpoint& e = ep_of(ep);
  size_t n = 0;
  if (coll_engine* c = e.coll.load(std::memory_order_acquire)) {
    engine_lock lk(*c);
    if (coll_group* g = find_group(*c, msg->coll_addr)) n = g->size;
  }
  if (!n) return -FI_EINVAL;
  switch (msg->coll) {
    case FI_ALLGATHER:
      if (rcount / n != count || rcount % n) return -FI_EINVAL;
      return op_allgather(ep, buf, count, nullptr, result, nullptr, msg->coll_addr, msg->datatype, flags,
                          msg->context);
    case FI_ALLTOALL:
      if (rcount != count || count % n) return -FI_EINVAL;
      return op_alltoall(ep, buf, count / n, nullptr, result, nullptr, msg->coll_addr, msg->datatype, flags,
                         msg->context);
    case FI_REDUCE_SCATTER:
      if (count / n != rcount || count % n) return -FI_EINVAL;
      return op_reduce_scatter(ep, buf, rcount, nullptr, result, nullptr, msg->coll_addr, msg->datatype, msg->op,
                               flags, msg->context);
    case FI_SCATTER:
      if (msg->iov_count && (count % n)) return -FI_EINVAL;
      return op_scatter(ep, buf, rcount, nullptr, result, nullptr, msg->coll_addr, msg->root_addr, msg->datatype,
                        flags, msg->context);
    default:  // FI_GATHER
      if (result_count && (rcount / n != count || rcount % n)) return -FI_EINVAL;
      return op_gather(ep, buf, count, nullptr, result, nullptr, msg->coll_addr, msg->root_addr, msg->datatype,
                       flags, msg->context);
  }
}

// A transfer of `o` ended with err (0: it did not fail): the first error
// is the operation's.
void note_xfer_err(coll_op& o, int err) noexcept {
  if (!err) return;
  int none = 0;
  o.xfer_err.compare_exchange_strong(none, err, std::memory_order_release);
}

}  // namespace

// ------------------------------------------------------------------ interface
void coll_tx_done(void* ctx, int err) noexcept {
  if (!ctx) return;
  switch (static_cast<coll_ctx*>(ctx)->kind) {
    case ctx_kind::op: {
      auto* o = static_cast<coll_op*>(ctx);
      note_xfer_err(*o, err);
      o->sends_done.fetch_add(1, std::memory_order_release);
      return;
    }
    case ctx_kind::ctl:
      static_cast<coll_ctl*>(ctx)->state.store(err ? 1 + err : 1, std::memory_order_release);
      return;
    case ctx_kind::sink:
      return;
  }
}

void coll_rx_done(void* ctx, size_t len, int err) noexcept {
  if (!ctx) return;
  switch (static_cast<coll_ctx*>(ctx)->kind) {
    case ctx_kind::op: {
      auto* o = static_cast<coll_op*>(ctx);
      note_xfer_err(*o, err);
      o->recv_bytes.fetch_add(len, std::memory_order_relaxed);
      o->recvs_done.fetch_add(1, std::memory_order_release);
      return;
    }
    case ctx_kind::sink: {
      coll_engine& c = *static_cast<coll_sink*>(ctx)->eng;
      c.sink_len.store(uint32_t(len), std::memory_order_relaxed);
      c.sink_state.store(err ? 2 : 1, std::memory_order_release);
      return;
    }
    case ctx_kind::ctl:
      return;
  }
}

void coll_progress(coll_engine& c) noexcept {
  if (!c.lock.try_lock()) return;
  if (!c.running) {
    c.running = true;
    run(c);
    c.running = false;
  }
  c.lock.unlock();
}

bool coll_arm(coll_engine& c) noexcept {
  if (!c.lock.try_lock()) return false;
  bool ok = !c.eagain && c.ctl_pending.empty() && c.sink_state.load(std::memory_order_acquire) == 0;
  for (coll_op* o : c.active) {
    if (!ok) break;
    // Transfers all ended (the next step waits for progress), or a wait
    // long enough that members must be probed: no sleep.
    const bool ended = o->sends_done.load(std::memory_order_acquire) >= o->sends &&
                       o->recvs_done.load(std::memory_order_acquire) >= o->recvs;
    ok = !ended && !o->failing && (!o->wait_since_ms || now_ms() < o->wait_since_ms + probe_after_ms);
  }
  for (coll_ctl* x : c.ctl_live)
    if (ok && x->state.load(std::memory_order_acquire)) ok = false;
  c.lock.unlock();
  return ok;
}

void coll_close(endpoint& e) noexcept {
  coll_engine* c = e.coll.exchange(nullptr, std::memory_order_acq_rel);
  if (!c) return;
  if (e.eq) eq_del_poller(e.eq, eq_poller, &e);
  {
    ep_guard lk(e);
    auto& list = posted_list(e, true);
    for (auto it = list.begin(); it != list.end();) {
      auto next = std::next(it);
      if (it->flags & flag_coll) recv_drop(e, list, it);
      it = next;
    }
    e.rx->coll = false;
  }
  for (coll_group* g : c->zombies) delete g;
  // fi_endpoint(3) lets an endpoint close before its groups (fi_close is
  // -FI_EBUSY only for a scalable endpoint's open contexts): the groups the
  // application has not closed outlive the engine, their operations gone,
  // until their own fi_close frees them; one it closed whose slot stayed
  // taken goes now.
  {
    engine_lock lk(*c);
    for (auto& slot : c->groups) {
      if (!slot) continue;
      if (slot->closed) {
        slot.reset();
      } else {
        slot->eng = nullptr;
        (void)slot.release();
      }
    }
  }
  delete c;
}

int coll_join(fid_ep* f, const void* addr, uint64_t flags, fid_mc** mc, void* context) noexcept {
  if (!(flags & FI_COLLECTIVE)) return -FI_ENOSYS;
  return guard([&]() -> int {
    if (!f || !addr || !mc) return -FI_EINVAL;
    if (!only(flags, FI_COLLECTIVE | FI_SEND | FI_RECV)) return -FI_EBADFLAGS;
    endpoint& e = ep_of(f);
    if (e.role != ep_role::endpoint || !e.coll_send || !e.info || !e.info->ep_attr ||
        e.info->ep_attr->type != FI_EP_RDM || !(e.caps & FI_COLLECTIVE))
      return -FI_EOPNOTSUPP;
    if (!e.enabled) return -FI_EOPBADSTATE;
    if (!e.eq) return -FI_ENOEQ;
    if (!e.tx_cq) return -FI_ENOCQ;
    if (e.rx != &e.own_rx) return -FI_EOPNOTSUPP;  // a shared receive context: not ours alone
    const auto* ca = static_cast<const fi_collective_addr*>(addr);
    av_set* set = av_set::from(ca->set);
    if (!set || set->owner != e.av) return -FI_EINVAL;
    std::vector<fi_addr_t> members;
    fi_addr_t set_addr;
    {
      std::lock_guard l(set->m);
      members.assign(set->members.begin(), set->members.end());
      set_addr = set->addr;
    }
    const size_t n = members.size();
    if (n == 0 || n > max_members) return -FI_EINVAL;

    // Our own rank: where our address stands in the set. Every member's
    // address goes into the group's hash; a set naming one endpoint twice
    // is refused.
    char me[512];
    size_t me_len = sizeof me;
    if (!e.fid_.cm || !e.fid_.cm->getname || e.fid_.cm->getname(&e.fid_.fid, me, &me_len) || me_len > sizeof me)
      return -FI_EOPNOTSUPP;
    int64_t rank = -1;
    uint64_t hash = fnv(1469598103934665603ULL, &n, sizeof n);
    std::unordered_set<std::string> seen;
    for (size_t i = 0; i < n; ++i) {
      size_t len = 0;
      const void* a = e.av->lookup(members[i], &len);
      if (!a) return -FI_EINVAL;  // removed from the AV since
      if (!seen.emplace(static_cast<const char*>(a), len).second) return -FI_EINVAL;
      if (rank < 0 && len == me_len && !memcmp(a, me, len)) rank = int64_t(i);
      hash = fnv(fnv(hash, &len, sizeof len), a, len);
    }
    if (rank < 0) return -FI_EINVAL;  // the endpoint is not a member of the set

    std::lock_guard ctl(e.ctl);
    coll_engine& c = engine_for(e);
    engine_lock lk(c);
    if (ca->coll_addr != set_addr) {
      // A subgroup of a group this endpoint joined.
      coll_group* parent = find_group(c, ca->coll_addr);
      if (!parent || parent->st != coll_group::state::joined) return -FI_EINVAL;
      for (fi_addr_t m : members)
        if (rank_of(*parent, *e.av, m) < 0) return -FI_EINVAL;
    }
    // A local group id, round robin so that a closed one is reused late.
    uint16_t cid = 0;
    for (uint32_t k = 0; k < cid_max && !cid; ++k) {
      const uint16_t cand = uint16_t(1 + (c.next_cid + k) % cid_max);
      if (!c.groups[cand]) cid = cand;
    }
    if (!cid) return -FI_ENOSPC;
    c.next_cid = cid;
    const uint32_t count = ++c.join_counts[hash];
    uint64_t k64 = hash ^ (uint64_t(count) * 0x9E3779B97F4A7C15ULL);
    k64 ^= k64 >> 29;
    k64 *= 0xBF58476D1CE4E5B9ULL;
    k64 ^= k64 >> 32;

    auto g = std::make_unique<coll_group>();
    g->mc.fid.fclass = FI_CLASS_MC;
    g->mc.fid.context = context;
    g->mc.fid.ops = &mc_fi_ops;
    g->eng = &c;
    g->cid = cid;
    g->instance = c.next_instance++;
    g->mc.fi_addr = mc_magic | uint64_t(g->instance) << 16 | cid;
    g->hash = hash;
    g->key = uint32_t(k64) & ((1u << 29) - 1);
    g->rank = uint32_t(rank);
    g->size = uint32_t(n);
    g->members = std::move(members);
    g->join_context = context;

    // The join: an allgather of each member's record (hash of the set, its
    // group id, rank, size) in the join space.
    coll_op* o = new_op(c, *g, coll_kind::join);
    try {
      o->join_buf.resize(16 * (n + 1));
      uint8_t* rec = o->join_buf.data() + 16 * n;
      const uint16_t r16 = uint16_t(rank);
      const uint32_t n32 = uint32_t(n);
      memcpy(rec, &hash, 8);
      memcpy(rec + 8, &cid, 2);
      memcpy(rec + 10, &r16, 2);
      memcpy(rec + 12, &n32, 4);
      o->src = rec;
      o->res = o->join_buf.data();
      o->count = 16;
      o->esize = 1;
      o->dt = FI_UINT8;
      alg_start(*o);
    } catch (...) {
      c.ops.release(o);
      throw;
    }
    coll_group* gp = g.get();
    c.groups[cid] = std::move(g);
    *mc = &gp->mc;
    launch(c, *o);
    return 0;
  });
}

int coll_query(domain& dom, fi_collective_op coll, fi_collective_attr* attr, uint64_t flags) noexcept {
  if (!attr || attr->mode) return -FI_EINVAL;
  if (!only(flags, FI_SCATTER)) return -FI_EBADFLAGS;
  // The provider offers collectives on its RDM endpoints (udp does not).
  bool offered = false;
  try {
    for (const auto& t : *dom.prov->templates())
      if (t->caps & FI_COLLECTIVE) offered = true;
  } catch (...) {
    return -FI_ENOMEM;
  }
  if (!offered) return -FI_ENOSYS;
  switch (coll) {
    case FI_BARRIER:
      attr->datatype_attr.count = 0;
      attr->datatype_attr.size = 0;
      attr->max_members = max_members;
      return 0;
    case FI_BROADCAST:
    case FI_ALLTOALL:
    case FI_ALLGATHER:
    case FI_SCATTER:
    case FI_GATHER:
      break;
    case FI_ALLREDUCE:
    case FI_REDUCE_SCATTER:
    case FI_REDUCE:
      if (!reduce_valid(attr->op, attr->datatype)) return -FI_EOPNOTSUPP;
      break;
    default:
      return -FI_EINVAL;
  }
  const size_t size = datatype_size(attr->datatype);
  if (!size) return -FI_EOPNOTSUPP;
  attr->datatype_attr.size = size;
  attr->datatype_attr.count = (SIZE_MAX / 2) / size / max_members;
  attr->max_members = max_members;
  return 0;
}

fi_ops_collective coll_ops = {sizeof(fi_ops_collective),
                              op_barrier,
                              op_broadcast,
                              op_alltoall,
                              op_allreduce,
                              op_allgather,
                              op_reduce_scatter,
                              op_reduce,
                              op_scatter,
                              op_gather,
                              op_msg,
                              op_barrier2};

fi_ops_collective coll_ops_none = {sizeof(fi_ops_collective),
                                   WEFT_NOSYS(fi_ops_collective, barrier),
                                   WEFT_NOSYS(fi_ops_collective, broadcast),
                                   WEFT_NOSYS(fi_ops_collective, alltoall),
                                   WEFT_NOSYS(fi_ops_collective, allreduce),
                                   WEFT_NOSYS(fi_ops_collective, allgather),
                                   WEFT_NOSYS(fi_ops_collective, reduce_scatter),
                                   WEFT_NOSYS(fi_ops_collective, reduce),
                                   WEFT_NOSYS(fi_ops_collective, scatter),
                                   WEFT_NOSYS(fi_ops_collective, gather),
                                   WEFT_NOSYS(fi_ops_collective, msg),
                                   WEFT_NOSYS(fi_ops_collective, barrier2)};

}  // namespace weft
