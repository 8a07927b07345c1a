// prov/shm: RMA. The initiator validates every access against the target
// domain's published registration table before it moves a byte; with CMA it
// then moves the data itself, without CMA it sends the data (or the read
// request) through the target's queue and the target validates again.
#include <unistd.h>

#include <cstring>

#include "prov/shm/shm_ep.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/mr.hpp"

namespace weft::shm {

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

// Resolves the remote side of an RMA against the target's table: fills
// remote[] (target addresses) or returns a positive FI_E* code.
int resolve_remote(peer& p, const fi_rma_iov* riov, size_t rcount, uint64_t access, iovec* remote,
                   size_t* nremote) {
  if (!map_domain(p)) return FI_EIO;
  size_t n = 0;
  for (size_t i = 0; i < rcount; ++i) {
    mr_entry me;
    if (!lookup_mr(p.domain_region.base(), riov[i].key, &me)) return FI_EACCES;
    iovec pieces[mr_iov_max];
    size_t count = 0;
    int ret = mr_entry_resolve(me, riov[i].addr, riov[i].len, access, pieces, &count);
    if (ret) return FI_EACCES;
    for (size_t j = 0; j < count; ++j) {
      if (n == iov_max * mr_iov_max) return FI_EINVAL;
      remote[n++] = pieces[j];
    }
  }
  *nremote = n;
  return 0;
}


ssize_t rma_generic(ep& e, bool write, const iovec* iov, size_t count, fi_addr_t addr, const fi_rma_iov* riov,
                    size_t rcount, uint64_t data, void* context, uint64_t flags) noexcept {
  if (!e.enabled) [[unlikely]]
    return -FI_EOPBADSTATE;
  if (count > iov_max || rcount > iov_max || !rcount || (count && !iov) || !riov) [[unlikely]]
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
  if (int err = resolve_remote(*p, riov, rcount, write ? FI_REMOTE_WRITE : FI_REMOTE_READ, remote, &nremote)) {
    tx_fail(e, context, cq_flags, flags, err, 0);
    return 0;
  }
  bool target_events = p->view().hdr()->rma_events.load(std::memory_order_acquire);
  if (p->cma) {
    if (int err = cma_copy(write, p->pid, iov, count, remote, nremote, 0, len)) {
      tx_fail(e, context, cq_flags, flags, err, 0);
      return 0;
    }
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

void handle_rma_cell(ep& e, cell* c) noexcept {
  const cell_hdr& h = c->h;
  rma_desc d;
  switch (h.opcode) {
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
      if (h.tag <= r->len) iov_copy_to(r->iov, r->iov_count, h.tag, c->payload, std::min<size_t>(h.len, r->len - h.tag));
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

ssize_t r_read(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t addr, uint64_t key,
               void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v{buf, len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(e, false, &v, 1, src, &r, 1, 0, ctx, tx_flags_of(f, e));
}
ssize_t r_readv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
                void* ctx) noexcept {
  ep& e = ep_of(f);
  fi_rma_iov r{addr, iov_total(iov, count), key};
  return rma_generic(e, false, iov, count, src, &r, 1, 0, ctx, tx_flags_of(f, e));
}
ssize_t r_readmsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, rma_flags_ok)) return -FI_EBADFLAGS;
  return rma_generic(ep_of(f), false, msg->msg_iov, msg->iov_count, msg->addr, msg->rma_iov, msg->rma_iov_count,
                     msg->data, msg->context, flags);
}
ssize_t r_write(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t addr, uint64_t key,
                void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v{const_cast<void*>(buf), len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(e, true, &v, 1, dest, &r, 1, 0, ctx, tx_flags_of(f, e));
}
ssize_t r_writev(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                 void* ctx) noexcept {
  ep& e = ep_of(f);
  fi_rma_iov r{addr, iov_total(iov, count), key};
  return rma_generic(e, true, iov, count, dest, &r, 1, 0, ctx, tx_flags_of(f, e));
}
ssize_t r_writemsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept {
  if (!msg) return -FI_EINVAL;
  if (!only(flags, rma_flags_ok)) return -FI_EBADFLAGS;
  return rma_generic(ep_of(f), true, msg->msg_iov, msg->iov_count, msg->addr, msg->rma_iov, msg->rma_iov_count,
                     msg->data, msg->context, flags);
}
ssize_t r_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key) noexcept {
  iovec v{const_cast<void*>(buf), len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(ep_of(f), true, &v, 1, dest, &r, 1, 0, nullptr, FI_INJECT | flag_no_cq);
}
ssize_t r_writedata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest, uint64_t addr,
                    uint64_t key, void* ctx) noexcept {
  ep& e = ep_of(f);
  iovec v{const_cast<void*>(buf), len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(e, true, &v, 1, dest, &r, 1, data, ctx, tx_flags_of(f, e) | FI_REMOTE_CQ_DATA);
}
ssize_t r_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t addr,
                     uint64_t key) noexcept {
  iovec v{const_cast<void*>(buf), len};
  fi_rma_iov r{addr, len, key};
  return rma_generic(ep_of(f), true, &v, 1, dest, &r, 1, data, nullptr,
                     FI_INJECT | FI_REMOTE_CQ_DATA | flag_no_cq);
}

}  // namespace

fi_ops_rma rma_ops = {sizeof(fi_ops_rma), r_read,   r_readv,     r_readmsg,   r_write,
                      r_writev,           r_writemsg, r_inject, r_writedata, r_injectdata};

}  // namespace weft::shm
