// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: RMA. The initiator validates every access against the target
// domain's published registration table before it moves a byte, then picks
// one protocol:
//
//   mapped   both sides' registrations are shrink-sealed memfds: memcpy
//   cma      process_vm_readv/writev into the target's address space
//   split    a large contiguous write: the initiator copies half, the
//            target's progress loop the other half (op::write_help)
//   cells    without CMA: the data (or a read request) travels through the
//            target's queue and the target validates again
//
// Return values as in shm_msg.cpp: 0 once the operation is taken (errors
// found later are completions), -FI_E* only when nothing was done.
#include <cstring>

#include "core/log.hpp"
#include "prov/shm/shm.hpp"
#include "util/ep_ops.hpp"
#include "util/mr.hpp"

namespace weft::shm {

namespace {

// Resolves the remote side of an RMA against the target's table: fills
// remote[] (target addresses) or returns a positive FI_E* code. When every
// piece lies in a mapped shared backing (try_map), *mapped is true and
// remote[] holds our addresses of those bytes instead.
int resolve_remote(peer& p, const fi_rma_iov* riov, size_t rcount, uint64_t access, iovec* remote,
                   size_t* nremote, bool try_map, bool* mapped) {
  if (!map_domain(p)) return FI_EIO;
  size_t n = 0;
  bool all_mapped = try_map;
  uintptr_t shift[iov_max * mr_iov_max];  // our address minus the target's, per piece
  for (size_t i = 0; i < rcount; ++i) {
    mr_entry me;
    if (!lookup_mr(p.domain_region.base(), riov[i].key, &me)) return FI_EACCES;
    iovec pieces[mr_iov_max];
    size_t count = 0;
    int ret = mr_entry_resolve(me, riov[i].addr, riov[i].len, access, pieces, &count);
    if (ret) return FI_EACCES;
    unsigned char* local = all_mapped ? mapped_mr(p, me) : nullptr;
    if (!local) all_mapped = false;
    for (size_t j = 0; j < count; ++j) {
      if (n == iov_max * mr_iov_max) return FI_EINVAL;
      // A mapped registration has one segment: offsets are from its first byte.
      shift[n] = reinterpret_cast<uintptr_t>(local) - static_cast<uintptr_t>(me.seg[0].addr);
      remote[n++] = pieces[j];
    }
  }
  if (all_mapped)
    for (size_t j = 0; j < n; ++j)
      remote[j].iov_base =
          reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(remote[j].iov_base) + shift[j]);
  *mapped = all_mapped;
  *nremote = n;
  return 0;
}

// memcpy between a local iov and mapped remote pieces of the same total length.
void map_copy(bool write, const iovec* local, size_t lc, const iovec* remote, size_t rc) noexcept {
  size_t li = 0, ri = 0, lo = 0, ro = 0;
  while (li < lc && ri < rc) {
    size_t n = std::min(local[li].iov_len - lo, remote[ri].iov_len - ro);
    auto* l = static_cast<unsigned char*>(local[li].iov_base) + lo;
    auto* r = static_cast<unsigned char*>(remote[ri].iov_base) + ro;
    if (n) write ? memcpy(r, l, n) : memcpy(l, r, n);
    lo += n;
    ro += n;
    if (lo == local[li].iov_len) ++li, lo = 0;
    if (ro == remote[ri].iov_len) ++ri, ro = 0;
  }
}

// The registration (key and offset) holding [buf, buf + len) when it has a
// shared backing a target can map: from the application's descriptor.
bool local_backing(ep& e, void* desc, const void* buf, size_t len, uint64_t* key, uint64_t* off) noexcept {
  if (!desc || !e.dom->mrs || e.dom->mrs->check_local(desc, buf, len, 0, key) != 0) return false;
  auto& sd = shm_domain::of(*e.dom);
  mr_entry me;
  if (!lookup_mr(sd.region.base(), *key, &me) || !(me.prov[0] & backing_valid) || me.iov_count != 1)
    return false;
  *off = reinterpret_cast<uintptr_t>(buf) - me.seg[0].addr;
  return true;
}

// How long an initiator waits for a target that took its part of a split
// write (a copy of at most a few MiB) before it gives up.
constexpr uint64_t split_stuck_us = 5'000'000;

// A large write to one contiguous remote range: copies [0, first) here (with
// memcpy when `mapped`, else CMA) and offers the rest to the target
// (op::write_help). `dst` is our mapping of the target's bytes (mapped) or
// the target's address (CMA). Returns 0 or a FI_E* code.
int split_write(ep& e, peer& p, bool mapped, void* dst, const unsigned char* src, size_t len,
                const help_desc& offer) noexcept {
  const size_t first = (len / 2) & ~size_t{4095};
  uint32_t gen;
  uint32_t s = arm_split(e, &gen);
  std::atomic<uint32_t>& word = e.me.splits()[s].word;
  help_desc d = offer;
  d.slot = s;
  d.gen = gen;
  if (d.mode == help_mapped) d.src += first;
  if (d.mode == help_cma) d.src = reinterpret_cast<uintptr_t>(src) + first;
  d.dst_addr += first;
  d.len = len - first;
  hdr_fields h{};
  h.opcode = op::write_help;
  // Offered only when the cell goes out now (a backlogged cell would come too late).
  const bool offered = e.backlog.empty() && send_cell(e, p, h, &d, sizeof d);
  auto copy = [&](size_t off, size_t n) -> int {
    if (mapped) {
      memcpy(static_cast<unsigned char*>(dst) + off, src + off, n);
      return 0;
    }
    iovec l{const_cast<unsigned char*>(src) + off, n}, r{static_cast<unsigned char*>(dst) + off, n};
    return cma_copy(true, p.pid, &l, 1, &r, 1, 0, n);
  };
  int err = copy(0, offered ? first : len);
  if (offered) {
    uint32_t expect = split_word(gen, split_armed);
    uint64_t started_us = 0;
    for (uint32_t spins = 0;; ++spins) {
      uint32_t st = word.load(std::memory_order_acquire) & 7;
      if (st == split_armed) {
        if (word.compare_exchange_strong(expect, split_word(gen, split_sender), std::memory_order_acq_rel)) {
          if (!err) err = copy(first, len - first);  // not taken: copy it here
          break;
        }
        continue;
      }
      if (st == split_done) break;
      if (st == split_failed) {
        if (!err) err = copy(first, len - first);
        break;
      }
      // The target is copying: it ends the slot, unless it dies meanwhile.
      if ((spins & 1023) == 1023) {
        if (!pid_alive(p.pid)) {
          err = FI_EIO;
          break;
        }
        // A target stopped in the middle of its copy: give up on it, and
        // never reuse the slot it may still write to.
        if (!started_us) started_us = now_us();
        if (now_us() - started_us > split_stuck_us) {
          WEFT_WARN(FI_LOG_EP_DATA, "shm: target %d stopped in a split write; slot %u retired", p.pid, s);
          return FI_ETIMEDOUT;
        }
      }
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }
  e.split_busy &= ~(uint64_t{1} << s);
  return err;
}

enum class rma_proto : uint8_t { mapped, cma, split, cells };

// The remote side of an RMA, resolved against the target's table.
struct remote_side {
  iovec iov[iov_max * mr_iov_max];
  size_t count = 0;
  bool mapped = false;  // iov holds our mapping of the target's bytes
};

// Tells the target about an RMA it did not take part in, when it counts
// remote events or the write carries remote CQ data.
int notify(ep& e, peer& p, bool write, size_t len, const fi_rma_iov& riov, uint64_t data,
           uint64_t flags) noexcept {
  const bool target_events = p.view().hdr()->rma_events.load(std::memory_order_acquire);
  if (!(write && (flags & FI_REMOTE_CQ_DATA)) && !target_events) return 0;
  hdr_fields h{};
  h.opcode = op::notify;
  h.size = len;
  h.data = data;
  h.flags = (write ? 0 : flag_read) | ((flags & FI_REMOTE_CQ_DATA) ? flag_remote_cq_data : 0);
  rma_desc d{riov.addr, riov.key, len, 0};
  return send_cell(e, p, h, &d, sizeof d) ? 0 : FI_ENOMEM;
}

// Without CMA: one request per remote iov, each with its slice of the local
// iov; the last one completes the operation. Everything is allocated before
// the first cell goes, so a failure leaves nothing behind.
ssize_t rma_cells(ep& e, peer& p, bool write, const iovec* iov, size_t count, const fi_rma_iov* riov,
                  size_t rcount, uint64_t data, void* context, uint64_t cq_flags, uint64_t flags) noexcept {
  request* reqs[iov_max] = {};
  size_t made = 0;
  auto undo = [&] {
    for (size_t i = 0; i < made; ++i) finish_request(e, reqs[i]);
    return -FI_ENOMEM;
  };
  size_t local_off = 0;
  for (; made < rcount; ++made) {
    request* r = new_request(e, &p, write ? req_kind::write : req_kind::read, context, cq_flags, flags,
                             riov[made].len);
    if (!r) return undo();
    reqs[made] = r;
    r->needs_completion = made + 1 == rcount;
    // This request's slice of the local iov.
    size_t skip = local_off, want = riov[made].len;
    for (size_t j = 0; j < count && want; ++j) {
      if (skip >= iov[j].iov_len) {
        skip -= iov[j].iov_len;
        continue;
      }
      size_t n = std::min(iov[j].iov_len - skip, want);
      r->iov[r->iov_count++] = {static_cast<char*>(iov[j].iov_base) + skip, n};
      want -= n;
      skip = 0;
    }
    local_off += riov[made].len;
    r->rma = rma_desc{riov[made].addr, riov[made].key, riov[made].len, 0};
    if (!write) continue;
    try {
      if (flags & FI_INJECT) {  // the buffer is reusable on return: keep a copy
        r->staged.resize(r->len);
        iov_copy_from(r->iov, r->iov_count, 0, r->staged.data(), r->len);
        r->iov[0] = {r->staged.data(), r->len};
        r->iov_count = 1;
      }
      e.outgoing.push_back(r);
    } catch (...) {
      ++made;
      return undo();
    }
    r->tmpl.opcode = op::write;
    r->tmpl.data = data;
    r->tmpl.flags = ((flags & FI_REMOTE_CQ_DATA) && r->needs_completion) ? flag_remote_cq_data : 0;
  }
  if (write) {
    push_outgoing(e);
    return 0;
  }
  for (size_t i = 0; i < rcount; ++i) {
    hdr_fields h{};
    h.opcode = op::read_req;
    h.id = reqs[i]->id;
    h.size = reqs[i]->len;
    if (send_cell(e, p, h, &reqs[i]->rma, sizeof reqs[i]->rma)) continue;
    // Out of memory with earlier pieces on their way: the rest is dropped and
    // the operation completes in error.
    for (size_t j = i; j < rcount; ++j) finish_request(e, reqs[j]);
    tx_fail(e, context, cq_flags, flags, FI_ENOMEM, 0);
    return 0;
  }
  return 0;
}

}  // namespace

ssize_t rma(ep& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
            const fi_rma_iov* riov, size_t rcount, uint64_t data, void* context, uint64_t flags) noexcept {
  const size_t len = iov_total(iov, count);
  const uint64_t cq_flags = FI_RMA | (write ? FI_WRITE : FI_READ);
  ep_guard g(e);
  if (fence_blocked(e, flags, [&e] { return ops_outstanding(e); })) [[unlikely]]
    return -FI_EAGAIN;
  peer_ref to = peer_of(e, addr);
  if (!to.p) [[unlikely]]
    return unreachable(e, addr, to.why, context, cq_flags, flags);
  peer& p = *to.p;
  remote_side rs;
  if (int err = resolve_remote(p, riov, rcount, write ? FI_REMOTE_WRITE : FI_REMOTE_READ, rs.iov, &rs.count,
                               p.cma && e.map_mr, &rs.mapped)) {
    tx_fail(e, context, cq_flags, flags, err, 0);
    return 0;
  }
  // Pick the protocol.
  help_desc offer{};
  offer.dst_key = riov[0].key;
  offer.dst_addr = riov[0].addr;
  rma_proto proto = rs.mapped ? rma_proto::mapped : p.cma ? rma_proto::cma : rma_proto::cells;
  const bool splittable = write && len >= split_min && e.split_enabled && count == 1 && rs.count == 1 &&
                          rcount == 1 && e.split_busy != ~uint64_t{0};
  if (splittable && rs.mapped && desc &&
      local_backing(e, desc[0], iov[0].iov_base, len, &offer.src_key, &offer.src)) {
    offer.mode = help_mapped;
    proto = rma_proto::split;
  } else if (splittable && !rs.mapped && p.cma && e.cma) {
    offer.mode = help_cma;  // the target pulls its part from us with process_vm_readv
    proto = rma_proto::split;
  }
  int err = 0;
  switch (proto) {
    case rma_proto::cells:
      return rma_cells(e, p, write, iov, count, riov, rcount, data, context, cq_flags, flags);
    case rma_proto::split:
      err = split_write(e, p, rs.mapped, rs.iov[0].iov_base,
                        static_cast<const unsigned char*>(iov[0].iov_base), len, offer);
      break;
    case rma_proto::mapped:
      map_copy(write, iov, count, rs.iov, rs.count);
      break;
    case rma_proto::cma:
      err = cma_copy(write, p.pid, iov, count, rs.iov, rs.count, 0, len);
      break;
  }
  if (!err) err = notify(e, p, write, len, riov[0], data, flags);
  if (err)
    tx_fail(e, context, cq_flags, flags, err, 0);
  else
    tx_done(e, context, cq_flags, flags, len);
  return 0;
}

// ------------------------------------------------------------------ target side
namespace {
void respond(ep& e, uint32_t slot, op opcode, uint64_t id, uint64_t err, uint64_t offset, uint32_t flags,
             const void* payload, size_t len) noexcept {
  peer* p = sender_of(e, slot);
  if (!p) return;
  hdr_fields h{};
  h.opcode = opcode;
  h.id = id;
  h.data = err;
  h.tag = offset;
  h.flags = flags;
  send_cell(e, *p, h, payload, len);
}
}  // namespace

void handle_notify(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  if (h.len < sizeof(rma_desc)) return;
  if (h.flags & flag_read)
    remote_read_done(e);
  else
    remote_write_done(e, h.flags & flag_remote_cq_data, h.size, h.data);
}

// A piece of a write carried in cells: validated against our own table.
void handle_write(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  rma_desc d;
  if (h.len < sizeof d) return;
  memcpy(&d, c->payload, sizeof d);
  const size_t n = h.len - sizeof d;
  const uint64_t off = h.offset;
  iovec pieces[mr_iov_max];
  size_t count = 0;
  const int ret = (off > d.len || n > d.len - off)
                      ? -FI_EINVAL
                      : e.dom->mrs->resolve(d.key, d.addr + off, n, FI_REMOTE_WRITE, pieces, &count);
  if (ret) {
    respond(e, h.src, op::ack, h.id, FI_EACCES, 0, 0, nullptr, 0);
    return;
  }
  iov_copy_to(pieces, count, 0, c->payload + sizeof d, n);
  if (h.flags & flag_last) {
    remote_write_done(e, h.flags & flag_remote_cq_data, h.size, h.data);
    respond(e, h.src, op::ack, h.id, 0, 0, 0, nullptr, 0);
  }
}

// A read without CMA: the data goes back in cells, validated against our table.
void handle_read_req(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  rma_desc d;
  if (h.len < sizeof d) return;
  memcpy(&d, c->payload, sizeof d);
  iovec pieces[mr_iov_max];
  size_t count = 0;
  if (e.dom->mrs->resolve(d.key, d.addr, d.len, FI_REMOTE_READ, pieces, &count)) {
    respond(e, h.src, op::read_resp, h.id, FI_EACCES, 0, flag_last, nullptr, 0);
    return;
  }
  unsigned char chunk[inject_max];
  for (uint64_t off = 0; off < d.len || d.len == 0; off += inject_max) {
    const size_t n = std::min<uint64_t>(inject_max, d.len - off);
    iov_copy_from(pieces, count, off, chunk, n);
    const bool last = off + n >= d.len;
    respond(e, h.src, op::read_resp, h.id, 0, off, last ? flag_last : 0, chunk, n);
    if (last) break;
  }
  remote_read_done(e);
}

void handle_read_resp(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  request* r = e.requests.find(h.id);
  if (!r || r->kind != req_kind::read) return;
  if (h.data) {
    tx_fail(e, r->context, r->flags, r->op_flags, static_cast<int>(h.data), 0);
    finish_request(e, r);
    return;
  }
  if (h.offset <= r->len)
    iov_copy_to(r->iov, r->iov_count, h.offset, c->payload, std::min<size_t>(h.len, r->len - h.offset));
  if (h.flags & flag_last) {
    if (r->needs_completion) tx_done(e, r->context, r->flags, r->op_flags, r->len);
    finish_request(e, r);
  }
}

// Target side of a split write: copy the offered part into our own
// registration, if the slot is still armed: from the initiator's mapped
// backing, or with process_vm_readv from its address space.
void handle_write_help(ep& e, cell* c) noexcept {
  help_desc d;
  memcpy(&d, c->payload, sizeof d);
  peer* p = sender_of(e, c->h.src);
  if (!p || d.slot >= split_slots) return;
  std::atomic<uint32_t>& word = p->view().splits()[d.slot].word;
  uint32_t expect = split_word(d.gen, split_armed);
  if (!word.compare_exchange_strong(expect, split_word(d.gen, split_receiver), std::memory_order_acq_rel))
    return;  // the initiator copied it already
  bool ok = false;
  void* dst = nullptr;
  // The destination is checked again against our own table.
  if (e.dom->mrs && e.dom->mrs->check(d.dst_key, d.dst_addr, d.len, FI_REMOTE_WRITE, &dst) == 0) {
    mr_entry me;
    if (d.mode == help_mapped) {
      // The source against the initiator's published table.
      if (e.map_mr && map_domain(*p) && lookup_mr(p->domain_region.base(), d.src_key, &me) &&
          me.iov_count == 1 && (me.flags & mr_entry_enabled) && d.src <= me.seg[0].len &&
          d.len <= me.seg[0].len - d.src) {
        if (const unsigned char* src = mapped_mr(*p, me)) {
          memcpy(dst, src + d.src, d.len);
          ok = true;
        }
      }
    } else if (d.mode == help_cma && e.cma) {
      // The initiator's own memory, which it asked us to read.
      iovec l{dst, d.len}, r{reinterpret_cast<void*>(d.src), d.len};
      ok = cma_copy(false, p->pid, &l, 1, &r, 1, 0, d.len) == 0;
    }
  }
  word.store(split_word(d.gen, ok ? split_done : split_failed), std::memory_order_release);
  WEFT_DEBUG(FI_LOG_EP_DATA, "shm: split write (%s): %s %llu bytes for slot %u",
             d.mode == help_mapped ? "mapped" : "cma", ok ? "copied" : "refused",
             static_cast<unsigned long long>(d.len), c->h.src);
}

}  // namespace weft::shm
