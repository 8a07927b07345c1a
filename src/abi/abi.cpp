// The exported entry points whose structures changed across ABI versions.
//
// Each old ABI node (FABRIC_1.0 … 1.2) saw smaller structures: fields were
// only ever appended, so an old structure is a prefix of the new one. Old
// callers' hints are widened into zeroed new structures; results are handed
// out in the new layout, whose prefix is exactly what an old caller reads.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdlib>
#include <cstring>

#include "common/export.hpp"
#include "common/object.hpp"
#include "core/info.hpp"
#include "util/fabric.hpp"

namespace {

// Sizes of each structure as ABI 1.0/1.1/1.2 defined it: the offset of the
// first field that ABI did not have.
constexpr size_t tx_attr_1_2 = offsetof(fi_tx_attr, tclass);
constexpr size_t domain_attr_1_0 = offsetof(fi_domain_attr, cntr_cnt);
constexpr size_t domain_attr_1_2 = offsetof(fi_domain_attr, tclass);
constexpr size_t ep_attr_1_0 = offsetof(fi_ep_attr, auth_key_size);
constexpr size_t fabric_attr_1_0 = offsetof(fi_fabric_attr, api_version);
constexpr size_t info_1_1 = offsetof(fi_info, nic);
static_assert(tx_attr_1_2 == 72 && domain_attr_1_0 == 120 && ep_attr_1_0 == 80);
static_assert(fabric_attr_1_0 == 28 && info_1_1 == 112);

struct abi_sizes {
  size_t info, tx, ep, domain, fabric;
};
constexpr abi_sizes abi_1_0{info_1_1, tx_attr_1_2, ep_attr_1_0, domain_attr_1_0, fabric_attr_1_0};
constexpr abi_sizes abi_1_1{info_1_1, tx_attr_1_2, sizeof(fi_ep_attr), domain_attr_1_2,
                            sizeof(fi_fabric_attr)};
constexpr abi_sizes abi_1_2{sizeof(fi_info), tx_attr_1_2, sizeof(fi_ep_attr), domain_attr_1_2,
                            sizeof(fi_fabric_attr)};

template <class T>
T* widen(const void* src, size_t old_size) {
  if (!src) return nullptr;
  T* d = static_cast<T*>(calloc(1, sizeof(T)));
  if (d) memcpy(d, src, old_size);
  return d;
}

// An old-layout info (one entry) widened into a shallow new-layout view; then
// deep-copied by info_dup. Only the view's own allocations are freed.
fi_info* widen_info(const void* old, const abi_sizes& s) {
  if (!old) return nullptr;
  fi_info view{};
  memcpy(&view, old, s.info);
  view.next = nullptr;
  fi_tx_attr* tx = widen<fi_tx_attr>(view.tx_attr, s.tx);
  fi_ep_attr* ep = widen<fi_ep_attr>(view.ep_attr, s.ep);
  fi_domain_attr* dom = widen<fi_domain_attr>(view.domain_attr, s.domain);
  fi_fabric_attr* fab = widen<fi_fabric_attr>(view.fabric_attr, s.fabric);
  fi_info* out = nullptr;
  if ((tx || !view.tx_attr) && (ep || !view.ep_attr) && (dom || !view.domain_attr) &&
      (fab || !view.fabric_attr)) {
    view.tx_attr = tx;
    view.ep_attr = ep;
    view.domain_attr = dom;
    view.fabric_attr = fab;
    out = weft::info_dup(&view);
  }
  free(tx);
  free(ep);
  free(dom);
  free(fab);
  return out;
}

int getinfo_old(uint32_t version, const char* node, const char* service, uint64_t flags, const void* hints,
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

}  // namespace

#define WEFT_SYMVER(impl, sym, node) __asm__(".symver " #impl "," #sym "@" node)
#define WEFT_SYMVER_DEFAULT(impl, sym, node) __asm__(".symver " #impl "," #sym "@@" node)

// --- fi_getinfo -------------------------------------------------------------
WEFT_EXPORT int fi_getinfo_1_3(uint32_t version, const char* node, const char* service, uint64_t flags,
                               const fi_info* hints, fi_info** info) {
  return weft::guard([&] { return weft::getinfo(version, node, service, flags, hints, info); });
}
WEFT_SYMVER_DEFAULT(fi_getinfo_1_3, fi_getinfo, "FABRIC_1.3");

WEFT_EXPORT int fi_getinfo_1_0(uint32_t version, const char* node, const char* service, uint64_t flags,
                               const void* hints, void** info) {
  return weft::guard([&] { return getinfo_old(version, node, service, flags, hints, info, abi_1_0); });
}
WEFT_SYMVER(fi_getinfo_1_0, fi_getinfo, "FABRIC_1.0");

WEFT_EXPORT int fi_getinfo_1_1(uint32_t version, const char* node, const char* service, uint64_t flags,
                               const void* hints, void** info) {
  return weft::guard([&] { return getinfo_old(version, node, service, flags, hints, info, abi_1_1); });
}
WEFT_SYMVER(fi_getinfo_1_1, fi_getinfo, "FABRIC_1.1");

WEFT_EXPORT int fi_getinfo_1_2(uint32_t version, const char* node, const char* service, uint64_t flags,
                               const void* hints, void** info) {
  return weft::guard([&] { return getinfo_old(version, node, service, flags, hints, info, abi_1_2); });
}
WEFT_SYMVER(fi_getinfo_1_2, fi_getinfo, "FABRIC_1.2");

// --- fi_freeinfo: every layout weft hands out is the newest -------------------
WEFT_EXPORT void fi_freeinfo_1_3(fi_info* info) {
  weft::info_free(info);
}
WEFT_SYMVER_DEFAULT(fi_freeinfo_1_3, fi_freeinfo, "FABRIC_1.3");
WEFT_EXPORT void fi_freeinfo_1_0(void* info) {
  weft::info_free(static_cast<fi_info*>(info));
}
WEFT_SYMVER(fi_freeinfo_1_0, fi_freeinfo, "FABRIC_1.0");
WEFT_EXPORT void fi_freeinfo_1_1(void* info) {
  weft::info_free(static_cast<fi_info*>(info));
}
WEFT_SYMVER(fi_freeinfo_1_1, fi_freeinfo, "FABRIC_1.1");
WEFT_EXPORT void fi_freeinfo_1_2(void* info) {
  weft::info_free(static_cast<fi_info*>(info));
}
WEFT_SYMVER(fi_freeinfo_1_2, fi_freeinfo, "FABRIC_1.2");

// --- fi_dupinfo ----------------------------------------------------------------
WEFT_EXPORT fi_info* fi_dupinfo_1_3(const fi_info* info) {
  return weft::info_dup(info);
}
WEFT_SYMVER_DEFAULT(fi_dupinfo_1_3, fi_dupinfo, "FABRIC_1.3");
WEFT_EXPORT void* fi_dupinfo_1_0(const void* info) {
  return info ? widen_info(info, abi_1_0) : weft::info_alloc();
}
WEFT_SYMVER(fi_dupinfo_1_0, fi_dupinfo, "FABRIC_1.0");
WEFT_EXPORT void* fi_dupinfo_1_1(const void* info) {
  return info ? widen_info(info, abi_1_1) : weft::info_alloc();
}
WEFT_SYMVER(fi_dupinfo_1_1, fi_dupinfo, "FABRIC_1.1");
WEFT_EXPORT void* fi_dupinfo_1_2(const void* info) {
  return info ? widen_info(info, abi_1_2) : weft::info_alloc();
}
WEFT_SYMVER(fi_dupinfo_1_2, fi_dupinfo, "FABRIC_1.2");

// --- fi_fabric -------------------------------------------------------------------
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

// --- unversioned ------------------------------------------------------------------
WEFT_EXPORT uint32_t fi_version(void) {
  return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
}

// fi_open opens named top-level interfaces ("mr_cache", "logging" …): weft
// has none yet.
WEFT_EXPORT int fi_open(uint32_t version, const char* name, void* attr, size_t attr_len, uint64_t flags,
                        fid** fid, void* context) {
  (void)version, (void)attr, (void)attr_len, (void)flags, (void)context;
  if (!name || !fid) return -FI_EINVAL;
  return -FI_ENOSYS;
}
