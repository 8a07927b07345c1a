// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: the endpoint's transport part — opening, enabling (RDM:
// listening), progress, closing; the connections' callbacks, dispatched by
// opcode; requests, responses and credit.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <cstdio>

#include <cstring>
#include <utility>

#include "core/info.hpp"
#include "core/log.hpp"
#include "prov/tcp/tcp.hpp"
#include "prov/tcp/tcp_part.hpp"
#include "util/addr.hpp"
#include "util/ep_ops.hpp"
#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/eq.hpp"
#include "util/rx.hpp"

namespace weft::tcp {

void sent(ep& e, conn* c, tx_entry& t, int err) noexcept;

namespace {

// The wait objects an application may sleep on: our sockets wake them.
int enable(endpoint& base) {
  ep& e = ep::of(base);
  if (e.type == FI_EP_RDM) {
    if (!e.named) {
      const int family = e.dom->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
      if (int ret = default_src(nullptr, family, e.name)) return ret;
    }
    if (int ret = e.poll->listen(e.owner, e.cfg, e.name, 0, &e.listen)) return ret;
    e.name = e.listen->addr();
    if (e.name.any()) {
      // Bound to every interface: peers are told the default one's address.
      sock_addr told;
      const int family = e.dom->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
      if (int ret = default_src(nullptr, family, told)) return ret;
      told.set_port(e.name.port());
      e.name = told;
    }
    e.named = true;
    e.cfg->self = to_wire(e.name, e.cfg->self.instance);
    e.peers = std::make_unique<peer_map>(*e.poll, e.owner, e.cfg);
  } else {
    e.cfg->self = wire_addr{};  // the active side of a connection listens nowhere
    e.cfg->self.instance = to_wire(e.name, 0).instance;
  }
  if (ep_watch_fd(e, e.poll->fd(), true) > 0) {  // someone may sleep on an fd: deadlines need a timer
    e.timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (e.timer >= 0) (void)ep_watch_fd(e, e.timer, true);
  }
  WEFT_DEBUG(FI_LOG_EP_CTRL, "tcp: %s endpoint enabled at %s", e.type == FI_EP_RDM ? "RDM" : "MSG",
             e.name.str().c_str());
  return 0;
}

void progress_hook(endpoint& e) noexcept {
  progress(ep::of(e));
}

// fi_trywait: the poller's epoll fd is in the wait objects (enable); its
// trywait takes pending edges and cools hot connections, so that the next
// byte raises an edge the application's poll sees. Deadlines (connects,
// stalled sends, frames parked for a connection) are kept by progress: the
// timer, in the wait objects too, wakes the sleeper for the next one.
bool arm(endpoint& base) noexcept {
  ep& e = ep::of(base);
  if (!e.enabled) return true;
  if (e.peers && e.peers->parked()) expire_parked(e);
  if (e.poll->trywait()) return false;
  int ms = e.poll->next_timeout_ms();
  if (e.peers && e.peers->parked()) ms = ms < 0 ? 100 : std::min(ms, 100);
  if (ms < 0) return true;
  if (ms == 0 || e.timer < 0) return false;  // due now, or no timer: keep polling
  itimerspec t{};
  t.it_value.tv_sec = ms / 1000;
  t.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1000000L;
  timerfd_settime(e.timer, 0, &t, nullptr);
  e.timer_armed = true;
  return true;
}

void unarm(ep& e) noexcept {
  e.timer_armed = false;
  itimerspec off{};
  timerfd_settime(e.timer, 0, &off, nullptr);
  uint64_t n;
  (void)!read(e.timer, &n, sizeof n);
}

void close(endpoint& base) noexcept {
  ep& e = ep::of(base);
  if (!e.enabled) return;
  (void)ep_watch_fd(e, e.poll->fd(), false);
  if (e.timer >= 0) {
    (void)ep_watch_fd(e, e.timer, false);
    ::close(e.timer);
    e.timer = -1;
  }
  if (e.msg_conn && !e.shut) e.msg_conn->shutdown();  // the peer hears FI_SHUTDOWN
  e.poll->progress();
}

void destroy(endpoint* base) noexcept {
  ep& e = ep::of(*base);
  e.peers.reset();  // before the poller
  if (e.pending_accept) e.pending_accept->release();
  for (auto& [serial, lk] : e.links) delete lk;
  e.links.clear();
  delete &e;
}

const ep_transport rdm_transport = {enable, progress_hook, close, destroy, &rx_answers, 0, arm};
const ep_transport msg_transport = {enable, progress_hook, close, destroy, &rx_answers, cm_data_max, arm, true};

}  // namespace

std::unique_ptr<ep> make_ep(domain& dom, const fi_info* info, void* context) {
  fi_ep_type type = info->ep_attr ? info->ep_attr->type : FI_EP_RDM;
  if (type == FI_EP_UNSPEC) type = FI_EP_RDM;
  if (type != FI_EP_RDM && type != FI_EP_MSG) fail(FI_EINVAL, "tcp: RDM and MSG endpoints only");
  auto e = std::make_unique<ep>();
  e->owner.e = e.get();
  endpoint_init(*e, dom, info, context, ep_role::endpoint, type == FI_EP_MSG ? &msg_transport : &rdm_transport,
                inject_max);
  // A refusal below frees the info endpoint_init copied (fi_close would).
  struct info_undo {
    ep* e;
    ~info_undo() {
      if (e) info_free(std::exchange(e->info, nullptr));
    }
  } undo{e.get()};
  e->type = type;
  auto cfg = std::make_shared<conn_config>();
  cfg->ep_type = type == FI_EP_MSG ? wire_ep_type::msg : wire_ep_type::rdm;
  // The endpoint's auth_key, else the domain's: a shared secret peers must hold.
  const fi_ep_attr* ea = info->ep_attr;
  const fi_domain_attr* da = dom.info ? dom.info->domain_attr : nullptr;
  if (ea && ea->auth_key_size && ea->auth_key)
    cfg->auth_key.assign(ea->auth_key, ea->auth_key + ea->auth_key_size);
  else if (da && da->auth_key_size && da->auth_key)
    cfg->auth_key.assign(da->auth_key, da->auth_key + da->auth_key_size);
  if (cfg->auth_key.size() > auth_key_max) fail(FI_EINVAL, "tcp: auth_key too long");
  cfg->limits.rma_iov_max = iov_max;
  cfg->limits.eager_max = eager_max;
  cfg->limits.atomic_max = atomic_max_bytes;
  cfg->credit = credit_window;
  apply_params(*cfg);
  // Many peers may connect at once (an MPI job starting): handshakes under
  // way are bounded (a flood is cut off), but above what a job produces.
  cfg->max_pending = 4096;
  if (int ret = cfg->new_instance()) fail(-ret, "tcp: no random instance");
  e->cfg = cfg;
  e->poll = std::make_unique<poller>();
  if (info->src_addr && info->src_addrlen) {
    if (sock_addr::from(info->src_addr, info->src_addrlen, e->name)) fail(FI_EINVAL, "tcp: bad src_addr");
    e->named = true;
  }
  if (type == FI_EP_MSG && info->handle && info->handle->fclass == FI_CLASS_PEP) {
    bool named = false;
    sock_addr name;
    if (take_pep(info->handle, name, named, e->reserved))
      fail(FI_EINVAL, "tcp: the info's handle is no passive endpoint of tcp's, or one taken over already");
    if (named) {
      e->name = name;
      e->named = true;
    }
  } else if (type == FI_EP_MSG && info->handle) {
    e->pending_accept = take_connreq(info->handle, *e->poll, e->owner);
    if (!e->pending_accept) fail(FI_EINVAL, "tcp: the info's handle is no open connection request");
  }
  install_ops(*e);
  e->fid_.cm = type == FI_EP_MSG ? &msg_cm_ops : &rdm_cm_ops;
  undo.e = nullptr;
  return e;
}

int tcp_domain::endpoint(fi_info* info, fid_ep** out, void* context) {
  if (!info || !out) return -FI_EINVAL;
  if (info->fabric_attr && info->fabric_attr->prov_name && !names_provider(info->fabric_attr->prov_name, "tcp"))
    return -FI_EINVAL;
  if (info->tx_attr && info->tx_attr->inject_size > inject_max) return -FI_EINVAL;
  if (info->ep_attr && ((info->ep_attr->tx_ctx_cnt > 1 && info->ep_attr->tx_ctx_cnt != FI_SHARED_CONTEXT) ||
                        (info->ep_attr->rx_ctx_cnt > 1 && info->ep_attr->rx_ctx_cnt != FI_SHARED_CONTEXT)))
    return -FI_EINVAL;
  auto e = make_ep(dom, info, context);
  dom.users_.add();
  *out = &e.release()->fid_;
  return 0;
}

int tcp_domain::stx_ctx(fi_tx_attr* attr, fid_stx** out, void* context) {
  return stx_open(dom, attr, out, context, inject_max);
}

int tcp_domain::srx_ctx(fi_rx_attr* attr, fid_ep** out, void* context) {
  return srx_open(dom, attr, out, context);
}

// ------------------------------------------------------------------ progress
void expire_parked(ep& e) noexcept {
  for (tx_entry* t = e.peers->expire(now_ns()); t;) {
    tx_entry* next = t->next;
    sent(e, nullptr, *t, -FI_ETIMEDOUT);  // its peer never answered
    t = next;
  }
}

void progress(ep& e) noexcept {
  if (!e.enabled) [[unlikely]]
    return;
  if (e.timer_armed) [[unlikely]]
    unarm(e);
  e.poll->progress();
  if ((++e.polls & 255) == 0 && e.peers) [[unlikely]]
    expire_parked(e);
  // Connections that stopped reading for want of room: room may be back.
  if (!e.deferred.empty() && e.rx->ux_count < ux_max_count && e.rx->ux_bytes < ux_max_bytes) {
    auto serials = std::move(e.deferred);
    e.deferred.clear();
    for (uint64_t s : serials) {
      auto it = e.links.find(s);
      if (it != e.links.end() && it->second->c) it->second->c->resume_rx();
    }
  }
}

// ------------------------------------------------------------------ links
link* link_of(ep& e, conn& c) noexcept {
  if (c.user) [[likely]]
    return static_cast<link*>(c.user);
  try {
    auto lk = std::make_unique<link>();
    lk->c = &c;
    lk->serial = e.next_serial++;
    if (c.established()) {
      lk->credit = static_cast<int64_t>(c.peer().credit);
      lk->credit_known = true;
    }
    e.links.emplace(lk->serial, lk.get());
    c.user = lk.get();
    return lk.release();
  } catch (...) {
    return nullptr;
  }
}

fi_addr_t source_of(ep& e, link& lk) noexcept {
  if (!e.av || !lk.c || e.type != FI_EP_RDM) return lk.src;
  // Found before, and the entry still the one found (not removed, not
  // given to another address since).
  if (lk.src != FI_ADDR_NOTAVAIL && e.av->entry_state(lk.src) == lk.src_state) return lk.src;
  lk.src = FI_ADDR_NOTAVAIL;
  sock_addr a;
  if (from_wire(lk.c->peer().id, a)) return FI_ADDR_NOTAVAIL;
  const fi_addr_t found = e.av->find(&a.ss, a.len);
  if (found == FI_ADDR_NOTAVAIL) return found;
  // The word first, then the address it stands for: an entry changed in
  // between is not cached.
  const uint32_t st = e.av->entry_state(found);
  size_t len = 0;
  const void* now = e.av->lookup(found, &len);
  if (!st || !now || len != a.len || memcmp(now, &a.ss, len) != 0) return FI_ADDR_NOTAVAIL;
  lk.src = found;
  lk.src_state = st;
  return found;
}

int route_to(ep& e, fi_addr_t dest, route& rt) noexcept {
  if (e.type == FI_EP_MSG) {
    if (!e.msg_conn || !e.connected || e.shut) return -FI_ENOTCONN;
    rt.c = e.msg_conn;
    return 0;
  }
  size_t len = 0;
  const void* a = e.av ? e.av->lookup(dest, &len) : nullptr;
  if (!a || sock_addr::from(a, len, rt.to)) return -FI_EINVAL;
  rt.c = e.peers->find(rt.to);
  return 0;
}

int send_on(ep& e, route& rt, tx_entry& tx) noexcept {
  if (e.type == FI_EP_MSG) return rt.c->send(tx);
  const int ret = e.peers->send(rt.to, tx);
  if (ret >= 0 && !rt.c) rt.c = e.peers->find(rt.to);
  return ret;
}

int send_frame(ep& e, fi_addr_t dest, tx_entry& tx, conn** used) noexcept {
  route rt;
  if (int ret = route_to(e, dest, rt)) return ret;
  const int ret = send_on(e, rt, tx);
  *used = rt.c;
  return ret;
}

// ------------------------------------------------------------------ requests
request* new_request(ep& e, req_kind kind, void* context, uint64_t cq_flags, uint64_t op_flags,
                     size_t len) noexcept {
  request* r = e.requests.alloc();
  if (!r) return nullptr;
  r->kind = kind;
  r->context = context;
  r->cq_flags = cq_flags;
  r->op_flags = op_flags;
  r->len = len;
  r->out.kind = out_kind::request;
  r->out.owner = r;
  r->data.kind = out_kind::data;
  r->data.owner = r;
  return r;
}

void finish(ep& e, request* r, int prov_errno) noexcept {
  if (r->err)
    tx_fail(e, r->context, r->cq_flags, r->op_flags, r->err, 0, prov_errno);
  else
    tx_done(e, r->context, r->cq_flags, r->op_flags, r->len);
  e.requests.release(r);
}

void fail_request(ep& e, request* r, int err, int prov_errno) noexcept {
  if (!r->err) r->err = err < 0 ? -err : err;
  r->written = r->answered = true;
  finish(e, r, prov_errno);
}

response* new_response(ep& e) noexcept {
  response* r = e.responses.alloc();
  if (!r) return nullptr;
  r->out.kind = out_kind::response;
  r->out.owner = r;
  r->credit = false;
  return r;
}

int respond(ep& e, link& lk, const frame_hdr& h, const iovec* payload, size_t count, response* r) noexcept {
  if (!r) r = new_response(e);
  if (!r) return -FI_ENOMEM;
  r->lk = &lk;
  int ret = r->out.tx.prepare(swap_hdr(h), nullptr, payload, count);
  if (ret == 0) ret = lk.c ? lk.c->send(r->out.tx) : -FI_ENOTCONN;
  if (ret != 0) {
    e.responses.release(r);  // written whole, or never
  } else {
    e.responses_queued++;  // on_sent later
    ep_owing(e, true);
  }
  return ret < 0 ? ret : 0;
}

int ack(ep& e, link& lk, uint64_t id, int status) noexcept {
  frame_hdr h{};
  h.op = static_cast<uint8_t>(op::ack);
  h.id = id;
  h.aux = static_cast<uint64_t>(status < 0 ? -status : status);
  return respond(e, lk, h, nullptr, 0);
}

void give_credit(ep& e, link& lk, uint64_t bytes) noexcept {
  lk.owed += bytes;
  if (lk.granting || lk.owed < credit_window / 4 || !lk.c) return;
  frame_hdr h{};
  h.op = static_cast<uint8_t>(op::credit);
  h.aux = lk.owed;
  response* r = new_response(e);
  if (!r) return;
  r->lk = &lk;
  r->credit = true;
  if (r->out.tx.prepare(swap_hdr(h), nullptr, nullptr, 0) != 0) {
    e.responses.release(r);
    return;
  }
  const int ret = lk.c->send(r->out.tx);
  if (ret < 0) {
    e.responses.release(r);
    return;
  }
  lk.owed = 0;
  if (ret == 1) {
    e.responses.release(r);
  } else {
    lk.granting = true;  // until on_sent
    e.responses_queued++;
    ep_owing(e, true);
  }
}

// ------------------------------------------------------------------ the connections' callbacks
void ep_owner::on_connreq(conn& c) noexcept {
  if (e->peers)
    e->peers->on_connreq(c);
  else
    c.reject(nullptr, 0, reject_reason::busy);  // an active MSG endpoint listens to nobody
}

void ep_owner::on_connected(conn& c) noexcept {
  if (link* lk = link_of(*e, c); lk && !lk->credit_known) {
    lk->credit = static_cast<int64_t>(c.peer().credit) - static_cast<int64_t>(lk->early);
    lk->credit_known = true;
  }
  if (e->type == FI_EP_MSG) cm_connected(*e, c);
}

rx_target ep_owner::on_frame(conn& c, const frame_hdr& h, const rma_desc* d) noexcept {
  link* lk = link_of(*e, c);
  if (!lk) [[unlikely]]
    return rx_target{rx_action::defer, nullptr, 0};
  lk->kind = rx_kind::skip;
  switch (static_cast<op>(h.op)) {
    case op::msg:
    case op::tagged:
      return msg_frame(*e, *lk, h);
    case op::cts:
      cts_frame(*e, *lk, h);
      break;
    case op::rndv_data:
      return rndv_data_frame(*e, *lk, h);
    case op::write:
      return write_frame(*e, *lk, h, d);
    case op::read_req:
      read_req_frame(*e, *lk, h, d);
      break;
    case op::read_resp:
      return read_resp_frame(*e, *lk, h);
    case op::atomic:
      return atomic_frame(*e, *lk, h, d);
    case op::atomic_resp:
      return atomic_resp_frame(*e, *lk, h);
    case op::ack:
      ack_frame(*e, *lk, h);
      break;
    case op::credit:
      lk->credit += static_cast<int64_t>(h.aux);
      break;
    default:
      break;  // validated by the decoder: nothing else reaches us
  }
  return rx_target{rx_action::discard, nullptr, 0};
}

void ep_owner::on_payload(conn& c, const frame_hdr& h, uint64_t landed) noexcept {
  link* lk = static_cast<link*>(c.user);
  if (!lk) return;
  switch (lk->kind) {
    case rx_kind::expected:
    case rx_kind::unexpected:
      msg_payload(*e, *lk, h, landed);
      break;
    case rx_kind::rndv_data:
      rndv_data_payload(*e, *lk, h, landed);
      break;
    case rx_kind::write:
      write_payload(*e, *lk, h, landed);
      break;
    case rx_kind::read_resp:
      read_resp_payload(*e, *lk, h, landed);
      break;
    case rx_kind::atomic:
      atomic_payload_done(*e, *lk, h, landed);
      break;
    case rx_kind::atomic_resp:
      read_resp_payload(*e, *lk, h, landed);  // the same: results landed in the request's buffers
      break;
    default:
      break;
  }
  if (c.user == lk) lk->kind = rx_kind::none;
}

void sent(ep& e, conn* c, tx_entry& t, int err) noexcept {
  frame_out& fo = reinterpret_cast<frame_out&>(t);
  switch (fo.kind) {
    case out_kind::request:
    case out_kind::data: {
      auto* r = static_cast<request*>(fo.owner);
      if (c) r->c = c;
      if (err) {
        fail_request(e, r, err, c ? c->foreign_note() : 0);
        return;
      }
      // A rendezvous announcement is not the message: its data frame is.
      if (fo.kind == out_kind::data || !r->rndv) r->written = true;
      if (r->written && r->answered) finish(e, r);
      return;
    }
    case out_kind::response: {
      auto* r = static_cast<response*>(fo.owner);
      if (r->credit && r->lk) r->lk->granting = false;
      e.responses.release(r);
      if (e.responses_queued) e.responses_queued--;
      ep_owing(e, e.responses_queued != 0);
      return;
    }
  }
}

void ep_owner::on_sent(conn& c, tx_entry& t, int err) noexcept {
  sent(*e, &c, t, err);
}

// Nobody answered a connection we opened to send: its operations end in
// error entries; once that has lasted, the warning (absent_peers).
[[gnu::cold, gnu::noinline]] static void note_absent(ep& e, const conn& c, int err) noexcept {
  const sock_addr& to = c.peer().addr;
  char how[96];
  snprintf(how, sizeof how, "each ended in an error completion: %s", fi_strerror(-err));
  const fi_addr_t dest = e.whole && e.av ? e.av->find(&to.ss, to.len) : FI_ADDR_NOTAVAIL;
  note_absent(e, "tcp", dest, [&] { return addr::to_string(FI_SOCKADDR, to.sa(), to.len); }, how);
}

void ep_owner::on_closed(conn& c, int err) noexcept {
  const int why = err ? err : -FI_ECONNRESET;
  // Our operations that went on it and wait for an answer end in error;
  // those of a connection that lost a simultaneous connect move with its
  // frames to the one kept.
  const bool crossed = c.rejected() == reject_reason::crossed;
  const int note = c.foreign_note();
  e->requests.for_each([&](request& r) {
    if (r.c != &c) return;
    if (crossed)
      r.c = nullptr;
    else
      fail_request(*e, &r, why, note);
  });
  if (link* lk = static_cast<link*>(c.user)) {
    forget_link(*e, *lk, why);
    e->links.erase(lk->serial);
    delete lk;
    c.user = nullptr;
  }
  if (e->type == FI_EP_MSG) {
    cm_closed(*e, c, err);
    return;
  }
  if (c.unanswered()) [[unlikely]]
    note_absent(*e, c, why);
  e->peers->on_closed(c, err);
}

int part_name(endpoint& base, void* addr, size_t* len) noexcept {
  ep& e = ep::of(base);
  const size_t have = *len;
  *len = e.name.len;
  if (!addr || have < e.name.len) return -FI_ETOOSMALL;
  memcpy(addr, &e.name.ss, e.name.len);
  return 0;
}
}  // namespace weft::tcp

namespace weft {

// ------------------------------------------------------------------ as a part (tcp_part.hpp)
template <>
endpoint* part<tcp::part_tag>::open(domain& part_domain, const fi_info* info) {
  if (info->ep_attr && info->ep_attr->type != FI_EP_RDM) fail(FI_EINVAL, "tcp: a part is an RDM endpoint");
  auto e = tcp::make_ep(part_domain, info, nullptr);
  e->poll->watch_when_idle();  // the owner polls us rarely while idle: the watch says when to
  part_domain.users_.add();
  return e.release();
}
template <>
ssize_t part<tcp::part_tag>::rma(endpoint& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
                  const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx, uint64_t flags) noexcept {
  return tcp::rma(tcp::ep::of(e), write, iov, desc, count, addr, riov, rcount, data, ctx, flags);
}
template <>
ssize_t part<tcp::part_tag>::atomic(endpoint& e, const atomic_call& call) noexcept {
  return tcp::atomic(tcp::ep::of(e), call);
}
template <>
size_t part<tcp::part_tag>::atomic_max_count(atomic_form form, fi_datatype dt) noexcept {
  return tcp::atomic_max_count(form, dt);
}
template <>
bool part<tcp::part_tag>::busy(endpoint& e) noexcept {
  return tcp::ops_outstanding(tcp::ep::of(e));
}
template <>
void part<tcp::part_tag>::progress(endpoint& e) noexcept {
  tcp::progress(tcp::ep::of(e));
}
template <>
uint64_t part<tcp::part_tag>::round_gap_us(endpoint& base) noexcept {
  // A round with no connection being read eagerly is an epoll_wait system
  // call (about 1 us on this VM). While the poller's ready_watch is armed,
  // its probe tells the owner when a socket woke, and the gap is only the
  // bound on the deadlines' checks (handshakes, parked messages): 1 ms.
  // Without the watch (no io_uring here) the gap is the bound on a wakeup's
  // wait too: 20 us with connections open, 1 ms with none (an lnx
  // endpoint whose peers all share its host), where a round every 20 us
  // cost the shm part's 8-byte ping-pong a quarter of its mean
  // (docs/performance.md, "The linked provider's idle tcp part").
  constexpr uint64_t idle_gap_us = 20, unconnected_gap_us = 1000, watched_gap_us = 1000;
  tcp::ep& e = tcp::ep::of(base);
  if (e.poll->hot_count() != 0 || !e.deferred.empty()) return 0;
  if (e.poll->watching()) return watched_gap_us;
  return e.poll->conn_count() == 0 ? unconnected_gap_us : idle_gap_us;
}
template <>
part_probe part<tcp::part_tag>::probe(endpoint& base) noexcept {
  // Between rounds only make_hot raises what round_gap_us looks at (the
  // hot count; the deferred list and the watch change in rounds), and the
  // watch's completion says that a socket woke.
  const tcp::poller& poll = *tcp::ep::of(base).poll;
  part_probe p;
  p.gap_us = round_gap_us(base);
  p.hot = poll.hot_word();
  if (poll.watching()) {
    p.wake = poll.idle_watch().fired_word();
    p.wake_seen = poll.idle_watch().fired_seen();
  }
  return p;
}

}  // namespace weft
