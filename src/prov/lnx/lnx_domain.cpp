// SPDX-License-Identifier: BSD-3-Clause
// prov/lnx: the domain — its parts, registrations known to both, and the
// parts' mirrors of every linked AV, where each peer's path is decided.
#include <cstring>

#include "core/info.hpp"
#include "core/log.hpp"
#include "prov/lnx/lnx.hpp"
#include "util/util.hpp"

namespace weft::lnx {

namespace {

// The part's template: shm's RDM one; tcp's RDM IPv4 one of the interface
// the linked domain is named after ("shm+tcp:<interface>").
info_ptr part_info(const char* prov, const char* iface) {
  provider* p = provider_named(prov);
  if (!p) fail(FI_ENODATA, "lnx: a part provider is missing");
  auto list = p->templates();
  for (const info_ptr& t : *list) {
    if (t->ep_attr->type != FI_EP_RDM) continue;
    if (iface ? (t->addr_format == FI_SOCKADDR_IN && !strcmp(t->domain_attr->name, iface))
              : t->addr_format == FI_ADDR_STR) {
      info_ptr i(info_dup(t.get()));
      if (!i) throw std::bad_alloc();
      return i;
    }
  }
  fail(FI_ENODATA, "lnx: no template for a part");
}

const char* iface_of(const domain& d) {
  const char* name = d.info && d.info->domain_attr ? d.info->domain_attr->name : nullptr;
  const char* colon = name ? strchr(name, ':') : nullptr;
  if (!colon || strncmp(name, links, strlen(links))) fail(FI_EINVAL, "lnx: not a linked domain name");
  return colon + 1;
}

}  // namespace

lnx_domain::lnx_domain(domain& d) : dom(d), host(host_id()) {
  if (d.addr_format != FI_ADDR_STR) fail(FI_EINVAL, "lnx: addresses are FI_ADDR_STR");
  info_ptr si = part_info("shm", nullptr);
  info_ptr ti = part_info("tcp", iface_of(d));
  shm = domain_open_part(d, *provider_named("shm"), si.get());
  tcp = domain_open_part(d, *provider_named("tcp"), ti.get());
}

lnx_domain::~lnx_domain() = default;

int lnx_domain::endpoint(fi_info* info, fid_ep** out, void* context) {
  if (!info || !out) return -FI_EINVAL;
  if (info->fabric_attr && info->fabric_attr->prov_name && !names_provider(info->fabric_attr->prov_name, prov_name))
    return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
    return -FI_EINVAL;
  if (info->ep_attr && ((info->ep_attr->tx_ctx_cnt > 1 && info->ep_attr->tx_ctx_cnt != FI_SHARED_CONTEXT) ||
                        (info->ep_attr->rx_ctx_cnt > 1 && info->ep_attr->rx_ctx_cnt != FI_SHARED_CONTEXT)))
    return -FI_EINVAL;  // no scalable endpoints: tcp has none
  return endpoint_open(dom, *this, info, out, context);
}

// Shared contexts are the endpoint core's: a shared receive context's
// queues become the endpoint's, and so both parts'.
int lnx_domain::stx_ctx(fi_tx_attr* attr, fid_stx** out, void* context) {
  return stx_open(dom, attr, out, context, endpoint_inject_max());
}

int lnx_domain::srx_ctx(fi_rx_attr* attr, fid_ep** out, void* context) {
  return srx_open(dom, attr, out, context);
}

// An atomic both parts can carry, with the smaller count.
int lnx_domain::query_atomic(fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) {
  fi_atomic_attr t{};
  if (int ret = shm->pd->query_atomic(dt, op, attr, flags)) return ret;
  if (int ret = tcp->pd->query_atomic(dt, op, &t, flags)) return ret;
  attr->count = std::min(attr->count, t.count);
  return 0;
}

// One registration map, three domains: the parts publish what they must.
void lnx_domain::mr_changed(uint64_t key) noexcept {
  shm->pd->mr_changed(key);
  tcp->pd->mr_changed(key);
}

// ------------------------------------------------------------------ AV mirrors
void lnx_domain::av_opened(av& a) {
  if (a.shared()) fail(FI_ENOSYS, "lnx: named AVs are not offered");
  fi_av_attr attr{};
  attr.type = a.type();
  attr.rx_ctx_bits = a.rx_ctx_bits();
  fid_av* s = nullptr;
  fid_av* t = nullptr;
  if (int ret = av_open(*shm, &attr, &s, nullptr)) fail(-ret, "lnx: shm mirror AV");
  if (int ret = av_open(*tcp, &attr, &t, nullptr)) {
    fi_close(&s->fid);
    fail(-ret, "lnx: tcp mirror AV");
  }
  std::lock_guard g(mu);
  try {
    avs[&a] = mirrors{av::of(s), av::of(t)};
  } catch (...) {
    fi_close(&s->fid);
    fi_close(&t->fid);
    throw;
  }
}

mirrors lnx_domain::mirrors_of(const av& a) {
  std::lock_guard g(mu);
  auto it = avs.find(&a);
  return it == avs.end() ? mirrors{} : it->second;
}

// Where the path to a peer is decided: shm when it is on this host and its
// shm name is known, else tcp. Every tcp address goes to the tcp mirror,
// so that a peer whose messages come over tcp (it knew only our tcp
// address) is still named by FI_SOURCE.
int lnx_domain::av_filled(av& a, uint64_t index, const void* addr, size_t len) noexcept {
  try {
    mirrors m = mirrors_of(a);
    if (!m.shm) return FI_EINVAL;
    m.shm->erase_at(index);
    m.tcp->erase_at(index);
    if (!len) return 0;  // an "any" entry (fi_av_insert of NULL): no path to it, for receives only
    address peer;
    if (!parse(addr, len, peer)) return FI_EINVAL;
    if (peer.tcp.family())
      if (int err = m.tcp->insert_at(index, &peer.tcp.ss, peer.tcp.len, index)) return err;
    if (peer.host == host && !peer.shm.empty()) {
      const std::string name = "fi_shm://" + peer.shm;
      if (int err = m.shm->insert_at(index, name.c_str(), name.size() + 1, index)) {
        m.tcp->erase_at(index);
        return err;
      }
    } else if (!peer.tcp.family()) {
      return FI_EADDRNOTAVAIL;  // another host's shm name alone: no path to it
    }
    // One line per peer (FI_LOG_LEVEL=info): the tests read it to check
    // that peers on this host go over shm and the others over tcp.
    WEFT_LOG(FI_LOG_INFO, FI_LOG_AV, prov_name, "lnx: host %012llx: peer %llu at %s goes over %s",
             static_cast<unsigned long long>(host), static_cast<unsigned long long>(index),
             static_cast<const char*>(addr), m.shm->lookup(index) ? "shm" : "tcp");
    return 0;
  } catch (const error& e) {
    return e.code();
  } catch (...) {
    return FI_ENOMEM;
  }
}

void lnx_domain::av_emptied(av& a, uint64_t index) noexcept {
  mirrors m = mirrors_of(a);
  if (!m.shm) return;
  m.shm->erase_at(index);
  m.tcp->erase_at(index);
}

void lnx_domain::av_closed(av& a) noexcept {
  mirrors m;
  {
    std::lock_guard g(mu);
    auto it = avs.find(&a);
    if (it == avs.end()) return;
    m = it->second;
    avs.erase(it);
  }
  fi_close(&m.shm->fid_.fid);
  fi_close(&m.tcp->fid_.fid);
}

}  // namespace weft::lnx
