// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Memory registration (man fi_mr): the fid_mr object and the domain's
// registration map, the structure a provider consults to validate every
// access to registered memory.
//
// Addressing. A region is the concatenation of its iov segments: one logical
// byte space [0, len). A peer names byte k of the region by the address
// `base + k`, where base is
//   * FI_MR_VIRT_ADDR: the virtual address of the first segment (so for a
//     one-segment region the peer's address is the owner's virtual address);
//   * otherwise: the registration's `offset` (0 in every conforming program:
//     the man page reserves it), so addresses are 0-based offsets.
// Keys are domain-wide: provider-chosen with FI_MR_PROV_KEY, else the
// application's requested_key (a duplicate is -FI_ENOKEY).
//
// Descriptors. fi_mr_desc() is an opaque handle (slot index + generation), not
// a pointer: a provider validates a descriptor from the application in O(1)
// without dereferencing it, and a stale descriptor (closed MR) is refused.
//
// Publishing. After every change to dom.mrs (registration, fi_mr_enable,
// close) mr.cpp calls prov_domain::mr_changed(key), outside the map's lock;
// the provider reads the entry back with mr_map::find (absent = withdrawn).
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "common/object.hpp"
#include "util/domain.hpp"

namespace weft {

// Most segments one region can have. Providers advertise mr_iov_limit <= this;
// registration enforces min(domain's mr_iov_limit, mr_iov_max).
inline constexpr size_t mr_iov_max = 4;

// Access bits a registration may carry.
inline constexpr uint64_t mr_access_bits =
    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_COLLECTIVE;

// One segment of a region, in the owner's address space.
struct mr_segment {
  uint64_t addr;
  uint64_t len;
};

// mr_entry::flags
inline constexpr uint32_t mr_entry_enabled =
    1u << 0;  // accessible (FI_MR_ENDPOINT/RMA_EVENT: after fi_mr_enable)

// One registration as the map (and, later, a process-shared table) holds it:
// fixed size, standard layout, no pointers (addresses are integers in the
// owner's address space, which is what cross-memory attach needs), two cache
// lines' worth so a shared table of them packs without straddling.
struct mr_entry {
  uint64_t key;
  uint64_t base;       // address a peer uses for byte 0 (see Addressing above)
  uint64_t len;        // total bytes, sum of seg[i].len, > 0
  uint64_t access;     // FI_SEND ... FI_REMOTE_WRITE
  uint32_t iov_count;  // 1 .. mr_iov_max
  uint32_t flags;      // mr_entry_*
  mr_segment seg[mr_iov_max];
  uint64_t prov[3];  // provider-specific; zero in the domain's map (shm: shared backing)
};
static_assert(std::is_standard_layout_v<mr_entry> && std::is_trivially_copyable_v<mr_entry>);
static_assert(sizeof(mr_segment) == 16);
static_assert(sizeof(mr_entry) == 128);
static_assert(offsetof(mr_entry, key) == 0 && offsetof(mr_entry, base) == 8 &&
              offsetof(mr_entry, len) == 16 && offsetof(mr_entry, access) == 24 &&
              offsetof(mr_entry, iov_count) == 32 && offsetof(mr_entry, flags) == 36 &&
              offsetof(mr_entry, seg) == 40);

// Validates a remote access of `len` bytes at peer address `addr` against one
// entry (usable on a copy read from a shared table too). Returns
//   0             allowed; *local_ptr (if non-null) = owner's address of addr;
//   -FI_EACCES    the region is not enabled, or `access` is not a subset of its access;
//   -FI_EINVAL    [addr, addr+len) is not inside the region (overflow included);
//   -FI_ETOOSMALL local_ptr was asked for but the range spans two segments of a
//                 vectored region: one pointer cannot describe it, use mr_entry_resolve.
// A zero-length access is allowed anywhere in [base, base+len].
int mr_entry_check(const mr_entry& e, uint64_t addr, size_t len, uint64_t access, void** local_ptr) noexcept;
// As mr_entry_check, and on success fills iov[0..*count) (room for mr_iov_max)
// with the owner's pieces of [addr, addr+len).
int mr_entry_resolve(const mr_entry& e, uint64_t addr, size_t len, uint64_t access, iovec* iov,
                     size_t* count) noexcept;

// The domain's registrations, by key (O(1) hash) and by descriptor (O(1) slot
// index). Thread safe: a shared_mutex, readers (the checks) share it.
class mr_map {
public:
  // key_size: bytes of key the domain supports (mr_key_size; 0 or > 8 means 8).
  // seed: for provider-chosen keys (fixed in tests, random in domains).
  explicit mr_map(size_t key_size = 8, uint64_t seed = 0);
  mr_map(const mr_map&) = delete;
  mr_map& operator=(const mr_map&) = delete;

  // ---- control path
  // Whose key an entry gets: the requested one (e.key), a fresh one the map
  // chooses, or the requested one when it fits and is free, else a fresh one.
  enum class key_choice { requested, provider, requested_if_free };
  // Adds `e`, its key chosen as `keys` says (into e.key). Returns 0 and sets
  // *desc (the descriptor handle), -FI_ENOKEY (key in use) or
  // -FI_EKEYREJECTED (key does not fit the key size, or is FI_KEY_NOTAVAIL).
  // Throws std::bad_alloc.
  int insert(mr_entry& e, void* owner, key_choice keys, uint64_t* desc);
  int insert(mr_entry& e, void* owner, bool prov_key, uint64_t* desc) {
    return insert(e, owner, prov_key ? key_choice::provider : key_choice::requested, desc);
  }
  // Removes the entry with this key; returns false if there is none.
  bool erase(uint64_t key) noexcept;
  // Sets / clears mr_entry flags of an entry; returns false if there is none.
  bool update_flags(uint64_t key, uint32_t set, uint32_t clear) noexcept;

  // ---- data path
  // Remote access by key: as mr_entry_check; an unknown key is -FI_EINVAL.
  int check(uint64_t key, uint64_t addr, size_t len, uint64_t access, void** local_ptr) const noexcept;
  int resolve(uint64_t key, uint64_t addr, size_t len, uint64_t access, iovec* iov,
              size_t* count) const noexcept;
  // Local access (FI_MR_LOCAL): `desc` is a descriptor from fi_mr_desc and
  // [buf, buf+len) must lie inside the region's segments, with `access` (FI_SEND,
  // FI_RECV, FI_READ, FI_WRITE; 0 to skip) a subset of the region's. Returns 0,
  // -FI_EINVAL (unknown or stale descriptor, range outside the region or
  // overflowing) or -FI_EACCES (disabled, access denied). On success *key (if
  // non-null) is the region's key.
  int check_local(const void* desc, const void* buf, size_t len, uint64_t access,
                  uint64_t* key = nullptr) const noexcept;

  // ---- inspection (publishing to shared memory, tests)
  bool find(uint64_t key, mr_entry* out) const noexcept;
  void* owner(const void* desc) const noexcept;  // the owner given to insert, or null
  size_t size() const noexcept;
  // Incremented by every insert/erase/update_flags: a publisher compares it to
  // know when to copy a new snapshot.
  uint64_t epoch() const noexcept { return epoch_.load(std::memory_order_acquire); }
  void snapshot(std::vector<mr_entry>& out) const;

  size_t key_size() const noexcept { return key_size_; }

private:
  struct slot {
    mr_entry e;
    void* owner;
    uint32_t gen;  // bumped when the slot is freed: stale descriptors miss
    bool used;
  };
  const slot* from_desc(const void* desc) const noexcept;
  bool key_fits(uint64_t key) const noexcept;
  uint64_t next_prov_key() noexcept;

  size_t key_size_;
  uint64_t key_mask_;
  uint64_t key_counter_;
  uint64_t key_in_, key_out_;  // secrets of the provider-key sequence
  mutable std::shared_mutex lock_;
  std::vector<slot> slots_;
  std::vector<uint32_t> free_;
  std::unordered_map<uint64_t, uint32_t> index_;  // key -> slot
  std::atomic<uint64_t> epoch_{0};
};

// A registered memory region: what fi_mr_reg hands out.
struct mr {
  fid_mr fid_;  // first
  domain* dom;
  mr_entry entry;  // the registration as inserted in dom.mrs (flags kept current)
  uint64_t flags;  // registration flags (FI_RMA_EVENT ...)
  void* context;
  std::mutex lock_;           // bind / enable
  fid* ep = nullptr;          // bound endpoint (FI_MR_ENDPOINT); not referenced
  fid_cntr* cntr = nullptr;   // bound counter (a reference held, cntr_take) and the
  uint64_t cntr_flags = 0;    // remote accesses it counts: FI_REMOTE_WRITE/READ
  bool needs_ep = false;      // FI_MR_ENDPOINT: fi_mr_enable needs a bound endpoint
  bool needs_enable = false;  // created disabled: bindings only before fi_mr_enable
  bool enabled = false;

  static mr* of(fid_mr* m) noexcept { return from_fid<mr>(m); }
};

// Domain control commands that belong to memory registration; the domain's
// fi_control forwards FI_MAP_RAW_MR and FI_UNMAP_KEY here.
// A raw key is the key's mr_key_size bytes, little-endian.
int mr_map_raw(domain& dom, struct fi_mr_map_raw* arg) noexcept;
int mr_unmap_key(domain& dom, const uint64_t* key) noexcept;

}  // namespace weft
