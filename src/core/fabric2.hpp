// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// libfabric 2.x as weft answers it while it builds against Debian 12's
// libfabric 1.17 headers (the contract; docs/design.md, "libfabric 1.x and
// 2.x"): the API versions weft takes, the names libfabric 1.18 ... 2.6 added
// to the public headers (values as libfabric 2.1's headers define them), and
// the fi_domain_attr layout of each ABI node.
//
// Built against 2.x headers the names below come from them and only the
// layouts are weft's own.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#if FI_MAJOR_VERSION < 2
// Capabilities (fi_getinfo(3), 2.0). Bit 48 was FI_VARIABLE_MSG in 1.x.
inline constexpr uint64_t FI_TAGGED_DIRECTED_RECV = 1ULL << 45;
inline constexpr uint64_t FI_TAGGED_MULTI_RECV = 1ULL << 46;
inline constexpr uint64_t FI_EXACT_DIRECTED_RECV = 1ULL << 48;
// fi_av_insert/remove flag (fi_av(3), 1.20): the address names an auth key.
inline constexpr uint64_t FI_AUTH_KEY = 1ULL << 57;
// fi_domain_attr::auth_key_size (fi_domain(3), 1.20): keys come from the AV.
inline constexpr size_t FI_AV_AUTH_KEY = SIZE_MAX;
// enum fi_progress (2.0)
inline constexpr fi_progress FI_PROGRESS_CONTROL_UNIFIED = static_cast<fi_progress>(3);
// Address formats and protocols (1.18 ... 2.0)
inline constexpr uint32_t FI_ADDR_UCX = 16;
enum : uint32_t {
  FI_PROTO_COLL = 26,
  FI_PROTO_UCX,
  FI_PROTO_SM2,
  FI_PROTO_CXI_RNR,
  FI_PROTO_LPP,
  FI_PROTO_LNX,
};
// fi_ep_attr::mem_tag_format below FI_TAG_MAX_FORMAT names a format (2.0).
enum : uint64_t { FI_TAG_BITS = 0, FI_TAG_MPI = 1, FI_TAG_CCL = 2, FI_TAG_MAX_FORMAT = 1ULL << 16 };
// enum fi_type (1.18 ... 2.0)
inline constexpr int FI_TYPE_AV_ATTR = 29;
inline constexpr int FI_TYPE_CQ_ATTR = 30;
inline constexpr int FI_TYPE_MR_ATTR = 31;
inline constexpr int FI_TYPE_CNTR_ATTR = 32;
inline constexpr int FI_TYPE_CQ_ERR_ENTRY = 33;
// fid classes (2.0)
inline constexpr int FI_CLASS_PEER_CNTR = FI_CLASS_PEER_AV_SET + 1;
inline constexpr int FI_CLASS_PROFILE = FI_CLASS_PEER_AV_SET + 2;
// errno (1.20)
inline constexpr int FI_ENOMR = 270;
// Atomic datatypes and operation (1.20 ... 2.0)
inline constexpr int FI_FLOAT16 = 16;
inline constexpr int FI_BFLOAT16 = 17;
inline constexpr int FI_FLOAT8_E4M3 = 18;
inline constexpr int FI_FLOAT8_E5M2 = 19;
inline constexpr int FI_DIFF = 19;
// Counter events (2.0)
inline constexpr int FI_CNTR_EVENTS_BYTES = 1;
// Memory registration flags (1.20, 2.0)
inline constexpr uint64_t FI_MR_DMABUF = 1ULL << 40;
inline constexpr uint64_t FI_MR_SINGLE_USE = 1ULL << 41;
// Endpoint options (1.18 ... 2.0)
enum : int {
  FI_OPT_CUDA_API_PERMITTED = FI_OPT_XPU_TRIGGER + 1,
  FI_OPT_SHARED_MEMORY_PERMITTED,
  FI_OPT_MAX_MSG_SIZE,
  FI_OPT_MAX_TAGGED_SIZE,
  FI_OPT_MAX_RMA_SIZE,
  FI_OPT_MAX_ATOMIC_SIZE,
  FI_OPT_INJECT_MSG_SIZE,
  FI_OPT_INJECT_TAGGED_SIZE,
  FI_OPT_INJECT_RMA_SIZE,
  FI_OPT_INJECT_ATOMIC_SIZE,
};
#endif

namespace weft {

// ---------------------------------------------------------------- versions

// The newest API weft implements: what fi_version() returns. fi_getinfo and
// fi_fabric take every version up to it (1.0 ... 1.x, 2.0 ... 2.6).
inline constexpr uint32_t api_newest = FI_VERSION(2, 6);

inline bool api_accepted(uint32_t v) {
  return FI_MAJOR(v) >= 1 && !FI_VERSION_LT(api_newest, v);
}
// The 2.x series: its removals and new meanings apply.
inline bool api_v2(uint32_t v) {
  return FI_MAJOR(v) >= 2;
}

// The API of the program's libfabric series as its loaded objects bind it:
// 2.0 or 2.6 where one needs FABRIC_1.8 or 1.9, 1.20 for 1.7, else 0
// (fabric2.cpp; computed once).
uint32_t linked_api();

// The newest API version this process asked for (fi_getinfo, fi_fabric);
// before any, what it binds. fi_tostr of anything but an fi_info (which
// carries its own) is written as the libfabric of that series writes it.
inline std::atomic<uint32_t> caller_api_newest{0};
inline void note_caller_api(uint32_t v) {
  uint32_t cur = caller_api_newest.load(std::memory_order_relaxed);
  while (v > cur && !caller_api_newest.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
inline uint32_t caller_api() {
  const uint32_t v = caller_api_newest.load(std::memory_order_relaxed);
  return v ? v : linked_api();
}

// ---------------------------------------------------------------- layouts

// fi_domain_attr grew at the end in ABI 1.7 (libfabric 1.20), 1.8 (2.0) and
// 1.9 (2.6); the other structures fi_getinfo hands out kept the 1.3 layout,
// which Debian 12's headers describe. Every fi_info weft allocates carries
// the newest domain attributes: `domain_attr_tail` right after the 1.3
// ones.
struct domain_attr_tail {
  size_t max_ep_auth_key;       // ABI 1.7
  uint32_t max_group_id;        // ABI 1.8
  uint64_t max_cntr_value;      // ABI 1.9
  uint64_t max_err_cntr_value;  // ABI 1.9
};

// Sizes of fi_domain_attr per ABI node: where its first missing field starts.
inline constexpr size_t domain_attr_1_0 = offsetof(fi_domain_attr, cntr_cnt);
inline constexpr size_t domain_attr_1_1 = offsetof(fi_domain_attr, tclass);
inline constexpr size_t domain_attr_1_3 = offsetof(fi_domain_attr, tclass) + 8;  // tclass and its padding
inline constexpr size_t domain_attr_1_7 = domain_attr_1_3 + offsetof(domain_attr_tail, max_group_id);
inline constexpr size_t domain_attr_1_8 = domain_attr_1_3 + offsetof(domain_attr_tail, max_cntr_value);
inline constexpr size_t domain_attr_1_9 = domain_attr_1_3 + sizeof(domain_attr_tail);
inline constexpr size_t domain_attr_wide = domain_attr_1_9;  // what weft allocates
static_assert(domain_attr_1_0 == 120 && domain_attr_1_1 == 184 && domain_attr_1_3 == 192);
static_assert(domain_attr_1_7 == 200 && domain_attr_1_8 == 208 && domain_attr_1_9 == 224);

// The tail of a domain attribute weft allocated (never an application's
// own structure: read those through their layout's size).
inline domain_attr_tail& tail_of(fi_domain_attr* a) {
  return *reinterpret_cast<domain_attr_tail*>(reinterpret_cast<char*>(a) + domain_attr_1_3);
}
inline const domain_attr_tail& tail_of(const fi_domain_attr* a) {
  return *reinterpret_cast<const domain_attr_tail*>(reinterpret_cast<const char*>(a) + domain_attr_1_3);
}

// The fi_domain_attr an application of API `v` passes back to weft (to
// fi_domain, fi_endpoint ...): the layout of the headers of that version.
// 2.x requires fi_info structures from fi_allocinfo/fi_dupinfo (fi_getinfo(3));
// a 1.x program may build its own, in its headers' layout.
inline size_t domain_attr_size_for(uint32_t v) {
  if (FI_VERSION_GE(v, FI_VERSION(2, 6))) return domain_attr_1_9;
  if (FI_VERSION_GE(v, FI_VERSION(2, 0))) return domain_attr_1_8;
  if (FI_VERSION_GE(v, FI_VERSION(1, 20))) return domain_attr_1_7;
  return domain_attr_1_3;
}

// fi_cq_err_entry::src_addr (1.20), after the 1.17 structure.
inline constexpr size_t cq_err_src_addr = sizeof(fi_cq_err_entry);
static_assert(cq_err_src_addr == 80);

}  // namespace weft
