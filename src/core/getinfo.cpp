// fi_getinfo: ask every provider for its templates, keep those that satisfy
// the hints, and adapt each to the hints and the caller's API version.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/object.hpp"
#include "core/info.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/prov_template.hpp"
#include "core/provider.hpp"

namespace weft {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// FI_PROVIDER: "a,b" keeps only those; "^a,b" keeps all but those. A
// provider made of others ("shm+tcp") goes with any of its parts excluded.
bool allowed_by_env(const provider& prov) {
  const char* env = getenv("FI_PROVIDER");
  if (!env || !*env) return true;
  bool exclude = env[0] == '^';
  const std::vector<std::string> parts = split(prov.links() ? prov.links() : "", '+');
  bool listed = false;
  for (const std::string& name : split(exclude ? env + 1 : env, ',')) {
    if (name == prov.name()) listed = true;
    if (exclude)
      for (const std::string& part : parts) listed |= name == part;
  }
  return exclude ? !listed : listed;
}

// hints->fabric_attr->prov_name may name a layered stack ("tcp;ofi_rxm"):
// weft's providers are not layered, so the whole name must match.
bool allowed_by_hints(const fi_info* hints, const char* prov) {
  if (!hints || !hints->fabric_attr || !hints->fabric_attr->prov_name) return true;
  return strcasecmp(hints->fabric_attr->prov_name, prov) == 0;
}

bool subset(uint64_t want, uint64_t have) {
  return (want & ~have) == 0;
}

// An enum field from the application, read as the int it is: an out-of-range
// value must be rejected, not loaded as the enum type.
template <class E>
unsigned raw(const E& field) {
  static_assert(sizeof(E) == sizeof(unsigned));
  unsigned v;
  memcpy(&v, &field, sizeof v);
  return v;
}

// The mr_mode bits an application supports, from its hints, in the bit
// form of API 1.5+. Legacy values FI_MR_BASIC/SCALABLE map to bits.
uint64_t app_mr_bits(uint32_t version, const fi_info* hints, bool* any) {
  *any = false;
  if (!hints || !hints->domain_attr) {
    *any = true;
    return 0;
  }
  int mode = hints->domain_attr->mr_mode;
  if (mode == FI_MR_BASIC) return mr_basic_map;
  if (mode == FI_MR_SCALABLE) return 0;
  if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
    *any = mode == FI_MR_UNSPEC;
    return 0;
  }
  return static_cast<uint64_t>(mode) & ~static_cast<uint64_t>(FI_MR_BASIC | FI_MR_SCALABLE);
}

bool tx_ok(const fi_tx_attr* h, const fi_tx_attr* p) {
  if (!h) return true;
  return subset(h->caps, p->caps) && subset(h->msg_order, p->msg_order) &&
         subset(h->comp_order, p->comp_order | FI_ORDER_NONE) && h->inject_size <= p->inject_size &&
         h->size <= p->size && h->iov_limit <= p->iov_limit && h->rma_iov_limit <= p->rma_iov_limit;
}

bool rx_ok(const fi_rx_attr* h, const fi_rx_attr* p) {
  if (!h) return true;
  return subset(h->caps, p->caps) && subset(h->msg_order, p->msg_order) &&
         subset(h->comp_order, p->comp_order | FI_ORDER_NONE) && h->size <= p->size &&
         h->iov_limit <= p->iov_limit && h->total_buffered_recv <= SIZE_MAX;
}

bool ep_ok(const fi_ep_attr* h, const fi_ep_attr* p, const fi_domain_attr* pd, size_t auth_max) {
  if (!h) return true;
  if (h->type != FI_EP_UNSPEC && h->type != p->type) return false;
  if (h->protocol != FI_PROTO_UNSPEC && h->protocol != p->protocol) return false;
  if (h->max_msg_size > p->max_msg_size) return false;
  if (h->auth_key_size > auth_max || (h->auth_key_size && !h->auth_key)) return false;
  auto ctx_ok = [](size_t want, size_t max) { return want == FI_SHARED_CONTEXT || want <= max; };
  if (!ctx_ok(h->tx_ctx_cnt, pd->max_ep_tx_ctx) || !ctx_ok(h->rx_ctx_cnt, pd->max_ep_rx_ctx)) return false;
  if (h->tx_ctx_cnt == FI_SHARED_CONTEXT && !pd->max_ep_stx_ctx) return false;
  if (h->rx_ctx_cnt == FI_SHARED_CONTEXT && !pd->max_ep_srx_ctx) return false;
  return true;
}

bool domain_ok(uint32_t version, const fi_domain_attr* h, const fi_domain_attr* p, size_t auth_max) {
  if (!h) return true;
  if (h->name && strcmp(h->name, p->name)) return false;
  if (h->domain) return false;  // opening info for an existing domain: not supported
  if (raw(h->threading) > FI_THREAD_COMPLETION) return false;
  if (raw(h->control_progress) > FI_PROGRESS_MANUAL || raw(h->data_progress) > FI_PROGRESS_MANUAL)
    return false;
  if (raw(h->resource_mgmt) > FI_RM_ENABLED) return false;
  if (raw(h->av_type) > FI_AV_TABLE) return false;
  if (h->mr_key_size > p->mr_key_size || h->cq_data_size > p->cq_data_size) return false;
  if (h->cq_cnt > p->cq_cnt || h->ep_cnt > p->ep_cnt || h->tx_ctx_cnt > p->tx_ctx_cnt ||
      h->rx_ctx_cnt > p->rx_ctx_cnt || h->max_ep_tx_ctx > p->max_ep_tx_ctx ||
      h->max_ep_rx_ctx > p->max_ep_rx_ctx || h->max_ep_stx_ctx > p->max_ep_stx_ctx ||
      h->max_ep_srx_ctx > p->max_ep_srx_ctx)
    return false;
  if (FI_VERSION_GE(version, FI_VERSION(1, 5))) {
    if (h->cntr_cnt > p->cntr_cnt || h->mr_iov_limit > p->mr_iov_limit || h->mr_cnt > p->mr_cnt) return false;
    if (h->auth_key_size > auth_max || (h->auth_key_size && !h->auth_key)) return false;
    if (!subset(h->caps, p->caps | secondary_caps)) return false;
  }
  return true;
}

bool fabric_ok(const fi_fabric_attr* h, const fi_fabric_attr* p) {
  if (!h) return true;
  if (h->fabric) return false;
  if (h->name && strcmp(h->name, p->name)) return false;
  if (h->prov_version && h->prov_version != p->prov_version) return false;
  return true;
}

// Caps the application gets: the primary caps it asked for (all the
// provider's when it asked for none), plus the provider's secondary caps.
uint64_t grant(uint64_t asked, uint64_t offered) {
  if (!(asked & primary_caps)) return offered;
  return (asked & offered) | (offered & secondary_caps);
}

// Adapt a duplicated template to the hints and the caller's version.
int adapt(fi_info* info, uint32_t version, const fi_info* hints, const char* node, const char* service,
          uint64_t flags, provider& prov) {
  bool mr_any;
  uint64_t app_bits = app_mr_bits(version, hints, &mr_any);
  uint64_t prov_required = 0;  // weft's providers need no mr_mode bit
  uint64_t mr_bits;
  if (mr_any) {
    mr_bits = static_cast<uint64_t>(info->domain_attr->mr_mode);
    if (FI_VERSION_LT(version, FI_VERSION(1, 5))) mr_bits = 0;
  } else if (hints->domain_attr->mr_mode == FI_MR_BASIC) {
    mr_bits = mr_basic_map;  // legacy basic mode: the application expects all three
  } else {
    // Of the bits the application supports, use those the provider prefers.
    mr_bits =
        prov_required | (app_bits & mr_mode_optional & static_cast<uint64_t>(info->domain_attr->mr_mode));
  }

  if (hints) {
    if (hints->caps) {
      info->caps = grant(hints->caps, info->caps);
      info->tx_attr->caps = grant(hints->caps, info->tx_attr->caps) & tx_cap_mask;
      info->rx_attr->caps = grant(hints->caps, info->rx_attr->caps) & rx_cap_mask;
    }
    if (hints->tx_attr) {
      if (hints->tx_attr->caps) info->tx_attr->caps = grant(hints->tx_attr->caps, info->tx_attr->caps);
      if (hints->tx_attr->op_flags) info->tx_attr->op_flags = hints->tx_attr->op_flags;
      if (hints->tx_attr->msg_order) info->tx_attr->msg_order = hints->tx_attr->msg_order;
      if (hints->tx_attr->size) info->tx_attr->size = hints->tx_attr->size;
      if (hints->tx_attr->iov_limit) info->tx_attr->iov_limit = hints->tx_attr->iov_limit;
      if (hints->tx_attr->inject_size) info->tx_attr->inject_size = hints->tx_attr->inject_size;
    }
    if (hints->rx_attr) {
      if (hints->rx_attr->caps) info->rx_attr->caps = grant(hints->rx_attr->caps, info->rx_attr->caps);
      if (hints->rx_attr->op_flags) info->rx_attr->op_flags = hints->rx_attr->op_flags;
      if (hints->rx_attr->msg_order) info->rx_attr->msg_order = hints->rx_attr->msg_order;
      if (hints->rx_attr->size) info->rx_attr->size = hints->rx_attr->size;
      if (hints->rx_attr->iov_limit) info->rx_attr->iov_limit = hints->rx_attr->iov_limit;
    }
    // An auth_key asked for is the one the endpoints will present.
    auto copy_key = [](uint8_t*& key, size_t& size, const uint8_t* from, size_t n) {
      if (!n) return true;
      free(key);
      key = static_cast<uint8_t*>(malloc(n));
      if (!key) return false;
      memcpy(key, from, n);
      size = n;
      return true;
    };
    if (hints->ep_attr &&
        !copy_key(info->ep_attr->auth_key, info->ep_attr->auth_key_size, hints->ep_attr->auth_key,
                  hints->ep_attr->auth_key_size))
      return -FI_ENOMEM;
    if (hints->domain_attr && FI_VERSION_GE(version, FI_VERSION(1, 5)) &&
        !copy_key(info->domain_attr->auth_key, info->domain_attr->auth_key_size, hints->domain_attr->auth_key,
                  hints->domain_attr->auth_key_size))
      return -FI_ENOMEM;
    if (hints->ep_attr) {
      if (hints->ep_attr->tx_ctx_cnt) info->ep_attr->tx_ctx_cnt = hints->ep_attr->tx_ctx_cnt;
      if (hints->ep_attr->rx_ctx_cnt) info->ep_attr->rx_ctx_cnt = hints->ep_attr->rx_ctx_cnt;
      if (hints->ep_attr->mem_tag_format) info->ep_attr->mem_tag_format = hints->ep_attr->mem_tag_format;
      if (hints->ep_attr->max_msg_size) info->ep_attr->max_msg_size = hints->ep_attr->max_msg_size;
    }
    if (const fi_domain_attr* hd = hints->domain_attr) {
      fi_domain_attr* d = info->domain_attr;
      if (hd->threading != FI_THREAD_UNSPEC) d->threading = hd->threading;
      if (hd->control_progress != FI_PROGRESS_UNSPEC) d->control_progress = hd->control_progress;
      if (hd->data_progress != FI_PROGRESS_UNSPEC) d->data_progress = hd->data_progress;
      if (hd->resource_mgmt != FI_RM_UNSPEC) d->resource_mgmt = hd->resource_mgmt;
      if (hd->av_type != FI_AV_UNSPEC) d->av_type = hd->av_type;
      if (FI_VERSION_GE(version, FI_VERSION(1, 5)) && hd->caps)
        d->caps = hd->caps & (d->caps | secondary_caps);
    }
    // Source/destination addresses given in the hints.
    if (hints->addr_format != FI_FORMAT_UNSPEC || hints->src_addr || hints->dest_addr) {
      if (hints->src_addr && hints->src_addrlen) {
        free(info->src_addr);
        info->src_addr = malloc(hints->src_addrlen);
        if (!info->src_addr) return -FI_ENOMEM;
        memcpy(info->src_addr, hints->src_addr, hints->src_addrlen);
        info->src_addrlen = hints->src_addrlen;
      }
      if (hints->dest_addr && hints->dest_addrlen) {
        free(info->dest_addr);
        info->dest_addr = malloc(hints->dest_addrlen);
        if (!info->dest_addr) return -FI_ENOMEM;
        memcpy(info->dest_addr, hints->dest_addr, hints->dest_addrlen);
        info->dest_addrlen = hints->dest_addrlen;
      }
    }
    info->mode = hints->mode & info->mode;  // only modes the app supports are required
  }
  info->domain_attr->mr_mode = static_cast<int>(mr_bits);

  if (int ret = prov.resolve(info, node, service, flags)) return ret;

  info->fabric_attr->api_version = version;
  if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
    // Legacy mr_mode: the enumeration, and FI_LOCAL_MR as a mode bit.
    if ((mr_bits & mr_basic_map) == mr_basic_map) {
      info->domain_attr->mr_mode = FI_MR_BASIC;
    } else {
      info->domain_attr->mr_mode = FI_MR_SCALABLE;
    }
    if (mr_bits & FI_MR_LOCAL) info->mode |= FI_LOCAL_MR;
  } else if (hints && hints->domain_attr &&
             (hints->domain_attr->mr_mode == FI_MR_BASIC || hints->domain_attr->mr_mode == FI_MR_SCALABLE)) {
    // A legacy value asked for at API 1.5+ is answered with the same value
    // (libfabric does; programs compare): fi_domain maps it to its bits.
    info->domain_attr->mr_mode = hints->domain_attr->mr_mode;
  }
  return 0;
}

bool matches(uint32_t version, const fi_info* hints, const fi_info* t, const char* node, uint64_t flags,
             size_t auth_max) {
  if (!hints) {
    // An IPv6 node chooses the IPv6 templates and vice versa.
    if (node && (t->addr_format == FI_SOCKADDR_IN || t->addr_format == FI_SOCKADDR_IN6)) {
      bool v6 = strchr(node, ':') != nullptr;
      return v6 == (t->addr_format == FI_SOCKADDR_IN6);
    }
    (void)flags;
    return t->addr_format != FI_SOCKADDR_IN6 || node;
  }
  if (hints->caps && !subset(hints->caps & ~secondary_caps, t->caps)) return false;
  if (hints->caps & secondary_caps & ~t->caps & ~(FI_SOURCE_ERR | FI_SHARED_AV | FI_TRIGGER | FI_RMA_PMEM))
    return false;
  if (hints->caps &
      (FI_SOURCE_ERR | FI_SHARED_AV | FI_TRIGGER | FI_RMA_PMEM | FI_HMEM | FI_MULTICAST | FI_COLLECTIVE |
       FI_NAMED_RX_CTX | FI_VARIABLE_MSG | FI_AV_USER_ID) &
      ~t->caps)
    return false;
  const bool sockaddr_t = t->addr_format == FI_SOCKADDR_IN || t->addr_format == FI_SOCKADDR_IN6;
  // FI_SOCKADDR: any socket address; the answer names the concrete family.
  const bool any_sockaddr = hints->addr_format == FI_SOCKADDR;
  if (any_sockaddr && !sockaddr_t) return false;
  if (!any_sockaddr && hints->addr_format != FI_FORMAT_UNSPEC && hints->addr_format != t->addr_format)
    return false;
  if (any_sockaddr) {
    // The family of an address given decides; else the node's; else IPv4.
    const void* given = hints->src_addr ? hints->src_addr : hints->dest_addr;
    const size_t given_len = hints->src_addr ? hints->src_addrlen : hints->dest_addrlen;
    bool v6 = false;
    if (given && given_len >= sizeof(sa_family_t))
      v6 = static_cast<const sockaddr*>(given)->sa_family == AF_INET6;
    else if (node)
      v6 = strchr(node, ':') != nullptr;
    if (v6 != (t->addr_format == FI_SOCKADDR_IN6)) return false;
  } else if (hints->addr_format == FI_FORMAT_UNSPEC) {
    if (node && sockaddr_t) {
      bool v6 = strchr(node, ':') != nullptr;
      if (v6 != (t->addr_format == FI_SOCKADDR_IN6)) return false;
    } else if (t->addr_format == FI_SOCKADDR_IN6 && !hints->src_addr && !hints->dest_addr) {
      return false;  // IPv4 first; IPv6 when asked for
    }
  }
  if (hints->src_addr && hints->src_addrlen == 0) return false;
  if (!ep_ok(hints->ep_attr, t->ep_attr, t->domain_attr, auth_max)) return false;
  if (!tx_ok(hints->tx_attr, t->tx_attr) || !rx_ok(hints->rx_attr, t->rx_attr)) return false;
  if (!domain_ok(version, hints->domain_attr, t->domain_attr, auth_max)) return false;
  if (!fabric_ok(hints->fabric_attr, t->fabric_attr)) return false;
  return true;
}

}  // namespace

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
            fi_info** info) {
  if (!info) return -FI_EINVAL;
  if (FI_MAJOR(version) != 1 || FI_VERSION_LT(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), version)) {
    WEFT_WARN(FI_LOG_CORE, "requested API version %u.%u is not supported", FI_MAJOR(version),
              FI_MINOR(version));
    return -FI_ENOSYS;
  }
  if (!only(flags, FI_NUMERICHOST | FI_SOURCE | FI_PROV_ATTR_ONLY)) return -FI_EBADFLAGS;
  if ((flags & FI_SOURCE) && !node && !service) return -FI_EINVAL;
  params_init();

  fi_info* head = nullptr;
  fi_info** tail = &head;
  int last_err = -FI_ENODATA;
  const provider* taken_from = nullptr;
  for (provider* prov : providers()) {
    if (!allowed_by_env(*prov) || !allowed_by_hints(hints, prov->name())) continue;
    auto templates = prov->templates();
    for (const info_ptr& tp : *templates) {
      const fi_info* t = tp.get();
      if (!matches(version, hints, t, node, flags, prov->auth_key_max())) continue;
      // FI_PROV_ATTR_ONLY: one entry per provider, for its attributes.
      if ((flags & FI_PROV_ATTR_ONLY) && head && taken_from == prov) continue;
      taken_from = prov;
      fi_info* dup = info_dup(t);
      if (!dup) {
        info_free(head);
        return -FI_ENOMEM;
      }
      int ret = (flags & FI_PROV_ATTR_ONLY) ? 0 : adapt(dup, version, hints, node, service, flags, *prov);
      if (flags & FI_PROV_ATTR_ONLY) dup->fabric_attr->api_version = version;
      if (ret) {
        info_free(dup);
        if (ret == -FI_ENOMEM) {
          info_free(head);
          return ret;
        }
        last_err = ret == -FI_EINVAL ? -FI_ENODATA : ret;
        continue;
      }
      *tail = dup;
      tail = &dup->next;
    }
  }
  if (!head) return last_err;
  *info = head;
  return 0;
}

}  // namespace weft
