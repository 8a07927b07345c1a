// SPDX-License-Identifier: BSD-3-Clause
// fi_getinfo: ask every provider for its templates, keep those that satisfy
// the hints, and adapt each to the hints and the caller's API version.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <dlfcn.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "common/object.hpp"
#include "core/fabric2.hpp"
#include "core/info.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/prov_template.hpp"
#include "core/provider.hpp"
#include "core/tostr.hpp"

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
    if (names_provider(name.c_str(), prov.name())) listed = true;
    if (exclude)
      for (const std::string& part : parts) listed |= names_provider(name.c_str(), part.c_str());
  }
  return exclude ? !listed : listed;
}

// FI_PROVIDER's names, checked at each fi_getinfo (said once per value): a
// name no provider has is reported with those there are. Not in a plugin:
// its host reads the variable and names its own providers too.
void check_provider_env() {
  const char* env = param_raw(nullptr, "provider");
  if (!env || !*env || *name_prefix()) return;
  const bool exclude = env[0] == '^';
  std::string unknown;
  size_t known = 0;
  for (const std::string& name : split(exclude ? env + 1 : env, ',')) {
    if (find_provider(name.c_str()))
      ++known;
    else
      unknown += (unknown.empty() ? "'" : ", '") + name + "'";
  }
  if (unknown.empty()) return;
  param_report(
      nullptr, "provider", env,
      "no provider is named " + unknown +
          (strchr(env, ';') ? " (weft's are not layered: name one alone, e.g. tcp for tcp;ofi_rxm)" : ""),
      provider_names() + ", comma separated; ^ first excludes them",
      exclude || known ? "the name is ignored" : "fi_getinfo offers no provider");
}

// hints->fabric_attr->prov_name may name a layered stack ("tcp;ofi_rxm"):
// weft's providers are not layered, so the whole name must match.
bool allowed_by_hints(const fi_info* hints, const char* prov) {
  if (!hints || !hints->fabric_attr || !hints->fabric_attr->prov_name) return true;
  return names_provider(hints->fabric_attr->prov_name, prov);
}

bool subset(uint64_t want, uint64_t have) {
  return (want & ~have) == 0;
}

// Capabilities as the caller's API names them. 2.0 gave bits 45, 46 and 48
// new meanings (in 1.x: two memory registration flags and FI_VARIABLE_MSG):
// a template's FI_DIRECTED_RECV brings FI_TAGGED_DIRECTED_RECV (with
// FI_TAGGED) and FI_EXACT_DIRECTED_RECV for a 2.x caller. No template has
// FI_TAGGED_MULTI_RECV: a tagged receive takes no FI_MULTI_RECV.
uint64_t caps_at(uint32_t version, uint64_t caps) {
  if (!api_v2(version) || !(caps & FI_DIRECTED_RECV)) return caps;
  caps |= FI_EXACT_DIRECTED_RECV;
  if (caps & FI_TAGGED) caps |= FI_TAGGED_DIRECTED_RECV;
  return caps;
}
uint64_t primary_at(uint32_t version) {
  return api_v2(version) ? (primary_caps & ~FI_VARIABLE_MSG) | FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV
                         : primary_caps;
}
uint64_t secondary_at(uint32_t version) {
  return api_v2(version) ? secondary_caps | FI_TAGGED_MULTI_RECV : secondary_caps;
}
uint64_t rx_mask_at(uint32_t version) {
  return api_v2(version) ? (rx_cap_mask & ~FI_VARIABLE_MSG) | FI_TAGGED_DIRECTED_RECV | FI_EXACT_DIRECTED_RECV |
                               FI_TAGGED_MULTI_RECV
                         : rx_cap_mask;
}

// A linked provider's protocol has a name from 2.0 on (FI_PROTO_LNX); 1.x
// callers see FI_PROTO_UNSPEC, as the templates have it.
uint32_t protocol_at(uint32_t version, const provider& prov, const fi_info* t) {
  return api_v2(version) && prov.links() ? FI_PROTO_LNX : t->ep_attr->protocol;
}

// Why a template does not satisfy the hints: nullptr when it does, else the
// hint that ruled it out (fi_getinfo explains at warn when nothing is left).
using verdict = const char*;
// Reasons the explanation completes with the bits the template lacks.
constexpr verdict no_caps = "hints->caps asks for capabilities it lacks";
constexpr verdict no_tx_caps = "hints->tx_attr->caps asks for capabilities it lacks";
constexpr verdict no_rx_caps = "hints->rx_attr->caps asks for capabilities it lacks";
// Not a reason to tell: the IPv6 twin of an IPv4 template (or the reverse).
constexpr verdict other_family = "the other address family";
constexpr verdict left_out = "it is left out by FI_PROVIDER";
// The provider has no template at all: a setting of its own (or of a part)
// leaves it nothing (provider::nothing_offered says which).
constexpr verdict offers_none = "it has nothing to offer";
constexpr verdict bad_ep_type = "hints->ep_attr->type";

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

// comp_order is a 1.x field: 2.x callers leave it 0 and weft ignores it.
// A hint's bits that fi_endpoint(3) does not list for the attribute ask
// nothing of it (an application may copy its caps there whole).
verdict tx_ok(uint32_t version, const fi_tx_attr* h, const fi_tx_attr* p) {
  if (!h) return nullptr;
  if (!subset(h->caps & tx_cap_mask, p->caps)) return no_tx_caps;
  if (!subset(h->msg_order, p->msg_order)) return "hints->tx_attr->msg_order asks for more ordering";
  if (!api_v2(version) && !subset(h->comp_order, p->comp_order | FI_ORDER_NONE)) return "hints->tx_attr->comp_order";
  if (h->inject_size > p->inject_size) return "hints->tx_attr->inject_size is larger than it offers";
  if (h->size > p->size) return "hints->tx_attr->size is larger than it offers";
  if (h->iov_limit > p->iov_limit || h->rma_iov_limit > p->rma_iov_limit)
    return "hints->tx_attr->iov_limit or rma_iov_limit is larger than it offers";
  return nullptr;
}

verdict rx_ok(uint32_t version, const fi_rx_attr* h, const fi_rx_attr* p) {
  if (!h) return nullptr;
  if (!subset(h->caps & rx_mask_at(version), caps_at(version, p->caps))) return no_rx_caps;
  if (!subset(h->msg_order, p->msg_order)) return "hints->rx_attr->msg_order asks for more ordering";
  if (!api_v2(version) && !subset(h->comp_order, p->comp_order | FI_ORDER_NONE)) return "hints->rx_attr->comp_order";
  if (h->size > p->size) return "hints->rx_attr->size is larger than it offers";
  if (h->iov_limit > p->iov_limit) return "hints->rx_attr->iov_limit is larger than it offers";
  if (h->total_buffered_recv > SIZE_MAX) return "hints->rx_attr->total_buffered_recv";
  return nullptr;
}

verdict ep_ok(uint32_t version, const fi_ep_attr* h, const fi_ep_attr* p, uint32_t protocol,
              const fi_domain_attr* pd, size_t auth_max) {
  if (!h) return nullptr;
  // 2.x: a mem_tag_format below FI_TAG_MAX_FORMAT names a format; weft's
  // tags are 64 free bits, which FI_TAG_MPI and FI_TAG_CCL only constrain.
  if (api_v2(version) && h->mem_tag_format > FI_TAG_CCL && h->mem_tag_format < FI_TAG_MAX_FORMAT)
    return "hints->ep_attr->mem_tag_format names no tag format (FI_TAG_BITS, FI_TAG_MPI, FI_TAG_CCL)";
  if (h->type != FI_EP_UNSPEC && h->type != p->type) return bad_ep_type;
  if (h->protocol != FI_PROTO_UNSPEC && h->protocol != protocol) return "hints->ep_attr->protocol";
  if (h->max_msg_size > p->max_msg_size) return "hints->ep_attr->max_msg_size is larger than it offers";
  if (h->auth_key_size > auth_max || (h->auth_key_size && !h->auth_key)) return "hints->ep_attr->auth_key";
  auto ctx_ok = [](size_t want, size_t max) { return want == FI_SHARED_CONTEXT || want <= max; };
  if (!ctx_ok(h->tx_ctx_cnt, pd->max_ep_tx_ctx) || !ctx_ok(h->rx_ctx_cnt, pd->max_ep_rx_ctx))
    return "hints->ep_attr->tx_ctx_cnt or rx_ctx_cnt is larger than it offers";
  if ((h->tx_ctx_cnt == FI_SHARED_CONTEXT && !pd->max_ep_stx_ctx) ||
      (h->rx_ctx_cnt == FI_SHARED_CONTEXT && !pd->max_ep_srx_ctx))
    return "hints->ep_attr asks for shared contexts";
  return nullptr;
}

// A progress model the caller's API has: FI_PROGRESS_CONTROL_UNIFIED is 2.x's
// (manual progress whose control calls the application serialises with its
// data calls; weft's manual progress is that already).
bool progress_ok(uint32_t version, unsigned v) {
  return v <= FI_PROGRESS_MANUAL || (api_v2(version) && v == FI_PROGRESS_CONTROL_UNIFIED);
}

// What the domain attributes libfabric 1.20 ... 2.6 added ask for, from the
// tail every hint weft reads has (zero when the caller's layout lacks it).
verdict domain_tail_ok(uint32_t version, const fi_domain_attr* h, size_t auth_max) {
  const domain_attr_tail& t = tail_of(h);
  if (FI_VERSION_GE(version, FI_VERSION(1, 20))) {
    if (h->auth_key_size == FI_AV_AUTH_KEY)
      return "hints->domain_attr->auth_key_size is FI_AV_AUTH_KEY (authorization keys kept in the AV are not "
             "supported)";
    if (t.max_ep_auth_key > (auth_max ? 1 : 0))
      return "hints->domain_attr->max_ep_auth_key is larger than it offers (one key per endpoint, with auth keys)";
  }
  if (api_v2(version)) {
    if (h->mr_mode & (FI_MR_BASIC | FI_MR_SCALABLE))
      return "hints->domain_attr->mr_mode: FI_MR_BASIC and FI_MR_SCALABLE are not part of API 2.x";
    if (t.max_group_id) return "hints->domain_attr->max_group_id (peer groups are not supported)";
  }
  return nullptr;
}

verdict domain_ok(uint32_t version, const fi_domain_attr* h, const fi_domain_attr* p, size_t auth_max) {
  if (!h) return nullptr;
  if (h->name && strcmp(h->name, p->name)) return "hints->domain_attr->name";
  if (h->domain) return "hints->domain_attr->domain (info for an open domain is not supported)";
  if (raw(h->threading) > FI_THREAD_COMPLETION) return "hints->domain_attr->threading";
  if (!progress_ok(version, raw(h->control_progress)) || !progress_ok(version, raw(h->data_progress)))
    return "hints->domain_attr->control_progress or data_progress";
  if (verdict v = domain_tail_ok(version, h, auth_max)) return v;
  if (raw(h->resource_mgmt) > FI_RM_ENABLED) return "hints->domain_attr->resource_mgmt";
  if (raw(h->av_type) > FI_AV_TABLE) return "hints->domain_attr->av_type";
  if (h->mr_key_size > p->mr_key_size || h->cq_data_size > p->cq_data_size)
    return "hints->domain_attr->mr_key_size or cq_data_size is larger than it offers";
  if (h->cq_cnt > p->cq_cnt || h->ep_cnt > p->ep_cnt || h->tx_ctx_cnt > p->tx_ctx_cnt ||
      h->rx_ctx_cnt > p->rx_ctx_cnt || h->max_ep_tx_ctx > p->max_ep_tx_ctx ||
      h->max_ep_rx_ctx > p->max_ep_rx_ctx || h->max_ep_stx_ctx > p->max_ep_stx_ctx ||
      h->max_ep_srx_ctx > p->max_ep_srx_ctx)
    return "a count in hints->domain_attr (cq_cnt, ep_cnt, ..._ctx_cnt) is larger than it offers";
  if (FI_VERSION_GE(version, FI_VERSION(1, 5))) {
    if (h->cntr_cnt > p->cntr_cnt || h->mr_iov_limit > p->mr_iov_limit || h->mr_cnt > p->mr_cnt)
      return "hints->domain_attr->cntr_cnt, mr_iov_limit or mr_cnt is larger than it offers";
    if (h->auth_key_size > auth_max || (h->auth_key_size && !h->auth_key)) return "hints->domain_attr->auth_key";
    if (!subset(h->caps, p->caps | secondary_at(version))) return "hints->domain_attr->caps";
  }
  return nullptr;
}

verdict fabric_ok(const fi_fabric_attr* h, const fi_fabric_attr* p) {
  if (!h) return nullptr;
  if (h->fabric) return "hints->fabric_attr->fabric (info for an open fabric is not supported)";
  if (h->name && strcmp(h->name, p->name)) return "hints->fabric_attr->name";
  if (h->prov_version && h->prov_version != p->prov_version) return "hints->fabric_attr->prov_version";
  return nullptr;
}

// Caps the application gets: the primary caps it asked for (all the
// provider's when it asked for none), plus the provider's secondary caps.
// A kind of operation asked for without a direction has every direction
// the provider offers, as libfabric's providers answer (ofi_get_caps):
// FI_MSG or FI_TAGGED without FI_SEND and FI_RECV, FI_RMA or FI_ATOMIC
// without FI_READ, FI_WRITE, FI_REMOTE_READ and FI_REMOTE_WRITE.
// Applications read them back (fabtests bind a counter to an endpoint with
// info->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)).
uint64_t grant(uint32_t version, uint64_t asked, uint64_t offered) {
  if (!(asked & primary_at(version))) return offered;
  uint64_t caps = (asked & offered) | (offered & secondary_at(version));
  constexpr uint64_t msg_ways = FI_SEND | FI_RECV;
  constexpr uint64_t rma_ways = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  if ((caps & (FI_MSG | FI_TAGGED)) && !(caps & msg_ways)) caps |= offered & msg_ways;
  if ((caps & (FI_RMA | FI_ATOMIC)) && !(caps & rma_ways)) caps |= offered & rma_ways;
  return caps;
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

  info->caps = caps_at(version, info->caps);
  info->rx_attr->caps = caps_at(version, info->rx_attr->caps);
  info->ep_attr->protocol = protocol_at(version, prov, info);
  // The attributes of libfabric 1.20 ... 2.6 (an older caller's layout ends
  // before them): one auth key per endpoint where keys exist, no peer
  // groups, counters of the full 64 bits.
  domain_attr_tail& tail = tail_of(info->domain_attr);
  tail.max_ep_auth_key = prov.auth_key_max() ? 1 : 0;
  tail.max_group_id = 0;
  tail.max_cntr_value = UINT64_MAX;
  tail.max_err_cntr_value = UINT64_MAX;
  if (hints) {
    if (hints->caps) {
      info->caps = grant(version, hints->caps, info->caps);
      info->tx_attr->caps = grant(version, hints->caps, info->tx_attr->caps) & tx_cap_mask;
      info->rx_attr->caps = grant(version, hints->caps, info->rx_attr->caps) & rx_mask_at(version);
    }
    if (hints->tx_attr) {
      if (hints->tx_attr->caps)
        info->tx_attr->caps = grant(version, hints->tx_attr->caps & tx_cap_mask, info->tx_attr->caps);
      if (hints->tx_attr->op_flags) info->tx_attr->op_flags = hints->tx_attr->op_flags;
      if (hints->tx_attr->msg_order) info->tx_attr->msg_order = hints->tx_attr->msg_order;
      if (hints->tx_attr->size) info->tx_attr->size = hints->tx_attr->size;
      if (hints->tx_attr->iov_limit) info->tx_attr->iov_limit = hints->tx_attr->iov_limit;
      if (hints->tx_attr->inject_size) info->tx_attr->inject_size = hints->tx_attr->inject_size;
    }
    if (hints->rx_attr) {
      if (hints->rx_attr->caps)
        info->rx_attr->caps = grant(version, hints->rx_attr->caps & rx_mask_at(version), info->rx_attr->caps);
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
        d->caps = hd->caps & (d->caps | secondary_at(version));
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
    // fi_getinfo(3): a passive endpoint in hints->handle is copied to the
    // answer, whose active endpoint takes over its address (fi_endpoint(3)).
    // Other handles are not ours to pass on.
    if (hints->handle && hints->handle->fclass == FI_CLASS_PEP) info->handle = hints->handle;
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
  } else if (!api_v2(version) && hints && hints->domain_attr &&
             (hints->domain_attr->mr_mode == FI_MR_BASIC || hints->domain_attr->mr_mode == FI_MR_SCALABLE)) {
    // A legacy value asked for at API 1.5+ is answered with the same value
    // (libfabric does; programs compare): fi_domain maps it to its bits.
    info->domain_attr->mr_mode = hints->domain_attr->mr_mode;
  }
  return 0;
}

verdict matches(uint32_t version, const fi_info* hints, const fi_info* t, const char* node, uint64_t flags,
                const provider& prov) {
  const size_t auth_max = prov.auth_key_max();
  if (!hints) {
    // An IPv6 node chooses the IPv6 templates and vice versa.
    if (node && (t->addr_format == FI_SOCKADDR_IN || t->addr_format == FI_SOCKADDR_IN6)) {
      bool v6 = strchr(node, ':') != nullptr;
      return v6 == (t->addr_format == FI_SOCKADDR_IN6) ? nullptr : other_family;
    }
    (void)flags;
    return t->addr_format != FI_SOCKADDR_IN6 || node ? nullptr : other_family;
  }
  const uint64_t t_caps = caps_at(version, t->caps);
  const uint64_t secondary = secondary_at(version);
  if (hints->caps && !subset(hints->caps & ~secondary, t_caps)) return no_caps;
  if (hints->caps & secondary & ~t_caps & ~(FI_SOURCE_ERR | FI_SHARED_AV | FI_TRIGGER | FI_RMA_PMEM))
    return no_caps;
  if (hints->caps &
      (FI_SOURCE_ERR | FI_SHARED_AV | FI_TRIGGER | FI_RMA_PMEM | FI_HMEM | FI_MULTICAST | FI_COLLECTIVE |
       FI_NAMED_RX_CTX | FI_VARIABLE_MSG | FI_AV_USER_ID) &
      ~t_caps)
    return no_caps;
  const bool sockaddr_t = t->addr_format == FI_SOCKADDR_IN || t->addr_format == FI_SOCKADDR_IN6;
  // FI_SOCKADDR: any socket address; the answer names the concrete family.
  const bool any_sockaddr = hints->addr_format == FI_SOCKADDR;
  if (any_sockaddr && !sockaddr_t) return "hints->addr_format";
  if (!any_sockaddr && hints->addr_format != FI_FORMAT_UNSPEC && hints->addr_format != t->addr_format)
    return "hints->addr_format";
  if (any_sockaddr) {
    // The family of an address given decides; else the node's; else IPv4.
    const void* given = hints->src_addr ? hints->src_addr : hints->dest_addr;
    const size_t given_len = hints->src_addr ? hints->src_addrlen : hints->dest_addrlen;
    bool v6 = false;
    if (given && given_len >= sizeof(sa_family_t))
      v6 = static_cast<const sockaddr*>(given)->sa_family == AF_INET6;
    else if (node)
      v6 = strchr(node, ':') != nullptr;
    if (v6 != (t->addr_format == FI_SOCKADDR_IN6)) return other_family;
  } else if (hints->addr_format == FI_FORMAT_UNSPEC) {
    if (node && sockaddr_t) {
      bool v6 = strchr(node, ':') != nullptr;
      if (v6 != (t->addr_format == FI_SOCKADDR_IN6)) return other_family;
    } else if (t->addr_format == FI_SOCKADDR_IN6 && !hints->src_addr && !hints->dest_addr) {
      return other_family;  // IPv4 first; IPv6 when asked for
    }
  }
  if (hints->src_addr && hints->src_addrlen == 0) return "hints->src_addr with src_addrlen 0";
  if (verdict v = ep_ok(version, hints->ep_attr, t->ep_attr, protocol_at(version, prov, t), t->domain_attr, auth_max))
    return v;
  if (verdict v = tx_ok(version, hints->tx_attr, t->tx_attr)) return v;
  if (verdict v = rx_ok(version, hints->rx_attr, t->rx_attr)) return v;
  if (verdict v = domain_ok(version, hints->domain_attr, t->domain_attr, auth_max)) return v;
  return fabric_ok(hints->fabric_attr, t->fabric_attr);
}

// One reason a provider gave nothing: the hint that ruled out one of its
// templates (with that template), or its address resolution's error.
struct refusal {
  const provider* prov;
  verdict why = nullptr;
  const fi_info* hints = nullptr;
  const fi_info* t = nullptr;
  int resolve_err = 0;
  uint32_t version = 0;
};

// The capability bits a template lacks, printed ("FI_ATOMIC | FI_RMA").
std::string missing_caps(uint64_t want, uint64_t have) {
  uint64_t missing = want & ~have;
  char buf[512];
  tostr_r(buf, sizeof buf, &missing, FI_TYPE_CAPS);
  return buf;
}

std::string describe(const refusal& r, const char* node, const char* service) {
  if (r.resolve_err) {
    std::string s = "node ";
    s += node ? "'" + std::string(node) + "'" : "(none)";
    s += ", service ";
    s += service ? "'" + std::string(service) + "'" : "(none)";
    if (r.resolve_err == -FI_ENODATA) return s + " names nothing it can reach";
    return s + ": " + fi_strerror(-r.resolve_err);
  }
  std::string s = r.why;
  if (r.why == no_caps) s += " (" + missing_caps(r.hints->caps, caps_at(r.version, r.t->caps)) + ")";
  if (r.why == no_tx_caps)
    s += " (" + missing_caps(r.hints->tx_attr->caps & tx_cap_mask, r.t->tx_attr->caps) + ")";
  if (r.why == no_rx_caps)
    s += " (" + missing_caps(r.hints->rx_attr->caps & rx_mask_at(r.version), caps_at(r.version, r.t->rx_attr->caps)) + ")";
  if (r.why == bad_ep_type) {
    char want[64], have[64];
    tostr_r(want, sizeof want, &r.hints->ep_attr->type, FI_TYPE_EP_TYPE);
    tostr_r(have, sizeof have, &r.t->ep_attr->type, FI_TYPE_EP_TYPE);
    s += std::string(" is ") + want + ", not " + have;
  }
  return s;
}

// fi_getinfo found nothing: one warning per provider that was asked, saying
// why it gave nothing (libfabric's log; FI_LOG_LEVEL=warn), or that no
// provider has the name asked for.
[[gnu::cold]] void explain_nothing(const fi_info* hints, const char* node, const char* service,
                                   const std::vector<refusal>& refusals) {
  const std::string names = provider_names();
  const char* asked = hints && hints->fabric_attr ? hints->fabric_attr->prov_name : nullptr;
  if (asked && !find_provider(asked)) {
    WEFT_WARN(FI_LOG_CORE, "fi_getinfo: no provider is named '%s'; weft's providers are %s%s", asked,
              names.c_str(),
              strchr(asked, ';') ? " (they are not layered: name one alone, e.g. 'tcp' for 'tcp;ofi_rxm')" : "");
    return;
  }
  const char* env = getenv("FI_PROVIDER");
  if (refusals.empty()) {
    if (env && *env)
      WEFT_WARN(FI_LOG_CORE, "fi_getinfo: FI_PROVIDER=%s leaves no provider (weft's providers are %s)", env,
                names.c_str());
    else
      WEFT_WARN(FI_LOG_CORE, "fi_getinfo: no provider was asked (weft's providers are %s)", names.c_str());
    return;
  }
  for (size_t i = 0; i < refusals.size(); ++i) {
    const provider* prov = refusals[i].prov;
    if (i && refusals[i - 1].prov == prov) continue;
    // The distinct reasons of this provider's templates; the other address
    // family's twin of a template is not one unless it is all there is.
    std::vector<std::string> why;
    for (size_t j = i; j < refusals.size() && refusals[j].prov == prov; ++j) {
      if (refusals[j].why == other_family) continue;
      std::string d = describe(refusals[j], node, service);
      if (std::find(why.begin(), why.end(), d) == why.end()) why.push_back(std::move(d));
    }
    if (why.empty()) why.push_back(std::string("node '") + (node ? node : "") + "' needs the other address family");
    std::string all;
    for (const std::string& w : why) all += (all.empty() ? "" : "; ") + w;
    if (refusals[i].why == left_out)
      all = std::string("it is left out by FI_PROVIDER=") + (env ? env : "");
    if (refusals[i].why == offers_none) {
      const std::string why = prov->nothing_offered();
      all = why.empty() ? offers_none : why;
    }
    WEFT_WARN(FI_LOG_CORE, "fi_getinfo: provider %s gave nothing: %s", prov->name(), all.c_str());
  }
}

// FI_LOG_LEVEL=info: one line, once, naming the library in use (weft's,
// its version and where it was loaded from) and its providers.
void announce_once() {
  Dl_info di{};
  const char* path = dladdr(reinterpret_cast<void*>(&announce_once), &di) && di.dli_fname ? di.dli_fname : "?";
  std::string provs;
  for (provider* p : providers())
    if (allowed_by_env(*p))
      provs += (provs.empty() ? "" : ", ") + std::string(p->name()) + " " + std::to_string(FI_MAJOR(p->version())) +
               "." + std::to_string(FI_MINOR(p->version()));
  log_write(FI_LOG_INFO, FI_LOG_CORE, "core", "fi_getinfo", __LINE__, "weft %s (libfabric API %d.%d) from %s; providers: %s",
            WEFT_VERSION, FI_MAJOR(api_newest), FI_MINOR(api_newest), path,
            provs.empty() ? "none (FI_PROVIDER)" : provs.c_str());
}

void announce() {
  if (!log_enabled(FI_LOG_INFO, FI_LOG_CORE, "core")) return;
  static std::once_flag once;
  std::call_once(once, announce_once);
}

}  // namespace

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
            fi_info** info) {
  if (!info) return -FI_EINVAL;
  if (!api_accepted(version)) {
    WEFT_WARN(FI_LOG_CORE, "requested API version %u.%u is not supported (weft implements up to %u.%u)",
              FI_MAJOR(version), FI_MINOR(version), FI_MAJOR(api_newest), FI_MINOR(api_newest));
    return -FI_ENOSYS;
  }
  note_caller_api(version);
  if (!only(flags, FI_NUMERICHOST | FI_SOURCE | FI_PROV_ATTR_ONLY)) return -FI_EBADFLAGS;
  if ((flags & FI_SOURCE) && !node && !service) return -FI_EINVAL;
  params_init();
  check_provider_env();
  log_check_settings();
  announce();

  fi_info* head = nullptr;
  fi_info** tail = &head;
  int last_err = -FI_ENODATA;
  const provider* taken_from = nullptr;
  // What each provider asked made of the request, for the explanation
  // when nothing is left (only while warnings are logged).
  const bool explain = log_enabled(FI_LOG_WARN, FI_LOG_CORE, "core");
  std::vector<refusal> refusals;
  for (provider* prov : providers()) {
    if (!offered(prov) || !allowed_by_hints(hints, prov->name())) continue;
    if (!allowed_by_env(*prov)) {
      if (explain) refusals.push_back({prov, left_out});
      continue;
    }
    auto templates = prov->templates();
    if (templates->empty() && explain) refusals.push_back({prov, offers_none});
    for (const info_ptr& tp : *templates) {
      const fi_info* t = tp.get();
      if (verdict v = matches(version, hints, t, node, flags, *prov)) {
        if (explain) refusals.push_back({prov, v, hints, t, 0, version});
        continue;
      }
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
        if (explain) refusals.push_back({prov, nullptr, nullptr, nullptr, ret});
        continue;
      }
      *tail = dup;
      tail = &dup->next;
    }
  }
  if (!head && explain) explain_nothing(hints, node, service, refusals);
  if (!head) return last_err;
  *info = head;
  return 0;
}

}  // namespace weft
