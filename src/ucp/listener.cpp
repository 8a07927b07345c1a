// SPDX-License-Identifier: BSD-3-Clause
// Client/server connection establishment on libfabric's connection
// management: a listener is an FI_EP_MSG passive endpoint; a client connects
// an FI_EP_MSG endpoint to it with its worker address and endpoint id in the
// CM private data, the server accepts with its own. Data then flows over the
// workers' RDM endpoints; the MSG connection stays as the link whose loss
// (FI_SHUTDOWN) tells an endpoint that its peer went away.
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>

#include <cstdlib>

#include "ucp_int.hpp"

namespace wucp {

namespace {

constexpr uint32_t cm_magic = 0x4d435577;  // "wUCM"
constexpr char reject_marker[] = "weft-ucp-reject";

struct cm_priv {
  uint32_t magic;
  uint8_t version;
  uint8_t flags;  // 1: client id present
  uint16_t addr_len;
  uint32_t ep_id;
  uint32_t pad;
  uint64_t client_id;
};
static_assert(sizeof(cm_priv) == 24);

std::vector<uint8_t> make_priv(ucp_worker* w, uint32_t ep_id, bool has_cid, uint64_t cid) {
  cm_priv h{
      cm_magic, 1,  static_cast<uint8_t>(has_cid ? 1 : 0), static_cast<uint16_t>(w->address.size()), ep_id,
      0,        cid};
  std::vector<uint8_t> v(sizeof h + w->address.size());
  memcpy(v.data(), &h, sizeof h);
  memcpy(v.data() + sizeof h, w->address.data(), w->address.size());
  return v;
}

bool parse_priv(const uint8_t* p, size_t len, cm_priv& h, peer_addr& pa) {
  if (len < sizeof h) return false;
  memcpy(&h, p, sizeof h);
  if (h.magic != cm_magic || h.version != 1 || h.addr_len > len - sizeof h) return false;
  return parse_address(p + sizeof h, h.addr_len, pa);
}

// libfabric takes socket addresses as node and service strings (the tcp
// provider of libfabric 1.17 ignores the port of a hints->src_addr).
bool to_strings(const sockaddr* sa, socklen_t len, std::string& node, std::string& service) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV))
    return false;
  node = host;
  service = serv;
  return true;
}

bool is_wildcard(const sockaddr* sa) {
  if (sa->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (sa->sa_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  return false;
}

// passive: the listener's own address (FI_SOURCE); otherwise the server's,
// with an optional local address to bind to.
fi_info* msg_info(const sockaddr* addr, socklen_t alen, bool passive, const sockaddr* local, socklen_t llen) {
  std::string node, service;
  if (!to_strings(addr, alen, node, service)) return nullptr;
  fi_info* hints = fi_allocinfo();
  if (!hints) return nullptr;
  hints->ep_attr->type = FI_EP_MSG;
  hints->caps = FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup("tcp");
  hints->addr_format = addr->sa_family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
  if (local) {
    hints->src_addr = malloc(llen);
    memcpy(hints->src_addr, local, llen);
    hints->src_addrlen = llen;
  }
  fi_info* info = nullptr;
  const char* n = passive && is_wildcard(addr) ? nullptr : node.c_str();
  int rc = fi_getinfo(FI_VERSION(1, 17), n, service.c_str(), passive ? FI_SOURCE : 0, hints, &info);
  fi_freeinfo(hints);
  if (rc) return nullptr;
  for (fi_info* i = info; i; i = i->next) {
    std::string p = i->fabric_attr->prov_name;
    if (p == "tcp" || p.rfind("tcp;", 0) == 0) {
      fi_info* one = fi_dupinfo(i);
      fi_freeinfo(info);
      return one;
    }
  }
  fi_freeinfo(info);
  return nullptr;
}

int ensure_cm(ucp_worker* w, fi_info* info) {
  if (w->eq) return 0;
  int rc = fi_fabric(info->fabric_attr, &w->cm_fabric, nullptr);
  if (rc) return rc;
  fi_eq_attr eq_attr{};
  eq_attr.size = 64;
  eq_attr.wait_obj = FI_WAIT_UNSPEC;
  rc = fi_eq_open(w->cm_fabric, &eq_attr, &w->eq, nullptr);
  if (rc) return rc;
  rc = fi_domain(w->cm_fabric, info, &w->cm_domain, nullptr);
  if (rc) return rc;
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.size = 16;
  return fi_cq_open(w->cm_domain, &cq_attr, &w->cm_cq, nullptr);
}

int open_msg_ep(ucp_worker* w, fi_info* info, fid_ep** ep) {
  int rc = fi_endpoint(w->cm_domain, info, ep, nullptr);
  if (rc) return rc;
  rc = fi_ep_bind(*ep, &w->eq->fid, 0);
  if (!rc) rc = fi_ep_bind(*ep, &w->cm_cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc) {
    fi_close(&(*ep)->fid);
    *ep = nullptr;
  }
  return rc;
}

void fill_names(ucp_ep* ep) {
  size_t len = sizeof ep->local_sa;
  if (fi_getname(&ep->cm_ep->fid, &ep->local_sa, &len)) memset(&ep->local_sa, 0, sizeof ep->local_sa);
  len = sizeof ep->remote_sa;
  sockaddr_storage peer{};
  if (fi_getpeer(ep->cm_ep, &peer, &len) == 0) ep->remote_sa = peer;
  ep->has_sa = true;
}

ucp_ep* cm_ep_of(ucp_worker* w, fid_t fid) {
  for (ucp_ep* ep : w->cm_eps)
    if (ep->cm_ep && &ep->cm_ep->fid == fid) return ep;
  return nullptr;
}

ucs_status_t attach_peer(ucp_ep* ep, const peer_addr& pa) {
  fi_addr_t dest;
  ucs_status_t st = UCS_OK;
  iface* tp = pick_transport(ep->w, pa, &dest, &st);
  if (!tp) return st;
  ep->tp = tp;
  ep->dest = dest;
  ep->peer = pa;
  set_path_names(ep);
  return UCS_OK;
}

void on_connreq(ucp_worker* w, const fi_eq_cm_entry* e, size_t datalen) {
  listener_impl* l = nullptr;
  for (auto* x : w->listeners)
    if (&x->pep->fid == e->fid) l = x;
  if (!l) {
    fi_freeinfo(e->info);
    return;
  }
  auto cr = std::make_unique<conn_req_impl>();
  cr->l = l;
  cr->info = e->info;
  cr->priv.assign(e->data, e->data + datalen);
  cm_priv h;
  peer_addr pa;
  if (!parse_priv(cr->priv.data(), cr->priv.size(), h, pa)) {
    fi_reject(l->pep, e->info->handle, nullptr, 0);
    fi_freeinfo(e->info);
    return;
  }
  cr->client_ep = h.ep_id;
  cr->has_client_id = h.flags & 1;
  cr->client_id = h.client_id;
  if (e->info->dest_addr && e->info->dest_addrlen <= sizeof cr->client_sa)
    memcpy(&cr->client_sa, e->info->dest_addr, e->info->dest_addrlen);
  conn_req_impl* raw = cr.release();
  l->reqs.push_back(raw);
  if (l->conn.cb) {
    l->conn.cb(reinterpret_cast<ucp_conn_request_h>(raw), l->conn.arg);
  } else if (l->accept.cb) {
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    p.conn_request = reinterpret_cast<ucp_conn_request_h>(raw);
    ucp_ep_h ep;
    if (ucp_ep_create(w, &p, &ep) == UCS_OK) l->accept.cb(ep, l->accept.arg);
  }
}

// The endpoint whose connection `f` ended (a shutdown or an error event),
// looked up after the completions the providers hold were dispatched (not
// from inside a dispatch): their callbacks may have closed it.
ucp_ep* cm_ep_ended(ucp_worker* w, fid_t f, bool nested) noexcept {
  if (!nested && cm_ep_of(w, f)) drain_completions(w);
  return cm_ep_of(w, f);
}

}  // namespace

void cm_close_ep(ucp_ep* ep) noexcept {
  if (!ep->cm_ep) return;
  ucp_worker* w = ep->w;
  fi_shutdown(ep->cm_ep, 0);
  fi_close(&ep->cm_ep->fid);
  ep->cm_ep = nullptr;
  for (size_t i = 0; i < w->cm_eps.size(); i++)
    if (w->cm_eps[i] == ep) {
      w->cm_eps.erase(w->cm_eps.begin() + static_cast<long>(i));
      break;
    }
  if (w->cm_users) w->cm_users--;
}

void cm_progress(ucp_worker* w, bool nested) noexcept {
  if (!w->eq) return;
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 1024];
  for (int n = 0; n < 16; n++) {
    uint32_t event = 0;
    ssize_t rc = fi_eq_read(w->eq, &event, buf, sizeof buf, 0);
    if (rc == -FI_EAGAIN) return;
    if (rc == -FI_EAVAIL) {
      fi_eq_err_entry err{};
      if (fi_eq_readerr(w->eq, &err, 0) < 0) return;  // the entry's size in bytes on success
      ucp_ep* ep = cm_ep_ended(w, err.fid, nested);
      WUCP_LOG(L_DEBUG, "cm: error event %d (%s) for %s", err.err, fi_strerror(err.err), ep ? ep->name : "?");
      if (ep) {
        bool rejected = err.err_data && err.err_data_size >= sizeof reject_marker &&
                        !memcmp(err.err_data, reject_marker, sizeof reject_marker);
        ucs_status_t st = err.err == FI_ECONNREFUSED ? (rejected ? UCS_ERR_REJECTED : UCS_ERR_UNREACHABLE)
                                                     : from_fi(err.err);
        ep_fail(ep, st);
      }
      continue;
    }
    if (rc < static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) return;
    auto* e = reinterpret_cast<fi_eq_cm_entry*>(buf);
    size_t datalen = static_cast<size_t>(rc) - sizeof(fi_eq_cm_entry);
    WUCP_LOG(L_DEBUG, "cm: event %u, %zu bytes of private data", event, datalen);
    try {
      switch (event) {
        case FI_CONNREQ:
          on_connreq(w, e, datalen);
          break;
        case FI_CONNECTED: {
          ucp_ep* ep = cm_ep_of(w, e->fid);
          if (!ep) break;
          fill_names(ep);
          if (ep->state != EP_CONNECTING) break;
          cm_priv h;
          peer_addr pa;
          if (!parse_priv(e->data, datalen, h, pa) || attach_peer(ep, pa) != UCS_OK) {
            ep_fail(ep, UCS_ERR_UNREACHABLE);
            break;
          }
          ep_connected(ep, h.ep_id);
          break;
        }
        case FI_SHUTDOWN: {
          ucp_ep* ep = cm_ep_ended(w, e->fid, nested);
          if (!ep || ep->close_stage) break;
          ep->flags |= EPF_REMOTE_CLOSED;
          if (ep->state == EP_CONNECTING || ep->err_mode == UCP_ERR_HANDLING_MODE_PEER)
            ep_fail(ep, UCS_ERR_CONNECTION_RESET);
          break;
        }
        default:
          break;
      }
    } catch (...) {}
  }
}

ucs_status_t cm_connect(ucp_worker* w, const ucp_ep_params_t* p, ucp_ep** out) {
  if (!p->sockaddr.addr || p->sockaddr.addrlen < sizeof(sockaddr_in) ||
      p->sockaddr.addrlen > sizeof(sockaddr_storage))
    return UCS_ERR_INVALID_PARAM;
  const sockaddr* src = nullptr;
  socklen_t slen = 0;
  if ((p->field_mask & UCP_EP_PARAM_FIELD_LOCAL_SOCK_ADDR) && p->local_sockaddr.addr) {
    src = p->local_sockaddr.addr;
    slen = p->local_sockaddr.addrlen;
  }
  fi_info* info = msg_info(p->sockaddr.addr, p->sockaddr.addrlen, false, src, slen);
  if (!info) return UCS_ERR_UNREACHABLE;
  std::unique_ptr<fi_info, void (*)(fi_info*)> ih(info, fi_freeinfo);
  int rc = ensure_cm(w, info);
  if (rc) return from_fi(rc);
  ucp_ep* ep = ep_new(w);
  ep->flags |= EPF_CM_CLIENT;
  apply_params(ep, p);
  ep->tp = w->tps[0].get();  // until the server's address says otherwise
  memcpy(&ep->remote_sa, p->sockaddr.addr, p->sockaddr.addrlen);
  ep->has_sa = true;
  rc = open_msg_ep(w, info, &ep->cm_ep);
  if (!rc) rc = fi_enable(ep->cm_ep);
  bool send_id =
      (p->field_mask & UCP_EP_PARAM_FIELD_FLAGS) && (p->flags & UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID);
  if (!rc) {
    auto priv = make_priv(w, ep->id, send_id, w->client_id);
    rc = fi_connect(ep->cm_ep, p->sockaddr.addr, priv.data(), priv.size());
  }
  if (rc) {
    if (ep->cm_ep) fi_close(&ep->cm_ep->fid);
    ep->cm_ep = nullptr;
    ep_free(ep);
    return rc == -FI_ENOSYS ? UCS_ERR_UNSUPPORTED : from_fi(rc);
  }
  w->cm_eps.push_back(ep);
  w->cm_users++;
  w->attn = true;
  if (ep->err_mode == UCP_ERR_HANDLING_MODE_PEER) w->peer_mode_eps++;
  w->attn = true;
  *out = ep;
  return UCS_OK;
}

ucs_status_t cm_accept(ucp_worker* w, const ucp_ep_params_t* p, ucp_ep** out) {
  auto* cr = reinterpret_cast<conn_req_impl*>(p->conn_request);
  // The endpoint may be created on another worker of the listener's context
  // (UCX's examples accept on a separate data worker).
  if (!cr || !cr->l || cr->l->w->ctx != w->ctx) return UCS_ERR_INVALID_PARAM;
  listener_impl* l = cr->l;
  std::unique_ptr<worker_guard> lg;
  if (l->w != w) lg = std::make_unique<worker_guard>(l->w);
  auto it = std::find(l->reqs.begin(), l->reqs.end(), cr);
  if (it == l->reqs.end()) return UCS_ERR_INVALID_PARAM;
  cm_priv h;
  peer_addr pa;
  if (!parse_priv(cr->priv.data(), cr->priv.size(), h, pa)) return UCS_ERR_INVALID_PARAM;
  int crc = ensure_cm(w, cr->info);
  if (crc) return from_fi(crc);
  ucp_ep* ep = ep_new(w);
  ep->flags |= EPF_CM_SERVER;
  apply_params(ep, p);
  ucs_status_t st = attach_peer(ep, pa);
  int rc = 0;
  if (st == UCS_OK) {
    rc = open_msg_ep(w, cr->info, &ep->cm_ep);
    if (!rc) {
      auto priv = make_priv(w, ep->id, false, 0);
      rc = fi_accept(ep->cm_ep, priv.data(), priv.size());
    }
    if (rc) st = rc == -FI_ENOSYS ? UCS_ERR_UNSUPPORTED : from_fi(rc);
  }
  l->reqs.erase(it);
  if (st != UCS_OK) {
    if (ep->cm_ep) fi_close(&ep->cm_ep->fid);
    ep->cm_ep = nullptr;
    fi_reject(l->pep, cr->info->handle, nullptr, 0);
    fi_freeinfo(cr->info);
    delete cr;
    ep_free(ep);
    return st;
  }
  ep->client_id = cr->client_id;
  ep->remote_sa = cr->client_sa;
  ep->has_sa = true;
  size_t len = sizeof ep->local_sa;
  fi_getname(&ep->cm_ep->fid, &ep->local_sa, &len);
  fi_freeinfo(cr->info);
  delete cr;
  w->cm_eps.push_back(ep);
  w->cm_users++;
  w->attn = true;
  if (ep->err_mode == UCP_ERR_HANDLING_MODE_PEER) {
    w->peer_mode_eps++;
    w->attn = true;
  }
  ep_connected(ep, h.ep_id);
  *out = ep;
  return UCS_OK;
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_t ucp_listener_create(ucp_worker_h w, const ucp_listener_params_t* params,
                                            ucp_listener_h* listener_p) {
  if (!w || !params || !listener_p) return UCS_ERR_INVALID_PARAM;
  if (!(params->field_mask & UCP_LISTENER_PARAM_FIELD_SOCK_ADDR) || !params->sockaddr.addr ||
      params->sockaddr.addrlen < sizeof(sockaddr_in) || params->sockaddr.addrlen > sizeof(sockaddr_storage))
    return UCS_ERR_INVALID_PARAM;
  bool conn = (params->field_mask & UCP_LISTENER_PARAM_FIELD_CONN_HANDLER) && params->conn_handler.cb;
  bool acc = (params->field_mask & UCP_LISTENER_PARAM_FIELD_ACCEPT_HANDLER) && params->accept_handler.cb;
  if (conn == acc) return UCS_ERR_INVALID_PARAM;
  worker_guard g(w);
  try {
    fi_info* info = msg_info(params->sockaddr.addr, params->sockaddr.addrlen, true, nullptr, 0);
    if (!info) return UCS_ERR_UNSUPPORTED;
    std::unique_ptr<fi_info, void (*)(fi_info*)> ih(info, fi_freeinfo);
    int rc = ensure_cm(w, info);
    if (rc) return rc == -FI_ENOSYS ? UCS_ERR_UNSUPPORTED : from_fi(rc);
    auto l = std::make_unique<listener_impl>();
    l->w = w;
    if (conn) l->conn = params->conn_handler;
    if (acc) l->accept = params->accept_handler;
    rc = fi_passive_ep(w->cm_fabric, info, &l->pep, nullptr);
    if (!rc) rc = fi_pep_bind(l->pep, &w->eq->fid, 0);
    if (!rc) rc = fi_listen(l->pep);
    if (rc) {
      if (l->pep) fi_close(&l->pep->fid);
      if (rc == -FI_ENOSYS) return UCS_ERR_UNSUPPORTED;
      return rc == -FI_EADDRINUSE ? UCS_ERR_BUSY : from_fi(rc);
    }
    size_t len = sizeof l->sa;
    fi_getname(&l->pep->fid, &l->sa, &len);
    w->listeners.push_back(l.get());
    w->cm_users++;
    w->attn = true;
    *listener_p = reinterpret_cast<ucp_listener_h>(l.release());
    return UCS_OK;
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
}

UCP_EXPORT void ucp_listener_destroy(ucp_listener_h listener) {
  auto* l = reinterpret_cast<listener_impl*>(listener);
  if (!l) return;
  ucp_worker* w = l->w;
  worker_guard g(w);
  for (auto* cr : l->reqs) {
    fi_reject(l->pep, cr->info->handle, nullptr, 0);
    fi_freeinfo(cr->info);
    delete cr;
  }
  fi_close(&l->pep->fid);
  for (size_t i = 0; i < w->listeners.size(); i++)
    if (w->listeners[i] == l) {
      w->listeners.erase(w->listeners.begin() + static_cast<long>(i));
      break;
    }
  if (w->cm_users) w->cm_users--;
  delete l;
}

UCP_EXPORT ucs_status_t ucp_listener_query(ucp_listener_h listener, ucp_listener_attr_t* attr) {
  auto* l = reinterpret_cast<listener_impl*>(listener);
  if (!l || !attr) return UCS_ERR_INVALID_PARAM;
  if (attr->field_mask & UCP_LISTENER_ATTR_FIELD_SOCKADDR) attr->sockaddr = l->sa;
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_listener_reject(ucp_listener_h listener, ucp_conn_request_h conn_request) {
  auto* l = reinterpret_cast<listener_impl*>(listener);
  auto* cr = reinterpret_cast<conn_req_impl*>(conn_request);
  if (!l || !cr || cr->l != l) return UCS_ERR_INVALID_PARAM;
  worker_guard g(l->w);
  auto it = std::find(l->reqs.begin(), l->reqs.end(), cr);
  if (it == l->reqs.end()) return UCS_ERR_INVALID_PARAM;
  l->reqs.erase(it);
  fi_reject(l->pep, cr->info->handle, reject_marker, sizeof reject_marker);
  fi_freeinfo(cr->info);
  delete cr;
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_conn_request_query(ucp_conn_request_h conn_request,
                                               ucp_conn_request_attr_t* attr) {
  auto* cr = reinterpret_cast<conn_req_impl*>(conn_request);
  if (!cr || !attr) return UCS_ERR_INVALID_PARAM;
  if (attr->field_mask & UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR) attr->client_address = cr->client_sa;
  if (attr->field_mask & UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID) {
    if (!cr->has_client_id) return UCS_ERR_UNSUPPORTED;
    attr->client_id = cr->client_id;
  }
  return UCS_OK;
}

namespace wucp {
// Called by ucp_worker_destroy after its endpoints and listeners are gone.
void cm_destroy(ucp_worker* w) noexcept {
  if (w->cm_cq) fi_close(&w->cm_cq->fid);
  if (w->cm_domain) fi_close(&w->cm_domain->fid);
  w->cm_cq = nullptr;
  w->cm_domain = nullptr;
}
}  // namespace wucp
