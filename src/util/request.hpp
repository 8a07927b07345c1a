// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Requests a transport keeps while an operation waits for its peer (an ack,
// read data, an atomic's result): a pool with stable addresses, found again
// in O(1) by the id that travels on the wire, allocation-free once warm.
//
// An id is (generation << 32 | slot + 1): a stale or forged id from a peer
// finds nothing. R has a field `uint64_t id`; alloc() hands out a fresh R
// (value-initialised, or reset by its recycle() when it has one) with its id set.
#include <cstdint>
#include <deque>
#include <vector>

namespace weft {

template <class R>
class request_pool {
public:
  // A fresh request, or nullptr when memory runs out.
  R* alloc() noexcept {
    try {
      uint32_t idx;
      if (free_.empty()) {
        slots_.emplace_back();
        idx = static_cast<uint32_t>(slots_.size() - 1);
        free_.reserve(slots_.size());  // release() never allocates
      } else {
        idx = free_.back();
        free_.pop_back();
      }
      slot& s = slots_[idx];
      // A request with large buffers resets only its bookkeeping.
      if constexpr (requires(R& r) { r.recycle(); })
        s.req.recycle();
      else
        s.req = R{};
      s.live = true;
      s.req.id = uint64_t{s.gen} << 32 | (idx + 1);
      ++live_;
      return &s.req;
    } catch (...) {
      return nullptr;
    }
  }
  // The live request with this id, or nullptr.
  R* find(uint64_t id) noexcept {
    uint32_t idx = static_cast<uint32_t>(id) - 1;
    if (static_cast<uint32_t>(id) == 0 || idx >= slots_.size()) return nullptr;
    slot& s = slots_[idx];
    if (!s.live || s.gen != static_cast<uint32_t>(id >> 32)) return nullptr;
    return &s.req;
  }
  void release(R* r) noexcept {
    uint32_t idx = static_cast<uint32_t>(r->id) - 1;
    slot& s = slots_[idx];
    s.live = false;
    s.gen++;
    s.req.id = 0;
    free_.push_back(idx);
    --live_;
  }
  bool empty() const noexcept { return live_ == 0; }
  size_t size() const noexcept { return live_; }
  // Calls f(R&) for every live request; f may release the one it is given.
  template <class F>
  void for_each(F&& f) {
    for (slot& s : slots_)
      if (s.live) f(s.req);
  }

private:
  struct slot {
    R req{};
    uint32_t gen = 1;
    bool live = false;
  };
  std::deque<slot> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace weft
