// SPDX-License-Identifier: BSD-3-Clause
// Workers: per transport an RDM endpoint, AV and CQ; the progress engine
// (completions, queued operations, endpoint failures, connection management,
// keepalive); the worker address; wakeup (event fd, arm, wait, signal).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "ucp_int.hpp"

namespace wucp {

namespace {
constexpr size_t rx_count = 32;
constexpr size_t op_chunk = 64;
constexpr size_t cq_batch = 16;
}  // namespace

iface::~iface() {
  if (ep) fi_close(&ep->fid);
  if (cq) fi_close(&cq->fid);
  if (av) fi_close(&av->fid);
  for (rx_buf* b : rx) {
    b->o.~op();
    free(b);
  }
}

// ---------------------------------------------------------------- ops
void op_pool_grow(ucp_worker* w) noexcept {
  try {
    auto chunk = std::make_unique<op[]>(op_chunk);
    for (size_t i = 0; i < op_chunk; i++) {
      chunk[i].next_free = w->op_free;
      w->op_free = &chunk[i];
    }
    w->op_chunks.push_back(std::move(chunk));
  } catch (...) {}
}

void op_attach(op* o, ucp_ep* ep, request* r, bool counts) noexcept {
  o->ep = ep;
  o->req = r;
  if (ep) o->tp = ep->tp;
  if (r) {
    r->pending++;
    if (ep && !r->ep_link.linked()) {
      r->ep = ep;
      ep->reqs.push_back(&r->ep_link);
    }
  }
  if (counts && ep) {
    o->flags |= OPF_COUNTS;
    ep->inflight++;
    ep->w->inflight++;
  }
}

void req_op_done(request* r, ucs_status_t st) noexcept {
  if (st != UCS_OK && r->status == UCS_INPROGRESS) r->status = st;
  if (r->pending) r->pending--;
  if (r->pending) return;
  if (r->flags & RF_COMPLETED) {
    req_maybe_release(r);
    return;
  }
  if ((r->flags & RF_WAIT_ACK) && r->status == UCS_INPROGRESS) return;
  req_complete(r, r->status == UCS_INPROGRESS ? UCS_OK : r->status);
}

void op_finish(ucp_worker* w, op* o, ucs_status_t st) noexcept {
  ucp_ep* ep = o->ep;
  if (o->ep_link.linked()) o->ep_link.unlink();
  if (o->flags & OPF_COUNTS) {
    w->inflight--;
    if (ep) {
      ep->inflight--;
      if (!(o->flags & OPF_PENDING)) ep->issued--;
    }
  }
  if (o->type == OP_KEEPALIVE && ep) ep->ka_inflight = false;
  if (o->flags & OPF_LINGER) w->lingering--;
  if (st == UCS_OK && o->result_ptr) memcpy(o->result_ptr, &o->result, o->result_size);
  if ((o->flags & OPF_FREE_BOUNCE) && o->bounce) free(o->bounce);
  if (o->flags & OPF_AM_ACK) {
    am_read_done(w, o->bounce, st == UCS_OK);
    if (st == UCS_OK && o->req && o->req->bounce) st = recv_dt_end(o->req, o->req->info.length);
  }
  request* r = o->req;
  bool counted = o->flags & OPF_COUNTS;
  // A failed operation without a request (ucp_put_nbi, an injected put)
  // has nobody to tell but the next flush.
  if (counted && !r && st != UCS_OK && st != UCS_ERR_CANCELED) {
    if (ep && ep->nbi_error == UCS_OK) ep->nbi_error = st;
    if (w->nbi_error == UCS_OK) w->nbi_error = st;
  }
  op_free(w, o);
  if (r) req_op_done(r, st);
  if (counted) check_flushes(w, ep);
}

void check_flushes(ucp_worker* w, ucp_ep* ep) noexcept {
  if (ep && !ep->inflight) {
    if (!ep->flushes.empty()) {
      auto fl = std::move(ep->flushes);
      ep->flushes.clear();
      ucs_status_t st = ep->state == EP_FAILED ? ep->fail_status : std::exchange(ep->nbi_error, UCS_OK);
      for (request* r : fl) req_complete(r, st);
    }
    if (ep->close_stage) ep_close_progress(ep);
  }
  if (!w->inflight && !w->flushes.empty()) {
    auto fl = std::move(w->flushes);
    w->flushes.clear();
    ucs_status_t st = std::exchange(w->nbi_error, UCS_OK);
    for (request* r : fl) req_complete(r, st);
  }
}

// ---------------------------------------------------------------- issuing
void ensure_pending(ucp_ep* ep) noexcept {
  if (ep->on_pend_list) return;
  try {
    ep->w->pend_list.push_back(ep);
    ep->w->attn = true;
    ep->on_pend_list = true;
  } catch (...) {}
}

void enqueue(ucp_ep* ep, op* o) noexcept {
  o->flags |= OPF_PENDING;
  ep->pending.push_back(&o->ep_link);
  ensure_pending(ep);
}

// One-sided operations (RMA, atomics) go in order with ucp_worker_fence:
// after a fence an operation waits until those issued before it completed.
// -FI_EAGAIN: the caller queues it (enqueue).
int issue_one_sided(ucp_worker* w, ucp_ep* ep, op* o) noexcept {
  if (w->fence_epoch != ep->fence_epoch) {
    ep->fence_epoch = w->fence_epoch;
    if (ep->issued) o->flags |= OPF_FENCED;
  }
  bool direct = ep->pending.empty() && ep->dest != FI_ADDR_UNSPEC && !(o->flags & OPF_FENCED);
  return direct ? issue(w, o) : -FI_EAGAIN;
}

int issue(ucp_worker* w, op* o) noexcept {
  (void)w;
  if (o->ep) {
    // Queued before the peer's address was known (client/server): take it now.
    o->dest = o->ep->dest;
    o->tp = o->ep->tp;
  }
  fid_ep* fep = o->tp->ep;
  void* ctx = &o->fctx;
  ssize_t rc = 0;
  switch (o->type) {
    case OP_TSEND:
      if (o->flags & OPF_SYNC) {
        o->data = (uint64_t{1} << 63) | (uint64_t{o->ep->remote_id & 0x7fffffff} << 32) | o->req->id;
        fi_msg_tagged m{};
        m.msg_iov = o->iov;
        m.iov_count = o->niov;
        m.addr = o->dest;
        m.tag = o->tag;
        m.context = ctx;
        m.data = o->data;
        rc = fi_tsendmsg(fep, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION);
      } else if (o->niov == 1) {
        rc = fi_tsend(fep, o->iov[0].iov_base, o->iov[0].iov_len, nullptr, o->dest, o->tag, ctx);
      } else {
        rc = fi_tsendv(fep, o->iov, nullptr, o->niov, o->dest, o->tag, ctx);
      }
      break;
    case OP_MSEND:
    case OP_KEEPALIVE: {
      auto* f = reinterpret_cast<frame*>(o->hdr);
      f->dst = o->ep ? o->ep->remote_id : no_id;
      f->src = o->ep ? o->ep->id : no_id;
      rc = fi_sendv(fep, o->iov, nullptr, o->niov, o->dest, ctx);
      break;
    }
    case OP_WRITE: {
      fi_rma_iov riov{o->raddr, o->iov[0].iov_len, o->rkey};
      fi_msg_rma m{};
      m.msg_iov = o->iov;
      m.desc = o->desc ? &o->desc : nullptr;
      m.iov_count = 1;
      m.addr = o->dest;
      m.rma_iov = &riov;
      m.rma_iov_count = 1;
      m.context = ctx;
      uint64_t fl = FI_DELIVERY_COMPLETE | FI_COMPLETION;
      if (o->iov[0].iov_len <= o->tp->d->inject) fl |= FI_INJECT;
      rc = fi_writemsg(fep, &m, fl);
      break;
    }
    case OP_READ:
      rc = fi_read(fep, o->iov[0].iov_base, o->iov[0].iov_len, nullptr, o->dest, o->raddr, o->rkey, ctx);
      break;
    case OP_ATOMIC: {
      fi_ioc ioc{&o->operand, 1};
      fi_rma_ioc rioc{o->raddr, 1, o->rkey};
      fi_msg_atomic m{};
      m.msg_iov = &ioc;
      m.iov_count = 1;
      m.addr = o->dest;
      m.rma_iov = &rioc;
      m.rma_iov_count = 1;
      m.datatype = static_cast<fi_datatype>(o->adt);
      m.op = static_cast<fi_op>(o->aop);
      m.context = ctx;
      rc = fi_atomicmsg(fep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION);  // the operand lives in the op
      break;
    }
    case OP_FATOMIC:
      if (o->aop == FI_CSWAP)
        rc = fi_compare_atomic(fep, &o->operand, 1, nullptr, &o->compare, nullptr, &o->result, nullptr,
                               o->dest, o->raddr, o->rkey, static_cast<fi_datatype>(o->adt), FI_CSWAP, ctx);
      else
        rc = fi_fetch_atomic(fep, &o->operand, 1, nullptr, &o->result, nullptr, o->dest, o->raddr, o->rkey,
                             static_cast<fi_datatype>(o->adt), static_cast<fi_op>(o->aop), ctx);
      break;
    default:
      return -FI_EINVAL;
  }
  if (rc == 0) {
    if (o->flags & OPF_PENDING) {
      o->flags &= ~OPF_PENDING;
      o->ep_link.unlink();
    }
    if (o->ep) {
      o->flags |= OPF_ON_EP;
      o->ep->ops.push_back(&o->ep_link);
      if (o->flags & OPF_COUNTS) o->ep->issued++;
    }
  }
  return static_cast<int>(rc);
}

// Queued operations go out in order once their endpoint can take them.
bool progress_pending(ucp_worker* w) noexcept {
  bool any = false;
  for (size_t i = 0; i < w->pend_list.size();) {
    ucp_ep* ep = w->pend_list[i];
    while (!ep->pending.empty()) {
      op* o = owner<op, &op::ep_link>(ep->pending.next);
      if (ep->state == EP_FAILED || ep->state == EP_CLOSED) break;
      if (ep->dest == FI_ADDR_UNSPEC) break;
      if ((o->flags & OPF_NEEDS_ID) && ep->state != EP_CONNECTED) break;
      if ((o->flags & OPF_FENCED) && ep->issued) break;
      int rc = issue(w, o);
      if (rc == -FI_EAGAIN) break;
      any = true;
      if (rc < 0) {
        o->ep_link.unlink();
        o->flags &= ~OPF_PENDING;
        op_finish(w, o, from_fi(rc));
      }
    }
    if (ep->pending.empty()) {
      ep->on_pend_list = false;
      w->pend_list[i] = w->pend_list.back();
      w->pend_list.pop_back();
    } else {
      i++;
    }
  }
  return any;
}

namespace {
// A control frame (and payload) sent from a copy with a completion, never
// injected: waits on the worker's control queue while the provider pushes
// back. `flags`: OPF_LINGER counts it in w->lingering until it ends.
int send_ctrl_op(iface* tp, fi_addr_t dest, const frame& f, const void* payload, size_t len,
                 uint16_t flags) noexcept {
  ucp_worker* w = tp->w;
  op* o = op_alloc(w);
  if (!o) return -FI_ENOMEM;
  o->type = OP_MSEND;
  o->tp = tp;
  o->dest = dest;
  o->bounce = malloc(sizeof f + len);
  if (!o->bounce) {
    op_free(w, o);
    return -FI_ENOMEM;
  }
  o->flags |= OPF_FREE_BOUNCE | flags;
  if (flags & OPF_LINGER) w->lingering++;
  memcpy(o->bounce, &f, sizeof f);
  if (len) memcpy(static_cast<uint8_t*>(o->bounce) + sizeof f, payload, len);
  o->iov[0] = {o->bounce, sizeof f + len};
  o->niov = 1;
  ssize_t rc = w->ctrl_pending.empty() ? fi_send(tp->ep, o->bounce, sizeof f + len, nullptr, dest, &o->fctx)
                                       : -FI_EAGAIN;
  if (rc == -FI_EAGAIN) {
    try {
      w->ctrl_pending.push_back(o);
      w->attn = true;
      return 0;
    } catch (...) {
      rc = -FI_ENOMEM;
    }
  }
  if (rc) op_finish(w, o, from_fi(static_cast<int>(rc)));
  return static_cast<int>(rc);
}
}  // namespace

// A control frame that needs no completion (connection requests and replies,
// acknowledgements). It is injected when it can be; otherwise it goes from a
// copy, and when the provider pushes back (a peer not reached yet: libfabric's
// shm maps a peer's region on first contact) it waits on the worker's control
// queue, retried in order by progress. Never spins here: the peer may itself
// be waiting for us.
int send_ctrl_to(iface* tp, fi_addr_t dest, const frame& f, const void* payload, size_t len) noexcept {
  ucp_worker* w = tp->w;
  if (w->ctrl_pending.empty() && sizeof f + len <= tp->d->inject && sizeof f + len <= 512) {
    uint8_t buf[512];
    memcpy(buf, &f, sizeof f);
    if (len) memcpy(buf + sizeof f, payload, len);
    ssize_t rc = fi_inject(tp->ep, buf, sizeof f + len, dest);
    if (rc != -FI_EAGAIN) return static_cast<int>(rc);
  }
  return send_ctrl_op(tp, dest, f, payload, len, 0);
}

void send_close_frame(ucp_ep* ep, uint8_t type) noexcept {
  if (ep->state != EP_CONNECTED || ep->remote_id == ep->id || (ep->flags & EPF_REMOTE_CLOSED)) return;
  frame f{};
  f.type = type;
  f.dst = ep->remote_id;
  f.src = ep->id;
  (void)send_ctrl_op(ep->tp, ep->dest, f, nullptr, 0, OPF_LINGER);
}

bool progress_ctrl(ucp_worker* w) noexcept {
  size_t i = 0;
  for (; i < w->ctrl_pending.size(); i++) {
    op* o = w->ctrl_pending[i];
    ssize_t rc = fi_send(o->tp->ep, o->bounce, o->iov[0].iov_len, nullptr, o->dest, &o->fctx);
    if (rc == -FI_EAGAIN) break;
    if (rc) op_finish(w, o, from_fi(static_cast<int>(rc)));
  }
  w->ctrl_pending.erase(w->ctrl_pending.begin(), w->ctrl_pending.begin() + static_cast<long>(i));
  return i > 0;
}

int send_frame(ucp_ep* ep, const frame& f, const void* p1, size_t l1, const void* p2, size_t l2, request* r,
               bool copy) noexcept {
  ucp_worker* w = ep->w;
  op* o = op_alloc(w);
  if (!o) return -FI_ENOMEM;
  o->type = OP_MSEND;
  o->frame_type = f.type;
  memcpy(o->hdr, &f, sizeof f);
  o->dest = ep->dest;
  o->flags |= OPF_NEEDS_ID;
  op_attach(o, ep, r, true);
  size_t total = sizeof f + l1 + l2;
  bool direct = ep->state == EP_CONNECTED && ep->pending.empty();
  // Without a request the application may reuse its buffers at return: a
  // frame that cannot be injected now travels from a copy.
  if (!r && (copy || !direct)) {
    o->bounce = malloc(total);
    if (!o->bounce) {
      op_finish(w, o, UCS_ERR_NO_MEMORY);
      return -FI_ENOMEM;
    }
    o->flags |= OPF_FREE_BOUNCE;
    auto* b = static_cast<uint8_t*>(o->bounce);
    memcpy(b, &f, sizeof f);
    if (l1) memcpy(b + sizeof f, p1, l1);
    if (l2) memcpy(b + sizeof f + l1, p2, l2);
    // the header is rewritten at issue: point iov[0] at the op's header and the rest at the copy
    o->iov[0] = {o->hdr, sizeof f};
    o->iov[1] = {b + sizeof f, l1 + l2};
    o->niov = (l1 + l2) ? 2 : 1;
  } else {
    o->iov[0] = {o->hdr, sizeof f};
    o->niov = 1;
    if (l1) o->iov[o->niov++] = {const_cast<void*>(p1), l1};
    if (l2) o->iov[o->niov++] = {const_cast<void*>(p2), l2};
  }
  (void)total;
  if (!direct) {
    enqueue(ep, o);
    return 0;
  }
  int rc = issue(w, o);
  if (rc == -FI_EAGAIN) {
    enqueue(ep, o);
    return 0;
  }
  if (rc < 0) op_finish(w, o, from_fi(rc));
  return rc < 0 ? rc : 0;
}

// ---------------------------------------------------------------- receive buffers
int post_rx(iface* tp, rx_buf* b) noexcept {
  b->o.type = OP_MRECV;
  b->held = false;
  ssize_t rc;
  int tries = 0;
  while ((rc = fi_recv(tp->ep, b->data, b->size, nullptr, FI_ADDR_UNSPEC, &b->o.fctx)) == -FI_EAGAIN &&
         tries++ < 100) {}
  if (rc == 0) tp->rx_posted++;
  return static_cast<int>(rc);
}

namespace {
rx_buf* new_rx(iface* tp, size_t size) {
  void* mem = aligned_alloc(64, (sizeof(rx_buf) + size + 63) & ~size_t{63});
  if (!mem) throw std::bad_alloc();
  auto* b = new (mem) rx_buf();
  b->tp = tp;
  b->size = size;
  b->o.tp = tp;
  try {
    tp->rx.push_back(b);
  } catch (...) {
    b->~rx_buf();
    free(mem);
    throw;
  }
  return b;
}
}  // namespace

void repost_rx(iface* tp, rx_buf* b) noexcept {
  b->held = false;
  if (tp->rx_posted >= rx_count) {
    try {
      tp->rx_spare.push_back(b);
      return;
    } catch (...) {}
  }
  post_rx(tp, b);
}

void replace_rx(iface* tp, size_t size) noexcept {
  if (!tp->rx_spare.empty()) {
    rx_buf* spare = tp->rx_spare.back();
    tp->rx_spare.pop_back();
    post_rx(tp, spare);
    return;
  }
  try {
    post_rx(tp, new_rx(tp, size));
  } catch (...) {
    // No memory: one fewer posted until a held buffer comes back.
  }
}

namespace {

std::unique_ptr<iface> open_iface(ucp_worker* w, domain_tp* d) {
  auto tp = std::make_unique<iface>();
  tp->d = d;
  tp->w = w;
  tp->inject = d->inject;
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = 64;
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = 8192;
  cq_attr.wait_obj = FI_WAIT_NONE;
  int rc = fi_av_open(d->domain, &av_attr, &tp->av, nullptr);
  if (!rc) rc = fi_cq_open(d->domain, &cq_attr, &tp->cq, nullptr);
  if (!rc) rc = fi_endpoint(d->domain, d->info, &tp->ep, nullptr);
  if (!rc) rc = fi_ep_bind(tp->ep, &tp->av->fid, 0);
  if (!rc) rc = fi_ep_bind(tp->ep, &tp->cq->fid, FI_TRANSMIT | FI_RECV);
  if (!rc) rc = fi_enable(tp->ep);
  if (rc) {
    WUCP_LOG(rc == -FI_ENOSYS ? L_DIAG : L_WARN, "%s: endpoint not available: %s", tp_name(d->kind),
             fi_strerror(-rc));
    return nullptr;
  }
  size_t len = 256;
  tp->name.resize(len);
  rc = fi_getname(&tp->ep->fid, tp->name.data(), &len);
  if (rc || len > 255) return nullptr;
  tp->name.resize(len);
  size_t sz = w->ctx->cfg.rx_buf_size;
  for (size_t i = 0; i < rx_count; i++)
    if (post_rx(tp.get(), new_rx(tp.get(), sz))) return nullptr;
  return tp;
}
}  // namespace

// ---------------------------------------------------------------- address
void make_address(ucp_worker* w) {
  addr_hdr h{};
  h.magic = addr_magic;
  h.version = 1;
  h.count = static_cast<uint8_t>(w->tps.size());
  h.uuid = w->uuid;
  h.host = w->ctx->host_id;
  h.pid = static_cast<uint32_t>(getpid());
  std::vector<uint8_t> a(sizeof h);
  memcpy(a.data(), &h, sizeof h);
  for (auto& tp : w->tps) {
    a.push_back(tp->d->kind);
    a.push_back(static_cast<uint8_t>(tp->name.size()));
    a.insert(a.end(), tp->name.begin(), tp->name.end());
  }
  w->address = std::move(a);
}

size_t address_length(const void* a) noexcept {
  if (!a) return 0;
  addr_hdr h;
  memcpy(&h, a, sizeof h);
  if (h.magic != addr_magic || h.version != 1 || h.count > 8) return 0;
  auto* p = static_cast<const uint8_t*>(a) + sizeof h;
  size_t len = sizeof h;
  for (unsigned i = 0; i < h.count; i++) {
    len += 2 + p[1];
    p += 2 + p[1];
  }
  return len;
}

bool parse_address(const void* a, size_t len, peer_addr& out) noexcept {
  if (!a || len < sizeof(addr_hdr)) return false;
  addr_hdr h;
  memcpy(&h, a, sizeof h);
  if (h.magic != addr_magic || h.version != 1 || h.count > 8) return false;
  try {
    out = peer_addr{};
    out.uuid = h.uuid;
    out.host = h.host;
    out.pid = h.pid;
    auto* p = static_cast<const uint8_t*>(a) + sizeof h;
    size_t left = len - sizeof h;
    for (unsigned i = 0; i < h.count; i++) {
      if (left < 2 || left - 2 < p[1]) return false;
      out.ents.push_back({p[0], std::vector<uint8_t>(p + 2, p + 2 + p[1])});
      left -= 2 + p[1];
      p += 2 + p[1];
    }
  } catch (...) {
    return false;
  }
  return true;
}

// shm when the peer shares this host, tcp otherwise.
iface* pick_transport(ucp_worker* w, const peer_addr& pa, fi_addr_t* dest, ucs_status_t* st) {
  for (auto& tp : w->tps) {
    for (auto& e : pa.ents) {
      if (e.kind != tp->d->kind) continue;
      if (e.kind == TP_SHM && pa.host != w->ctx->host_id) continue;
      std::string key(e.bytes.begin(), e.bytes.end());
      auto it = tp->av_cache.find(key);
      if (it != tp->av_cache.end()) {
        *dest = it->second;
        return tp.get();
      }
      fi_addr_t fa = FI_ADDR_UNSPEC;
      int rc = fi_av_insert(tp->av, e.bytes.data(), 1, &fa, 0, nullptr);
      if (rc != 1) {
        WUCP_LOG(L_WARN, "%s: fi_av_insert failed (%d)", tp_name(e.kind), rc);
        continue;
      }
      tp->av_cache.emplace(std::move(key), fa);
      *dest = fa;
      return tp.get();
    }
  }
  *st = UCS_ERR_UNREACHABLE;
  return nullptr;
}

namespace {
// The <host> of an lnx address "fi_lnx://<host>;<shm name>;<tcp address>".
std::string lnx_host(const void* p, size_t len) {
  std::string a(static_cast<const char*>(p), strnlen(static_cast<const char*>(p), len));
  constexpr std::string_view prefix = "fi_lnx://";
  if (a.compare(0, prefix.size(), prefix) != 0) return {};
  return a.substr(prefix.size(), a.find(';') == std::string::npos ? 0 : a.find(';') - prefix.size());
}
}  // namespace

void set_path_names(ucp_ep* ep) {
  iface* tp = ep->tp;
  ep->tl_name = tp_name(tp->d->kind);
  ep->dev_name = tp->d->dev_name;
  if (tp->d->kind != TP_LNX) return;
  ep->tl_name = "tcp";
  const std::string mine = lnx_host(tp->name.data(), tp->name.size());
  for (auto& e : ep->peer.ents)
    if (e.kind == TP_LNX && !mine.empty() && lnx_host(e.bytes.data(), e.bytes.size()) == mine) {
      ep->tl_name = "shm";
      ep->dev_name = "memory";
    }
}

// ---------------------------------------------------------------- completions
void handle_cq_error(ucp_worker* w, iface* tp) noexcept {
  fi_cq_err_entry err{};
  if (fi_cq_readerr(tp->cq, &err, 0) != 1) return;
  op* o = op::of(err.op_context);
  if (!o) return;
  ucs_status_t st = from_fi(err.err);
  switch (o->type) {
    case OP_MRECV: {
      auto* b = reinterpret_cast<rx_buf*>(o);
      tp->rx_posted--;
      if (err.err != FI_ECANCELED && !w->destroying) post_rx(tp, b);
      return;
    }
    case OP_TRECV:
      if (o->req) {
        o->req->info.sender_tag = err.tag;
        o->req->info.length = err.len;
      }
      op_finish(w, o, st);
      return;
    case OP_TRECV_REQ: {
      auto* r = reinterpret_cast<request*>(err.op_context);
      r->ctx_type = 0;
      r->info.sender_tag = err.tag;
      r->info.length = err.len;
      r->pending = 0;
      req_complete(r, st);
      return;
    }
    case OP_TPEEK:
      o->flags |= OPF_PEEK_DONE;
      o->data = err.err;
      return;
    default:
      break;
  }
  // A transport error on an operation towards a peer fails its endpoint
  // (access errors of one RMA do not).
  if (o->ep && err.err != FI_ECANCELED && err.err != FI_EACCES && err.err != FI_EINVAL &&
      err.err != FI_ETRUNC)
    ep_fail(o->ep, st);
  op_finish(w, o, st);
}

// A contiguous tag receive whose request holds the provider's context: the
// result, and the provider is done with the request.
[[gnu::always_inline]] inline void trecv_req_result(request* r, const fi_cq_tagged_entry& e) noexcept {
  r->ctx_type = 0;
  r->info.sender_tag = e.tag;
  r->info.length = e.len;
  r->pending = 0;
}

void dispatch(ucp_worker* w, iface* tp, const fi_cq_tagged_entry& e) noexcept {
  op* o = op::of(e.op_context);
  if (!o) return;
  switch (o->type) {
    case OP_TRECV_REQ: {
      auto* r = reinterpret_cast<request*>(e.op_context);
      trecv_req_result(r, e);
      if ((e.flags & FI_REMOTE_CQ_DATA) && (e.data >> 63)) [[unlikely]]
        send_sync_ack(w, e.data);
      req_complete_plain(r);
      break;
    }
    case OP_TRECV:
      trecv_done(w, o, e);
      break;
    case OP_MRECV:
      tp->rx_posted--;
      frame_recv(w, tp, reinterpret_cast<rx_buf*>(o), e.len);
      break;
    case OP_TPEEK:
      o->flags |= OPF_PEEK_DONE;
      o->data = 0;
      o->tag = e.tag;
      o->raddr = e.len;
      o->rkey = (e.flags & FI_REMOTE_CQ_DATA) ? e.data : 0;
      break;
    case OP_FREE:
      break;
    default:
      op_finish(w, o, UCS_OK);
  }
}

// After an active-message callback the application gets control back
// before the next one (programs such as UCX's client/server example re-arm
// their handler state between messages): the rest of the batch waits.
void dispatch_batch(ucp_worker* w, iface* tp, const fi_cq_tagged_entry* e, ssize_t k) noexcept {
  for (ssize_t i = 0; i < k; i++) {
    dispatch(w, tp, e[i]);
    if (w->am_called) [[unlikely]] {
      w->am_called = false;
      for (ssize_t j = i + 1; j < k; j++) w->stash.emplace_back(tp, e[j]);
      w->attn = true;
      return;
    }
  }
}

namespace {
// One read of a transport's CQ, dispatched: how many entries it handled
// (an error entry counts one), 0 when the CQ was empty. Inlined: progress_full
// polls through it, and its code stays what it was before the helper.
[[gnu::always_inline]] inline unsigned read_cq(ucp_worker* w, iface* tp) noexcept {
  fi_cq_tagged_entry e[cq_batch];
  ssize_t k = fi_cq_read(tp->cq, e, cq_batch);
  if (k > 0) {
    dispatch_batch(w, tp, e, k);
    return static_cast<unsigned>(k);
  }
  if (k == -FI_EAVAIL) [[unlikely]] {
    handle_cq_error(w, tp);
    return 1;
  }
  return 0;
}
}  // namespace

// Before a peer's disconnection fails its endpoint: the completions the
// providers hold now are dispatched first, so that an operation the
// provider finished before the peer went (a send whose completion waits in
// the queue, behind a batch's worth of others or posted in this progress
// call) completes as it did, not with the reset. Not while completions wait
// in the stash (they go first, in the next progress call); bounded per
// transport. The caller is progress itself, not a dispatch: a dispatch in
// the middle of its batch would reorder the queue.
void drain_completions(ucp_worker* w) noexcept {
  for (auto& tpp : w->tps)
    for (int round = 0; round < 64 && w->stash_pos >= w->stash.size(); round++)
      if (!read_cq(w, tpp.get())) break;
}

// Closed endpoints are deleted only here, where no caller holds one.
void bury(ucp_worker* w) noexcept {
  auto g = std::move(w->graveyard);
  w->graveyard.clear();
  for (ucp_ep* ep : g) {
    for (size_t i = 0; i < w->pend_list.size(); i++)
      if (w->pend_list[i] == ep) {
        w->pend_list[i] = w->pend_list.back();
        w->pend_list.pop_back();
        break;
      }
    delete ep;
  }
}

unsigned progress_full(ucp_worker* w) noexcept {
  unsigned n = 0;
  bool was = w->in_progress;
  w->in_progress = true;
  if (w->deferred_head) [[unlikely]] {
    run_deferred(w);
    n++;
  }
  if (w->stash_pos < w->stash.size()) [[unlikely]] {
    while (w->stash_pos < w->stash.size()) {
      auto [tp, e] = w->stash[w->stash_pos++];
      dispatch(w, tp, e);
      n++;
      if (w->am_called) {
        w->am_called = false;
        break;
      }
    }
    if (w->stash_pos == w->stash.size()) {
      w->stash.clear();
      w->stash_pos = 0;
    } else {
      w->in_progress = was;
      return n;
    }
  }
  for (auto& tpp : w->tps) n += read_cq(w, tpp.get());
  if (!w->ctrl_pending.empty()) [[unlikely]]
    n += progress_ctrl(w);
  if (!w->pend_list.empty()) [[unlikely]]
    n += progress_pending(w);
  if (!w->failed.empty()) [[unlikely]] {
    run_failed(w);
    n++;
  }
  if (w->cm_users) [[unlikely]]
    cm_progress(w, false);
  if (w->peer_mode_eps && !(++w->ka_tick & 255)) [[unlikely]]
    keepalive(w);
  if (w->deferred_head) [[unlikely]]
    run_deferred(w);
  w->in_progress = was;
  if (!was && !w->graveyard.empty()) [[unlikely]]
    bury(w);
  w->attn = w->tps.size() > 1 || w->deferred_head || w->stash_pos < w->stash.size() ||
            !w->ctrl_pending.empty() || !w->pend_list.empty() || !w->failed.empty() || w->cm_users ||
            w->peer_mode_eps || !w->graveyard.empty();
  return n;
}

// The common case, one transport and nothing but completions to look at, in
// a few instructions; anything else (queued work, failures, connection
// management, keepalive, deferred callbacks) sets w->attn and takes the
// full path.
// Completions found by the fast path: out of line, so that polling an empty
// queue costs a few instructions.
[[gnu::noinline]] unsigned progress_found(ucp_worker* w, ssize_t k) noexcept {
  iface* tp = w->tp0;
  if (k < 0) {
    if (k != -FI_EAVAIL) return 0;
    bool was = w->in_progress;
    w->in_progress = true;
    handle_cq_error(w, tp);
    w->in_progress = was;
    if (w->attn) progress_full(w);
    return 1;
  }
  fi_cq_tagged_entry e[cq_batch];
  memcpy(e, w->cqe, sizeof(fi_cq_tagged_entry) * static_cast<size_t>(k));
  bool was = w->in_progress;
  w->in_progress = true;
  dispatch_batch(w, tp, e, k);
  w->in_progress = was;
  if (w->attn) [[unlikely]]
    progress_full(w);
  return static_cast<unsigned>(k);
}

// The common case, one transport and nothing but completions to look at, in
// a few instructions; anything else (queued work, failures, connection
// management, keepalive, deferred callbacks) sets w->attn and takes the
// full path.
[[gnu::always_inline]] inline unsigned progress_inline(ucp_worker* w) noexcept {
  if (w->attn) [[unlikely]]
    return progress_full(w);
  ssize_t k = fi_cq_read(w->tp0->cq, w->cqe, cq_batch);
  if (k == -FI_EAGAIN) [[likely]]
    return 0;
  if (k == 1) {
    // One completion of a contiguous tag receive that wants nothing else
    // (no callback, no sync acknowledgement): done here, what dispatch()
    // and req_complete_plain() do less their checks for what is excluded
    // (calling them measured 5 ns slower per message). Such receives have
    // no result pointers (tag_recv_hot refuses OP_ATTR_FIELD_RECV_INFO).
    const fi_cq_tagged_entry& e = w->cqe[0];
    auto* r = reinterpret_cast<request*>(e.op_context);
    if (r && r->ctx_type == OP_TRECV_REQ && r->cbk == CB_NONE && !(e.flags & FI_REMOTE_CQ_DATA)) [[likely]] {
      trecv_req_result(r, e);
      r->status = UCS_OK;
      r->flags |= RF_COMPLETED;
      req_maybe_release(r);
      return 1;
    }
  }
  return progress_found(w, k);
}

unsigned progress(ucp_worker* w) noexcept {
  return progress_inline(w);
}

// Endpoints in error-handling mode PEER learn of a dead peer without traffic:
// a peer on this host is watched through a pidfd, a remote one gets a
// keepalive frame whose failure fails the endpoint.
void keepalive(ucp_worker* w) noexcept {
  double t = now_s();
  double iv = w->ctx->cfg.keepalive_s;
  if (t - w->ka_last < iv / 2) return;
  w->ka_last = t;
  for (ucp_ep* ep : w->eps) {
    if (!ep || ep->err_mode != UCP_ERR_HANDLING_MODE_PEER || ep->state == EP_FAILED || ep->close_stage)
      continue;
    if (ep->pidfd >= 0) {
      pollfd p{ep->pidfd, POLLIN, 0};
      if (poll(&p, 1, 0) > 0) ep_fail(ep, UCS_ERR_CONNECTION_RESET);
      continue;
    }
    if (ep->ka_inflight || ep->state != EP_CONNECTED || t - ep->last_alive < iv) continue;
    ep->last_alive = t;
    op* o = op_alloc(w);
    if (!o) return;
    o->type = OP_KEEPALIVE;
    frame f{};
    f.type = F_KEEPALIVE;
    memcpy(o->hdr, &f, sizeof f);
    o->iov[0] = {o->hdr, sizeof f};
    o->niov = 1;
    o->dest = ep->dest;
    op_attach(o, ep, nullptr, false);
    int rc = issue(w, o);
    if (rc == 0) {
      ep->ka_inflight = true;
    } else {
      op_finish(w, o, UCS_OK);
      if (rc != -FI_EAGAIN) ep_fail(ep, from_fi(rc));
    }
  }
}

ucs_status_t wait_ptr(ucp_worker* w, ucs_status_ptr_t p) noexcept {
  if (!UCS_PTR_IS_PTR(p)) return UCS_PTR_STATUS(p);
  request* r = request::of(p);
  while (!(r->flags & RF_COMPLETED)) progress(w);
  ucs_status_t st = r->status;
  r->flags |= RF_RELEASED;
  r->cbk = CB_NONE;
  req_maybe_release(r);
  return st;
}

namespace {
bool ensure_wakeup(ucp_worker* w) {
  if (w->epfd >= 0) return true;
  w->epfd = epoll_create1(EPOLL_CLOEXEC);
  w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (w->epfd < 0 || w->evfd < 0 || w->tfd < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = w->evfd;
  if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev)) return false;
  ev.data.fd = w->tfd;
  return epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->tfd, &ev) == 0;
}

void drain(int fd) {
  uint64_t v;
  while (read(fd, &v, sizeof v) > 0) {}
}
}  // namespace

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_t ucp_worker_create(ucp_context_h context, const ucp_worker_params_t* params,
                                          ucp_worker_h* worker_p) {
  if (!context || !params || !worker_p) return UCS_ERR_INVALID_PARAM;
  try {
    auto w = std::make_unique<ucp_worker>();
    w->ctx = context;
    if (params->field_mask & UCP_WORKER_PARAM_FIELD_THREAD_MODE) {
      if (params->thread_mode > UCS_THREAD_MODE_MULTI) return UCS_ERR_INVALID_PARAM;
      w->thread_mode = params->thread_mode;
    }
    w->mt = w->thread_mode == UCS_THREAD_MODE_MULTI;
    if (params->field_mask & UCP_WORKER_PARAM_FIELD_USER_DATA) w->user_data = params->user_data;
    if (params->field_mask & UCP_WORKER_PARAM_FIELD_CLIENT_ID) w->client_id = params->client_id;
    if ((params->field_mask & UCP_WORKER_PARAM_FIELD_NAME) && params->name) w->name = params->name;
    w->uuid = random64();
    if (w->name.empty()) {
      char b[40];
      snprintf(b, sizeof b, "%s:%d", context->name.c_str(), static_cast<int>(getpid()));
      w->name = b;
    }
    // One transport per worker: the provider matches tags, and a receive can
    // be posted to one provider only (docs/ucp.md, "Transports").
    for (auto& d : context->tps)
      if (auto tp = open_iface(w.get(), d.get())) {
        w->tps.push_back(std::move(tp));
        break;
      }
    if (w->tps.empty()) {
      WUCP_LOG(L_ERROR, "ucp_worker_create: no transport could open an endpoint");
      return UCS_ERR_NO_DEVICE;
    }
    make_address(w.get());
    w->tp0 = w->tps[0].get();
    w->attn = w->tps.size() > 1;
    w->stash.reserve(64);
    if (params->field_mask & UCP_WORKER_PARAM_FIELD_EVENT_FD) {
      if (!(context->features & UCP_FEATURE_WAKEUP)) return UCS_ERR_INVALID_PARAM;
      if (!ensure_wakeup(w.get())) return UCS_ERR_IO_ERROR;
      // The worker's events show on the application's epoll set, with the
      // worker's user_data as the event's data (ucp.h).
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = w->user_data;
      if (epoll_ctl(params->event_fd, EPOLL_CTL_ADD, w->epfd, &ev)) return UCS_ERR_INVALID_PARAM;
      w->external_efd = true;
    }
    *worker_p = w.release();
    return UCS_OK;
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
}

UCP_EXPORT void ucp_worker_destroy(ucp_worker_h w) {
  if (!w) return;
  {
    worker_guard g(w);
    w->destroying = true;
    for (auto* l : std::vector<listener_impl*>(w->listeners))
      ucp_listener_destroy(reinterpret_cast<ucp_listener_h>(l));
    // Linger, as a socket's close does: a send completes once the provider
    // took it (an injected frame at once), and a provider's endpoint drops
    // what it still holds when it closes (a frame queued behind a
    // connection being opened: seen under load, the client of
    // ucp_client_server exiting right after its send and the server never
    // getting it). A last frame to each peer, which it ignores (the
    // endpoints are not closed to it: no F_CLOSE, no error callbacks
    // there), follows the endpoint's earlier frames in order; its
    // completion says those are out. Bounded: a dead or silent peer costs
    // at most linger_s.
    for (ucp_ep* ep : w->eps)
      if (ep && !ep->close_stage) send_close_frame(ep, F_KEEPALIVE);
    constexpr double linger_s = 1.0;
    for (const double end = now_s() + linger_s; w->lingering && now_s() < end;) progress_full(w);
    if (w->lingering)
      WUCP_LOG(L_WARN, "worker destroy: %zu endpoint(s) still sending after %.0f s; what they hold is dropped",
               w->lingering, linger_s);
    for (ucp_ep* ep : std::vector<ucp_ep*>(w->eps))
      if (ep) {
        ep_purge(ep, UCS_ERR_CANCELED);
        cm_close_ep(ep);
        ep_free(ep);
      }
    for (op* o : w->ctrl_pending) {
      free(o->bounce);
      op_free(w, o);
    }
    w->ctrl_pending.clear();
    // Every provider context dies with the endpoints.
    w->tps.clear();
    cm_destroy(w);
    // Operations the providers never completed: what they held goes now.
    for (auto& chunk : w->op_chunks)
      for (size_t i = 0; i < op_chunk; i++) {
        op* o = &chunk[i];
        if (o->type == OP_FREE) continue;
        if ((o->flags & OPF_FREE_BOUNCE) && o->bounce) free(o->bounce);
        if (o->flags & OPF_AM_ACK) am_read_done(w, o->bounce, false);
        o->type = OP_FREE;
      }
    if (w->eq) fi_close(&w->eq->fid);
    if (w->cm_fabric) fi_close(&w->cm_fabric->fid);
    if (w->cm_info) fi_freeinfo(w->cm_info);
    am_release_all(w);
    bury(w);
    for (int fd : {w->epfd, w->evfd, w->tfd})
      if (fd >= 0) close(fd);
    req_pool_destroy(w);
  }
  delete w;
}

UCP_EXPORT unsigned ucp_worker_progress(ucp_worker_h w) {
  if (!w) return 0;
  if (!w->mt) [[likely]]
    return progress_inline(w);
  worker_guard g(w);
  return progress(w);
}

UCP_EXPORT ucs_status_t ucp_worker_query(ucp_worker_h w, ucp_worker_attr_t* attr) {
  if (!w || !attr) return UCS_ERR_INVALID_PARAM;
  worker_guard g(w);
  if (attr->field_mask & UCP_WORKER_ATTR_FIELD_THREAD_MODE) attr->thread_mode = w->thread_mode;
  if (attr->field_mask & UCP_WORKER_ATTR_FIELD_ADDRESS) {
    attr->address = static_cast<ucp_address_t*>(malloc(w->address.size()));
    if (!attr->address) return UCS_ERR_NO_MEMORY;
    memcpy(attr->address, w->address.data(), w->address.size());
    attr->address_length = w->address.size();
  }
  if (attr->field_mask & UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER)
    attr->max_am_header = w->ctx->cfg.rx_buf_size - sizeof(frame) - 64;
  if (attr->field_mask & UCP_WORKER_ATTR_FIELD_NAME)
    snprintf(attr->name, sizeof attr->name, "%s", w->name.c_str());
  if (attr->field_mask & UCP_WORKER_ATTR_FIELD_MAX_INFO_STRING) attr->max_debug_string = 128;
  return UCS_OK;
}

UCP_EXPORT void ucp_worker_print_info(ucp_worker_h w, FILE* stream) {
  if (!w || !stream) return;
  worker_guard g(w);
  fprintf(stream, "#\n# UCP worker '%s'\n#\n", w->name.c_str());
  fprintf(stream, "#                 address: %zu bytes\n", w->address.size());
  fprintf(stream, "#             thread mode: %s\n",
          w->thread_mode == UCS_THREAD_MODE_MULTI        ? "multi"
          : w->thread_mode == UCS_THREAD_MODE_SERIALIZED ? "serialized"
                                                         : "single");
  for (auto& tp : w->tps)
    fprintf(stream, "#               transport: %s (libfabric %s, device %s, inject %zu)\n",
            tp_name(tp->d->kind), tp->d->prov_name.c_str(), tp->d->dev_name.c_str(), tp->d->inject);
  fprintf(stream, "#\n");
}

UCP_EXPORT ucs_status_t ucp_worker_get_address(ucp_worker_h w, ucp_address_t** address_p, size_t* len_p) {
  if (!w || !address_p || !len_p) return UCS_ERR_INVALID_PARAM;
  void* a = malloc(w->address.size());
  if (!a) return UCS_ERR_NO_MEMORY;
  memcpy(a, w->address.data(), w->address.size());
  *address_p = static_cast<ucp_address_t*>(a);
  *len_p = w->address.size();
  return UCS_OK;
}

UCP_EXPORT void ucp_worker_release_address(ucp_worker_h, ucp_address_t* address) {
  free(address);
}

UCP_EXPORT ucs_status_t ucp_worker_address_query(ucp_address_t* address, ucp_worker_address_attr_t* attr) {
  if (!address || !attr) return UCS_ERR_INVALID_PARAM;
  size_t len = address_length(address);
  if (!len) return UCS_ERR_INVALID_PARAM;
  if (attr->field_mask & UCP_WORKER_ADDRESS_ATTR_FIELD_UID) {
    addr_hdr h;
    memcpy(&h, address, sizeof h);
    attr->worker_uid = h.uuid;
  }
  return UCS_OK;
}

// The event fd is an epoll set of: an eventfd (ucp_worker_signal) and a timer
// that ucp_worker_arm starts. Providers with manual progress (weft's shm,
// libfabric's shm) signal nothing when a peer writes into shared memory, so an
// armed worker wakes at the latest 1 ms later to make progress (docs/ucp.md).
UCP_EXPORT ucs_status_t ucp_worker_get_efd(ucp_worker_h w, int* fd) {
  if (!w || !fd) return UCS_ERR_INVALID_PARAM;
  if (!(w->ctx->features & UCP_FEATURE_WAKEUP)) return UCS_ERR_UNSUPPORTED;
  if (w->external_efd) return UCS_ERR_UNSUPPORTED;  // "calling ucp_worker_get_efd will result in an error"
  worker_guard g(w);
  if (!ensure_wakeup(w)) return UCS_ERR_IO_ERROR;
  *fd = w->epfd;
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_worker_arm(ucp_worker_h w) {
  if (!w) return UCS_ERR_INVALID_PARAM;
  if (!(w->ctx->features & UCP_FEATURE_WAKEUP)) return UCS_ERR_UNSUPPORTED;
  worker_guard g(w);
  if (!ensure_wakeup(w)) return UCS_ERR_IO_ERROR;
  drain(w->evfd);
  drain(w->tfd);
  if (w->deferred_head || w->stash_pos < w->stash.size() || !w->failed.empty() || !w->ctrl_pending.empty())
    return UCS_ERR_BUSY;
  bool busy = false;
  for (auto& tp : w->tps) {
    fi_cq_tagged_entry e[cq_batch];
    ssize_t k = fi_cq_read(tp->cq, e, cq_batch);
    if (k > 0) {
      for (ssize_t i = 0; i < k; i++) w->stash.emplace_back(tp.get(), e[i]);
      w->attn = true;
      busy = true;
    } else if (k == -FI_EAVAIL) {
      busy = true;
    }
  }
  if (busy) return UCS_ERR_BUSY;
  itimerspec its{};
  its.it_value.tv_nsec = 1000000;
  timerfd_settime(w->tfd, 0, &its, nullptr);
  w->armed = true;
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_worker_wait(ucp_worker_h w) {
  if (!w) return UCS_ERR_INVALID_PARAM;
  ucs_status_t st = ucp_worker_arm(w);
  if (st == UCS_ERR_BUSY) return UCS_OK;
  if (st != UCS_OK) return st;
  pollfd p{w->epfd, POLLIN, 0};
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {}
  return UCS_OK;
}

UCP_EXPORT void ucp_worker_wait_mem(ucp_worker_h w, void* address) {
  (void)w;
  (void)address;
  // No transport here can wake on a memory write: a short pause lets the
  // caller re-check the location.
  __builtin_ia32_pause();
}

UCP_EXPORT ucs_status_t ucp_worker_signal(ucp_worker_h w) {
  if (!w) return UCS_ERR_INVALID_PARAM;
  if (!(w->ctx->features & UCP_FEATURE_WAKEUP)) return UCS_ERR_UNSUPPORTED;
  worker_guard g(w);
  if (!ensure_wakeup(w)) return UCS_ERR_IO_ERROR;
  uint64_t one = 1;
  return write(w->evfd, &one, sizeof one) == sizeof one ? UCS_OK : UCS_ERR_IO_ERROR;
}

UCP_EXPORT ucs_status_ptr_t ucp_worker_flush_nbx(ucp_worker_h w, const ucp_request_param_t* param) {
  if (!w) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  worker_guard g(w);
  progress(w);
  if (!w->inflight) return imm_complete(w, param, std::exchange(w->nbi_error, UCS_OK), CB_SEND_NBX);
  request* r = req_from_param(w, param);
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  r->kind = RK_FLUSH;
  req_set_cb(r, param, CB_SEND_NBX);
  try {
    w->flushes.push_back(r);
  } catch (...) {
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  return req_return(r);
}

UCP_EXPORT ucs_status_ptr_t ucp_worker_flush_nb(ucp_worker_h w, unsigned flags, ucp_send_callback_t cb) {
  (void)flags;
  ucp_request_param_t p{};
  ucs_status_ptr_t sp = ucp_worker_flush_nbx(w, &p);
  if (UCS_PTR_IS_PTR(sp)) {
    request* r = request::of(sp);
    r->cbk = cb ? CB_SEND_NB : CB_NONE;
    r->cb = reinterpret_cast<void*>(cb);
  }
  return sp;
}

UCP_EXPORT ucs_status_t ucp_worker_flush(ucp_worker_h w) {
  if (!w) return UCS_ERR_INVALID_PARAM;
  ucp_request_param_t p{};
  ucs_status_ptr_t sp = ucp_worker_flush_nbx(w, &p);
  worker_guard g(w);
  return wait_ptr(w, sp);
}

// Operations after a fence are issued only once those before it completed.
UCP_EXPORT ucs_status_t ucp_worker_fence(ucp_worker_h w) {
  if (!w) return UCS_ERR_INVALID_PARAM;
  worker_guard g(w);
  w->fence_epoch++;
  return UCS_OK;
}
