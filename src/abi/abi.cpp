// SPDX-License-Identifier: BSD-3-Clause
// The exported entry points whose structures changed across ABI versions.
//
// libfabric only ever appended fields, so an old structure is a prefix of
// the new one. Each ABI node (FABRIC_1.0 … 1.9, libfabric.map) has its own
// fi_getinfo/fi_dupinfo (and fi_fabric at 1.0): an old caller's structures
// are widened into zeroed new ones, reading only the fields its layout has.
// Results are handed out in the newest layout (the domain attributes of ABI
// 1.9, core/fabric2.hpp), whose prefix is exactly what an old caller reads,
// so one fi_freeinfo serves every node.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdlib>
#include <cstring>

#include "common/export.hpp"
#include "common/object.hpp"
#include "core/fabric2.hpp"
#include "core/info.hpp"
#include "util/fabric.hpp"

namespace {

// Sizes of each structure as an ABI node defines it: the offset of the first
// field that ABI did not have (fi_rx_attr never changed).
constexpr size_t tx_attr_1_2 = offsetof(fi_tx_attr, tclass);
constexpr size_t ep_attr_1_0 = offsetof(fi_ep_attr, auth_key_size);
constexpr size_t fabric_attr_1_0 = offsetof(fi_fabric_attr, api_version);
constexpr size_t info_1_1 = offsetof(fi_info, nic);
static_assert(tx_attr_1_2 == 72 && ep_attr_1_0 == 80);
static_assert(fabric_attr_1_0 == 28 && info_1_1 == 112);

struct abi_sizes {
  size_t info, tx, ep, domain, fabric;
};
constexpr abi_sizes abi_1_0{info_1_1, tx_attr_1_2, ep_attr_1_0, weft::domain_attr_1_0, fabric_attr_1_0};
constexpr abi_sizes abi_1_1{info_1_1, tx_attr_1_2, sizeof(fi_ep_attr), weft::domain_attr_1_1,
                            sizeof(fi_fabric_attr)};
constexpr abi_sizes abi_1_2{sizeof(fi_info), tx_attr_1_2, sizeof(fi_ep_attr), weft::domain_attr_1_1,
                            sizeof(fi_fabric_attr)};
constexpr abi_sizes abi_1_3{sizeof(fi_info), sizeof(fi_tx_attr), sizeof(fi_ep_attr), weft::domain_attr_1_3,
                            sizeof(fi_fabric_attr)};
constexpr abi_sizes abi_1_7{sizeof(fi_info), sizeof(fi_tx_attr), sizeof(fi_ep_attr), weft::domain_attr_1_7,
                            sizeof(fi_fabric_attr)};
constexpr abi_sizes abi_1_8{sizeof(fi_info), sizeof(fi_tx_attr), sizeof(fi_ep_attr), weft::domain_attr_1_8,
                            sizeof(fi_fabric_attr)};
constexpr abi_sizes abi_1_9{sizeof(fi_info), sizeof(fi_tx_attr), sizeof(fi_ep_attr), weft::domain_attr_1_9,
                            sizeof(fi_fabric_attr)};

// `old_size` bytes of an attribute, zero-extended to `new_size`.
void* widen(const void* src, size_t old_size, size_t new_size) {
  if (!src) return nullptr;
  void* d = calloc(1, new_size);
  if (d) memcpy(d, src, old_size);
  return d;
}

// An old-layout info (one entry) widened into a shallow new-layout view,
// then deep-copied by info_dup. Only the view's own allocations are freed.
fi_info* widen_info(const void* old, const abi_sizes& s) {
  if (!old) return nullptr;
  fi_info view{};
  memcpy(&view, old, s.info);
  view.next = nullptr;
  void* tx = widen(view.tx_attr, s.tx, sizeof(fi_tx_attr));
  void* ep = widen(view.ep_attr, s.ep, sizeof(fi_ep_attr));
  void* dom = widen(view.domain_attr, s.domain, weft::domain_attr_wide);
  void* fab = widen(view.fabric_attr, s.fabric, sizeof(fi_fabric_attr));
  fi_info* out = nullptr;
  if ((tx || !view.tx_attr) && (ep || !view.ep_attr) && (dom || !view.domain_attr) &&
      (fab || !view.fabric_attr)) {
    view.tx_attr = static_cast<fi_tx_attr*>(tx);
    view.ep_attr = static_cast<fi_ep_attr*>(ep);
    view.domain_attr = static_cast<fi_domain_attr*>(dom);
    view.fabric_attr = static_cast<fi_fabric_attr*>(fab);
    out = weft::info_dup(&view);
  }
  free(tx);
  free(ep);
  free(dom);
  free(fab);
  return out;
}

int getinfo_node(uint32_t version, const char* node, const char* service, uint64_t flags, const void* hints,
                 void** info, const abi_sizes& s) {
  fi_info* wide = nullptr;
  if (hints) {
    wide = widen_info(hints, s);
    if (!wide) return -FI_ENOMEM;
  }
  int ret = weft::getinfo(version, node, service, flags, wide, reinterpret_cast<fi_info**>(info));
  weft::info_free(wide);
  return ret;
}

void* dupinfo_node(const void* info, const abi_sizes& s) {
  return info ? widen_info(info, s) : weft::info_alloc();
}

}  // namespace

#define WEFT_SYMVER(impl, sym, node) __asm__(".symver " #impl "," #sym "@" node)
#define WEFT_SYMVER_DEFAULT(impl, sym, node) __asm__(".symver " #impl "," #sym "@@" node)

// fi_getinfo, fi_freeinfo and fi_dupinfo of one ABI node, bound with `bind`
// (WEFT_SYMVER, or WEFT_SYMVER_DEFAULT for the newest).
#define WEFT_INFO_NODE(tag, node, sizes, bind)                                                            \
  WEFT_EXPORT int fi_getinfo_##tag(uint32_t version, const char* node_, const char* service,           \
                                   uint64_t flags, const void* hints, void** info) {                    \
    return weft::guard([&] { return getinfo_node(version, node_, service, flags, hints, info, sizes); }); \
  }                                                                                                     \
  bind(fi_getinfo_##tag, fi_getinfo, node);                                                             \
  WEFT_EXPORT void fi_freeinfo_##tag(void* info) {                                                      \
    weft::info_free(static_cast<fi_info*>(info));                                                       \
  }                                                                                                     \
  bind(fi_freeinfo_##tag, fi_freeinfo, node);                                                           \
  WEFT_EXPORT void* fi_dupinfo_##tag(const void* info) {                                                \
    return dupinfo_node(info, sizes);                                                                   \
  }                                                                                                     \
  bind(fi_dupinfo_##tag, fi_dupinfo, node)

WEFT_INFO_NODE(1_0, "FABRIC_1.0", abi_1_0, WEFT_SYMVER);
WEFT_INFO_NODE(1_1, "FABRIC_1.1", abi_1_1, WEFT_SYMVER);
WEFT_INFO_NODE(1_2, "FABRIC_1.2", abi_1_2, WEFT_SYMVER);
WEFT_INFO_NODE(1_3, "FABRIC_1.3", abi_1_3, WEFT_SYMVER);
WEFT_INFO_NODE(1_7, "FABRIC_1.7", abi_1_7, WEFT_SYMVER);
WEFT_INFO_NODE(1_8, "FABRIC_1.8", abi_1_8, WEFT_SYMVER);
WEFT_INFO_NODE(1_9, "FABRIC_1.9", abi_1_9, WEFT_SYMVER_DEFAULT);

// --- fi_fabric, fi_fabric2 ----------------------------------------------------------
WEFT_EXPORT int fi_fabric_1_1(fi_fabric_attr* attr, fid_fabric** fabric, void* context) {
  if (!attr) return -FI_EINVAL;
  return weft::guard([&] { return weft::fabric_open(attr, fabric, context, attr->api_version); });
}
WEFT_SYMVER_DEFAULT(fi_fabric_1_1, fi_fabric, "FABRIC_1.1");

// ABI 1.0's fi_fabric_attr has no api_version: such callers are API 1.0–1.4.
WEFT_EXPORT int fi_fabric_1_0(void* attr_1_0, fid_fabric** fabric, void* context) {
  if (!attr_1_0) return -FI_EINVAL;
  fi_fabric_attr attr{};
  memcpy(&attr, attr_1_0, fabric_attr_1_0);
  attr.api_version = FI_VERSION(1, 0);
  return weft::guard([&] { return weft::fabric_open(&attr, fabric, context, attr.api_version); });
}
WEFT_SYMVER(fi_fabric_1_0, fi_fabric, "FABRIC_1.0");

// fi_fabric2 (2.0): the fabric of an fi_info from fi_getinfo; no flags are
// defined.
WEFT_EXPORT int fi_fabric2_1_8(fi_info* info, fid_fabric** fabric, uint64_t flags, void* context) {
  if (!info || !info->fabric_attr || flags) return -FI_EINVAL;
  fi_fabric_attr* attr = info->fabric_attr;
  return weft::guard([&] { return weft::fabric_open(attr, fabric, context, attr->api_version); });
}
WEFT_SYMVER_DEFAULT(fi_fabric2_1_8, fi_fabric2, "FABRIC_1.8");

// --- unversioned ------------------------------------------------------------------
WEFT_EXPORT uint32_t fi_version(void) {
  return weft::api_newest;
}

// fi_open opens named top-level interfaces ("mr_cache", "logging" …): weft
// has none yet.
WEFT_EXPORT int fi_open(uint32_t version, const char* name, void* attr, size_t attr_len, uint64_t flags,
                        fid** fid, void* context) {
  (void)version, (void)attr, (void)attr_len, (void)flags, (void)context;
  if (!name || !fid) return -FI_EINVAL;
  return -FI_ENOSYS;
}
