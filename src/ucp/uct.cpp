// SPDX-License-Identifier: BSD-3-Clause
// libuct.so.0: UCX's transport layer, as far as programs that link it
// without using it need it. Open MPI 5 builds its btl/uct into
// libopen-pal.so, which therefore needs libuct.so.0 at load time (Debian's
// openmpi-mca-params.conf turns the component off); ucx_info and
// ucx_perftest list UCT's components and resources. docs/ucp.md says why
// weft provides this library rather than the libucs internals that UCX's
// own libuct needs.
//
// What it describes: one component, memory domain and transport per
// provider under weft's UCP face that fi_getinfo finds: "shm" (device
// "memory") and "tcp" (one device per network interface that is up with an
// IPv4 or IPv6 address). An interface opens and answers queries; it
// advertises no operation (cap.flags 0, no addresses), so a program that
// checks capabilities, as ucx_perftest and Open MPI do, finds it cannot
// send, and every operation answers UCS_ERR_UNSUPPORTED. The data path of
// weft is its UCP face (libucp.so.0).
#include <ifaddrs.h>
#include <net/if.h>
#include <rdma/fabric.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include <ucs/sys/topo/base/topo.h>
#include <uct/api/uct.h>

#define UCT_EXPORT extern "C" __attribute__((visibility("default")))

// Indexed by uct_device_type_t, as UCX names the types.
extern "C" {
__attribute__((visibility("default"))) const char* uct_device_type_names[] = {"network", "intra-node", "accelerator",
                                                                              "loopback"};
}
static_assert(sizeof uct_device_type_names / sizeof(char*) == UCT_DEVICE_TYPE_LAST);

// The memory domain attributes of UCX's v2 API (src/uct/api/v2/uct_v2.h,
// not installed by libucx-dev; UCX 1.18's ucx_info calls uct_md_query_v2).
namespace {
enum : uint64_t {
  md_attr_max_alloc = 1u << 0,
  md_attr_max_reg = 1u << 1,
  md_attr_flags = 1u << 2,
  md_attr_reg_mem_types = 1u << 3,
  md_attr_reg_nonblock_mem_types = 1u << 4,
  md_attr_cache_mem_types = 1u << 5,
  md_attr_detect_mem_types = 1u << 6,
  md_attr_alloc_mem_types = 1u << 7,
  md_attr_access_mem_types = 1u << 8,
  md_attr_dmabuf_mem_types = 1u << 9,
  md_attr_reg_cost = 1u << 10,
  md_attr_component_name = 1u << 11,
  md_attr_rkey_packed_size = 1u << 12,
  md_attr_local_cpus = 1u << 13,
  md_attr_exported_mkey_packed_size = 1u << 14,
  md_attr_global_id = 1u << 15,
  md_attr_reg_alignment = 1u << 16,
  md_attr_gva_mem_types = 1u << 17,
};
}  // namespace

extern "C" typedef struct {
  uint64_t field_mask;
  uint64_t max_alloc;
  size_t max_reg;
  uint64_t flags;
  uint64_t reg_mem_types;
  uint64_t reg_nonblock_mem_types;
  uint64_t cache_mem_types;
  uint64_t gva_mem_types;
  uint64_t detect_mem_types;
  uint64_t alloc_mem_types;
  uint64_t access_mem_types;
  uint64_t dmabuf_mem_types;
  ucs_linear_func_t reg_cost;
  char component_name[UCT_COMPONENT_NAME_MAX];
  size_t rkey_packed_size;
  ucs_cpu_set_t local_cpus;
  size_t exported_mkey_packed_size;
  char global_id[256];
  size_t reg_alignment;
} uct_md_attr_v2_t;

extern "C" typedef struct {
  uint64_t field_mask;
  unsigned flags;
} uct_md_mkey_pack_params_t;

namespace {
void copy_name(char* dst, size_t size, const char* src) {
  snprintf(dst, size, "%s", src);
}
}  // namespace

// ------------------------------------------------------------------ objects
struct uct_component {
  char name[UCT_COMPONENT_NAME_MAX];
  std::vector<uct_tl_resource_desc_t> resources;
};

struct uct_md {
  uct_component* component;
};

struct uct_cm {};

namespace {
constexpr uint32_t config_magic = 0x77636667;  // "wcfg"
// uct_md_config_t and uct_iface_config_t are opaque: weft reads no UCT
// settings, so a configuration is a marked empty block.
struct weft_config {
  uint32_t magic;
};

struct weft_worker {
  uct_worker_t pub;                  // progress_q: zero, so progress finds no callback
  unsigned char room[1024];          // a later UCX's callback queue is larger
};

struct weft_iface {
  uct_iface_t pub;  // first: programs call through pub.ops inline
  uct_component* component;
};

// Every operation of an interface that advertises none: the type's
// "unsupported" answer (a status or a negative size; 0 for a count of
// progressed events or "not reachable"; nothing for void).
template <typename F>
struct unsupported;
template <typename R, typename... A>
struct unsupported<R (*)(A...)> {
  static R call(A...) noexcept {
    if constexpr (std::is_void_v<R>)
      return;
    else if constexpr (std::is_same_v<R, ucs_status_t>)
      return UCS_ERR_UNSUPPORTED;
    else if constexpr (std::is_same_v<R, ssize_t>)
      return UCS_ERR_UNSUPPORTED;
    else
      return R{};
  }
};

#define WEFT_UCT_OPS(X)                                                                                        \
  X(ep_put_short) X(ep_put_bcopy) X(ep_put_zcopy) X(ep_get_short) X(ep_get_bcopy) X(ep_get_zcopy)             \
  X(ep_am_short) X(ep_am_short_iov) X(ep_am_bcopy) X(ep_am_zcopy) X(ep_atomic_cswap64) X(ep_atomic_cswap32)   \
  X(ep_atomic32_post) X(ep_atomic64_post) X(ep_atomic32_fetch) X(ep_atomic64_fetch) X(ep_tag_eager_short)    \
  X(ep_tag_eager_bcopy) X(ep_tag_eager_zcopy) X(ep_tag_rndv_zcopy) X(ep_tag_rndv_cancel)                      \
  X(ep_tag_rndv_request) X(iface_tag_recv_zcopy) X(iface_tag_recv_cancel) X(ep_pending_add)                   \
  X(ep_pending_purge) X(ep_flush) X(ep_fence) X(ep_check) X(ep_create) X(ep_connect) X(ep_disconnect)         \
  X(cm_ep_conn_notify) X(ep_destroy) X(ep_get_address) X(ep_connect_to_ep) X(iface_accept) X(iface_reject)    \
  X(iface_flush) X(iface_fence) X(iface_progress_enable) X(iface_progress_disable) X(iface_progress)          \
  X(iface_event_fd_get) X(iface_event_arm) X(iface_close) X(iface_query) X(iface_get_device_address)          \
  X(iface_get_address) X(iface_is_reachable)

void iface_close(uct_iface_h iface) {
  delete reinterpret_cast<weft_iface*>(iface);
}

ucs_status_t iface_query(uct_iface_h, uct_iface_attr_t* attr) {
  if (!attr) return UCS_ERR_INVALID_PARAM;
  memset(attr, 0, sizeof *attr);
  // No operations, events, addresses or endpoints: nothing to connect to.
  attr->cap.am.max_hdr = 0;
  attr->max_num_eps = 0;
  attr->priority = 0;
  return UCS_OK;
}

// Nothing is ever outstanding on an interface that sends nothing.
ucs_status_t iface_flush(uct_iface_h, unsigned, uct_completion_t*) {
  return UCS_OK;
}

ucs_status_t iface_fence(uct_iface_h, unsigned) {
  return UCS_OK;
}

// Addresses are 0 bytes long (iface_query): nothing to write.
ucs_status_t iface_get_device_address(uct_iface_h, uct_device_addr_t*) {
  return UCS_OK;
}

ucs_status_t iface_get_address(uct_iface_h, uct_iface_addr_t*) {
  return UCS_OK;
}

const uct_iface_ops_t iface_ops = [] {
  uct_iface_ops_t o{};
#define X(name) o.name = unsupported<decltype(o.name)>::call;
  WEFT_UCT_OPS(X)
#undef X
  o.iface_close = iface_close;
  o.iface_query = iface_query;
  o.iface_flush = iface_flush;
  o.iface_fence = iface_fence;
  o.iface_get_device_address = iface_get_device_address;
  o.iface_get_address = iface_get_address;
  return o;
}();
// Every member of the table is named in WEFT_UCT_OPS.
#define X(name) +1
static_assert(sizeof(uct_iface_ops_t) == sizeof(void*) * (0 WEFT_UCT_OPS(X)));
#undef X

// The provider under weft's UCP face with this name, if fi_getinfo finds one.
bool provider_present(const char* name) {
  fi_info* hints = fi_allocinfo();
  if (!hints) return false;
  hints->ep_attr->type = FI_EP_RDM;
  hints->fabric_attr->prov_name = strdup(name);
  fi_info* info = nullptr;
  bool found = false;
  if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info) == 0) {
    for (fi_info* i = info; i && !found; i = i->next) {
      std::string p = i->fabric_attr->prov_name;
      found = p == name || p.rfind(std::string(name) + ";", 0) == 0;
    }
    fi_freeinfo(info);
  }
  fi_freeinfo(hints);
  return found;
}

uct_tl_resource_desc_t resource(const char* tl, const char* dev, uct_device_type_t type) {
  uct_tl_resource_desc_t r{};
  copy_name(r.tl_name, sizeof r.tl_name, tl);
  copy_name(r.dev_name, sizeof r.dev_name, dev);
  r.dev_type = type;
  r.sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
  return r;
}

// The components, built once: the providers do not change while a program runs.
const std::vector<std::unique_ptr<uct_component>>& components() {
  static const std::vector<std::unique_ptr<uct_component>> list = [] {
    std::vector<std::unique_ptr<uct_component>> v;
    if (provider_present("shm")) {
      auto c = std::make_unique<uct_component>();
      copy_name(c->name, sizeof c->name, "shm");
      c->resources.push_back(resource("shm", "memory", UCT_DEVICE_TYPE_SHM));
      v.push_back(std::move(c));
    }
    if (provider_present("tcp")) {
      auto c = std::make_unique<uct_component>();
      copy_name(c->name, sizeof c->name, "tcp");
      ifaddrs* ifs = nullptr;
      if (getifaddrs(&ifs) == 0) {
        for (ifaddrs* i = ifs; i; i = i->ifa_next) {
          if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
          if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
          bool seen = false;
          for (auto& r : c->resources) seen |= !strncmp(r.dev_name, i->ifa_name, sizeof r.dev_name);
          if (!seen) c->resources.push_back(resource("tcp", i->ifa_name, UCT_DEVICE_TYPE_NET));
        }
        freeifaddrs(ifs);
      }
      v.push_back(std::move(c));
    }
    return v;
  }();
  return list;
}

bool known_component(uct_component_h c) {
  for (auto& k : components())
    if (k.get() == c) return true;
  return false;
}

ucs_status_t new_config(void** config_p) {
  auto* c = static_cast<weft_config*>(calloc(1, sizeof(weft_config)));
  if (!c) return UCS_ERR_NO_MEMORY;
  c->magic = config_magic;
  *config_p = c;
  return UCS_OK;
}
}  // namespace

// --------------------------------------------------------------- components
UCT_EXPORT ucs_status_t uct_query_components(uct_component_h** components_p, unsigned* num_components_p) {
  if (!components_p || !num_components_p) return UCS_ERR_INVALID_PARAM;
  try {
    auto& list = components();
    auto* out = static_cast<uct_component_h*>(calloc(list.size() + 1, sizeof(uct_component_h)));
    if (!out) return UCS_ERR_NO_MEMORY;
    for (size_t i = 0; i < list.size(); ++i) out[i] = list[i].get();
    *components_p = out;
    *num_components_p = static_cast<unsigned>(list.size());
    return UCS_OK;
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
}

UCT_EXPORT void uct_release_component_list(uct_component_h* components) {
  free(components);
}

UCT_EXPORT ucs_status_t uct_component_query(uct_component_h component, uct_component_attr_t* attr) {
  if (!component || !attr || !known_component(component)) return UCS_ERR_INVALID_PARAM;
  if (attr->field_mask & UCT_COMPONENT_ATTR_FIELD_NAME) {
    memset(attr->name, 0, sizeof attr->name);
    copy_name(attr->name, sizeof attr->name, component->name);
  }
  if (attr->field_mask & UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT) attr->md_resource_count = 1;
  if (attr->field_mask & UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES) {
    if (!attr->md_resources) return UCS_ERR_INVALID_PARAM;
    memset(attr->md_resources[0].md_name, 0, sizeof attr->md_resources[0].md_name);
    copy_name(attr->md_resources[0].md_name, sizeof attr->md_resources[0].md_name, component->name);
  }
  // No connection manager: weft's client/server connections are its UCP
  // face's listeners.
  if (attr->field_mask & UCT_COMPONENT_ATTR_FIELD_FLAGS) attr->flags = 0;
  return UCS_OK;
}

// ------------------------------------------------------------ configuration
UCT_EXPORT ucs_status_t uct_md_config_read(uct_component_h component, const char*, const char*,
                                           uct_md_config_t** config_p) {
  if (!component || !config_p || !known_component(component)) return UCS_ERR_INVALID_PARAM;
  return new_config(reinterpret_cast<void**>(config_p));
}

UCT_EXPORT ucs_status_t uct_md_iface_config_read(uct_md_h md, const char* tl_name, const char*, const char*,
                                                 uct_iface_config_t** config_p) {
  if (!md || !config_p) return UCS_ERR_INVALID_PARAM;
  if (tl_name && strcmp(tl_name, md->component->name) != 0) return UCS_ERR_NO_ELEM;
  return new_config(reinterpret_cast<void**>(config_p));
}

UCT_EXPORT ucs_status_t uct_cm_config_read(uct_component_h component, const char*, const char*,
                                           uct_cm_config_t** config_p) {
  if (!component || !config_p) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT void uct_config_release(void* config) {
  auto* c = static_cast<weft_config*>(config);
  if (!c || c->magic != config_magic) return;
  c->magic = 0;
  free(c);
}

// ----------------------------------------------------------- memory domains
UCT_EXPORT ucs_status_t uct_md_open(uct_component_h component, const char* md_name, const uct_md_config_t* config,
                                    uct_md_h* md_p) {
  if (!component || !md_name || !config || !md_p || !known_component(component)) return UCS_ERR_INVALID_PARAM;
  if (strcmp(md_name, component->name) != 0) return UCS_ERR_NO_DEVICE;
  auto* md = new (std::nothrow) uct_md{component};
  if (!md) return UCS_ERR_NO_MEMORY;
  *md_p = md;
  return UCS_OK;
}

UCT_EXPORT void uct_md_close(uct_md_h md) {
  delete md;
}

UCT_EXPORT ucs_status_t uct_md_query_tl_resources(uct_md_h md, uct_tl_resource_desc_t** resources_p,
                                                  unsigned* num_resources_p) {
  if (!md || !resources_p || !num_resources_p) return UCS_ERR_INVALID_PARAM;
  auto& r = md->component->resources;
  auto* out = static_cast<uct_tl_resource_desc_t*>(calloc(r.size() + 1, sizeof(uct_tl_resource_desc_t)));
  if (!out) return UCS_ERR_NO_MEMORY;
  if (!r.empty()) memcpy(out, r.data(), r.size() * sizeof r[0]);
  *resources_p = out;
  *num_resources_p = static_cast<unsigned>(r.size());
  return UCS_OK;
}

UCT_EXPORT void uct_release_tl_resource_list(uct_tl_resource_desc_t* resources) {
  free(resources);
}

// Neither allocation nor registration: flags 0, host memory only as the
// memory it can access, every CPU as close.
UCT_EXPORT ucs_status_t uct_md_query(uct_md_h md, uct_md_attr_t* attr) {
  if (!md || !attr) return UCS_ERR_INVALID_PARAM;
  memset(attr, 0, sizeof *attr);
  attr->cap.access_mem_types = 1u << UCS_MEMORY_TYPE_HOST;
  copy_name(attr->component_name, sizeof attr->component_name, md->component->name);
  for (unsigned i = 0; i < UCS_CPU_SETSIZE; ++i) UCS_CPU_SET(i, &attr->local_cpus);
  return UCS_OK;
}

UCT_EXPORT ucs_status_t uct_md_query_v2(uct_md_h md, uct_md_attr_v2_t* attr) {
  if (!md || !attr) return UCS_ERR_INVALID_PARAM;
  uint64_t f = attr->field_mask;
  if (f & md_attr_max_alloc) attr->max_alloc = 0;
  if (f & md_attr_max_reg) attr->max_reg = 0;
  if (f & md_attr_flags) attr->flags = 0;
  if (f & md_attr_reg_mem_types) attr->reg_mem_types = 0;
  if (f & md_attr_reg_nonblock_mem_types) attr->reg_nonblock_mem_types = 0;
  if (f & md_attr_cache_mem_types) attr->cache_mem_types = 0;
  if (f & md_attr_gva_mem_types) attr->gva_mem_types = 0;
  if (f & md_attr_detect_mem_types) attr->detect_mem_types = 0;
  if (f & md_attr_alloc_mem_types) attr->alloc_mem_types = 0;
  if (f & md_attr_access_mem_types) attr->access_mem_types = 1u << UCS_MEMORY_TYPE_HOST;
  if (f & md_attr_dmabuf_mem_types) attr->dmabuf_mem_types = 0;
  if (f & md_attr_reg_cost) attr->reg_cost = ucs_linear_func_t{0, 0};
  if (f & md_attr_component_name) {
    memset(attr->component_name, 0, sizeof attr->component_name);
    copy_name(attr->component_name, sizeof attr->component_name, md->component->name);
  }
  if (f & md_attr_rkey_packed_size) attr->rkey_packed_size = 0;
  if (f & md_attr_local_cpus) {
    memset(&attr->local_cpus, 0, sizeof attr->local_cpus);
    for (unsigned i = 0; i < UCS_CPU_SETSIZE; ++i) UCS_CPU_SET(i, &attr->local_cpus);
  }
  if (f & md_attr_exported_mkey_packed_size) attr->exported_mkey_packed_size = 0;
  if (f & md_attr_global_id) memset(attr->global_id, 0, sizeof attr->global_id);
  if (f & md_attr_reg_alignment) attr->reg_alignment = 1;
  return UCS_OK;
}

UCT_EXPORT ucs_status_t uct_md_mem_reg(uct_md_h md, void* address, size_t length, unsigned, uct_mem_h* memh_p) {
  if (!md || !address || !length || !memh_p) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT ucs_status_t uct_md_mem_dereg(uct_md_h md, uct_mem_h) {
  if (!md) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT ucs_status_t uct_md_mkey_pack(uct_md_h md, uct_mem_h, void* rkey_buffer) {
  if (!md || !rkey_buffer) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT ucs_status_t uct_md_mkey_pack_v2(uct_md_h md, uct_mem_h, void*, size_t, const uct_md_mkey_pack_params_t*,
                                            void* mkey_buffer) {
  if (!md || !mkey_buffer) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT ucs_status_t uct_rkey_unpack(uct_component_h component, const void* rkey_buffer,
                                        uct_rkey_bundle_t* rkey_ob) {
  if (!component || !rkey_buffer || !rkey_ob) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT ucs_status_t uct_rkey_release(uct_component_h component, const uct_rkey_bundle_t* rkey_ob) {
  if (!component || !rkey_ob) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

// ------------------------------------------------------------------ workers
UCT_EXPORT ucs_status_t uct_worker_create(ucs_async_context_t* async, ucs_thread_mode_t thread_mode,
                                          uct_worker_h* worker_p) {
  if (!async || !worker_p || thread_mode >= UCS_THREAD_MODE_LAST) return UCS_ERR_INVALID_PARAM;
  auto* w = static_cast<weft_worker*>(calloc(1, sizeof(weft_worker)));
  if (!w) return UCS_ERR_NO_MEMORY;
  *worker_p = &w->pub;
  return UCS_OK;
}

UCT_EXPORT void uct_worker_destroy(uct_worker_h worker) {
  free(reinterpret_cast<weft_worker*>(worker));
}

// --------------------------------------------------------------- interfaces
UCT_EXPORT ucs_status_t uct_iface_open(uct_md_h md, uct_worker_h worker, const uct_iface_params_t* params,
                                       const uct_iface_config_t* config, uct_iface_h* iface_p) {
  if (!md || !worker || !params || !config || !iface_p) return UCS_ERR_INVALID_PARAM;
  if (params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE) {
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) return UCS_ERR_UNSUPPORTED;  // no sockaddr server/client
    const char* tl = params->mode.device.tl_name;
    const char* dev = params->mode.device.dev_name;
    if (!tl || !dev) return UCS_ERR_INVALID_PARAM;
    bool found = false;
    for (auto& r : md->component->resources)
      found |= !strcmp(r.tl_name, tl) && !strcmp(r.dev_name, dev);
    if (!found) return UCS_ERR_NO_DEVICE;
  }
  auto* i = new (std::nothrow) weft_iface{};
  if (!i) return UCS_ERR_NO_MEMORY;
  i->pub.ops = iface_ops;
  i->component = md->component;
  *iface_p = &i->pub;
  return UCS_OK;
}

UCT_EXPORT void uct_iface_close(uct_iface_h iface) {
  if (iface) iface->ops.iface_close(iface);
}

UCT_EXPORT ucs_status_t uct_iface_query(uct_iface_h iface, uct_iface_attr_t* attr) {
  if (!iface || !attr) return UCS_ERR_INVALID_PARAM;
  return iface->ops.iface_query(iface, attr);
}

UCT_EXPORT ucs_status_t uct_iface_get_device_address(uct_iface_h iface, uct_device_addr_t* addr) {
  if (!iface || !addr) return UCS_ERR_INVALID_PARAM;
  return iface->ops.iface_get_device_address(iface, addr);
}

UCT_EXPORT ucs_status_t uct_iface_get_address(uct_iface_h iface, uct_iface_addr_t* addr) {
  if (!iface || !addr) return UCS_ERR_INVALID_PARAM;
  return iface->ops.iface_get_address(iface, addr);
}

UCT_EXPORT int uct_iface_is_reachable(const uct_iface_h iface, const uct_device_addr_t*, const uct_iface_addr_t*) {
  (void)iface;
  return 0;  // an interface that sends nothing reaches no one
}

UCT_EXPORT ucs_status_t uct_iface_set_am_handler(uct_iface_h iface, uint8_t id, uct_am_callback_t cb, void*,
                                                 uint32_t) {
  if (!iface || id >= UCT_AM_ID_MAX || !cb) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT ucs_status_t uct_iface_mem_alloc(uct_iface_h iface, size_t length, unsigned, const char*,
                                            uct_allocated_memory_t* mem) {
  if (!iface || !length || !mem) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT void uct_iface_mem_free(const uct_allocated_memory_t*) {}

// ---------------------------------------------------------------- endpoints
UCT_EXPORT ucs_status_t uct_ep_create(const uct_ep_params_t* params, uct_ep_h* ep_p) {
  if (!params || !ep_p) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT void uct_ep_destroy(uct_ep_h) {}

UCT_EXPORT ucs_status_t uct_ep_get_address(uct_ep_h ep, uct_ep_addr_t* addr) {
  if (!ep || !addr) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT ucs_status_t uct_ep_connect_to_ep(uct_ep_h ep, const uct_device_addr_t* dev_addr,
                                             const uct_ep_addr_t* ep_addr) {
  if (!ep || !dev_addr || !ep_addr) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

// ------------------------------------------------------ connection managers
UCT_EXPORT ucs_status_t uct_cm_open(uct_component_h component, uct_worker_h worker, const uct_cm_config_t* config,
                                    uct_cm_h* cm_p) {
  if (!component || !worker || !config || !cm_p) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}

UCT_EXPORT void uct_cm_close(uct_cm_h) {}

UCT_EXPORT ucs_status_t uct_cm_query(uct_cm_h cm, uct_cm_attr_t* cm_attr) {
  if (!cm || !cm_attr) return UCS_ERR_INVALID_PARAM;
  return UCS_ERR_UNSUPPORTED;
}
