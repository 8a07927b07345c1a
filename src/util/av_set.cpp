// SPDX-License-Identifier: BSD-3-Clause
// AV sets (man fi_av_set): an ordered subset of an AV's addresses, the
// members of a collective group (util/coll.cpp joins them).
//
// Choices the man page leaves open:
// * Members are AV entries, compared by slot index (receive-context bits
//   ignored); every address given must name an entry in use (-FI_EINVAL).
// * fi_av_set_insert of a member, or fi_av_set_remove of a non-member:
//   -FI_EINVAL. Removing keeps the order of the others (the man page's
//   rule); union appends in the source's order.
// * attr: FI_UNIVERSE takes every entry of the AV in index order;
//   start_addr/end_addr (FI_AV_TABLE only) with a stride of at least 1 take
//   the entries in use among start + i * stride <= end, and more than a
//   non-zero count of them is -FI_EINVAL; both at once is -FI_EINVAL. An
//   empty set has a stride of 1, as the man page asks (0 is taken too).
//   Communication keys are not supported (-FI_EINVAL). The *_SET flags are
//   accepted: every set supports every collective.
// * fi_av_set_addr's address is only good for fi_join_collective with this
//   set. A set can be closed while groups made from it live on.
#include <algorithm>
#include <atomic>

#include "util/coll_int.hpp"

namespace weft {

namespace {

constexpr uint64_t set_flags_ok = FI_UNIVERSE | FI_BARRIER_SET | FI_BROADCAST_SET | FI_ALLTOALL_SET |
                                  FI_ALLREDUCE_SET | FI_ALLGATHER_SET | FI_REDUCE_SCATTER_SET | FI_REDUCE_SET |
                                  FI_SCATTER_SET | FI_GATHER_SET;
constexpr uint64_t set_addr_magic = uint64_t{0xA5E7} << 48;
std::atomic<uint64_t> next_set_id{1};

bool has(const av_set& s, uint64_t idx) noexcept {
  return std::find(s.members.begin(), s.members.end(), idx) != s.members.end();
}

// Both sets, locked (one lock when they are the same set), of the same AV.
template <class F>
int with_two(fid_av_set* dst, const fid_av_set* src, F&& f) noexcept {
  av_set* d = av_set::from(dst);
  av_set* s = av_set::from(src);
  if (!d || !s || d->owner != s->owner) return -FI_EINVAL;
  return guard([&]() -> int {
    if (d == s) {
      std::lock_guard l(d->m);
      return f(*d, std::vector<uint64_t>(d->members));
    }
    std::scoped_lock l(d->m, s->m);
    return f(*d, std::vector<uint64_t>(s->members));
  });
}

int set_union(fid_av_set* dst, const fid_av_set* src) noexcept {
  return with_two(dst, src, [](av_set& d, const std::vector<uint64_t>& s) {
    for (uint64_t a : s)
      if (!has(d, a)) d.members.push_back(a);
    return 0;
  });
}

int set_intersect(fid_av_set* dst, const fid_av_set* src) noexcept {
  return with_two(dst, src, [](av_set& d, const std::vector<uint64_t>& s) {
    std::erase_if(d.members, [&](uint64_t a) { return std::find(s.begin(), s.end(), a) == s.end(); });
    return 0;
  });
}

int set_diff(fid_av_set* dst, const fid_av_set* src) noexcept {
  return with_two(dst, src, [](av_set& d, const std::vector<uint64_t>& s) {
    std::erase_if(d.members, [&](uint64_t a) { return std::find(s.begin(), s.end(), a) != s.end(); });
    return 0;
  });
}

int set_insert(fid_av_set* set, fi_addr_t addr) noexcept {
  av_set* s = av_set::from(set);
  if (!s || !s->owner->lookup(addr)) return -FI_EINVAL;
  return guard([&]() -> int {
    std::lock_guard l(s->m);
    const uint64_t idx = s->owner->index(addr);
    if (has(*s, idx)) return -FI_EINVAL;
    s->members.push_back(idx);
    return 0;
  });
}

int set_remove(fid_av_set* set, fi_addr_t addr) noexcept {
  av_set* s = av_set::from(set);
  if (!s) return -FI_EINVAL;
  std::lock_guard l(s->m);
  auto it = std::find(s->members.begin(), s->members.end(), s->owner->index(addr));
  if (it == s->members.end()) return -FI_EINVAL;
  s->members.erase(it);
  return 0;
}

int set_addr(fid_av_set* set, fi_addr_t* coll_addr) noexcept {
  av_set* s = av_set::from(set);
  if (!s || !coll_addr) return -FI_EINVAL;
  *coll_addr = s->addr;
  return 0;
}

fi_ops_av_set set_ops = {sizeof(fi_ops_av_set), set_union, set_intersect, set_diff,
                         set_insert,            set_remove, set_addr};

int set_close(fid* f) noexcept {
  auto* s = reinterpret_cast<av_set*>(f);
  s->owner->drop_user();
  delete s;
  return 0;
}

fi_ops set_fi_ops = {sizeof(fi_ops),  set_close,    fid_no_bind,   fid_no_control,
                     fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

}  // namespace

av_set* av_set::from(const fid_av_set* s) noexcept {
  if (!s || s->fid.fclass != FI_CLASS_AV_SET || s->fid.ops != &set_fi_ops) return nullptr;
  return reinterpret_cast<av_set*>(const_cast<fid_av_set*>(s));
}

int av_set_open(av& a, fi_av_set_attr* attr, fid_av_set** out, void* context) noexcept {
  if (!attr || !out) return -FI_EINVAL;
  if (!only(attr->flags, set_flags_ok)) return -FI_EBADFLAGS;
  if (attr->comm_key_size || attr->comm_key) return -FI_EINVAL;  // no fabric manager here
  const bool range = attr->start_addr != FI_ADDR_NOTAVAIL || attr->end_addr != FI_ADDR_NOTAVAIL;
  const bool universe = attr->flags & FI_UNIVERSE;
  if (range && universe) return -FI_EINVAL;
  if (range) {
    if (attr->start_addr == FI_ADDR_NOTAVAIL || attr->end_addr == FI_ADDR_NOTAVAIL ||
        attr->end_addr < attr->start_addr || attr->stride == 0 || a.type() != FI_AV_TABLE)
      return -FI_EINVAL;
  } else if (attr->stride > 1) {
    return -FI_EINVAL;  // the man page: 1 for an empty set (0 is taken too)
  }
  return guard([&]() -> int {
    auto s = std::make_unique<av_set>();
    s->fid_.fid.fclass = FI_CLASS_AV_SET;
    s->fid_.fid.context = context;
    s->fid_.fid.ops = &set_fi_ops;
    s->fid_.ops = &set_ops;
    s->owner = &a;
    s->addr = set_addr_magic | (next_set_id.fetch_add(1, std::memory_order_relaxed) & 0xffffffffffffULL);
    if (universe) {
      const uint64_t cap = a.capacity();
      for (uint64_t i = 0; i < cap; ++i)
        if (a.slot_of(i)) s->members.push_back(i);
    } else if (range) {
      for (uint64_t i = attr->start_addr; i <= attr->end_addr; i += attr->stride) {
        if (a.lookup(i)) s->members.push_back(a.index(i));
        if (attr->end_addr - i < attr->stride) break;  // no wrap past the end
      }
      if (attr->count && s->members.size() > attr->count) return -FI_EINVAL;
    }
    a.add_user();
    *out = &s.release()->fid_;
    return 0;
  });
}

}  // namespace weft
