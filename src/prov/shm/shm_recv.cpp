// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: the receive side — messages arriving in our queue (matched
// against posted receives through util's matcher, or parked as unexpected),
// fragments, the rendezvous pull and its split copy, and the matcher's
// questions about the messages shm parked.
#include <cstring>

#include "prov/shm/shm.hpp"
#include "util/rx.hpp"

namespace weft::shm {

namespace {

// unexpected::kind for shm's entries.
constexpr uint32_t ux_rndv = 1;        // desc holds an rndv_desc: the data is still with the sender
constexpr uint32_t ux_acked = 1 << 8;  // the sender waits for op::ack

void deliver_bytes(ep& e, recv_list& list, recv_list::iterator it, bool tagged,
                   const void* data, uint64_t size, uint32_t cflags, uint64_t tag, uint64_t cq_data,
                   fi_addr_t src) noexcept {
  const posted_recv r = *it;
  const landing l = landing_of(r);
  const size_t n = std::min<uint64_t>(size, l.room);
  iov_copy_to(l.iov, l.count, 0, data, n);
  const uint64_t flags = recv_cq_flags(tagged, cflags & flag_remote_cq_data) | consume(e, list, it, n);
  rx_finish(e, r, flags, n, size, 0, l.buf, cq_data, tag, src);
}

void finish_split(ep& e, split_recv& s, int err) noexcept {
  e.split_busy &= ~(uint64_t{1} << s.slot);
  send_ack(e, s.src_slot, s.id, err);
  rx_finish(e, s.recv, s.cq_flags, s.n, s.size, err, s.buf, s.data, s.tag, s.src);
}

// How long the receiver leaves the second part to a sender that has not
// started on it: past this, it copies the part itself.
constexpr uint64_t split_patience_us = 200;

void deliver_rndv(ep& e, recv_list& list, recv_list::iterator it, bool tagged,
                  const rndv_desc& d, uint64_t size, uint32_t cflags, uint64_t tag, uint64_t cq_data,
                  fi_addr_t src, uint32_t slot, uint64_t id) noexcept {
  const posted_recv r = *it;
  const landing l = landing_of(r);
  const size_t n = std::min<uint64_t>(size, l.room);
  const uint64_t first = (n / 2) & ~uint64_t{4095};
  uint64_t flags = recv_cq_flags(tagged, cflags & flag_remote_cq_data);
  peer* from = nullptr;
  bool room = false;
  if (e.split_enabled && n >= split_min && first && e.split_busy != ~uint64_t{0} &&
      (from = sender_of(e, slot)) && from->cma) {
    try {
      e.splits.emplace_back();  // before anything is offered: nothing to take back
      room = true;
    } catch (...) {
      // No memory to track a split: pull it all here.
    }
  }
  if (room) {
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
    split_recv& sr = e.splits.back();
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
    sr.cq_flags = flags | consume(e, list, it, n);
    sr.err = pull_desc(d, l.iov, l.count, 0, first);
    sr.armed_at_us = now_us();
    poll_splits(e);
    return;
  }
  const int err = pull_desc(d, l.iov, l.count, 0, n);
  flags |= consume(e, list, it, n);
  send_ack(e, slot, id, err);
  rx_finish(e, r, flags, n, size, err, l.buf, cq_data, tag, src);
}

// The first fragment of a message: into the matched receive, or into a new
// unexpected entry (ux).
void start_assembly(ep& e, const cell_hdr& h, uint64_t size, const posted_recv* recv, unexpected* ux,
                    uint64_t data, fi_addr_t src) {
  assembly a;
  if (recv) a.recv = *recv;
  a.src_slot = h.src;
  a.id = h.id;
  a.size = size;
  a.tag = h.tag;
  a.data = data;
  a.flags = h.flags;
  a.src = src;
  a.ux = ux;
  e.assemblies.push_back(a);
}

// ------------------------------------------------------------------ the matcher's questions
int rx_deliver(endpoint& owner, posted_recv&, const landing& l, unexpected& u, size_t n, uint64_t) noexcept {
  ep& e = ep::of(owner);
  if (u.kind & ux_rndv) {
    rndv_desc d;
    memcpy(&d, u.desc, sizeof d);
    const int err = n ? pull_desc(d, l.iov, l.count, 0, n) : 0;
    send_ack(e, static_cast<uint32_t>(u.peer), u.id, err);
    return err;
  }
  if (n) iov_copy_to(l.iov, l.count, 0, u.bytes.data(), n);
  if (u.kind & ux_acked) send_ack(e, static_cast<uint32_t>(u.peer), u.id, 0);
  return 0;
}

bool rx_adopt(endpoint& owner, posted_recv& r, unexpected& u) noexcept {
  ep& e = ep::of(owner);
  for (assembly& a : e.assemblies) {
    if (a.ux != &u) continue;
    a.ux = nullptr;
    a.recv = r;  // the whole receive (a multi-receive buffer gets what remains back at the end)
    a.tag = u.tag;
    a.data = u.data;
    a.src = (e.caps & FI_SOURCE) ? src_addr_of(e, static_cast<uint32_t>(u.peer)) : FI_ADDR_NOTAVAIL;
    const landing l = landing_of(r);
    iov_copy_to(l.iov, l.count, 0, u.bytes.data(), std::min<size_t>(u.filled, l.room));
    a.filled = u.filled;
    return true;
  }
  return false;  // its sender died: the rest never comes
}

void rx_discard(endpoint& owner, unexpected& u) noexcept {
  if (u.kind & (ux_rndv | ux_acked)) send_ack(ep::of(owner), static_cast<uint32_t>(u.peer), u.id, 0);
}

fi_addr_t rx_source(endpoint& owner, uint64_t peer) noexcept {
  return src_addr_of(ep::of(owner), static_cast<uint32_t>(peer));
}

}  // namespace

const rx_transport rx_answers = {rx_deliver, rx_adopt, rx_discard, rx_source};

// ------------------------------------------------------------------ arrivals
arrival handle_message(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  if (e.dgram && h.opcode != op::msg) [[unlikely]] {
    // A fragment stream or rendezvous (an RDM peer's large message): a
    // datagram endpoint reassembles nothing. Its sender hears why; the
    // fragments that follow find no assembly and are dropped.
    send_ack(e, h.src, h.id, FI_EMSGSIZE);
    return arrival::done;
  }
  // The size is read once: the cell stays in the sender's reach, and a
  // sender that rewrote it after cell_sane looked must not make the
  // unexpected buffer, the assembly and the copies disagree on it.
  const uint64_t size = __atomic_load_n(&h.size, __ATOMIC_RELAXED);
  if (h.opcode == op::msg && size > inject_max) [[unlikely]] {
    WEFT_WARN(FI_LOG_EP_DATA, "shm: dropped a message cell rewritten after its check (slot %u)",
              static_cast<unsigned>(h.src));
    return arrival::done;
  }
  const bool tagged = h.flags & flag_tagged;
  fi_addr_t src = (e.caps & FI_SOURCE) ? src_addr_of(e, h.src) : FI_ADDR_NOTAVAIL;
  auto& list = posted_list(e, tagged);
  auto it = match_posted(e, tagged, h.tag, &src, [&] { return src_addr_of(e, h.src); });
  const uint64_t data = (h.flags & flag_remote_cq_data) ? h.data : 0;
  if (it != list.end()) {
    switch (h.opcode) {
      case op::msg:
        deliver_bytes(e, list, it, tagged, (h.flags & flag_inline) ? h.inl : c->payload, size, h.flags,
                      h.tag, data, src);
        if (h.flags & (flag_want_ack | flag_ack_arrival)) send_ack(e, h.src, h.id, 0);
        return arrival::done;
      case op::rndv: {
        rndv_desc d;
        memcpy(&d, c->payload, sizeof d);
        deliver_rndv(e, list, it, tagged, d, size, h.flags, h.tag, data, src, h.src, h.id);
        return arrival::done;
      }
      default: {  // the first fragment: the receive is taken off the list until the last one
        start_assembly(e, h, size, &*it, nullptr, data, src);
        recv_drop(e, list, it);
        handle_fragment(e, c);
        return arrival::done;
      }
    }
  }
  // Unexpected: parked up to the matcher's bounds, else left in the queue.
  const size_t bytes = h.opcode == op::rndv ? 0 : size;
  unexpected* u = ux_add(e, tagged, bytes);
  if (!u) return arrival::held_back;
  u->peer = h.src;
  u->src = src;
  u->tag = h.tag;
  u->data = data;
  u->remote_cq_data = h.flags & flag_remote_cq_data;
  u->size = size;
  u->id = h.id;
  u->kind = (h.flags & flag_want_ack) ? ux_acked : 0;
  if (h.opcode == op::rndv) {
    u->kind |= ux_rndv;
    memcpy(u->desc, c->payload, sizeof(rndv_desc));
    return arrival::done;
  }
  u->bytes.resize(size);
  if (h.opcode == op::msg) {
    if (size) memcpy(u->bytes.data(), (h.flags & flag_inline) ? h.inl : c->payload, size);
    if (h.flags & flag_ack_arrival) send_ack(e, h.src, h.id, 0);  // transmit complete: it is ours now
    return arrival::done;
  }
  u->complete = false;
  start_assembly(e, h, size, nullptr, u, data, src);
  handle_fragment(e, c);
  return arrival::done;
}

void handle_fragment(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  for (auto it = e.assemblies.begin(); it != e.assemblies.end(); ++it) {
    if (it->src_slot != h.src || it->id != h.id) continue;
    // Offset and length read once each, the length clamped to the cell
    // (cell_sane looked at them before; the sender may have rewritten them).
    const uint64_t off = (h.flags & flag_first) ? 0 : __atomic_load_n(&h.offset, __ATOMIC_RELAXED);
    const size_t len = std::min<size_t>(__atomic_load_n(&h.len, __ATOMIC_RELAXED), inject_max);
    const size_t n = off < it->size ? std::min<size_t>(len, it->size - off) : 0;
    if (unexpected* u = it->ux) {
      if (n) memcpy(u->bytes.data() + off, c->payload, n);
      u->filled += n;
      if (u->filled >= u->size) {
        u->complete = true;
        e.assemblies.erase(it);
      }
      return;
    }
    const landing l = landing_of(it->recv);
    if (off < l.room) iov_copy_to(l.iov, l.count, off, c->payload, std::min<size_t>(n, l.room - off));
    it->filled += n;
    if (it->filled < it->size) return;
    const assembly a = *it;
    e.assemblies.erase(it);
    const size_t got = std::min<size_t>(a.size, l.room);
    const uint64_t flags =
        recv_cq_flags(a.flags & flag_tagged, a.flags & flag_remote_cq_data) | consume_taken(e, a.recv, got);
    send_ack(e, a.src_slot, a.id, 0);
    rx_finish(e, a.recv, flags, got, a.size, 0, l.buf, a.data, a.tag, a.src);
    return;
  }
  // No assembly: the receive was cancelled or the sender is unknown; dropped.
}

// ------------------------------------------------------------------ split copies
void poll_splits(ep& e) noexcept {
  for (auto it = e.splits.begin(); it != e.splits.end();) {
    split_recv& s = *it;
    std::atomic<uint32_t>& word = e.me.splits()[s.slot].word;
    const uint32_t st = word.load(std::memory_order_acquire) & 7;
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
      peer_slot& ps = e.me.peers()[s.src_slot];  // a slot cell_sane let in
      if (!pid_alive(ps.pid.load(std::memory_order_relaxed))) {  // died while copying: the part may be torn
        finish_split(e, s, FI_EIO);
        it = e.splits.erase(it);
        continue;
      }
    }
    if (mine) {
      const int err = s.err ? s.err : pull_desc(s.desc, s.iov, s.count, s.first, s.n - s.first);
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
void handle_cts(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  cts_desc d;
  memcpy(&d, c->payload, sizeof d);
  request* r = e.requests.find(h.id);
  if (!r || d.slot >= split_slots || d.iov_count > iov_max) return;
  peer* p = r->to;
  if (!p || r->kind != req_kind::send || d.offset > r->len || d.len > r->len - d.offset) return;
  std::atomic<uint32_t>& word = p->view().splits()[d.slot].word;
  uint32_t expect = split_word(d.gen, split_armed);
  if (!word.compare_exchange_strong(expect, split_word(d.gen, split_sender), std::memory_order_acq_rel))
    return;  // the receiver took it back
  iovec remote[iov_max];
  for (size_t i = 0; i < d.iov_count; ++i) remote[i] = {reinterpret_cast<void*>(d.iov[i].base), d.iov[i].len};
  const int err = cma_copy(true, d.pid, r->iov, r->iov_count, remote, d.iov_count, d.offset, d.len);
  word.store(split_word(d.gen, err ? split_failed : split_done), std::memory_order_release);
}

}  // namespace weft::shm
