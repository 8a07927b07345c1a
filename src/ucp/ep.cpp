// SPDX-License-Identifier: BSD-3-Clause
// Endpoints: creation from a worker address (with the connection handshake
// that pairs endpoints the way UCX does: by worker and creation sequence
// number), failure and error handling, close, flush, queries.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "ucp_int.hpp"

namespace wucp {

namespace {
constexpr uint32_t idx_bits = 20;
constexpr uint32_t idx_mask = (1u << idx_bits) - 1;

int pidfd_open_(uint32_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
#else
  (void)pid;
  return -1;
#endif
}
}  // namespace

ucp_ep* ep_lookup(ucp_worker* w, uint32_t id) noexcept {
  uint32_t idx = id & idx_mask;
  if (id == no_id || idx >= w->eps.size()) return nullptr;
  ucp_ep* ep = w->eps[idx];
  if (!ep || ep->id != id) return nullptr;
  return ep;
}

ucp_ep* ep_new(ucp_worker* w) {
  auto ep = std::make_unique<ucp_ep>();
  ep->w = w;
  uint32_t idx;
  if (!w->ep_free.empty()) {
    idx = w->ep_free.back();
    w->ep_free.pop_back();
  } else {
    idx = static_cast<uint32_t>(w->eps.size());
    if (idx > idx_mask) throw std::bad_alloc();
    w->eps.push_back(nullptr);
    w->ep_gen.push_back(1);
  }
  ep->id = idx | ((w->ep_gen[idx] & 0x7ff) << idx_bits);
  snprintf(ep->name, sizeof ep->name, "%s:%u", w->name.substr(0, 20).c_str(), idx);
  w->eps[idx] = ep.get();
  return ep.release();
}

// Takes the endpoint out of every table; its memory goes at the end of the
// current progress call (operations in flight no longer point at it).
void ep_free(ucp_ep* ep) noexcept {
  ucp_worker* w = ep->w;
  if (ep->state == EP_CLOSED) return;
  uint32_t idx = ep->id & idx_mask;
  if (idx < w->eps.size() && w->eps[idx] == ep) {
    w->eps[idx] = nullptr;
    w->ep_gen[idx] = (w->ep_gen[idx] + 1) & 0x7ff;
    if (!w->ep_gen[idx]) w->ep_gen[idx] = 1;
    w->ep_free.push_back(idx);
  }
  for (auto* m : {&w->unmatched, &w->expect})
    for (auto it = m->begin(); it != m->end();) it = it->second == ep ? m->erase(it) : std::next(it);
  // Operations still owned by the provider forget the endpoint.
  while (!ep->ops.empty()) {
    op* o = owner<op, &op::ep_link>(ep->ops.next);
    o->ep_link.unlink();
    o->ep = nullptr;
    o->flags &= ~OPF_ON_EP;
  }
  while (!ep->reqs.empty()) ep->reqs.next->unlink();
  for (auto& e : ep->early)
    if (!w->destroying) repost_rx(e.first->tp, e.first);
  ep->early.clear();
  for (auto& e : ep->am_later)
    if (!w->destroying) repost_rx(e.first->tp, e.first);
  ep->am_later.clear();
  ep->am_fetching = 0;
  if (ep->fail_link.linked()) ep->fail_link.unlink();
  if (ep->stream_link.linked()) ep->stream_link.unlink();
  if (ep->pidfd >= 0) close(ep->pidfd);
  ep->pidfd = -1;
  if (ep->err_mode == UCP_ERR_HANDLING_MODE_PEER && w->peer_mode_eps) w->peer_mode_eps--;
  ep->state = EP_CLOSED;
  try {
    w->graveyard.push_back(ep);
    w->attn = true;
  } catch (...) {}
}

// Every request of the endpoint ends with st; queued operations are dropped,
// issued ones are left to the provider without their requests.
void ep_purge(ucp_ep* ep, ucs_status_t st) noexcept {
  ucp_worker* w = ep->w;
  while (!ep->pending.empty()) {
    op* o = owner<op, &op::ep_link>(ep->pending.next);
    o->ep_link.unlink();
    op_finish(w, o, st);
  }
  for (link* l = ep->ops.next; l != &ep->ops; l = l->next) {
    op* o = owner<op, &op::ep_link>(l);
    if (o->req) {
      if (o->req->pending) o->req->pending--;
      o->req = nullptr;
    }
  }
  while (!ep->reqs.empty()) {
    request* r = owner<request, &request::ep_link>(ep->reqs.next);
    r->ep_link.unlink();
    req_complete(r, st);
  }
  auto fl = std::move(ep->flushes);
  ep->flushes.clear();
  for (request* r : fl) req_complete(r, st);
  stream_fail(ep, st);
}

void ep_fail(ucp_ep* ep, ucs_status_t st) noexcept {
  if (ep->state == EP_FAILED || ep->state == EP_CLOSED) return;
  ucp_worker* w = ep->w;
  WUCP_LOG(ep->err_mode == UCP_ERR_HANDLING_MODE_PEER ? L_DIAG : L_ERROR, "endpoint %s: %s", ep->name,
           ucs_status_string(st));
  ep->state = EP_FAILED;
  ep->fail_status = st;
  ep_purge(ep, st);
  if (ep->close_stage) {
    ep_close_progress(ep);
    return;
  }
  if (ep->err_mode == UCP_ERR_HANDLING_MODE_PEER && (ep->flags & EPF_USER) && ep->err_handler.cb &&
      !(ep->flags & EPF_ERR_NOTIFIED))
    w->failed.push_back(&ep->fail_link);
  w->attn = true;
}

void run_failed(ucp_worker* w) noexcept {
  while (!w->failed.empty()) {
    ucp_ep* ep = owner<ucp_ep, &ucp_ep::fail_link>(w->failed.next);
    ep->fail_link.unlink();
    if (ep->close_stage || (ep->flags & EPF_ERR_NOTIFIED)) continue;
    ep->flags |= EPF_ERR_NOTIFIED;
    ep->err_handler.cb(ep->user_data, ep, ep->fail_status);
  }
}

void ep_connected(ucp_ep* ep, uint32_t remote_id) noexcept {
  if (ep->state != EP_CONNECTING) return;
  ep->remote_id = remote_id;
  ep->state = EP_CONNECTED;
  ep->last_alive = now_s();
  ucp_worker* w = ep->w;
  auto it = w->expect.find({ep->peer.uuid, ep->conn_sn});
  if (it != w->expect.end() && it->second == ep) w->expect.erase(it);
  if (!ep->pending.empty()) ensure_pending(ep);
  if (!ep->early.empty()) [[unlikely]]
    replay_early(ep);
}

void apply_params(ucp_ep* ep, const ucp_ep_params_t* p);

namespace {

void setup_peer_watch(ucp_ep* ep) {
  ucp_worker* w = ep->w;
  if (ep->err_mode != UCP_ERR_HANDLING_MODE_PEER) return;
  w->peer_mode_eps++;
  w->attn = true;
  if (ep->peer.host == w->ctx->host_id && ep->peer.pid && ep->peer.uuid != w->uuid)
    ep->pidfd = pidfd_open_(ep->peer.pid);
  WUCP_LOG(L_DEBUG, "endpoint %s: peer pid %u watched by pidfd %d", ep->name, ep->peer.pid, ep->pidfd);
}

void send_conn_rep(ucp_ep* ep, uint32_t dst) {
  frame f{};
  f.type = F_CONN_REP;
  f.dst = dst;
  f.src = ep->id;
  send_ctrl_to(ep->tp, ep->dest, f, nullptr, 0);
}

ucs_status_t create_from_address(ucp_worker* w, const ucp_ep_params_t* p, ucp_ep** out) {
  if (!p->address) return UCS_ERR_INVALID_PARAM;
  size_t len = address_length(p->address);
  peer_addr pa;
  if (!len || !parse_address(p->address, len, pa)) return UCS_ERR_INVALID_ADDR;
  unsigned flags = (p->field_mask & UCP_EP_PARAM_FIELD_FLAGS) ? p->flags : 0;
  bool no_loop = flags & UCP_EP_PARAMS_FLAGS_NO_LOOPBACK;
  bool self = pa.uuid == w->uuid;
  uint64_t sn = w->conn_sn[pa.uuid]++;
  // The peer connected to us first: take the endpoint its request created.
  auto it = w->unmatched.find({pa.uuid, sn});
  if (it != w->unmatched.end() && !(self && !no_loop)) {
    ucp_ep* ep = it->second;
    w->unmatched.erase(it);
    apply_params(ep, p);
    setup_peer_watch(ep);
    *out = ep;
    return UCS_OK;
  }
  fi_addr_t dest;
  ucs_status_t st = UCS_OK;
  iface* tp = pick_transport(w, pa, &dest, &st);
  if (!tp) return st;
  std::unique_ptr<ucp_ep, void (*)(ucp_ep*)> ep(ep_new(w), [](ucp_ep* e) { ep_free(e); });
  ep->tp = tp;
  ep->dest = dest;
  ep->peer = std::move(pa);
  ep->conn_sn = sn;
  set_path_names(ep.get());
  if (no_loop) ep->flags |= EPF_NO_LOOPBACK;
  apply_params(ep.get(), p);
  if (self && !no_loop) {
    // Connected to itself: what it sends on a stream it receives.
    ep_connected(ep.get(), ep->id);
  } else {
    w->expect[{ep->peer.uuid, sn}] = ep.get();
    frame f{};
    f.type = F_CONN_REQ;
    f.flags = no_loop ? FF_NO_LOOPBACK : 0;
    f.src = ep->id;
    f.dst = no_id;
    f.aux = sn;
    int rc = send_ctrl_to(tp, dest, f, w->address.data(), w->address.size());
    if (rc) {
      WUCP_LOG(L_WARN, "ucp_ep_create: connection request failed: %s", fi_strerror(-rc));
      return from_fi(rc);
    }
  }
  setup_peer_watch(ep.get());
  *out = ep.release();
  return UCS_OK;
}

}  // namespace

// As UCX: the error handler is called with the endpoint's user data, which is
// err_handler.arg unless user_data is given too.
void apply_params(ucp_ep* ep, const ucp_ep_params_t* p) {
  if (p->field_mask & UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE) ep->err_mode = p->err_mode;
  if (p->field_mask & UCP_EP_PARAM_FIELD_ERR_HANDLER) {
    ep->err_handler = p->err_handler;
    ep->user_data = p->err_handler.arg;
  }
  if (p->field_mask & UCP_EP_PARAM_FIELD_USER_DATA) ep->user_data = p->user_data;
  if ((p->field_mask & UCP_EP_PARAM_FIELD_NAME) && p->name)
    snprintf(ep->name, sizeof ep->name, "%s", p->name);
  ep->flags |= EPF_USER;
}

// A peer created an endpoint to us: pair it with ours (same worker, same
// sequence number) or keep an internal endpoint for it until the application
// creates its own (or forever, for replies and stream data).
void ep_conn_req(ucp_worker* w, iface* tp, const frame& f, const uint8_t* payload, size_t len) noexcept {
  peer_addr pa;
  if (!parse_address(payload, len, pa)) return;
  bool self = pa.uuid == w->uuid;
  conn_pair_key key{pa.uuid, f.aux};
  try {
    auto it = w->expect.find(key);
    if (it != w->expect.end() && !(self && (f.flags & FF_NO_LOOPBACK) && it->second->id == f.src)) {
      ucp_ep* ep = it->second;
      if (ep->state == EP_CONNECTING) ep_connected(ep, f.src);
      send_conn_rep(ep, f.src);
      return;
    }
    auto un = w->unmatched.find(key);
    if (un != w->unmatched.end()) {  // a repeated request
      send_conn_rep(un->second, f.src);
      return;
    }
    fi_addr_t dest;
    ucs_status_t st;
    iface* use = pick_transport(w, pa, &dest, &st);
    if (!use) return;
    (void)tp;
    ucp_ep* ep = ep_new(w);
    ep->tp = use;
    ep->dest = dest;
    ep->peer = std::move(pa);
    ep->conn_sn = f.aux;
    set_path_names(ep);
    ep_connected(ep, f.src);
    w->unmatched[key] = ep;
    send_conn_rep(ep, f.src);
  } catch (...) {}
}

void ep_conn_rep(ucp_worker* w, const frame& f) noexcept {
  ucp_ep* ep = ep_lookup(w, f.dst);
  if (!ep) return;
  if (ep->state == EP_CONNECTING) ep_connected(ep, f.src);
}

// The peer closed its endpoint. An internal endpoint goes; an application's
// endpoint in PEER mode reports the disconnection as UCX does.
void ep_remote_closed(ucp_worker* w, const frame& f) noexcept {
  ucp_ep* ep = ep_lookup(w, f.dst);
  if (!ep || ep->remote_id != f.src) return;
  ep->flags |= EPF_REMOTE_CLOSED;
  if (!(ep->flags & EPF_USER)) {
    bool matched = false;
    for (auto& kv : w->unmatched) matched |= kv.second == ep;
    if (!matched || true) {
      ep_purge(ep, UCS_ERR_CONNECTION_RESET);
      ep_free(ep);
    }
    return;
  }
  if (ep->err_mode == UCP_ERR_HANDLING_MODE_PEER && !ep->close_stage) ep_fail(ep, UCS_ERR_CONNECTION_RESET);
}

// Graceful close: stage 1 waits until nothing is in flight, then tells the
// peer (stage 2), then the endpoint goes.
void ep_close_progress(ucp_ep* ep) noexcept {
  if (ep->inflight && ep->state != EP_FAILED) return;
  if (ep->close_stage == 1 && ep->state == EP_CONNECTED && !(ep->flags & EPF_REMOTE_CLOSED) &&
      ep->remote_id != ep->id) {
    ep->close_stage = 2;
    frame f{};
    f.type = F_CLOSE;
    if (send_frame(ep, f, nullptr, 0, nullptr, 0, nullptr, true) == 0) return;
  }
  if (ep->state != EP_FAILED && ep->inflight) return;
  request* r = ep->close_req;
  ep->close_req = nullptr;
  ep->close_stage = 3;
  cm_close_ep(ep);
  ep_free(ep);
  if (r) req_complete(r, UCS_OK);
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_t ucp_ep_create(ucp_worker_h w, const ucp_ep_params_t* params, ucp_ep_h* ep_p) {
  if (!w || !params || !ep_p) return UCS_ERR_INVALID_PARAM;
  worker_guard g(w);
  uint64_t m = params->field_mask;
  int ways = !!(m & UCP_EP_PARAM_FIELD_REMOTE_ADDRESS) + !!(m & UCP_EP_PARAM_FIELD_SOCK_ADDR) +
             !!(m & UCP_EP_PARAM_FIELD_CONN_REQUEST);
  if (ways != 1) return UCS_ERR_INVALID_PARAM;
  if ((m & UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE) && params->err_mode != UCP_ERR_HANDLING_MODE_NONE &&
      params->err_mode != UCP_ERR_HANDLING_MODE_PEER)
    return UCS_ERR_INVALID_PARAM;
  try {
    ucp_ep* ep = nullptr;
    ucs_status_t st;
    if (m & UCP_EP_PARAM_FIELD_REMOTE_ADDRESS) {
      st = create_from_address(w, params, &ep);
    } else if (m & UCP_EP_PARAM_FIELD_SOCK_ADDR) {
      unsigned flags = (m & UCP_EP_PARAM_FIELD_FLAGS) ? params->flags : 0;
      if (!(flags & UCP_EP_PARAMS_FLAGS_CLIENT_SERVER)) return UCS_ERR_INVALID_PARAM;
      st = cm_connect(w, params, &ep);
    } else {
      st = cm_accept(w, params, &ep);
    }
    if (st != UCS_OK) return st;
    *ep_p = ep;
    return UCS_OK;
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
}

UCP_EXPORT ucs_status_ptr_t ucp_ep_close_nbx(ucp_ep_h ep, const ucp_request_param_t* param) {
  if (!ep) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  worker_guard g(w);
  if (ep->close_stage || ep->state == EP_CLOSED) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  bool force =
      param && (param->op_attr_mask & UCP_OP_ATTR_FIELD_FLAGS) && (param->flags & UCP_EP_CLOSE_FLAG_FORCE);
  if (force || ep->state == EP_FAILED) {
    // The peer learns of it; what this endpoint injected goes out before
    // its providers' endpoint closes (send_close_frame).
    send_close_frame(ep, F_CLOSE);
    ep->close_stage = 3;
    ep_purge(ep, UCS_ERR_CANCELED);
    cm_close_ep(ep);
    ep_free(ep);
    return imm_complete(w, param, UCS_OK, CB_SEND_NBX);
  }
  request* r = req_from_param(w, param);
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  r->kind = RK_CLOSE;
  req_set_cb(r, param, CB_SEND_NBX);
  ep->close_req = r;
  ep->close_stage = 1;
  ep_close_progress(ep);
  if (r->flags & RF_COMPLETED) {
    if (!(param && (param->op_attr_mask & UCP_OP_ATTR_FLAG_NO_IMM_CMPL)) && !(r->flags & RF_DEFERRED)) {
      ucs_status_t st = r->status;
      r->flags |= RF_RELEASED;
      req_maybe_release(r);
      return st == UCS_OK ? nullptr : UCS_STATUS_PTR(st);
    }
  }
  return req_return(r);
}

UCP_EXPORT ucs_status_ptr_t ucp_ep_close_nb(ucp_ep_h ep, unsigned mode) {
  if (mode != UCP_EP_CLOSE_MODE_FORCE && mode != UCP_EP_CLOSE_MODE_FLUSH)
    return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = mode == UCP_EP_CLOSE_MODE_FORCE ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  return ucp_ep_close_nbx(ep, &p);
}

UCP_EXPORT ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep) {
  return ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FLUSH);
}

UCP_EXPORT void ucp_ep_destroy(ucp_ep_h ep) {
  if (!ep) return;
  ucp_worker* w = ep->w;
  ucs_status_ptr_t sp = ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FLUSH);
  worker_guard g(w);
  wait_ptr(w, sp);
}

UCP_EXPORT ucs_status_ptr_t ucp_ep_flush_nbx(ucp_ep_h ep, const ucp_request_param_t* param) {
  if (!ep) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  ucp_worker* w = ep->w;
  worker_guard g(w);
  if (ep->state == EP_FAILED) return UCS_STATUS_PTR(ep->fail_status);
  if (ep->state == EP_CLOSED) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  if (ep->inflight) progress(w);
  if (!ep->inflight) return imm_complete(w, param, std::exchange(ep->nbi_error, UCS_OK), CB_SEND_NBX);
  request* r = req_from_param(w, param);
  if (!r) return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  r->kind = RK_FLUSH;
  req_set_cb(r, param, CB_SEND_NBX);
  try {
    ep->flushes.push_back(r);
  } catch (...) {
    return UCS_STATUS_PTR(UCS_ERR_NO_MEMORY);
  }
  return req_return(r);
}

UCP_EXPORT ucs_status_ptr_t ucp_ep_flush_nb(ucp_ep_h ep, unsigned flags, ucp_send_callback_t cb) {
  (void)flags;
  ucp_request_param_t p{};
  ucs_status_ptr_t sp = ucp_ep_flush_nbx(ep, &p);
  if (UCS_PTR_IS_PTR(sp)) {
    request* r = request::of(sp);
    r->cbk = cb ? CB_SEND_NB : CB_NONE;
    r->cb = reinterpret_cast<void*>(cb);
  }
  return sp;
}

UCP_EXPORT ucs_status_t ucp_ep_flush(ucp_ep_h ep) {
  if (!ep) return UCS_ERR_INVALID_PARAM;
  ucp_worker* w = ep->w;
  ucp_request_param_t p{};
  ucs_status_ptr_t sp = ucp_ep_flush_nbx(ep, &p);
  worker_guard g(w);
  return wait_ptr(w, sp);
}

namespace {
// UCX 1.17's ucp_ep_attr_t, which weft's own ucp.h declares: the 1.13 layout
// with the transports array appended.
struct transport_entry_117 {
  const char* transport_name;
  const char* device_name;
};
struct transports_117 {
  transport_entry_117* entries;
  unsigned num_entries;
  size_t entry_size;
};
struct ep_attr_117 {
  uint64_t field_mask;
  char name[UCP_ENTITY_NAME_MAX];
  sockaddr_storage local_sockaddr;
  sockaddr_storage remote_sockaddr;
  transports_117 transports;
};
static_assert(offsetof(ep_attr_117, local_sockaddr) == offsetof(ucp_ep_attr_t, local_sockaddr));
static_assert(offsetof(ep_attr_117, transports) == sizeof(ucp_ep_attr_t));
constexpr uint64_t attr_field_transports = UCS_BIT(3);
}  // namespace

UCP_EXPORT ucs_status_t ucp_ep_query(ucp_ep_h ep, ucp_ep_attr_t* attr) {
  if (!ep || !attr) return UCS_ERR_INVALID_PARAM;
  worker_guard g(ep->w);
  if (attr->field_mask & UCP_EP_ATTR_FIELD_NAME) snprintf(attr->name, sizeof attr->name, "%s", ep->name);
  if (attr->field_mask & (UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR | UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR)) {
    if (!ep->has_sa) return UCS_ERR_NOT_CONNECTED;
    if (attr->field_mask & UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR) attr->local_sockaddr = ep->local_sa;
    if (attr->field_mask & UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR) attr->remote_sockaddr = ep->remote_sa;
  }
  if (attr->field_mask & attr_field_transports) {
    auto* a = reinterpret_cast<ep_attr_117*>(attr);
    transports_117& t = a->transports;
    if (t.num_entries && (!t.entries || !t.entry_size)) return UCS_ERR_INVALID_PARAM;
    unsigned n = 0;
    if (ep->tp && t.num_entries) {
      // Never write past the caller's entry size: copy as much of the entry as fits.
      transport_entry_117 e{ep->tl_name.c_str(), ep->dev_name.c_str()};
      memcpy(t.entries, &e, std::min(t.entry_size, sizeof e));
      n = 1;
    }
    t.num_entries = n;
  }
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_ep_evaluate_perf(ucp_ep_h ep, const ucp_ep_evaluate_perf_param_t* param,
                                             ucp_ep_evaluate_perf_attr_t* attr) {
  if (!ep || !param || !attr) return UCS_ERR_INVALID_PARAM;
  if (!(param->field_mask & UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE)) return UCS_ERR_INVALID_PARAM;
  worker_guard g(ep->w);
  if (!ep->tp) return UCS_ERR_NOT_CONNECTED;
  if (attr->field_mask & UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME) {
    measure_transport(ep->tp->d);
    attr->estimated_time = ep->tp->d->lat_s + static_cast<double>(param->message_size) / ep->tp->d->bw_Bps;
  }
  return UCS_OK;
}

UCP_EXPORT void ucp_ep_print_info(ucp_ep_h ep, FILE* stream) {
  if (!ep || !stream) return;
  worker_guard g(ep->w);
  static const char* states[] = {"connecting", "connected", "failed", "closed"};
  fprintf(stream, "#\n# UCP endpoint '%s'\n#\n", ep->name);
  fprintf(stream, "#               peer: %016llx%s\n", static_cast<unsigned long long>(ep->peer.uuid),
          ep->has_sa ? " (client/server)" : "");
  fprintf(stream, "#              state: %s\n", states[ep->state & 3]);
  fprintf(stream, "#           err mode: %s\n", ep->err_mode == UCP_ERR_HANDLING_MODE_PEER ? "peer" : "none");
  if (ep->tp) {
    const domain_tp* d = ep->tp->d;
    fprintf(stream, "#          transport: %s/%s (libfabric provider %s)\n", ep->tl_name.c_str(),
            ep->dev_name.c_str(), d->prov_name.c_str());
    fprintf(stream, "#     tag eager inline: 0..%zu (fi_tinject)\n", d->inject);
    fprintf(stream, "#        tag eager/rndv: %zu.. (fi_tsend; the provider chooses eager or rendezvous)\n",
            d->inject + 1);
    fprintf(stream, "#       am/stream eager: 0..%zu, am rendezvous (fi_read) above\n",
            ep->w->ctx->cfg.rx_buf_size - sizeof(frame));
    fprintf(stream, "#                  rma: fi_write/fi_read, FI_DELIVERY_COMPLETE%s\n",
            d->virt_addr ? ", virtual addresses" : ", offsets");
    fprintf(stream, "#              atomics: %s\n", d->atomics ? "fi_atomic (32/64-bit)" : "not available");
  }
  fprintf(stream, "#\n");
}

UCP_EXPORT ucs_status_ptr_t ucp_ep_modify_nb(ucp_ep_h ep, const ucp_ep_params_t* params) {
  if (!ep || !params) return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
  constexpr uint64_t allowed = UCP_EP_PARAM_FIELD_USER_DATA | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  if (params->field_mask & ~allowed) return UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
  worker_guard g(ep->w);
  if (params->field_mask & UCP_EP_PARAM_FIELD_ERR_HANDLER) {
    ep->err_handler = params->err_handler;
    ep->user_data = params->err_handler.arg;
  }
  if (params->field_mask & UCP_EP_PARAM_FIELD_USER_DATA) ep->user_data = params->user_data;
  return nullptr;
}
