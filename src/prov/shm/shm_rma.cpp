// prov/shm: RMA. The initiator validates every access against the target
// domain's published registration table before it moves a byte; with CMA it
// then moves the data itself, without CMA it sends the data (or the read
// request) through the target's queue and the target validates again.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bit>
#include <cstring>

#include "core/log.hpp"
#include "prov/shm/shm_ep.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/mr.hpp"

namespace weft::shm {

peer::~peer() {
  for (remote_map& m : maps)
    if (m.base) munmap(m.base, m.size);
}

namespace {

constexpr uint64_t rma_flags_ok = FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                  FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA | FI_FENCE | FI_MORE | FI_RMA |
                                  FI_READ | FI_WRITE | FI_COMMIT_COMPLETE;

bool map_domain(peer& p) {
  if (p.domain_region.base()) return true;
  const char* file = p.view().hdr()->domain_region;
  char name[name_max];
  memcpy(name, file, name_max);
  name[name_max - 1] = 0;
  if (!p.domain_region.open(name, domain_region_size)) return false;
  auto* h = reinterpret_cast<const domain_hdr*>(p.domain_region.base());
  if (h->magic != domain_magic || h->version != proto_version) {
    p.domain_region.reset();
    return false;
  }
  return true;
}

// Our mapping of a registration's shared backing: the local address of its
// first byte, or nullptr (no backing, or it cannot be mapped: then CMA).
constexpr size_t remote_maps_max = 16;

unsigned char* mapped_mr(peer& p, const mr_entry& me) noexcept {
  if (!(me.prov[0] & backing_valid) || me.iov_count != 1) return nullptr;
  const uint32_t gen = backing_gen(me.prov[0]);
  const uint64_t off = me.prov[1];
  // Accesses are bounded by the segment (what mr_entry_resolve checks against).
  const uint64_t len = me.seg[0].len;
  if (off > UINT64_MAX - len) return nullptr;
  for (peer::remote_map& m : p.maps)
    if (m.gen == gen) {
      if (!m.base) return nullptr;
      if (off + len <= m.size) return m.base + off;
      // The file has grown since we mapped it: map it again below.
      munmap(m.base, m.size);
      m = p.maps.back();
      p.maps.pop_back();
      break;
    }
  peer::remote_map m{gen, nullptr, 0};
  // The owner's duplicate of the fd, fetched with the same ptrace check as CMA.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, p.pid, 0));
  int fd = pidfd < 0 ? -1 : static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, backing_fd(me.prov[0]), 0));
  if (pidfd >= 0) close(pidfd);
  struct stat st;
  const int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
  // Trust nothing the table says: same inode, regular file, sealed against
  // shrinking (so the mapping can never fault), and long enough.
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_ino) == me.prov[2] && seals >= 0 && (seals & F_SEAL_SHRINK) &&
      static_cast<uint64_t>(st.st_size) >= off + len) {
    void* base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base != MAP_FAILED) {
      m.base = static_cast<unsigned char*>(base);
      m.size = static_cast<size_t>(st.st_size);
    }
  }
  if (fd >= 0) close(fd);
  try {
    if (p.maps.size() >= remote_maps_max) {
      if (p.maps.front().base) munmap(p.maps.front().base, p.maps.front().size);
      p.maps.erase(p.maps.begin());
    }
    p.maps.push_back(m);
  } catch (...) {
    if (m.base) munmap(m.base, m.size);
    return nullptr;
  }
  return m.base ? m.base + off : nullptr;
}

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
      if ((spins & 1023) == 1023 && !pid_alive(p.pid)) {
        err = FI_EIO;
        break;
      }
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }
  e.split_busy &= ~(uint64_t{1} << s);
  return err;
}

ssize_t rma_generic(ep& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
                    const fi_rma_iov* riov, size_t rcount, uint64_t data, void* context,
                    uint64_t flags) noexcept {
  if (!e.enabled) [[unlikely]]
    return -FI_EOPBADSTATE;
  if (count > iov_max || rcount > iov_max || !rcount || (count && !iov) || !riov || !iov_valid(iov, count))
      [[unlikely]]
    return -FI_EINVAL;
  size_t len = iov_total(iov, count), rlen = 0;
  for (size_t i = 0; i < rcount; ++i) rlen += riov[i].len;
  if (len != rlen) return -FI_EINVAL;
  if ((flags & FI_INJECT) && (!write || len > e.inject_size)) return -FI_EINVAL;
  const uint64_t cq_flags = FI_RMA | (write ? FI_WRITE : FI_READ);
  ep_guard g(e);
  if (fence_blocked(e, flags)) [[unlikely]]
    return -FI_EAGAIN;
  peer* p = peer_of(e, addr);
  if (!p || p->dead) {
    if (!e.av || !e.av->lookup(addr)) return -FI_EINVAL;
    tx_fail(e, context, cq_flags, flags, FI_EIO, 0);
    return 0;
  }
  iovec remote[iov_max * mr_iov_max];
  size_t nremote = 0;
  bool mapped = false;
  if (int err = resolve_remote(*p, riov, rcount, write ? FI_REMOTE_WRITE : FI_REMOTE_READ, remote, &nremote,
                               p->cma && e.map_mr, &mapped)) {
    tx_fail(e, context, cq_flags, flags, err, 0);
    return 0;
  }
  bool target_events = p->view().hdr()->rma_events.load(std::memory_order_acquire);
  // A large write to one contiguous range is split with the target.
  help_desc offer{};
  offer.dst_key = riov[0].key;
  offer.dst_addr = riov[0].addr;
  const bool split = write && len >= split_min && e.split_enabled && count == 1 && nremote == 1 &&
                     rcount == 1 && e.split_busy != ~uint64_t{0};
  if (split && mapped && desc && local_backing(e, desc[0], iov[0].iov_base, len, &offer.src_key, &offer.src))
    offer.mode = help_mapped;
  else if (split && !mapped && p->cma && e.cma)
    offer.mode = help_cma;  // the target pulls its part from us with process_vm_readv
  if (offer.mode) {
    if (int err = split_write(e, *p, mapped, remote[0].iov_base,
                              static_cast<const unsigned char*>(iov[0].iov_base), len, offer)) {
      tx_fail(e, context, cq_flags, flags, err, 0);
      return 0;
    }
  } else if (mapped) {
    map_copy(write, iov, count, remote, nremote);
  } else if (p->cma) {
    if (int err = cma_copy(write, p->pid, iov, count, remote, nremote, 0, len)) {
      tx_fail(e, context, cq_flags, flags, err, 0);
      return 0;
    }
  }
  if (mapped || p->cma) {
    if ((write && (flags & FI_REMOTE_CQ_DATA)) || target_events) {
      hdr_fields h{};
      h.opcode = op::notify;
      h.size = len;
      h.data = data;
      h.flags = (write ? 0 : flag_read) | ((flags & FI_REMOTE_CQ_DATA) ? flag_remote_cq_data : 0);
      rma_desc d{riov[0].addr, riov[0].key, len, 0};
      if (!send_cell(e, *p, h, &d, sizeof d)) return -FI_ENOMEM;
    }
    tx_done(e, context, cq_flags, flags, len);
    return 0;
  }

  // Without CMA: one request per remote iov; the last one completes the operation.
  size_t local_off = 0;
  for (size_t i = 0; i < rcount; ++i) {
    request* r = new_request(e);
    if (!r) return -FI_ENOMEM;
    r->kind = write ? req_kind::write : req_kind::read;
    r->context = context;
    r->flags = cq_flags;
    r->op_flags = flags;
    r->len = riov[i].len;
    r->peer_pid = p->pid;
    r->to = p;
    r->needs_completion = i + 1 == rcount;
    // This request's slice of the local iov.
    size_t skip = local_off, want = riov[i].len;
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
    local_off += riov[i].len;
    r->rma = rma_desc{riov[i].addr, riov[i].key, riov[i].len, 0};
    if (write) {
      if (flags & FI_INJECT) {
        // The buffer is reusable on return: keep a copy.
        try {
          r->staged.resize(r->len);
        } catch (...) {
          finish_request(e, r->id);
          return -FI_ENOMEM;
        }
        iov_copy_from(r->iov, r->iov_count, 0, r->staged.data(), r->len);
        r->iov[0] = {r->staged.data(), r->len};
        r->iov_count = 1;
      }
      r->tmpl.opcode = op::write;
      r->tmpl.data = data;
      r->tmpl.flags = ((flags & FI_REMOTE_CQ_DATA) && r->needs_completion) ? flag_remote_cq_data : 0;
      try {
        e.outgoing.push_back(r);
      } catch (...) {
        finish_request(e, r->id);
        return -FI_ENOMEM;
      }
    } else {
      hdr_fields h{};
      h.opcode = op::read_req;
      h.id = r->id;
      h.size = r->len;
      if (!send_cell(e, *p, h, &r->rma, sizeof r->rma)) return -FI_ENOMEM;
    }
  }
  progress(e);
  return 0;
}

// ------------------------------------------------------------------ target side
void remote_event(ep& e, bool write, uint32_t cflags, uint64_t len, uint64_t data) {
  if (write) {
    if (e.cntr_rwrite) cntr_inc(e.cntr_rwrite);
    if ((cflags & flag_remote_cq_data) && e.rx_cq)
      cq_write(e.rx_cq, nullptr, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, len, nullptr, data, 0);
  } else if (e.cntr_rread) {
    cntr_inc(e.cntr_rread);
  }
}

void respond(ep& e, uint32_t slot, op opcode, uint64_t id, uint64_t err, uint64_t offset, uint32_t flags,
             const void* payload, size_t len) {
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

namespace {
// Target side of a split write: copy the offered part into our own
// registration, if the slot is still armed: from the initiator's mapped
// backing, or with process_vm_readv from its address space.
void handle_write_help(ep& e, const cell* c) noexcept {
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
}  // namespace

void handle_rma_cell(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  rma_desc d;
  switch (h.opcode) {
    case op::write_help:
      handle_write_help(e, c);
      return;
    case op::notify:
      if (h.len < sizeof d) return;
      remote_event(e, !(h.flags & flag_read), h.flags, h.size, h.data);
      return;
    case op::write: {
      if (h.len < sizeof d) return;
      memcpy(&d, c->payload, sizeof d);
      size_t n = h.len - sizeof d;
      uint64_t off = h.tag;
      iovec pieces[mr_iov_max];
      size_t count = 0;
      int ret = (off > d.len || n > d.len - off)
                    ? -FI_EINVAL
                    : e.dom->mrs->resolve(d.key, d.addr + off, n, FI_REMOTE_WRITE, pieces, &count);
      if (!ret) iov_copy_to(pieces, count, 0, c->payload + sizeof d, n);
      if (ret) {
        respond(e, h.src, op::ack, h.id, FI_EACCES, 0, 0, nullptr, 0);
      } else if (h.flags & flag_last) {
        remote_event(e, true, h.flags, h.size, h.data);
        respond(e, h.src, op::ack, h.id, 0, 0, 0, nullptr, 0);
      }
      return;
    }
    case op::read_req: {
      if (h.len < sizeof d) return;
      memcpy(&d, c->payload, sizeof d);
      iovec pieces[mr_iov_max];
      size_t count = 0;
      int ret = e.dom->mrs->resolve(d.key, d.addr, d.len, FI_REMOTE_READ, pieces, &count);
      if (ret) {
        respond(e, h.src, op::read_resp, h.id, FI_EACCES, 0, flag_last, nullptr, 0);
        return;
      }
      unsigned char chunk[inject_max];
      for (uint64_t off = 0; off < d.len || d.len == 0; off += inject_max) {
        size_t n = std::min<uint64_t>(inject_max, d.len - off);
        iov_copy_from(pieces, count, off, chunk, n);
        bool last = off + n >= d.len;
        respond(e, h.src, op::read_resp, h.id, 0, off, last ? flag_last : 0, chunk, n);
        if (last) break;
      }
      remote_event(e, false, 0, d.len, 0);
      return;
    }
    case op::read_resp: {
      auto it = e.pending.find(h.id);
      if (it == e.pending.end()) return;
      request* r = it->second.get();
      if (h.data) {
        tx_fail(e, r->context, r->flags, r->op_flags, static_cast<int>(h.data), 0);
        finish_request(e, r->id);
        return;
      }
      if (h.tag <= r->len)
        iov_copy_to(r->iov, r->iov_count, h.tag, c->payload, std::min<size_t>(h.len, r->len - h.tag));
      r->received += h.len;
      if (h.flags & flag_last) {
        if (r->needs_completion) tx_done(e, r->context, r->flags, r->op_flags, r->len);
        finish_request(e, r->id);
      }
      return;
    }
    default:
      return;
  }
}

namespace {

ssize_t r_read(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t addr, uint64_t key,
               void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v{buf, len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(e, false, &v, &desc, 1, src, &r, 1, 0, ctx, tx_flags_of(f, e));
}
ssize_t r_readv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src, uint64_t addr,
                uint64_t key, void* ctx) noexcept {
  ep& e = ep_of(f);
  fi_rma_iov r{addr, iov_total(iov, count), key};
  return rma_generic(e, false, iov, desc, count, src, &r, 1, 0, ctx, tx_flags_of(f, e));
}
ssize_t r_readmsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, rma_flags_ok)) return -FI_EBADFLAGS;
  return rma_generic(ep_of(f), false, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->rma_iov,
                     msg->rma_iov_count, msg->data, msg->context, flags);
}
ssize_t r_write(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t dest, uint64_t addr,
                uint64_t key, void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v{const_cast<void*>(buf), len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(e, true, &v, &desc, 1, dest, &r, 1, 0, ctx, tx_flags_of(f, e));
}
ssize_t r_writev(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest, uint64_t addr,
                 uint64_t key, void* ctx) noexcept {
  ep& e = ep_of(f);
  fi_rma_iov r{addr, iov_total(iov, count), key};
  return rma_generic(e, true, iov, desc, count, dest, &r, 1, 0, ctx, tx_flags_of(f, e));
}
ssize_t r_writemsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, rma_flags_ok)) return -FI_EBADFLAGS;
  return rma_generic(ep_of(f), true, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->rma_iov,
                     msg->rma_iov_count, msg->data, msg->context, flags);
}
ssize_t r_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                 uint64_t key) noexcept {
  iovec v{const_cast<void*>(buf), len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(ep_of(f), true, &v, nullptr, 1, dest, &r, 1, 0, nullptr, FI_INJECT | flag_no_cq);
}
ssize_t r_writedata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data, fi_addr_t dest,
                    uint64_t addr, uint64_t key, void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v{const_cast<void*>(buf), len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(e, true, &v, &desc, 1, dest, &r, 1, data, ctx, tx_flags_of(f, e) | FI_REMOTE_CQ_DATA);
}
ssize_t r_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t addr,
                     uint64_t key) noexcept {
  iovec v{const_cast<void*>(buf), len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(ep_of(f), true, &v, nullptr, 1, dest, &r, 1, data, nullptr,
                     FI_INJECT | FI_REMOTE_CQ_DATA | flag_no_cq);
}

}  // namespace

fi_ops_rma rma_ops = {sizeof(fi_ops_rma), r_read,     r_readv,  r_readmsg,   r_write,
                      r_writev,           r_writemsg, r_inject, r_writedata, r_injectdata};

}  // namespace weft::shm
