// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Address vectors: the object behind fid_av, and what providers use of it.
//
// fi_addr_t encoding (FI_AV_TABLE and FI_AV_MAP alike): the low 64 -
// rx_ctx_bits bits are the index of the entry's slot; the top rx_ctx_bits
// bits carry the receive-context index that fi_rx_addr() put there. Indices
// are the same in every process that shares a named AV, whatever map_addr.
//
// Storage: slots of a fixed stride (a 16-byte header, then the address),
// grouped in chunks of geometrically growing size (64, 128, 256, ... slots).
// Chunks never move once published, so the data path reads a slot with no
// lock and no allocation: index -> chunk by one bit scan. A named AV keeps
// all its slots in one shared mapping of fixed capacity, described by the
// same chunk table.
//
// Data path (any thread, lock-free, O(1)): lookup(), user_id(), index(),
// rx_index(). Control path: everything else (takes the AV's lock).
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/object.hpp"
#include "util/domain.hpp"

namespace weft {

struct av_shared;   // the mapped region of a named AV (av.cpp)
struct av_private;  // reverse map and lock of a process-private AV (av.cpp)

class av {
public:
  fid_av fid_;  // first: the application's fid_av* is this object

  static av* of(fid_av* a) noexcept { return from_fid<av>(a); }
  static const av* of(const fid_av* a) noexcept { return from_fid<const av>(a); }
  // The AV behind an application-supplied fid (fi_ep_bind), or nullptr when
  // it is not an AV opened by weft.
  static av* from(fid* f) noexcept;

  // ------------------------------------------------------------- data path
  // The slot index of an fi_addr_t (receive-context bits stripped).
  uint64_t index(fi_addr_t a) const noexcept { return a & index_mask_; }
  // The receive-context index fi_rx_addr() encoded into `a` (0 without bits).
  uint64_t rx_index(fi_addr_t a) const noexcept { return rx_ctx_bits_ ? a >> (64 - rx_ctx_bits_) : 0; }
  int rx_ctx_bits() const noexcept { return rx_ctx_bits_; }

  // The raw address stored for `a` (receive-context bits ignored), or nullptr
  // when `a` names no entry (FI_ADDR_NOTAVAIL, out of range, removed). *len,
  // when given, receives its length in bytes.
  const void* lookup(fi_addr_t a, size_t* len = nullptr) const noexcept {
    const slot_hdr* s = slot_of(index(a));
    if (!s) [[unlikely]]
      return nullptr;
    if (len) *len = s->len;
    return s + 1;
  }
  // The FI_AV_USER_ID value given at insert, or the fi_addr_t itself (rx bits
  // stripped) when none was. FI_ADDR_NOTAVAIL when `a` names no entry.
  fi_addr_t user_id(fi_addr_t a) const noexcept {
    const slot_hdr* s = slot_of(index(a));
    return s ? s->user_id : FI_ADDR_NOTAVAIL;
  }
  // Slots below this index may be in use (slot_of says which): the bound of
  // a walk over every entry.
  uint64_t capacity() const noexcept { return capacity_.load(std::memory_order_acquire); }
  // Bumped each time a slot is (re)filled: lets a provider that caches state
  // per index (a connection, a mapped peer region) notice remove + reinsert.
  uint32_t generation(fi_addr_t a) const noexcept {
    const slot_hdr* s = slot_of(index(a));
    return s ? std::atomic_ref<const uint32_t>(s->state).load(std::memory_order_acquire) >> 1 : 0;
  }
  // The generation and whether the slot is in use, in one word (0: no
  // slot). A cached reverse lookup (the fi_addr_t a sender's address has
  // here, for FI_SOURCE and directed receives) stays right while its entry's
  // word is the one it was found with: a removed entry, or one given to
  // another address, changes it, and the sender is looked up again.
  uint32_t entry_state(fi_addr_t a) const noexcept {
    const slot_hdr* s = slot_of(index(a));
    return s ? std::atomic_ref<const uint32_t>(s->state).load(std::memory_order_acquire) : 0;
  }
  // Where that word lives (nullptr: no entry at a). Slots never move while
  // the AV is open, so a cache on the data path keeps this and the word's
  // value and compares them with one load (word_now).
  const uint32_t* entry_word(fi_addr_t a) const noexcept {
    const slot_hdr* s = slot_of(index(a));
    return s ? &s->state : nullptr;
  }
  static uint32_t word_now(const uint32_t* w) noexcept {
    return std::atomic_ref<const uint32_t>(*w).load(std::memory_order_acquire);
  }

  // ---------------------------------------------------------- control path
  // Endpoints bound to the AV hold a user reference: fi_close(av) returns
  // -FI_EBUSY while any is held.
  void add_user() noexcept { users_.add(); }
  void drop_user() noexcept { users_.drop(); }
  int user_count() const noexcept { return users_.count(); }

  // Reverse lookup: the fi_addr_t of the entry holding `addr` (len bytes;
  // FI_ADDR_STR addresses include their NUL), or FI_ADDR_NOTAVAIL. Takes the
  // AV's lock, allocates nothing: a hash lookup for private AVs, a scan for
  // named ones (cache the answer). With duplicates, the first inserted;
  // once it is removed, the lowest index still holding the address.
  fi_addr_t find(const void* addr, size_t len) const noexcept;

  domain& dom() const noexcept { return *dom_; }
  fi_av_type type() const noexcept { return type_; }
  uint32_t addr_format() const noexcept { return format_; }
  size_t max_addrlen() const noexcept { return max_len_; }  // one slot's address capacity
  bool shared() const noexcept { return shared_ != nullptr; }
  uint64_t flags() const noexcept { return flags_; }

  // Implementation (av.cpp).
  struct slot_hdr {
    uint32_t state;    // atomic_ref: bit 0 = in use, bits 1.. = generation
    uint32_t len;      // bytes of address that follow the header
    uint64_t user_id;  // FI_AV_USER_ID value (or the index)
  };
  static_assert(sizeof(slot_hdr) == 16);
  static constexpr unsigned chunk0_shift = 6;  // chunk k holds 64 << k slots
  static constexpr unsigned max_chunks = 26;   // up to 64 * (2^26 - 1) slots

  av(domain& dom, const fi_av_attr& attr, void* context);
  ~av();
  av(const av&) = delete;
  av& operator=(const av&) = delete;

  const slot_hdr* slot_of(uint64_t idx) const noexcept {
    if (idx >= capacity_.load(std::memory_order_acquire)) [[unlikely]]
      return nullptr;
    const slot_hdr* s = slot_at(idx);
    if (!(std::atomic_ref<const uint32_t>(s->state).load(std::memory_order_acquire) & 1)) [[unlikely]]
      return nullptr;
    return s;
  }
  // Slot `idx` < capacity, used or not.
  slot_hdr* slot_at(uint64_t idx) const noexcept {
    uint64_t j = idx + (uint64_t{1} << chunk0_shift);
    unsigned k = unsigned(std::bit_width(j)) - (chunk0_shift + 1);
    unsigned char* base = chunks_[k].load(std::memory_order_relaxed);
    return reinterpret_cast<slot_hdr*>(base + (j - (uint64_t{1} << (k + chunk0_shift))) * stride_);
  }

  // Control-path entry points behind the ops tables (av.cpp).
  int insert_one(const void* addr, size_t len, uint64_t user_id, bool use_user_id, fi_addr_t& out);
  // For a provider that mirrors another AV's indices in an AV of its own
  // (the linked provider's parts): fills slot `idx` of this private AV
  // (0 or a positive FI_E*), or empties it. Takes the lock.
  int insert_at(uint64_t idx, const void* addr, size_t len, uint64_t user_id);
  void erase_at(uint64_t idx) noexcept;
  int remove(const fi_addr_t* fi_addr, size_t count);
  void bind_eq(fid_eq* eq);
  fid_eq* eq() const noexcept { return eq_; }
  bool read_only() const noexcept { return read_only_; }
  std::string_view str_prefix() const noexcept;  // FI_ADDR_STR: "fi_<prov>://"
  // The AV's lock (a process-shared one for named AVs). Control path only.
  void lock() const;
  void unlock() const noexcept;

private:
  friend struct av_shared;
  friend int av_open(domain&, fi_av_attr*, fid_av**, void*) noexcept;
  void grow(uint64_t need);
  void rev_add(const void* addr, size_t len, uint64_t idx);
  void rev_drop(uint64_t idx) noexcept;

  domain* dom_;
  fi_av_type type_;
  int rx_ctx_bits_;
  uint64_t index_mask_;
  uint64_t flags_;
  uint32_t format_;
  size_t max_len_;
  size_t stride_;
  bool read_only_ = false;
  fid_eq* eq_ = nullptr;
  std::atomic<uint64_t> capacity_{0};
  std::atomic<unsigned char*> chunks_[max_chunks] = {};
  // Allocation cursor (private AVs; a named AV keeps its own in the region).
  uint64_t hint_ = 0;  // no free slot below this index
  uint64_t high_ = 0;  // no slot at or above this index was ever used
  std::string prefix_;
  av_private* priv_ = nullptr;
  av_shared* shared_ = nullptr;
  users users_;
};

}  // namespace weft
