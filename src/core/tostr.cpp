// SPDX-License-Identifier: BSD-3-Clause
// fi_tostr / fi_tostr_r: printable forms of libfabric attributes, flags and
// enum values. The output is what Debian's libfabric 1.17 prints, byte for
// byte, because `fi_info -v` and many test suites compare it as text; that
// includes its truncation behaviour, which tests/unit/test_tostr.cpp checks
// differentially against the real library for every length. For a caller
// of API 2.x (an fi_info's api_version; else the newest version the process
// asked for) it is what libfabric 2.1 prints: the names 2.0 removed print as
// unknown ones, the fields it deprecated are left out. The types 1.18 ... 2.0
// added (FI_TYPE_AV_ATTR ... FI_TYPE_CQ_ERR_ENTRY) print in either.
//
// Three ways of appending exist, and each keeps the real library's bound:
//  - text and numbers leave room for one byte more than the terminator, so a
//    full buffer holds at most len - 2 characters;
//  - an address uses all the room left (len - 1 characters);
//  - a fid with its own tostr op is handed the start of the buffer and the
//    room left, and overwrites what came before it.
// A list of flags is written "A, B, " and then loses its final ", ".
#include "core/tostr.hpp"

#include "common/export.hpp"
#include "core/fabric2.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_trigger.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cinttypes>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string_view>

namespace weft {
namespace {

// ---------------------------------------------------------------- output

class out_buf {
public:
  out_buf(char* buf, size_t len) noexcept : buf_(buf), len_(len) {}

  char* start() const noexcept { return buf_; }
  size_t size() const noexcept { return len_; }
  size_t used() const noexcept { return strnlen(buf_, len_); }

  // Text: at most len - 2 characters in the whole buffer.
  void put(std::string_view s) noexcept {
    size_t at = used();
    if (at + 1 >= len_) return;
    size_t room = len_ - 1 - at;  // vsnprintf-style size, terminator included
    size_t n = s.size() < room - 1 ? s.size() : room - 1;
    memcpy(buf_ + at, s.data(), n);
    buf_[at + n] = '\0';
  }

  [[gnu::format(printf, 2, 3)]] void putf(const char* fmt, ...) noexcept {
    size_t at = used();
    if (at + 1 >= len_) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf_ + at, len_ - 1 - at, fmt, ap);
    va_end(ap);
  }

  // Addresses: may fill the buffer up to len - 1 characters.
  [[gnu::format(printf, 2, 3)]] void put_full(const char* fmt, ...) noexcept {
    size_t at = used();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf_ + at, len_ - at, fmt, ap);
    va_end(ap);
  }

  // Ends a list of flags: drop a trailing ", ", when the buffer ends with
  // one (truncation may have cut it, or something longer may follow it).
  void drop_trailing_comma() noexcept {
    size_t n = used();
    if (n >= 2 && buf_[n - 2] == ',' && buf_[n - 1] == ' ') buf_[n - 2] = '\0';
  }

private:
  char* buf_;
  size_t len_;
};

template <typename T>
T load(const void* p, size_t offset = 0) noexcept {
  T v;
  memcpy(&v, static_cast<const unsigned char*>(p) + offset, sizeof v);
  return v;
}

// ---------------------------------------------------------------- enums

// An enum field as the int it holds: callers in C store any value there, and
// loading an out-of-range value as the C++ enum type is undefined.
template <typename E>
int raw_enum(const E& field) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  return load<int>(&field);
}

using names = std::span<const char* const>;

void put_enum(out_buf& out, names table, int value) noexcept {
  if (value >= 0 && static_cast<size_t>(value) < table.size() && table[value])
    out.put(table[value]);
  else
    out.put("Unknown");
}

// Address formats and protocols reserve the high bit for providers (1.x;
// 2.x prints such a value as an unknown one).
void put_enum_prov(out_buf& out, names table, uint32_t value, bool v2) noexcept {
  if ((value & FI_PROV_SPECIFIC) && !v2)
    out.put("Provider specific");
  else
    put_enum(out, table, static_cast<int>(value));
}

constexpr const char* ep_type_names[] = {
    "FI_EP_UNSPEC", "FI_EP_MSG", "FI_EP_DGRAM", "FI_EP_RDM", "FI_EP_SOCK_STREAM", "FI_EP_SOCK_DGRAM",
};
static_assert(FI_EP_SOCK_DGRAM == 5);

constexpr const char* addr_format_names[] = {
    "FI_FORMAT_UNSPEC", "FI_SOCKADDR",   "FI_SOCKADDR_IN", "FI_SOCKADDR_IN6",
    "FI_SOCKADDR_IB",   "FI_ADDR_PSMX",  "FI_ADDR_GNI",    "FI_ADDR_BGQ",
    "FI_ADDR_MLX",      "FI_ADDR_STR",   "FI_ADDR_PSMX2",  "FI_ADDR_IB_UD",
    "FI_ADDR_EFA",      "FI_ADDR_PSMX3", "FI_ADDR_OPX",    "FI_ADDR_CXI",
};
static_assert(FI_ADDR_CXI == 15);

constexpr const char* threading_names[] = {
    "FI_THREAD_UNSPEC", "FI_THREAD_SAFE",       "FI_THREAD_FID",
    "FI_THREAD_DOMAIN", "FI_THREAD_COMPLETION", "FI_THREAD_ENDPOINT",
};
static_assert(FI_THREAD_ENDPOINT == 5);

constexpr const char* progress_names[] = {
    "FI_PROGRESS_UNSPEC",
    "FI_PROGRESS_AUTO",
    "FI_PROGRESS_MANUAL",
};
static_assert(FI_PROGRESS_MANUAL == 2);

constexpr const char* resource_mgmt_names[] = {
    "FI_RM_UNSPEC",
    "FI_RM_DISABLED",
    "FI_RM_ENABLED",
};
static_assert(FI_RM_ENABLED == 2);

// FI_PROTO_MXM (7) and FI_PROTO_MRAIL (17) have no printed name.
constexpr const char* protocol_names[] = {
    "FI_PROTO_UNSPEC",        "FI_PROTO_RDMA_CM_IB_RC",
    "FI_PROTO_IWARP",         "FI_PROTO_IB_UD",
    "FI_PROTO_PSMX",          "FI_PROTO_UDP",
    "FI_PROTO_SOCK_TCP",      nullptr,
    "FI_PROTO_IWARP_RDM",     "FI_PROTO_IB_RDM",
    "FI_PROTO_GNI",           "FI_PROTO_RXM",
    "FI_PROTO_RXD",           "FI_PROTO_MLX",
    "FI_PROTO_NETWORKDIRECT", "FI_PROTO_PSMX2",
    "FI_PROTO_SHM",           nullptr,
    "FI_PROTO_RSTREAM",       "FI_PROTO_RDMA_CM_IB_XRC",
    "FI_PROTO_EFA",           "FI_PROTO_PSMX3",
    "FI_PROTO_RXM_TCP",       "FI_PROTO_OPX",
    "FI_PROTO_CXI",           "FI_PROTO_XNET",
};
static_assert(FI_PROTO_MXM == 7 && FI_PROTO_MRAIL == 17 && FI_PROTO_XNET == 25);

// 2.x: the providers it dropped have no names, those it added have.
constexpr const char* ep_type_names_2[] = {"FI_EP_UNSPEC", "FI_EP_MSG", "FI_EP_DGRAM", "FI_EP_RDM"};
constexpr const char* addr_format_names_2[] = {
    "FI_FORMAT_UNSPEC", "FI_SOCKADDR",   "FI_SOCKADDR_IN", "FI_SOCKADDR_IN6",
    "FI_SOCKADDR_IB",   nullptr,         nullptr,          nullptr,
    "FI_ADDR_MLX",      "FI_ADDR_STR",   "FI_ADDR_PSMX2",  "FI_ADDR_IB_UD",
    "FI_ADDR_EFA",      "FI_ADDR_PSMX3", "FI_ADDR_OPX",    "FI_ADDR_CXI",
    "FI_ADDR_UCX",
};
static_assert(FI_ADDR_UCX == 16);
constexpr const char* threading_names_2[] = {
    "FI_THREAD_UNSPEC", "FI_THREAD_SAFE", nullptr, "FI_THREAD_DOMAIN", "FI_THREAD_COMPLETION",
};
constexpr const char* progress_names_2[] = {
    "FI_PROGRESS_UNSPEC",
    "FI_PROGRESS_AUTO",
    "FI_PROGRESS_MANUAL",
    "FI_PROGRESS_CONTROL_UNIFIED",
};
static_assert(FI_PROGRESS_CONTROL_UNIFIED == 3);
constexpr const char* protocol_names_2[] = {
    "FI_PROTO_UNSPEC",        "FI_PROTO_RDMA_CM_IB_RC",
    "FI_PROTO_IWARP",         "FI_PROTO_IB_UD",
    nullptr,                  "FI_PROTO_UDP",
    "FI_PROTO_SOCK_TCP",      nullptr,
    "FI_PROTO_IWARP_RDM",     "FI_PROTO_IB_RDM",
    nullptr,                  "FI_PROTO_RXM",
    "FI_PROTO_RXD",           "FI_PROTO_MLX",
    "FI_PROTO_NETWORKDIRECT", "FI_PROTO_PSMX2",
    "FI_PROTO_SHM",           nullptr,
    nullptr,                  "FI_PROTO_RDMA_CM_IB_XRC",
    "FI_PROTO_EFA",           "FI_PROTO_PSMX3",
    "FI_PROTO_RXM_TCP",       "FI_PROTO_OPX",
    "FI_PROTO_CXI",           "FI_PROTO_XNET",
    nullptr,                  "FI_PROTO_UCX",
    "FI_PROTO_SM2",           "FI_PROTO_CXI_RNR",
    "FI_PROTO_LPP",           "FI_PROTO_LNX",
};
static_assert(FI_PROTO_COLL == 26 && FI_PROTO_LNX == 31);

constexpr const char* av_type_names[] = {"FI_AV_UNSPEC", "FI_AV_MAP", "FI_AV_TABLE"};
static_assert(FI_AV_TABLE == 2);

constexpr const char* datatype_names[] = {
    "FI_INT8",          "FI_UINT8",
    "FI_INT16",         "FI_UINT16",
    "FI_INT32",         "FI_UINT32",
    "FI_INT64",         "FI_UINT64",
    "FI_FLOAT",         "FI_DOUBLE",
    "FI_FLOAT_COMPLEX", "FI_DOUBLE_COMPLEX",
    "FI_LONG_DOUBLE",   "FI_LONG_DOUBLE_COMPLEX",
    "FI_INT128",        "FI_UINT128",
};
static_assert(FI_UINT128 == 15);

constexpr const char* atomic_op_names[] = {
    "FI_MIN",         "FI_MAX",          "FI_SUM",      "FI_PROD",     "FI_LOR",
    "FI_LAND",        "FI_BOR",          "FI_BAND",     "FI_LXOR",     "FI_BXOR",
    "FI_ATOMIC_READ", "FI_ATOMIC_WRITE", "FI_CSWAP",    "FI_CSWAP_NE", "FI_CSWAP_LE",
    "FI_CSWAP_LT",    "FI_CSWAP_GE",     "FI_CSWAP_GT", "FI_MSWAP",
};
static_assert(FI_MSWAP == 18);

constexpr const char* eq_event_names[] = {
    "FI_NOTIFY",      "FI_CONNREQ",     "FI_CONNECTED",     "FI_SHUTDOWN",
    "FI_MR_COMPLETE", "FI_AV_COMPLETE", "FI_JOIN_COMPLETE",
};
static_assert(FI_NOTIFY == 0 && FI_JOIN_COMPLETE == 6);

constexpr const char* op_type_names[] = {
    "FI_OP_RECV",           "FI_OP_SEND",     "FI_OP_TRECV",    "FI_OP_TSEND",
    "FI_OP_READ",           "FI_OP_WRITE",    "FI_OP_ATOMIC",   "FI_OP_FETCH_ATOMIC",
    "FI_OP_COMPARE_ATOMIC", "FI_OP_CNTR_SET", "FI_OP_CNTR_ADD",
};
static_assert(FI_OP_CNTR_ADD == 10);

constexpr const char* collective_op_names[] = {
    "FI_BARRIER",        "FI_BROADCAST", "FI_ALLTOALL", "FI_ALLREDUCE", "FI_ALLGATHER",
    "FI_REDUCE_SCATTER", "FI_REDUCE",    "FI_SCATTER",  "FI_GATHER",
};
static_assert(FI_GATHER == 8);

constexpr const char* hmem_iface_names[] = {
    "FI_HMEM_SYSTEM", "FI_HMEM_CUDA", "FI_HMEM_ROCR", "FI_HMEM_ZE", "FI_HMEM_NEURON", "FI_HMEM_SYNAPSEAI",
};
static_assert(FI_HMEM_SYNAPSEAI == 5);

constexpr const char* wait_obj_names[] = {
    "FI_WAIT_NONE", "FI_WAIT_UNSPEC", "FI_WAIT_SET", "FI_WAIT_FD", "FI_WAIT_MUTEX_COND", "FI_WAIT_YIELD",
    "FI_WAIT_POLLFD",
};
static_assert(FI_WAIT_POLLFD == 6);

constexpr const char* cq_wait_cond_names[] = {"FI_CQ_COND_NONE", "FI_CQ_COND_THRESHOLD"};
static_assert(FI_CQ_COND_THRESHOLD == 1);

constexpr const char* cntr_events_names[] = {"FI_CNTR_EVENTS_COMP", "FI_CNTR_EVENTS_BYTES"};
static_assert(FI_CNTR_EVENTS_COMP == 0 && FI_CNTR_EVENTS_BYTES == 1);

constexpr const char* cq_format_names[] = {
    "FI_CQ_FORMAT_UNSPEC", "FI_CQ_FORMAT_CONTEXT", "FI_CQ_FORMAT_MSG",
    "FI_CQ_FORMAT_DATA",   "FI_CQ_FORMAT_TAGGED",
};
static_assert(FI_CQ_FORMAT_TAGGED == 4);

// enum fi_log_level and enum fi_log_subsys (rdma/providers/fi_log.h).
constexpr const char* log_level_names[] = {"warn", "trace", "info", "debug"};

constexpr const char* log_subsys_names[] = {
    "core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr",
};

// ---------------------------------------------------------------- flags

struct flag_name {
  uint64_t bit;
  const char* name;
};
using flag_names = std::span<const flag_name>;

#define WEFT_FLAG(f) \
  flag_name {        \
    f, #f            \
  }

// Each list is in the order the real library prints it (not bit order).
constexpr flag_name caps_names[] = {
    WEFT_FLAG(FI_MSG),          WEFT_FLAG(FI_RMA),
    WEFT_FLAG(FI_TAGGED),       WEFT_FLAG(FI_ATOMIC),
    WEFT_FLAG(FI_MULTICAST),    WEFT_FLAG(FI_COLLECTIVE),
    WEFT_FLAG(FI_READ),         WEFT_FLAG(FI_WRITE),
    WEFT_FLAG(FI_RECV),         WEFT_FLAG(FI_SEND),
    WEFT_FLAG(FI_REMOTE_READ),  WEFT_FLAG(FI_REMOTE_WRITE),
    WEFT_FLAG(FI_MULTI_RECV),   WEFT_FLAG(FI_REMOTE_CQ_DATA),
    WEFT_FLAG(FI_TRIGGER),      WEFT_FLAG(FI_FENCE),
    WEFT_FLAG(FI_VARIABLE_MSG), WEFT_FLAG(FI_RMA_PMEM),
    WEFT_FLAG(FI_SOURCE_ERR),   WEFT_FLAG(FI_LOCAL_COMM),
    WEFT_FLAG(FI_REMOTE_COMM),  WEFT_FLAG(FI_SHARED_AV),
    WEFT_FLAG(FI_RMA_EVENT),    WEFT_FLAG(FI_SOURCE),
    WEFT_FLAG(FI_NAMED_RX_CTX), WEFT_FLAG(FI_DIRECTED_RECV),
    WEFT_FLAG(FI_HMEM),
};

// 2.x: no FI_VARIABLE_MSG; FI_AV_USER_ID and FI_PEER print. (It prints
// none of FI_TAGGED_DIRECTED_RECV, FI_TAGGED_MULTI_RECV and
// FI_EXACT_DIRECTED_RECV.)
constexpr flag_name caps_names_2[] = {
    WEFT_FLAG(FI_MSG),          WEFT_FLAG(FI_RMA),           WEFT_FLAG(FI_TAGGED),
    WEFT_FLAG(FI_ATOMIC),       WEFT_FLAG(FI_MULTICAST),     WEFT_FLAG(FI_COLLECTIVE),
    WEFT_FLAG(FI_READ),         WEFT_FLAG(FI_WRITE),         WEFT_FLAG(FI_RECV),
    WEFT_FLAG(FI_SEND),         WEFT_FLAG(FI_REMOTE_READ),   WEFT_FLAG(FI_REMOTE_WRITE),
    WEFT_FLAG(FI_MULTI_RECV),   WEFT_FLAG(FI_REMOTE_CQ_DATA), WEFT_FLAG(FI_TRIGGER),
    WEFT_FLAG(FI_FENCE),        WEFT_FLAG(FI_RMA_PMEM),      WEFT_FLAG(FI_SOURCE_ERR),
    WEFT_FLAG(FI_LOCAL_COMM),   WEFT_FLAG(FI_REMOTE_COMM),   WEFT_FLAG(FI_SHARED_AV),
    WEFT_FLAG(FI_RMA_EVENT),    WEFT_FLAG(FI_SOURCE),        WEFT_FLAG(FI_NAMED_RX_CTX),
    WEFT_FLAG(FI_DIRECTED_RECV), WEFT_FLAG(FI_AV_USER_ID),   WEFT_FLAG(FI_PEER),
    WEFT_FLAG(FI_HMEM),
};

constexpr flag_name op_flags_names[] = {
    WEFT_FLAG(FI_MULTICAST),
    WEFT_FLAG(FI_MULTI_RECV),
    WEFT_FLAG(FI_REMOTE_CQ_DATA),
    WEFT_FLAG(FI_MORE),
    WEFT_FLAG(FI_PEEK),
    WEFT_FLAG(FI_TRIGGER),
    WEFT_FLAG(FI_FENCE),
    WEFT_FLAG(FI_COMPLETION),
    WEFT_FLAG(FI_INJECT),
    WEFT_FLAG(FI_INJECT_COMPLETE),
    WEFT_FLAG(FI_TRANSMIT_COMPLETE),
    WEFT_FLAG(FI_DELIVERY_COMPLETE),
    WEFT_FLAG(FI_MATCH_COMPLETE),
    WEFT_FLAG(FI_AFFINITY),
    WEFT_FLAG(FI_CLAIM),
    WEFT_FLAG(FI_DISCARD),
};

constexpr flag_name msg_order_names[] = {
    WEFT_FLAG(FI_ORDER_RAR),        WEFT_FLAG(FI_ORDER_RAW),        WEFT_FLAG(FI_ORDER_RAS),
    WEFT_FLAG(FI_ORDER_WAR),        WEFT_FLAG(FI_ORDER_WAW),        WEFT_FLAG(FI_ORDER_WAS),
    WEFT_FLAG(FI_ORDER_SAR),        WEFT_FLAG(FI_ORDER_SAW),        WEFT_FLAG(FI_ORDER_SAS),
    WEFT_FLAG(FI_ORDER_RMA_RAR),    WEFT_FLAG(FI_ORDER_RMA_RAW),    WEFT_FLAG(FI_ORDER_RMA_WAR),
    WEFT_FLAG(FI_ORDER_RMA_WAW),    WEFT_FLAG(FI_ORDER_ATOMIC_RAR), WEFT_FLAG(FI_ORDER_ATOMIC_RAW),
    WEFT_FLAG(FI_ORDER_ATOMIC_WAR), WEFT_FLAG(FI_ORDER_ATOMIC_WAW),
};

constexpr flag_name mode_names[] = {
    WEFT_FLAG(FI_CONTEXT),         WEFT_FLAG(FI_MSG_PREFIX), WEFT_FLAG(FI_ASYNC_IOV),
    WEFT_FLAG(FI_RX_CQ_DATA),      WEFT_FLAG(FI_LOCAL_MR),   WEFT_FLAG(FI_NOTIFY_FLAGS_ONLY),
    WEFT_FLAG(FI_RESTRICTED_COMP), WEFT_FLAG(FI_CONTEXT2),   WEFT_FLAG(FI_BUFFERED_RECV),
};

// 2.x dropped FI_NOTIFY_FLAGS_ONLY, FI_RESTRICTED_COMP and FI_BUFFERED_RECV.
constexpr flag_name mode_names_2[] = {
    WEFT_FLAG(FI_CONTEXT), WEFT_FLAG(FI_MSG_PREFIX), WEFT_FLAG(FI_ASYNC_IOV),
    WEFT_FLAG(FI_RX_CQ_DATA), WEFT_FLAG(FI_LOCAL_MR), WEFT_FLAG(FI_CONTEXT2),
};

constexpr flag_name av_flags_names[] = {WEFT_FLAG(FI_EVENT), WEFT_FLAG(FI_READ), WEFT_FLAG(FI_SYMMETRIC)};
constexpr flag_name cq_flags_names[] = {WEFT_FLAG(FI_AFFINITY)};
constexpr flag_name mr_access_names[] = {
    WEFT_FLAG(FI_RECV),         WEFT_FLAG(FI_SEND),          WEFT_FLAG(FI_READ),       WEFT_FLAG(FI_WRITE),
    WEFT_FLAG(FI_REMOTE_READ),  WEFT_FLAG(FI_REMOTE_WRITE),  WEFT_FLAG(FI_COLLECTIVE),
};

constexpr flag_name cq_event_flags_names[] = {
    WEFT_FLAG(FI_SEND),
    WEFT_FLAG(FI_RECV),
    WEFT_FLAG(FI_RMA),
    WEFT_FLAG(FI_ATOMIC),
    WEFT_FLAG(FI_MSG),
    WEFT_FLAG(FI_TAGGED),
    WEFT_FLAG(FI_READ),
    WEFT_FLAG(FI_WRITE),
    WEFT_FLAG(FI_REMOTE_READ),
    WEFT_FLAG(FI_REMOTE_WRITE),
    WEFT_FLAG(FI_REMOTE_CQ_DATA),
    WEFT_FLAG(FI_MULTI_RECV),
    WEFT_FLAG(FI_MORE),
    WEFT_FLAG(FI_CLAIM),
};

constexpr flag_name mr_mode_names[] = {
    WEFT_FLAG(FI_MR_BASIC),    WEFT_FLAG(FI_MR_SCALABLE),   WEFT_FLAG(FI_MR_LOCAL),
    WEFT_FLAG(FI_MR_RAW),      WEFT_FLAG(FI_MR_VIRT_ADDR),  WEFT_FLAG(FI_MR_ALLOCATED),
    WEFT_FLAG(FI_MR_PROV_KEY), WEFT_FLAG(FI_MR_MMU_NOTIFY), WEFT_FLAG(FI_MR_RMA_EVENT),
    WEFT_FLAG(FI_MR_ENDPOINT), WEFT_FLAG(FI_MR_HMEM),       WEFT_FLAG(FI_MR_COLLECTIVE),
};

#undef WEFT_FLAG

// The names of one series of the API.
struct dialect {
  bool v2;
  names ep_type, addr_format, threading, progress, protocol;
  flag_names caps, mode;
};
constexpr dialect dialect_1{false,          ep_type_names,   addr_format_names, threading_names,
                            progress_names, protocol_names,  caps_names,        mode_names};
constexpr dialect dialect_2{true,             ep_type_names_2,   addr_format_names_2, threading_names_2,
                            progress_names_2, protocol_names_2,  caps_names_2,        mode_names_2};

const dialect& dialect_of(uint32_t api_version) noexcept {
  return api_v2(api_version) ? dialect_2 : dialect_1;
}

void put_flags(out_buf& out, flag_names table, uint64_t flags) noexcept {
  for (const flag_name& f : table) {
    if (flags & f.bit) {
      out.put(f.name);
      out.put(", ");
    }
  }
  out.drop_trailing_comma();
}

// Completion order is not a set of bits: strict ordering is all of the
// FI_ORDER_STRICT bits together, and none of them reads FI_ORDER_NONE.
void put_comp_order(out_buf& out, uint64_t flags) noexcept {
  if ((flags & FI_ORDER_STRICT) == 0) out.put("FI_ORDER_NONE, ");
  if ((flags & FI_ORDER_STRICT) == FI_ORDER_STRICT) out.put("FI_ORDER_STRICT, ");
  if (flags & FI_ORDER_DATA) out.put("FI_ORDER_DATA, ");
  out.drop_trailing_comma();
}

// ---------------------------------------------------------------- addresses

// sockaddr_ib from <rdma/rdma_cm.h>, which weft does not depend on.
struct sockaddr_ib_layout {
  static constexpr size_t pkey = 2, gid = 8, sid = 24, scope_id = 40;
};

void put_ntop6(char (&str)[INET6_ADDRSTRLEN], const void* raw) noexcept {
  memset(str, 0, sizeof str);
  inet_ntop(AF_INET6, raw, str, sizeof str);
}

// An address printed according to the format it claims; families other than
// IPv4/IPv6 in the sockaddr formats, and unknown formats, print nothing (in
// 2.x the formats of the providers it dropped too).
void put_addr(out_buf& out, uint32_t format, const void* addr, bool v2) noexcept {
  if (!addr) {
    out.put("(null)");
    return;
  }
  const auto* bytes = static_cast<const unsigned char*>(addr);
  char str[INET6_ADDRSTRLEN];

  if (format == FI_SOCKADDR) {
    switch (load<sa_family_t>(addr)) {
      case AF_INET:
        format = FI_SOCKADDR_IN;
        break;
      case AF_INET6:
        format = FI_SOCKADDR_IN6;
        break;
      default:
        return;
    }
  }

  switch (format) {
    case FI_SOCKADDR_IN:
    case FI_SOCKADDR_IN6: {
      // The family in the address, not the format, picks how to read the
      // bytes at the format's address offset (as the real library does).
      bool in6 = format == FI_SOCKADDR_IN6;
      size_t at = in6 ? offsetof(sockaddr_in6, sin6_addr) : offsetof(sockaddr_in, sin_addr);
      int family = load<sa_family_t>(addr);
      if (!inet_ntop(family, bytes + at, str, sizeof str)) return;
      unsigned port = ntohs(load<uint16_t>(addr, offsetof(sockaddr_in, sin_port)));
      if (in6)
        out.put_full("fi_sockaddr_in6://[%s]:%u", str, port);
      else
        out.put_full("fi_sockaddr_in://%s:%u", str, port);
      break;
    }
    case FI_SOCKADDR_IB: {
      using ib = sockaddr_ib_layout;
      put_ntop6(str, bytes + ib::gid);
      unsigned pkey = ntohs(load<uint16_t>(addr, ib::pkey));
      uint64_t sid = be64toh(load<uint64_t>(addr, ib::sid));
      uint64_t scope = be64toh(load<uint64_t>(addr, ib::scope_id));
      out.put_full("fi_sockaddr_ib://[%s]:0x%x:0x%x:0x%x", str, pkey,
                   static_cast<unsigned>((sid >> 16) & 0xfff), static_cast<unsigned>(scope & 0xff));
      break;
    }
    case FI_ADDR_PSMX:
      if (!v2) out.put_full("fi_addr_psmx://%" PRIx64, load<uint64_t>(addr));
      break;
    case FI_ADDR_GNI:
      if (!v2) out.put_full("fi_addr_gni://%" PRIx64, load<uint64_t>(addr));
      break;
    case FI_ADDR_BGQ:
      if (!v2) out.put_full("fi_addr_bgq://%p", addr);
      break;
    case FI_ADDR_UCX:
      if (v2) out.put_full("fi_addr_ucx://%p", addr);
      break;
    case FI_ADDR_MLX:
      out.put_full("fi_addr_mlx://%p", addr);
      break;
    case FI_ADDR_STR:
      out.put_full("%s", static_cast<const char*>(addr));
      break;
    case FI_ADDR_PSMX2:
      out.put_full("fi_addr_psmx2://%" PRIx64 ":%" PRIx64, load<uint64_t>(addr), load<uint64_t>(addr, 8));
      break;
    case FI_ADDR_PSMX3:
      out.put_full("fi_addr_psmx3://%" PRIx64 ":%" PRIx64 ":%" PRIx64 ":%" PRIx64, load<uint64_t>(addr),
                   load<uint64_t>(addr, 8), load<uint64_t>(addr, 16), load<uint64_t>(addr, 24));
      break;
    case FI_ADDR_IB_UD:
      // GID, QPN, LID, P_Key, SL.
      put_ntop6(str, addr);
      out.put_full("fi_addr_ib_ud://%s:%" PRIx32 "/%x/%x/%x", str, load<uint32_t>(addr, 16),
                   unsigned{load<uint16_t>(addr, 20)}, unsigned{load<uint16_t>(addr, 22)},
                   unsigned{load<uint8_t>(addr, 26)});
      break;
    case FI_ADDR_EFA:
      // GID, QPN, QKey.
      put_ntop6(str, addr);
      out.put_full("fi_addr_efa://[%s]:%u:%" PRIu32, str, unsigned{load<uint16_t>(addr, 16)},
                   load<uint32_t>(addr, 20));
      break;
    case FI_ADDR_OPX:
      out.put_full("fi_addr_opx://%016" PRIx64, load<uint64_t>(addr));
      break;
    case FI_ADDR_CXI:
      out.put_full("fi_addr_cxi://0x%08" PRIx32, load<uint32_t>(addr));
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------- fids

void put_fid(out_buf& out, const char* label, const fid* f) noexcept {
  if (f && FI_CHECK_OP(f->ops, struct fi_ops, tostr)) {
    // The object's own tostr gets the start of the buffer: what was
    // printed before it is overwritten, as in the real library.
    f->ops->tostr(f, out.start(), out.size() - out.used());
    return;
  }
  out.putf("%s%p\n", label, static_cast<const void*>(f));
}

// ---------------------------------------------------------------- attributes

// `head` indents the "fi_x_attr:" line, `tab` the fields below it.
struct indent {
  const char* head;
  const char* tab;
};

void put_flag_field(out_buf& out, const char* tab, const char* name, flag_names table,
                    uint64_t flags) noexcept {
  out.putf("%s%s: [ ", tab, name);
  put_flags(out, table, flags);
  out.put(" ]\n");
}

bool put_attr_head(out_buf& out, indent in, const char* name, const void* attr) noexcept {
  out.putf("%s%s:", in.head, name);
  if (!attr) {
    out.put(" (null)\n");
    return false;
  }
  out.put("\n");
  return true;
}

// 2.x leaves out the fields it deprecated: comp_order, total_buffered_recv.
void put_tx_attr(out_buf& out, const dialect& d, indent in, const fi_tx_attr* a) noexcept {
  if (!put_attr_head(out, in, "fi_tx_attr", a)) return;
  const char* t = in.tab;
  put_flag_field(out, t, "caps", d.caps, a->caps);
  put_flag_field(out, t, "mode", d.mode, a->mode);
  put_flag_field(out, t, "op_flags", op_flags_names, a->op_flags);
  put_flag_field(out, t, "msg_order", msg_order_names, a->msg_order);
  if (!d.v2) {
    out.putf("%scomp_order: [ ", t);
    put_comp_order(out, a->comp_order);
    out.put(" ]\n");
  }
  out.putf("%sinject_size: %zu\n", t, a->inject_size);
  out.putf("%ssize: %zu\n", t, a->size);
  out.putf("%siov_limit: %zu\n", t, a->iov_limit);
  out.putf("%srma_iov_limit: %zu\n", t, a->rma_iov_limit);
  out.putf("%stclass: 0x%" PRIx32 "\n", t, a->tclass);
}

void put_rx_attr(out_buf& out, const dialect& d, indent in, const fi_rx_attr* a) noexcept {
  if (!put_attr_head(out, in, "fi_rx_attr", a)) return;
  const char* t = in.tab;
  put_flag_field(out, t, "caps", d.caps, a->caps);
  put_flag_field(out, t, "mode", d.mode, a->mode);
  put_flag_field(out, t, "op_flags", op_flags_names, a->op_flags);
  put_flag_field(out, t, "msg_order", msg_order_names, a->msg_order);
  if (!d.v2) {
    out.putf("%scomp_order: [ ", t);
    put_comp_order(out, a->comp_order);
    out.put(" ]\n");
    out.putf("%stotal_buffered_recv: %zu\n", t, a->total_buffered_recv);
  }
  out.putf("%ssize: %zu\n", t, a->size);
  out.putf("%siov_limit: %zu\n", t, a->iov_limit);
}

// An endpoint's context count may be the FI_SHARED_CONTEXT marker.
void put_ctx_cnt(out_buf& out, const char* tab, const char* name, size_t cnt) noexcept {
  if (cnt == FI_SHARED_CONTEXT)
    out.putf("%s%s: FI_SHARED_CONTEXT\n", tab, name);
  else
    out.putf("%s%s: %zu\n", tab, name, cnt);
}

void put_ep_attr(out_buf& out, const dialect& d, indent in, const fi_ep_attr* a) noexcept {
  if (!put_attr_head(out, in, "fi_ep_attr", a)) return;
  const char* t = in.tab;
  out.putf("%stype: ", t);
  put_enum(out, d.ep_type, raw_enum(a->type));
  out.put("\n");
  out.putf("%sprotocol: ", t);
  put_enum_prov(out, d.protocol, a->protocol, d.v2);
  out.put("\n");
  // Printed signed, as the real library does.
  out.putf("%sprotocol_version: %d\n", t, static_cast<int>(a->protocol_version));
  out.putf("%smax_msg_size: %zu\n", t, a->max_msg_size);
  out.putf("%smsg_prefix_size: %zu\n", t, a->msg_prefix_size);
  out.putf("%smax_order_raw_size: %zu\n", t, a->max_order_raw_size);
  out.putf("%smax_order_war_size: %zu\n", t, a->max_order_war_size);
  out.putf("%smax_order_waw_size: %zu\n", t, a->max_order_waw_size);
  out.putf("%smem_tag_format: 0x%016" PRIx64 "\n", t, a->mem_tag_format);
  put_ctx_cnt(out, t, "tx_ctx_cnt", a->tx_ctx_cnt);
  put_ctx_cnt(out, t, "rx_ctx_cnt", a->rx_ctx_cnt);
  out.putf("%sauth_key_size: %zu\n", t, a->auth_key_size);
}

// 2.x prints one progress model, data_progress (its `progress`).
void put_domain_attr(out_buf& out, const dialect& d, indent in, const fi_domain_attr* a) noexcept {
  if (!put_attr_head(out, in, "fi_domain_attr", a)) return;
  const char* t = in.tab;
  // The real library prints the low 32 bits of the domain pointer.
  out.putf("%sdomain: 0x%" PRIx32 "\n", t, static_cast<uint32_t>(reinterpret_cast<uintptr_t>(a->domain)));
  out.putf("%sname: %s\n", t, a->name ? a->name : "(null)");
  out.putf("%sthreading: ", t);
  put_enum(out, d.threading, raw_enum(a->threading));
  out.put("\n");
  if (d.v2) {
    out.putf("%sprogress: ", t);
  } else {
    out.putf("%scontrol_progress: ", t);
    put_enum(out, d.progress, raw_enum(a->control_progress));
    out.put("\n");
    out.putf("%sdata_progress: ", t);
  }
  put_enum(out, d.progress, raw_enum(a->data_progress));
  out.put("\n");
  out.putf("%sresource_mgmt: ", t);
  put_enum(out, resource_mgmt_names, raw_enum(a->resource_mgmt));
  out.put("\n");
  out.putf("%sav_type: ", t);
  put_enum(out, av_type_names, raw_enum(a->av_type));
  out.put("\n");
  put_flag_field(out, t, "mr_mode", mr_mode_names, static_cast<uint32_t>(a->mr_mode));
  out.putf("%smr_key_size: %zu\n", t, a->mr_key_size);
  out.putf("%scq_data_size: %zu\n", t, a->cq_data_size);
  out.putf("%scq_cnt: %zu\n", t, a->cq_cnt);
  out.putf("%sep_cnt: %zu\n", t, a->ep_cnt);
  out.putf("%stx_ctx_cnt: %zu\n", t, a->tx_ctx_cnt);
  out.putf("%srx_ctx_cnt: %zu\n", t, a->rx_ctx_cnt);
  out.putf("%smax_ep_tx_ctx: %zu\n", t, a->max_ep_tx_ctx);
  out.putf("%smax_ep_rx_ctx: %zu\n", t, a->max_ep_rx_ctx);
  out.putf("%smax_ep_stx_ctx: %zu\n", t, a->max_ep_stx_ctx);
  out.putf("%smax_ep_srx_ctx: %zu\n", t, a->max_ep_srx_ctx);
  out.putf("%scntr_cnt: %zu\n", t, a->cntr_cnt);
  out.putf("%smr_iov_limit: %zu\n", t, a->mr_iov_limit);
  put_flag_field(out, t, "caps", d.caps, a->caps);
  put_flag_field(out, t, "mode", d.mode, a->mode);
  out.putf("%sauth_key_size: %zu\n", t, a->auth_key_size);
  out.putf("%smax_err_data: %zu\n", t, a->max_err_data);
  out.putf("%smr_cnt: %zu\n", t, a->mr_cnt);
  out.putf("%stclass: 0x%" PRIx32 "\n", t, a->tclass);
}

void put_fabric_attr(out_buf& out, indent in, const fi_fabric_attr* a) noexcept {
  if (!put_attr_head(out, in, "fi_fabric_attr", a)) return;
  const char* t = in.tab;
  out.putf("%sname: %s\n", t, a->name ? a->name : "(null)");
  out.putf("%sprov_name: %s\n", t, a->prov_name ? a->prov_name : "(null)");
  out.putf("%sprov_version: %" PRIu32 ".%" PRIu32 "\n", t, FI_MAJOR(a->prov_version),
           FI_MINOR(a->prov_version));
  out.putf("%sapi_version: %" PRIu32 ".%" PRIu32 "\n", t, FI_MAJOR(a->api_version), FI_MINOR(a->api_version));
}

// An fi_info carries the API version it was asked for.
void put_info(out_buf& out, const fi_info* info) noexcept {
  constexpr indent top{"", "    "};
  constexpr indent nested{"    ", "        "};
  const dialect& d = info->fabric_attr ? dialect_of(info->fabric_attr->api_version) : dialect_of(caller_api());
  out.put("fi_info:\n");
  put_flag_field(out, top.tab, "caps", d.caps, info->caps);
  put_flag_field(out, top.tab, "mode", d.mode, info->mode);
  out.put("    addr_format: ");
  put_enum_prov(out, d.addr_format, info->addr_format, d.v2);
  out.put("\n");
  out.putf("    src_addrlen: %zu\n", info->src_addrlen);
  out.putf("    dest_addrlen: %zu\n", info->dest_addrlen);
  out.put("    src_addr: ");
  put_addr(out, info->addr_format, info->src_addr, d.v2);
  out.put("\n");
  out.put("    dest_addr: ");
  put_addr(out, info->addr_format, info->dest_addr, d.v2);
  out.put("\n");
  put_fid(out, "    handle: ", info->handle);
  put_tx_attr(out, d, nested, info->tx_attr);
  put_rx_attr(out, d, nested, info->rx_attr);
  put_ep_attr(out, d, nested, info->ep_attr);
  put_domain_attr(out, d, nested, info->domain_attr);
  put_fabric_attr(out, nested, info->fabric_attr);
  put_fid(out, "    nic: ", info->nic ? &info->nic->fid : nullptr);
}

// The structures 1.18 ... 2.0 gave printed forms (as libfabric 2.1 prints
// them, but prov_errno is the entry's own).
void put_av_attr(out_buf& out, const fi_av_attr* a) noexcept {
  if (!put_attr_head(out, {"", ""}, "fi_av_attr", a)) return;
  out.put("    type: ");
  put_enum(out, av_type_names, raw_enum(a->type));
  out.put("\n");
  out.putf("    count: %zu\n", a->count);
  out.putf("    ep_per_node: %zu\n", a->ep_per_node);
  out.putf("    name: %s\n", a->name ? a->name : "(null)");
  put_flag_field(out, "    ", "flags", av_flags_names, a->flags);
}

void put_cq_attr(out_buf& out, const fi_cq_attr* a) noexcept {
  if (!put_attr_head(out, {"", ""}, "fi_cq_attr", a)) return;
  out.putf("    size: %zu\n", a->size);
  put_flag_field(out, "    ", "flags", cq_flags_names, a->flags);
  out.put("    format: ");
  put_enum(out, cq_format_names, raw_enum(a->format));
  out.put("\n    wait_obj: ");
  put_enum(out, wait_obj_names, raw_enum(a->wait_obj));
  out.put("\n");
  out.putf("    signaling_vector: %d\n", a->signaling_vector);
  out.put("    wait_cond: ");
  put_enum(out, cq_wait_cond_names, raw_enum(a->wait_cond));
  out.put("\n");
}

void put_mr_attr(out_buf& out, const fi_mr_attr* a) noexcept {
  if (!put_attr_head(out, {"", ""}, "fi_mr_attr", a)) return;
  out.putf("    mr_iov: %p\n", static_cast<const void*>(a->mr_iov));
  out.putf("    iov_count: %zu\n", a->iov_count);
  put_flag_field(out, "    ", "access", mr_access_names, a->access);
  out.putf("    offset: 0x%" PRIx64 "\n", a->offset);
  out.putf("    requested_key: 0x%" PRIx64 "\n", a->requested_key);
  out.putf("    context: %p\n", a->context);
  out.putf("    auth_key_size: %zu\n", a->auth_key_size);
  out.put("    iface: ");
  put_enum(out, hmem_iface_names, raw_enum(a->iface));
  out.put("\n");
}

void put_cntr_attr(out_buf& out, const fi_cntr_attr* a) noexcept {
  if (!put_attr_head(out, {"", ""}, "fi_cntr_attr", a)) return;
  out.put("    events: ");
  put_enum(out, cntr_events_names, raw_enum(a->events));
  out.put("\n    wait_obj: ");
  put_enum(out, wait_obj_names, raw_enum(a->wait_obj));
  out.put("\n");
  out.putf("    flags: 0x%" PRIx64 "\n", a->flags);
}

void put_cq_err_entry(out_buf& out, const fi_cq_err_entry* e) noexcept {
  if (!put_attr_head(out, {"", ""}, "fi_cq_err_entry", e)) return;
  out.putf("    op_context: %p\n", e->op_context);
  out.putf("    flags: 0x%" PRIx64 "\n", e->flags);
  out.putf("    len: %zu\n", e->len);
  out.putf("    buf: %p\n", e->buf);
  out.putf("    data: %" PRIu64 "\n", e->data);
  out.putf("    tag: 0x%" PRIx64 "\n", e->tag);
  out.putf("    olen: %zu\n", e->olen);
  out.putf("    err: %d\n", e->err);
  out.putf("    prov_errno: %d\n", e->prov_errno);
  out.putf("    err_data: %p\n", e->err_data);
  out.putf("    err_data_size: %zu\n", e->err_data_size);
}

// ---------------------------------------------------------------- dispatch

void format(out_buf& out, const void* data, int type) noexcept {
  constexpr indent top{"", "    "};
  const dialect& d = dialect_of(caller_api());
  auto u64 = [data] { return load<uint64_t>(data); };
  auto i32 = [data] { return load<int>(data); };
  auto u32 = [data] { return load<uint32_t>(data); };

  switch (type) {
    case FI_TYPE_INFO:
      put_info(out, static_cast<const fi_info*>(data));
      break;
    case FI_TYPE_EP_TYPE:
      put_enum(out, d.ep_type, i32());
      break;
    case FI_TYPE_CAPS:
      put_flags(out, d.caps, u64());
      break;
    case FI_TYPE_OP_FLAGS:
      put_flags(out, op_flags_names, u64());
      break;
    case FI_TYPE_ADDR_FORMAT:
      put_enum_prov(out, d.addr_format, u32(), d.v2);
      break;
    case FI_TYPE_TX_ATTR:
      put_tx_attr(out, d, top, static_cast<const fi_tx_attr*>(data));
      break;
    case FI_TYPE_RX_ATTR:
      put_rx_attr(out, d, top, static_cast<const fi_rx_attr*>(data));
      break;
    case FI_TYPE_EP_ATTR:
      put_ep_attr(out, d, top, static_cast<const fi_ep_attr*>(data));
      break;
    case FI_TYPE_DOMAIN_ATTR:
      put_domain_attr(out, d, top, static_cast<const fi_domain_attr*>(data));
      break;
    case FI_TYPE_FABRIC_ATTR:
      put_fabric_attr(out, top, static_cast<const fi_fabric_attr*>(data));
      break;
    case FI_TYPE_THREADING:
      put_enum(out, d.threading, i32());
      break;
    case FI_TYPE_PROGRESS:
      put_enum(out, d.progress, i32());
      break;
    case FI_TYPE_PROTOCOL:
      put_enum_prov(out, d.protocol, u32(), d.v2);
      break;
    case FI_TYPE_MSG_ORDER:
      put_flags(out, msg_order_names, u64());
      break;
    case FI_TYPE_MODE:
      put_flags(out, d.mode, u64());
      break;
    case FI_TYPE_AV_TYPE:
      put_enum(out, av_type_names, i32());
      break;
    case FI_TYPE_ATOMIC_TYPE:
      put_enum(out, datatype_names, i32());
      break;
    case FI_TYPE_ATOMIC_OP:
      put_enum(out, atomic_op_names, i32());
      break;
    case FI_TYPE_VERSION:
      // The library's version: 1.17.0 as Debian 12's, or the 2.x API weft implements.
      if (d.v2)
        out.putf("%u.%u.0", FI_MAJOR(api_newest), FI_MINOR(api_newest));
      else
        out.putf("%d.%d.%d", FI_MAJOR_VERSION, FI_MINOR_VERSION, FI_REVISION_VERSION);
      break;
    case FI_TYPE_EQ_EVENT:
      put_enum(out, eq_event_names, i32());
      break;
    case FI_TYPE_CQ_EVENT_FLAGS:
      put_flags(out, cq_event_flags_names, u64());
      break;
    // mr_mode is an int in fi_domain_attr.
    case FI_TYPE_MR_MODE:
      put_flags(out, mr_mode_names, u32());
      break;
    case FI_TYPE_OP_TYPE:
      put_enum(out, op_type_names, i32());
      break;
    case FI_TYPE_FID:
      put_fid(out, "fid: ", static_cast<const fid*>(data));
      break;
    case FI_TYPE_COLLECTIVE_OP:
      put_enum(out, collective_op_names, i32());
      break;
    case FI_TYPE_HMEM_IFACE:
      put_enum(out, hmem_iface_names, i32());
      break;
    case FI_TYPE_CQ_FORMAT:
      put_enum(out, cq_format_names, i32());
      break;
    case FI_TYPE_LOG_LEVEL:
      put_enum(out, log_level_names, i32());
      break;
    case FI_TYPE_LOG_SUBSYS:
      put_enum(out, log_subsys_names, i32());
      break;
    case FI_TYPE_AV_ATTR:
      put_av_attr(out, static_cast<const fi_av_attr*>(data));
      break;
    case FI_TYPE_CQ_ATTR:
      put_cq_attr(out, static_cast<const fi_cq_attr*>(data));
      break;
    case FI_TYPE_MR_ATTR:
      put_mr_attr(out, static_cast<const fi_mr_attr*>(data));
      break;
    case FI_TYPE_CNTR_ATTR:
      put_cntr_attr(out, static_cast<const fi_cntr_attr*>(data));
      break;
    case FI_TYPE_CQ_ERR_ENTRY:
      put_cq_err_entry(out, static_cast<const fi_cq_err_entry*>(data));
      break;
    default:
      out.put("Unknown type");
      break;
  }
}

}  // namespace

char* tostr_r(char* buf, size_t len, const void* data, int datatype) noexcept {
  if (!buf || !len || !data) return nullptr;
  buf[0] = '\0';
  out_buf out(buf, len);
  format(out, data, datatype);
  return buf;
}

}  // namespace weft

WEFT_EXPORT char* fi_tostr_r(char* buf, size_t len, const void* data, enum fi_type datatype) {
  return weft::tostr_r(buf, len, data, weft::raw_enum(datatype));
}

WEFT_EXPORT char* fi_tostr(const void* data, enum fi_type datatype) {
  // One buffer per thread, allocated on first use and freed at thread exit.
  thread_local std::unique_ptr<char[]> buf;
  if (!buf) {
    buf.reset(new (std::nothrow) char[weft::tostr_buf_size]);
    if (!buf) return nullptr;
  }
  return weft::tostr_r(buf.get(), weft::tostr_buf_size, data, weft::raw_enum(datatype));
}
