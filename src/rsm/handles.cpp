// SPDX-License-Identifier: BSD-3-Clause
// The process-wide handle table. An RSMAPI handle is the value
// generation << 32 | index << 8 | kind, never a pointer: a forged, stale or
// foreign handle finds no live slot and the call answers RSMERR_BAD_*_HNDL.
// Lookups take no lock: a slot's tag is published after its contents.
#include <pthread.h>

#include "rsm.hpp"

namespace weft::rsm {
namespace {

constexpr uint32_t chunk_bits = 10;
constexpr uint32_t chunk_size = 1u << chunk_bits;
constexpr uint32_t max_index = 1u << 24;
constexpr uint32_t max_chunks = max_index / chunk_size;

struct slot {
  std::atomic<uint64_t> tag{0};  // the live handle, 0 when free
  std::atomic<void*> obj{nullptr};
  std::atomic<controller*> ctl{nullptr};
  uint32_t gen = 0;
};

std::atomic<slot*> chunks[max_chunks];
std::mutex table_mtx;
std::vector<uint32_t> free_list;
uint32_t next_index = 1;  // index 0 is never handed out
[[maybe_unused]] const int atfork_registered =
    pthread_atfork([] { table_mtx.lock(); }, [] { table_mtx.unlock(); }, [] { table_mtx.unlock(); });

slot* slot_of(uint32_t idx) noexcept {
  slot* c = chunks[idx >> chunk_bits].load(std::memory_order_acquire);
  return c ? &c[idx & (chunk_size - 1)] : nullptr;
}

}  // namespace

uint64_t handle_add(kind k, void* obj, controller* ctl) {
  std::lock_guard<std::mutex> l(table_mtx);
  uint32_t idx;
  if (!free_list.empty()) {
    idx = free_list.back();
    free_list.pop_back();
  } else {
    if (next_index >= max_index) throw std::bad_alloc();
    idx = next_index++;
    if (!chunks[idx >> chunk_bits].load(std::memory_order_relaxed))
      chunks[idx >> chunk_bits].store(new slot[chunk_size], std::memory_order_release);
  }
  slot* s = slot_of(idx);
  if (++s->gen == 0) s->gen = 1;
  uint64_t h =
      static_cast<uint64_t>(s->gen) << 32 | static_cast<uint64_t>(idx) << 8 | static_cast<uint8_t>(k);
  s->obj.store(obj, std::memory_order_release);
  s->ctl.store(ctl, std::memory_order_release);
  s->tag.store(h, std::memory_order_release);
  return h;
}

void handle_remove(uint64_t h) noexcept {
  uint32_t idx = static_cast<uint32_t>(h >> 8) & (max_index - 1);
  std::lock_guard<std::mutex> l(table_mtx);
  slot* s = idx ? slot_of(idx) : nullptr;
  if (!s || s->tag.load(std::memory_order_relaxed) != h) return;
  s->tag.store(0, std::memory_order_release);
  try {
    free_list.push_back(idx);
  } catch (...) {
    // The index is lost for reuse; the table stays correct.
  }
}

bool handle_get(uint64_t h, kind k, void** obj, controller** ctl) noexcept {
  if ((h & 0xff) != static_cast<uint8_t>(k) || (h >> 32) == 0) return false;
  uint32_t idx = static_cast<uint32_t>(h >> 8) & 0xffffff;
  if (idx == 0) return false;
  slot* s = slot_of(idx);
  if (!s || s->tag.load(std::memory_order_acquire) != h) return false;
  // Acquire loads: the second look at the tag cannot happen before them, so
  // a slot reused meanwhile is noticed.
  void* o = s->obj.load(std::memory_order_acquire);
  controller* c = s->ctl.load(std::memory_order_acquire);
  if (s->tag.load(std::memory_order_relaxed) != h) return false;
  if (obj) *obj = o;
  if (ctl) *ctl = c;
  return true;
}

}  // namespace weft::rsm
