// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: connection management (man fi_cm) — passive endpoints that
// listen and raise FI_CONNREQ, and the MSG endpoint's fi_connect, fi_accept,
// fi_reject, fi_shutdown, fi_getname/fi_getpeer, each ending in an EQ event:
// FI_CONNECTED on both sides, FI_SHUTDOWN on the peer, an error entry
// (FI_ECONNREFUSED with the reject's data, or why it failed) otherwise.
#include <cstring>
#include <mutex>

#include "core/fabric2.hpp"
#include "core/info.hpp"
#include "prov/tcp/tcp.hpp"
#include "util/eq.hpp"
#include "util/fabric.hpp"

namespace weft::tcp {

namespace {

struct pep;

// The handle of an FI_CONNREQ's fi_info: one connection request, answered by
// fi_accept (through fi_endpoint) or fi_reject.
struct connreq {
  fid fid_;  // first; fclass FI_CLASS_CONNREQ
  pep* owner = nullptr;
  conn* c = nullptr;  // nullptr once taken, rejected, or closed
};

struct pep_owner final : conn_owner {
  pep* p = nullptr;
  void on_connreq(conn& c) noexcept override;
  void on_connected(conn&) noexcept override {}
  rx_target on_frame(conn&, const frame_hdr&, const rma_desc*) noexcept override {
    return rx_target{rx_action::discard, nullptr, 0};
  }
  void on_payload(conn&, const frame_hdr&, uint64_t) noexcept override {}
  void on_sent(conn&, tx_entry&, int) noexcept override {}
  void on_closed(conn& c, int err) noexcept override;
};

struct pep {
  fid_pep fid_;  // first
  fabric* fab = nullptr;
  fi_info* info = nullptr;
  fid_eq* eq = nullptr;
  std::shared_ptr<conn_config> cfg;
  poller poll;
  listener* listen = nullptr;
  sock_addr name;
  bool named = false;
  scoped_fd reserved;  // bound by fi_setname until it listens or an endpoint takes it
  bool taken = false;  // an active endpoint took its address over (fi_endpoint with it as handle)
  std::mutex lock;
  std::list<connreq> requests;  // stable addresses: the handles applications hold
  pep_owner owner;
  static pep* of(fid* f) noexcept { return from_fid<pep>(f); }
};

void pep_poll(void* arg) noexcept {
  pep* p = static_cast<pep*>(arg);
  std::lock_guard g(p->lock);
  p->poll.progress();
}

void pep_owner::on_connreq(conn& c) noexcept {
  // FI_CONNREQ: an fi_info for the endpoint that accepts, whose handle is
  // the request, and the connector's private data behind the entry.
  try {
    info_ptr info(info_dup(p->info));
    if (!info) throw std::bad_alloc();
    const sock_addr& from = c.peer().addr;
    free(info->dest_addr);
    info->dest_addr = malloc(from.len);
    if (!info->dest_addr) throw std::bad_alloc();
    memcpy(info->dest_addr, &from.ss, from.len);
    info->dest_addrlen = from.len;
    p->requests.emplace_back();
    connreq& cr = p->requests.back();
    cr.fid_.fclass = FI_CLASS_CONNREQ;
    cr.owner = p;
    cr.c = &c;
    c.user = &cr;
    info->handle = &cr.fid_;
    const std::vector<uint8_t>& cm = c.peer().cm;
    std::vector<unsigned char> entry(sizeof(fi_eq_cm_entry) + cm.size());
    auto* ev = reinterpret_cast<fi_eq_cm_entry*>(entry.data());
    ev->fid = &p->fid_.fid;
    ev->info = info.get();
    if (!cm.empty()) memcpy(ev->data, cm.data(), cm.size());
    if (!p->eq || eq_post(p->eq, FI_CONNREQ, entry.data(), entry.size(), 0) < 0) {
      p->requests.pop_back();
      c.reject(nullptr, 0, reject_reason::busy);
      return;
    }
    info.release();  // the application frees it (fi_freeinfo)
  } catch (...) {
    c.reject(nullptr, 0, reject_reason::busy);
  }
}

void pep_owner::on_closed(conn& c, int) noexcept {
  // Rejected, or gone before the application answered.
  if (auto* cr = static_cast<connreq*>(c.user)) cr->c = nullptr;
  c.release();
}

int pep_close(fid* f) noexcept {
  pep* p = pep::of(f);
  {
    std::lock_guard g(p->lock);
    for (connreq& cr : p->requests)
      if (cr.c) cr.c->release();
  }
  if (p->eq) {
    eq_del_poller(p->eq, pep_poll, p);
    eq_forget(p->eq, &p->fid_.fid);
    eq_drop(p->eq);
  }
  p->fab->users_.drop();
  info_free(p->info);
  delete p;
  return 0;
}

int pep_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  pep* p = pep::of(f);
  if (!bfid || !is_eq(bfid)) return -FI_EINVAL;
  if (flags) return -FI_EBADFLAGS;
  auto* eq = reinterpret_cast<fid_eq*>(bfid);
  {
    std::lock_guard g(p->lock);
    if (p->eq || p->listen) return -FI_EINVAL;
    p->eq = eq;
  }
  // Not under p->lock: the EQ's reader holds its poller list while pep_poll
  // takes p->lock.
  if (eq_add_poller(eq, pep_poll, p)) {
    std::lock_guard g(p->lock);
    p->eq = nullptr;
    return -FI_ENOMEM;
  }
  eq_take(eq);
  return 0;
}

fi_ops pep_fi_ops = {sizeof(fi_ops),  pep_close,    pep_bind,      fid_no_control,
                     fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

int pep_listen(fid_pep* f) noexcept {
  pep* p = pep::of(&f->fid);
  std::lock_guard g(p->lock);
  if (p->taken) return -FI_EOPBADSTATE;
  if (!p->eq) return -FI_ENOEQ;
  if (p->listen) return -FI_EINVAL;
  if (!p->named) {
    const int family = p->info->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
    if (int ret = default_src(nullptr, family, p->name)) return ret;
  }
  p->cfg->self = to_wire(p->name, p->cfg->self.instance);
  if (int ret = p->poll.listen(p->owner, p->cfg, p->name, 0, &p->listen, &p->reserved)) return ret;
  p->name = p->listen->addr();  // an ephemeral port when none was given
  p->cfg->self = to_wire(p->name, p->cfg->self.instance);
  p->named = true;
  return 0;
}

int copy_addr(const sock_addr& a, void* addr, size_t* addrlen) noexcept {
  if (!addrlen) return -FI_EINVAL;
  const size_t have = *addrlen;
  *addrlen = a.len;
  if (!addr || have < a.len) return -FI_ETOOSMALL;
  memcpy(addr, &a.ss, a.len);
  return 0;
}

int pep_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  pep* p = pep::of(f);
  std::lock_guard g(p->lock);
  if (!p->named) return -FI_EADDRNOTAVAIL;
  return copy_addr(p->name, addr, addrlen);
}

// fi_cm(3): like bind(2). The address is reserved at once, a port the
// kernel chooses when none is given, so fi_getname tells it and an active
// endpoint made from this one (fi_endpoint with it as info->handle) takes
// it over.
int pep_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  pep* p = pep::of(f);
  std::lock_guard g(p->lock);
  if (p->listen || p->taken) return -FI_EOPBADSTATE;
  sock_addr a;
  if (sock_addr::from(addr, addrlen, a)) return -FI_EINVAL;
  scoped_fd fd;
  sock_addr bound;
  if (int ret = sock_bind(a, fd, bound)) return ret;
  p->reserved = std::move(fd);
  p->name = bound;
  p->named = true;
  return 0;
}

int pep_reject(fid_pep* f, fid_t handle, const void* param, size_t paramlen) noexcept {
  pep* p = pep::of(&f->fid);
  if (!handle || handle->fclass != FI_CLASS_CONNREQ) return -FI_EINVAL;
  if (paramlen > cm_data_max || (paramlen && !param)) return -FI_EINVAL;
  std::lock_guard g(p->lock);
  auto* cr = reinterpret_cast<connreq*>(handle);
  if (cr->owner != p) return -FI_EINVAL;
  if (!cr->c) return -FI_ECONNABORTED;  // the connector is gone
  const int ret = cr->c->reject(param, paramlen);
  if (ret) return ret;
  p->poll.progress();  // the reject goes out now
  return 0;
}

fi_ops_cm pep_cm = {sizeof(fi_ops_cm),
                    pep_setname,
                    pep_getname,
                    WEFT_NOSYS(fi_ops_cm, getpeer),
                    WEFT_NOSYS(fi_ops_cm, connect),
                    pep_listen,
                    WEFT_NOSYS(fi_ops_cm, accept),
                    pep_reject,
                    WEFT_NOSYS(fi_ops_cm, shutdown),
                    WEFT_NOSYS(fi_ops_cm, join)};

// FI_OPT_CM_DATA_SIZE: the most data a connection request carries.
int pep_getopt(fid_t, int level, int optname, void* optval, size_t* optlen) noexcept {
  return opt_get(opt_target{nullptr, true, cm_data_max}, level, optname, optval, optlen);
}
int pep_setopt(fid_t, int level, int optname, const void* optval, size_t optlen) noexcept {
  return opt_set(opt_target{nullptr, true, cm_data_max}, level, optname, optval, optlen);
}

fi_ops_ep pep_ep_ops = {sizeof(fi_ops_ep),
                        WEFT_NOSYS(fi_ops_ep, cancel),
                        pep_getopt,
                        pep_setopt,
                        WEFT_NOSYS(fi_ops_ep, tx_ctx),
                        WEFT_NOSYS(fi_ops_ep, rx_ctx),
                        WEFT_NOSYS(fi_ops_ep, rx_size_left),
                        WEFT_NOSYS(fi_ops_ep, tx_size_left)};

// ------------------------------------------------------------------ the MSG endpoint
ep& msg_ep(fid_t f) noexcept {
  return ep::of(ep_of(reinterpret_cast<fid_ep*>(f)));
}

int ep_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  ep& e = msg_ep(f);
  ep_guard g(e);
  if (e.type == FI_EP_MSG && e.msg_conn) {
    sock_addr local;
    if (sock_local(e.msg_conn->fd(), local) == 0) return copy_addr(local, addr, addrlen);
  }
  if (!e.named) return -FI_EADDRNOTAVAIL;
  return copy_addr(e.name, addr, addrlen);
}

int ep_setname(fid_t f, void* addr, size_t addrlen) noexcept {
  ep& e = msg_ep(f);
  std::lock_guard c(e.ctl);
  if (e.enabled || e.msg_conn) return -FI_EOPBADSTATE;
  sock_addr a;
  if (sock_addr::from(addr, addrlen, a)) return -FI_EINVAL;
  e.name = a;
  e.named = true;
  e.reserved.reset();  // a passive endpoint's address, taken over, is no longer ours to use
  return 0;
}

int ep_getpeer(fid_ep* f, void* addr, size_t* addrlen) noexcept {
  ep& e = msg_ep(&f->fid);
  ep_guard g(e);
  if (!e.msg_conn || !e.connected) return -FI_ENOTCONN;
  return copy_addr(e.msg_conn->peer().addr, addr, addrlen);
}

// fi_connect and fi_accept enable an endpoint that is not yet (fi_endpoint(3)).
int ep_connect(fid_ep* f, const void* addr, const void* param, size_t paramlen) noexcept {
  ep& e = msg_ep(&f->fid);
  if (!addr || paramlen > cm_data_max || (paramlen && !param)) return -FI_EINVAL;
  sock_addr to;
  const size_t len = e.dom->addr_format == FI_SOCKADDR_IN6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (sock_addr::from(addr, len, to)) return -FI_EINVAL;
  {
    ep_guard g(e);
    if (e.msg_conn) return -FI_EISCONN;
  }
  // Enabling checks the bindings (an EQ among them) before it changes
  // anything: a refused connect leaves the endpoint open to binds.
  if (int ret = fi_enable(f)) return ret;
  ep_guard g(e);
  if (e.msg_conn) return -FI_EISCONN;
  // The connection leaves from the endpoint's address (src_addr,
  // fi_setname): not the wildcard with no port (nothing to bind), and not a
  // loopback address toward another host (fi_getinfo's default without a
  // node, which could reach nothing there). A passive endpoint's address
  // taken over is its socket, already bound.
  const bool bind_name = e.named && !(e.name.any() && !e.name.port()) && e.name.family() == to.family() &&
                         !(e.name.loopback() && !to.loopback());
  conn* c = nullptr;
  if (int ret = e.poll->connect(e.owner, e.cfg, to, param, paramlen, &c, bind_name ? &e.name : nullptr,
                                &e.reserved))
    return ret;
  e.msg_conn = c;
  return 0;
}

int ep_accept(fid_ep* f, const void* param, size_t paramlen) noexcept {
  ep& e = msg_ep(&f->fid);
  if (paramlen > cm_data_max || (paramlen && !param)) return -FI_EINVAL;
  {
    ep_guard g(e);
    if (!e.pending_accept) return e.msg_conn ? -FI_EISCONN : -FI_EINVAL;
  }
  if (int ret = fi_enable(f)) return ret;  // as in ep_connect
  ep_guard g(e);
  if (!e.pending_accept) return e.msg_conn ? -FI_EISCONN : -FI_EINVAL;
  conn* c = e.pending_accept;
  if (int ret = c->accept(param, paramlen)) return ret;
  e.pending_accept = nullptr;
  e.msg_conn = c;
  e.poll->progress();  // the accept goes out now
  return 0;
}

int ep_shutdown(fid_ep* f, uint64_t flags) noexcept {
  ep& e = msg_ep(&f->fid);
  if (flags) return -FI_EBADFLAGS;
  ep_guard g(e);
  if (!e.msg_conn || !e.connected) return -FI_ENOTCONN;
  if (e.shut) return 0;
  e.shut = true;
  const int ret = e.msg_conn->shutdown();
  e.poll->progress();
  return ret;
}

int rdm_getname(fid_t f, void* addr, size_t* addrlen) noexcept {
  ep& e = msg_ep(f);
  ep_guard g(e);
  if (!e.named) return -FI_EADDRNOTAVAIL;
  return copy_addr(e.name, addr, addrlen);
}

}  // namespace

fi_ops_cm msg_cm_ops = {sizeof(fi_ops_cm),
                        ep_setname,
                        ep_getname,
                        ep_getpeer,
                        ep_connect,
                        WEFT_NOSYS(fi_ops_cm, listen),
                        ep_accept,
                        WEFT_NOSYS(fi_ops_cm, reject),
                        ep_shutdown,
                        WEFT_NOSYS(fi_ops_cm, join)};

// RDM: fi_join_collective (util/coll.hpp) is the only join.
fi_ops_cm rdm_cm_ops = {sizeof(fi_ops_cm),
                        ep_setname,
                        rdm_getname,
                        WEFT_NOSYS(fi_ops_cm, getpeer),
                        WEFT_NOSYS(fi_ops_cm, connect),
                        WEFT_NOSYS(fi_ops_cm, listen),
                        WEFT_NOSYS(fi_ops_cm, accept),
                        WEFT_NOSYS(fi_ops_cm, reject),
                        WEFT_NOSYS(fi_ops_cm, shutdown),
                        coll_join};

int take_pep(fid_t handle, sock_addr& name, bool& named, scoped_fd& reserved) noexcept {
  if (!handle || handle->fclass != FI_CLASS_PEP || handle->ops != &pep_fi_ops) return -FI_EINVAL;
  pep* p = pep::of(handle);
  std::lock_guard g(p->lock);
  if (p->taken) return -FI_EINVAL;
  p->taken = true;
  if (p->listen) {  // it no longer listens: the address is the endpoint's
    p->poll.close_listener(p->listen);
    p->listen = nullptr;
  }
  reserved = std::move(p->reserved);
  named = p->named;
  if (named) name = p->name;
  return 0;
}

conn* take_connreq(fid_t handle, poller& to, conn_owner& owner) noexcept {
  if (!handle || handle->fclass != FI_CLASS_CONNREQ) return nullptr;
  auto* cr = reinterpret_cast<connreq*>(handle);
  pep* p = cr->owner;
  std::lock_guard g(p->lock);
  conn* c = cr->c;
  if (!c || p->poll.move_to(*c, to)) return nullptr;
  cr->c = nullptr;
  c->user = nullptr;
  c->set_owner(&owner);
  return c;
}

void cm_connected(ep& e, conn& c) noexcept {
  e.connected = true;
  if (!e.eq) return;
  const std::vector<uint8_t>& cm = c.is_connector() ? c.peer().cm : std::vector<uint8_t>{};
  std::vector<unsigned char> entry;
  try {
    entry.resize(sizeof(fi_eq_cm_entry) + cm.size());
  } catch (...) {
    return;
  }
  auto* ev = reinterpret_cast<fi_eq_cm_entry*>(entry.data());
  ev->fid = &e.fid_.fid;
  ev->info = nullptr;
  if (!cm.empty()) memcpy(ev->data, cm.data(), cm.size());
  eq_post(e.eq, FI_CONNECTED, entry.data(), entry.size(), 0);
}

void cm_closed(ep& e, conn& c, int err) noexcept {
  const bool was_connected = e.connected;
  e.connected = false;
  if (e.msg_conn == &c) e.msg_conn = nullptr;
  if (e.eq) {
    if (was_connected && (err == 0 || err == -FI_ECONNRESET)) {
      fi_eq_cm_entry ev{};
      ev.fid = &e.fid_.fid;
      eq_post(e.eq, FI_SHUTDOWN, &ev, sizeof ev, 0);
    } else {
      // A connect that failed: refused (with the reject's data), timed out, ...
      const std::vector<uint8_t>& cm = c.peer().cm;
      const int code = err < 0 ? -err : (err ? err : FI_ECONNABORTED);
      // A peer that speaks another protocol: prov_errno's text names it.
      const int note = c.foreign_note();
      eq_post_error(e.eq, &e.fid_.fid, e.fid_.fid.context, 0, code, note ? note : err,
                    c.rejected() == reject_reason::app && !cm.empty() ? cm.data() : nullptr,
                    c.rejected() == reject_reason::app ? cm.size() : 0);
    }
  }
  c.release();
}

int passive_ep_open(fabric& fab, fi_info* info, fid_pep** out, void* context) {
  if (!info || !out) return -FI_EINVAL;
  if (!info->ep_attr || info->ep_attr->type != FI_EP_MSG) return -FI_EINVAL;
  if (info->fabric_attr && info->fabric_attr->prov_name && !names_provider(info->fabric_attr->prov_name, "tcp"))
    return -FI_EINVAL;
  auto p = std::make_unique<pep>();
  p->owner.p = p.get();
  p->info = info_dup(info, domain_attr_size_for(fab.api_version));
  if (!p->info) return -FI_ENOMEM;
  p->fab = &fab;
  auto cfg = std::make_shared<conn_config>();
  cfg->ep_type = wire_ep_type::msg;
  if (info->ep_attr->auth_key_size && info->ep_attr->auth_key)
    cfg->auth_key.assign(info->ep_attr->auth_key, info->ep_attr->auth_key + info->ep_attr->auth_key_size);
  else if (info->domain_attr && info->domain_attr->auth_key_size && info->domain_attr->auth_key)
    cfg->auth_key.assign(info->domain_attr->auth_key,
                         info->domain_attr->auth_key + info->domain_attr->auth_key_size);
  if (cfg->auth_key.size() > auth_key_max) return -FI_EINVAL;
  cfg->limits.rma_iov_max = iov_max;
  cfg->limits.eager_max = eager_max;
  cfg->limits.atomic_max = atomic_max_bytes;
  cfg->credit = credit_window;
  apply_params(*cfg);
  if (int ret = cfg->new_instance()) return ret;
  p->cfg = cfg;
  if (info->src_addr && info->src_addrlen) {
    if (sock_addr::from(info->src_addr, info->src_addrlen, p->name)) return -FI_EINVAL;
    p->named = true;
  }
  p->fid_.fid.fclass = FI_CLASS_PEP;
  p->fid_.fid.context = context;
  p->fid_.fid.ops = &pep_fi_ops;
  p->fid_.ops = &pep_ep_ops;
  p->fid_.cm = &pep_cm;
  fab.users_.add();
  *out = &p.release()->fid_;
  return 0;
}

}  // namespace weft::tcp
