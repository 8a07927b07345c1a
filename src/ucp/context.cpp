// SPDX-License-Identifier: BSD-3-Clause
// ucp_init / ucp_cleanup / context queries: a context opens one fabric and
// domain per enabled transport (shm for this host, tcp for the network).
#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "ucp_int.hpp"

namespace wucp {

const char* tp_name(uint8_t kind) noexcept {
  switch (kind) {
    case TP_SHM:
      return "shm";
    case TP_TCP:
      return "tcp";
    case TP_LNX:
      return "lnx";
    default:
      return "?";
  }
}

domain_tp::~domain_tp() {
  if (domain) fi_close(&domain->fid);
  if (fabric) fi_close(&fabric->fid);
  if (info) fi_freeinfo(info);
}

namespace {

// The interface tcp binds to: the first one UCX_NET_DEVICES allows, an
// interface that is up with an IPv4 address, loopback only when nothing else
// is allowed.
bool pick_interface(const config& c, std::string& dev, std::string& ip) {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  std::string lo_dev, lo_ip;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    if (!device_enabled(c, i->ifa_name)) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    if (i->ifa_flags & IFF_LOOPBACK) {
      if (lo_dev.empty()) lo_dev = i->ifa_name, lo_ip = buf;
      continue;
    }
    dev = i->ifa_name;
    ip = buf;
    freeifaddrs(ifs);
    return true;
  }
  freeifaddrs(ifs);
  if (lo_dev.empty()) return false;
  dev = lo_dev;
  ip = lo_ip;
  return true;
}

// UCX_NET_DEVICES checked against the interfaces pick_interface takes: a
// name none has is said in UCX's words, and whether tcp is left without a
// device. Returns whether tcp has one.
bool check_devices(const config& c) {
  std::string avail, bad;
  size_t unknown = 0;
  bool any = false;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
      const std::string n = std::string("'") + i->ifa_name + "'(tcp)";
      if (avail.find(n) == std::string::npos) avail += (avail.empty() ? "" : ", ") + n;
      any |= device_enabled(c, i->ifa_name);
    }
    freeifaddrs(ifs);
  }
  std::string value;
  for (const std::string& d : c.net_devices) {
    value += (value.empty() ? "" : ",") + d;
    if (d != "all" && avail.find("'" + d.substr(0, d.find(':')) + "'") == std::string::npos)
      bad += (unknown++ ? ",'" : "'") + d + "'";
  }
  if (unknown)
    report_once("UCX_NET_DEVICES", value,
                std::string(unknown > 1 ? "network devices " : "network device ") + bad +
                    (unknown > 1 ? " are" : " is") + " not available, please use one or more of: " + avail +
                    (any ? "" : "; tcp is not used"));
  return any;
}

fi_info* getinfo(uint8_t kind, const char* node, bool atomics) {
  fi_info* hints = fi_allocinfo();
  if (!hints) return nullptr;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE |
                FI_SEND | FI_RECV | (atomics ? FI_ATOMIC : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_COMPLETION;
  hints->fabric_attr->prov_name = strdup(tp_name(kind));
  if (kind == TP_TCP) hints->addr_format = FI_SOCKADDR_IN;
  if (kind == TP_LNX) hints->caps |= FI_LOCAL_COMM | FI_REMOTE_COMM;
  fi_info* info = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), node, nullptr, node ? FI_SOURCE : 0, hints, &info);
  fi_freeinfo(hints);
  if (rc) return nullptr;
  // The provider named exactly, or the tcp provider under a utility layer
  // (real libfabric lists "tcp;ofi_rxm").
  for (fi_info* i = info; i; i = i->next) {
    std::string p = i->fabric_attr->prov_name;
    if (p == tp_name(kind) || p.rfind(std::string(tp_name(kind)) + ";", 0) == 0) {
      fi_info* one = fi_dupinfo(i);
      fi_freeinfo(info);
      return one;
    }
  }
  fi_freeinfo(info);
  return nullptr;
}

std::unique_ptr<domain_tp> open_transport(const config& c, uint8_t kind, bool want_atomics) {
  std::string dev = kind == TP_SHM ? "memory" : "", ip;
  if (kind != TP_SHM && !pick_interface(c, dev, ip)) {
    WUCP_LOG(L_DIAG, "%s: no network interface allowed by UCX_NET_DEVICES", tp_name(kind));
    return nullptr;
  }
  fi_info* info = getinfo(kind, ip.empty() ? nullptr : ip.c_str(), want_atomics);
  bool atomics = info && want_atomics;
  if (!info && want_atomics) info = getinfo(kind, ip.empty() ? nullptr : ip.c_str(), false);
  if (!info) {
    WUCP_LOG(L_DIAG, "%s: no provider (fi_getinfo)", tp_name(kind));
    return nullptr;
  }
  auto d = std::make_unique<domain_tp>();
  d->kind = kind;
  d->info = info;
  d->prov_name = info->fabric_attr->prov_name;
  d->dev_name = dev;
  d->atomics = atomics;
  d->inject = info->tx_attr->inject_size;
  d->iov_limit = std::max<size_t>(1, std::min<size_t>(4, info->tx_attr->iov_limit));
  d->max_msg = info->ep_attr->max_msg_size;
  d->virt_addr = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
  d->prov_key = info->domain_attr->mr_mode & FI_MR_PROV_KEY;
  int rc = fi_fabric(info->fabric_attr, &d->fabric, nullptr);
  if (!rc) rc = fi_domain(d->fabric, info, &d->domain, nullptr);
  if (rc) {
    WUCP_LOG(L_DIAG, "%s: fi_fabric/fi_domain: %s", tp_name(kind), fi_strerror(-rc));
    return nullptr;
  }
  return d;
}

// UCX_LOG_LEVEL=info: one line, once per process, naming the library in
// use (weft's face, its version, where it and the libfabric under it were
// loaded from) and the transports of the first context.
void announce(const ucp_context& ctx) {
  if (L_INFO > g_log_level) return;
  static std::once_flag once;
  std::call_once(once, [&ctx] {
    Dl_info self{}, fabric{};
    const char* ucp_path = dladdr(reinterpret_cast<void*>(&ucp_get_version_string), &self) && self.dli_fname
                               ? self.dli_fname
                               : "?";
    const char* fabric_path =
        dladdr(reinterpret_cast<void*>(&fi_getinfo), &fabric) && fabric.dli_fname ? fabric.dli_fname : "?";
    std::string tps;
    for (auto& d : ctx.tps)
      tps += (tps.empty() ? "" : ", ") + std::string(tp_name(d->kind)) + " (libfabric provider " + d->prov_name +
             (d->dev_name.empty() ? "" : ", device " + d->dev_name) + ")";
    const uint32_t v = fi_version();
    WUCP_LOG(L_INFO, "weft %s: UCP API %s from %s, over libfabric API %u.%u from %s; transports: %s", WEFT_VERSION,
             ucp_get_version_string(), ucp_path, FI_MAJOR(v), FI_MINOR(v), fabric_path, tps.c_str());
  });
}

}  // namespace
}  // namespace wucp

using namespace wucp;

UCP_EXPORT void ucp_get_version(unsigned* major_version, unsigned* minor_version, unsigned* release_number) {
  if (major_version) *major_version = 1;
  if (minor_version) *minor_version = 17;
  if (release_number) *release_number = 0;
}

UCP_EXPORT const char* ucp_get_version_string(void) {
  return "1.17.0";
}

UCP_EXPORT ucs_status_t ucp_lib_query(ucp_lib_attr_t* attr) {
  if (!attr) return UCS_ERR_INVALID_PARAM;
  if (attr->field_mask & UCP_LIB_ATTR_FIELD_MAX_THREAD_LEVEL) attr->max_thread_level = UCS_THREAD_MODE_MULTI;
  return UCS_OK;
}

UCP_EXPORT ucs_status_t ucp_init_version(unsigned api_major_version, unsigned api_minor_version,
                                         const ucp_params_t* params, const ucp_config_t* config,
                                         ucp_context_h* context_p) {
  (void)api_minor_version;
  if (!params || !context_p) return UCS_ERR_INVALID_PARAM;
  if (api_major_version != 1) return UCS_ERR_UNSUPPORTED;
  if (!(params->field_mask & UCP_PARAM_FIELD_FEATURES) || !params->features) {
    WUCP_LOG(L_ERROR, "ucp_init: no features were requested");
    return UCS_ERR_INVALID_PARAM;
  }
  constexpr uint64_t known = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64 |
                             UCP_FEATURE_WAKEUP | UCP_FEATURE_STREAM | UCP_FEATURE_AM;
  if (params->features & ~known) return UCS_ERR_UNSUPPORTED;
  try {
    auto ctx = std::make_unique<ucp_context>();
    ctx->cfg = config ? config->c : read_config(nullptr);
    apply_log_level(ctx->cfg.log_level);
    ctx->features = params->features;
    if (params->field_mask & UCP_PARAM_FIELD_REQUEST_SIZE) ctx->user_req_size = params->request_size;
    if (params->field_mask & UCP_PARAM_FIELD_REQUEST_INIT) ctx->req_init = params->request_init;
    if (params->field_mask & UCP_PARAM_FIELD_REQUEST_CLEANUP) ctx->req_cleanup = params->request_cleanup;
    if (params->field_mask & UCP_PARAM_FIELD_MT_WORKERS_SHARED) ctx->mt_shared = params->mt_workers_shared;
    if ((params->field_mask & UCP_PARAM_FIELD_NAME) && params->name) ctx->name = params->name;
    if (ctx->name.empty()) ctx->name = "weft-" + std::to_string(getpid());
    if (ctx->user_req_size > (1u << 20)) return UCS_ERR_INVALID_PARAM;
    ctx->host_id = host_identity();
    bool amo = params->features & (UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64);
    const bool tcp_device = !tl_enabled(ctx->cfg, "tcp") || check_devices(ctx->cfg);
    // Both allowed: one linked endpoint reaches every peer (one matcher for
    // tag receives from anyone). Else, or where the library has no linked
    // provider (Debian's libfabric 1.17), each transport on its own.
    if (tl_enabled(ctx->cfg, "shm") && tl_enabled(ctx->cfg, "tcp"))
      if (auto d = open_transport(ctx->cfg, TP_LNX, amo)) ctx->tps.push_back(std::move(d));
    for (uint8_t kind : {TP_SHM, TP_TCP}) {
      if (!ctx->tps.empty() && ctx->tps[0]->kind == TP_LNX) break;
      if (!tl_enabled(ctx->cfg, tp_name(kind))) continue;
      if (auto d = open_transport(ctx->cfg, kind, amo)) ctx->tps.push_back(std::move(d));
    }
    for (auto& d : ctx->tps)
      WUCP_LOG(L_INFO, "transport %s: libfabric provider %s, device %s", tp_name(d->kind), d->prov_name.c_str(),
               d->dev_name.c_str());
    if (ctx->tps.empty()) {
      // Which setting left nothing: UCX_TLS, UCX_NET_DEVICES, or else the
      // libfabric under the face (whose own lines say why).
      std::string tls, devs;
      for (auto& t : ctx->cfg.tls) tls += (tls.empty() ? "" : ",") + t;
      if (ctx->cfg.tls_negate) tls = "^" + tls;
      for (auto& d : ctx->cfg.net_devices) devs += (devs.empty() ? "" : ",") + d;
      const bool shm = tl_enabled(ctx->cfg, "shm"), tcp = tl_enabled(ctx->cfg, "tcp");
      std::string why;
      if (!shm && !tcp)
        why = "UCX_TLS=" + tls + " selects none of shm, tcp";
      else if (!shm && !tcp_device)
        why = "UCX_NET_DEVICES=" + devs + " leaves tcp no network device (UCX_TLS=" + tls + ")";
      else
        why = std::string("libfabric's fi_getinfo gave no ") +
              (shm && tcp ? "shm nor tcp"
               : shm      ? "shm"
                          : "tcp") +
              " provider (FI_LOG_LEVEL=warn says why)";
      WUCP_LOG(L_ERROR, "ucp_init: no usable transport: %s", why.c_str());
      return UCS_ERR_NO_DEVICE;
    }
    announce(*ctx);
    *context_p = ctx.release();
    return UCS_OK;
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
}

UCP_EXPORT void ucp_cleanup(ucp_context_h context) {
  delete context;
}

UCP_EXPORT ucs_status_t ucp_context_query(ucp_context_h context, ucp_context_attr_t* attr) {
  if (!context || !attr) return UCS_ERR_INVALID_PARAM;
  if (attr->field_mask & UCP_ATTR_FIELD_REQUEST_SIZE) attr->request_size = sizeof(request);
  if (attr->field_mask & UCP_ATTR_FIELD_THREAD_MODE)
    attr->thread_mode = context->mt_shared ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SINGLE;
  if (attr->field_mask & UCP_ATTR_FIELD_MEMORY_TYPES) attr->memory_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
  if (attr->field_mask & UCP_ATTR_FIELD_NAME)
    snprintf(attr->name, sizeof attr->name, "%s", context->name.c_str());
  return UCS_OK;
}

// The "# resource" lines follow UCX's layout: Open MPI reads them
// (opal_common_ucx_support_level) to learn the transports and devices.
UCP_EXPORT void ucp_context_print_info(const ucp_context_h context, FILE* stream) {
  if (!context || !stream) return;
  fprintf(stream, "#\n# UCP context (weft %s)\n#\n", ucp_get_version_string());
  fprintf(stream, "#            name: %s\n", context->name.c_str());
  std::string f;
  static const std::pair<uint64_t, const char*> names[] = {
      {UCP_FEATURE_TAG, "TAG"},     {UCP_FEATURE_RMA, "RMA"},       {UCP_FEATURE_AMO32, "AMO32"},
      {UCP_FEATURE_AMO64, "AMO64"}, {UCP_FEATURE_WAKEUP, "WAKEUP"}, {UCP_FEATURE_STREAM, "STREAM"},
      {UCP_FEATURE_AM, "AM"}};
  for (auto& n : names)
    if (context->features & n.first) f += (f.empty() ? "" : "|") + std::string(n.second);
  fprintf(stream, "#        features: %s\n#\n", f.c_str());
  int i = 0;
  for (auto& d : context->tps) {
    fprintf(stream, "#      md %d     :  component %s (libfabric provider %s)\n", i, tp_name(d->kind),
            d->prov_name.c_str());
    fprintf(stream, "# resource %d  :  md %d  dev %d  flags -- %s/%s\n", i, i, i, tp_name(d->kind),
            d->dev_name.c_str());
    i++;
  }
  fprintf(stream, "#\n");
}
