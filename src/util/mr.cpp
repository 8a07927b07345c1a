// SPDX-License-Identifier: BSD-3-Clause
// Memory registration: fi_mr_reg/regv/regattr, the fid_mr operations (close,
// bind, enable, raw keys, refresh) and the domain's registration map.
#include "util/mr.hpp"

#include <rdma/fi_eq.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "core/log.hpp"
#include "util/cntr.hpp"
#include "util/eq.hpp"
#include "util/util.hpp"

namespace weft {

namespace {

constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();

// A bijective 64-bit mix (the splitmix64 finaliser). Provider keys are
// mix64(counter ^ in) ^ out with two per-map secrets: distinct counters give
// distinct keys, and a peer that has seen some keys cannot simply run the
// mix backwards to predict the next. Not cryptographic: MR keys are the
// "limited protection" of fi_mr(3); bounds and access are what is enforced.
constexpr uint64_t mix64(uint64_t z) noexcept {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

size_t seg_count(const mr_entry& e) noexcept {
  return std::min<size_t>(e.iov_count, mr_iov_max);
}

// Whether the owner's range [addr, addr+len) lies inside the union of the
// entry's segments (adjacent segments may carry one range between them). Each
// step jumps to the end of a segment holding `cur`, never the same one twice,
// so seg_count steps suffice. A zero-length range may sit at a segment's end.
bool covered(const mr_entry& e, uint64_t addr, uint64_t len) noexcept {
  const size_t n = seg_count(e);
  if (len == 0) {
    for (size_t i = 0; i < n; ++i)
      if (addr >= e.seg[i].addr && addr - e.seg[i].addr <= e.seg[i].len) return true;
    return false;
  }
  if (len > u64_max - addr) return false;
  const uint64_t end = addr + len;
  uint64_t cur = addr;
  for (size_t step = 0; step < n; ++step) {
    size_t i = 0;
    while (i < n && !(cur >= e.seg[i].addr && cur - e.seg[i].addr < e.seg[i].len)) ++i;
    if (i == n) return false;
    const uint64_t seg_end = e.seg[i].addr + e.seg[i].len;
    if (end <= seg_end) return true;
    cur = seg_end;
  }
  return false;
}

}  // namespace

// ------------------------------------------------------------------ entry checks

int mr_entry_check(const mr_entry& e, uint64_t addr, size_t len, uint64_t access, void** local_ptr) noexcept {
  if (!(e.flags & mr_entry_enabled)) [[unlikely]]
    return -FI_EACCES;
  if (access & ~e.access) [[unlikely]]
    return -FI_EACCES;
  if (addr < e.base) [[unlikely]]
    return -FI_EINVAL;
  const uint64_t off = addr - e.base;
  if (off > e.len || len > e.len - off) [[unlikely]]
    return -FI_EINVAL;
  if (!local_ptr) return 0;
  const size_t n = seg_count(e);
  uint64_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    const mr_segment& s = e.seg[i];
    // The last segment also takes the zero-length access at the very end.
    if (off - start < s.len || i + 1 == n) {
      const uint64_t in = off - start;
      if (in > s.len) [[unlikely]]
        return -FI_EINVAL;  // inconsistent entry: segments shorter than len
      if (len > s.len - in) return -FI_ETOOSMALL;
      *local_ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(s.addr + in));
      return 0;
    }
    start += s.len;
  }
  return -FI_EINVAL;  // no segments
}

int mr_entry_resolve(const mr_entry& e, uint64_t addr, size_t len, uint64_t access, iovec* iov,
                     size_t* count) noexcept {
  int ret = mr_entry_check(e, addr, len, access, nullptr);
  if (ret) return ret;
  uint64_t off = addr - e.base;
  uint64_t left = len;
  uint64_t start = 0;
  size_t out = 0;
  const size_t n = seg_count(e);
  for (size_t i = 0; i < n && left; ++i) {
    const mr_segment& s = e.seg[i];
    if (off - start < s.len) {
      const uint64_t in = off - start;
      const uint64_t take = std::min(s.len - in, left);
      iov[out].iov_base = reinterpret_cast<void*>(static_cast<uintptr_t>(s.addr + in));
      iov[out].iov_len = take;
      ++out;
      off += take;
      left -= take;
    }
    start += s.len;
  }
  if (left) [[unlikely]]
    return -FI_EINVAL;  // inconsistent entry
  *count = out;
  return 0;
}

// ------------------------------------------------------------------ mr_map

mr_map::mr_map(size_t key_size, uint64_t seed)
    : key_size_(key_size == 0 || key_size > 8 ? 8 : key_size),
      key_mask_(key_size_ == 8 ? u64_max : (uint64_t{1} << (8 * key_size_)) - 1),
      key_counter_(0),
      key_in_(mix64(seed)),
      key_out_(mix64(~seed)) {}

bool mr_map::key_fits(uint64_t key) const noexcept {
  return key != FI_KEY_NOTAVAIL && (key & ~key_mask_) == 0;
}

uint64_t mr_map::next_prov_key() noexcept {
  for (;;) {
    const uint64_t k = (mix64(key_counter_++ ^ key_in_) ^ key_out_) & key_mask_;
    if (key_fits(k) && index_.find(k) == index_.end()) return k;
  }
}

int mr_map::insert(mr_entry& e, void* owner, key_choice keys, uint64_t* desc) {
  std::unique_lock lk(lock_);
  if (keys == key_choice::requested_if_free)
    keys =
        key_fits(e.key) && index_.find(e.key) == index_.end() ? key_choice::requested : key_choice::provider;
  if (keys == key_choice::provider) {
    // Keep one key of the space unused so the search above always ends.
    if (key_mask_ != u64_max && index_.size() >= key_mask_) return -FI_ENOSPC;
    e.key = next_prov_key();
  } else {
    if (!key_fits(e.key)) return -FI_EKEYREJECTED;
    if (index_.find(e.key) != index_.end()) return -FI_ENOKEY;
  }
  if (free_.empty()) {
    if (slots_.size() >= 0xfffffffeu) return -FI_ENOSPC;  // the descriptor holds slot+1 in 32 bits
    // free_ always has room for every slot, so erase() never allocates.
    free_.reserve(slots_.size() + 1);
    slots_.push_back(slot{});
    free_.push_back(static_cast<uint32_t>(slots_.size() - 1));
  }
  const uint32_t idx = free_.back();
  index_.emplace(e.key, idx);  // the last step that may throw
  free_.pop_back();
  slot& s = slots_[idx];
  s.e = e;
  s.owner = owner;
  s.used = true;
  *desc = (uint64_t{s.gen} << 32) | (uint64_t{idx} + 1);
  epoch_.fetch_add(1, std::memory_order_release);
  return 0;
}

bool mr_map::erase(uint64_t key) noexcept {
  std::unique_lock lk(lock_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  slot& s = slots_[it->second];
  s.used = false;
  s.owner = nullptr;
  s.gen++;
  free_.push_back(it->second);
  index_.erase(it);
  epoch_.fetch_add(1, std::memory_order_release);
  return true;
}

bool mr_map::update_flags(uint64_t key, uint32_t set, uint32_t clear) noexcept {
  std::unique_lock lk(lock_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  mr_entry& e = slots_[it->second].e;
  e.flags = (e.flags & ~clear) | set;
  epoch_.fetch_add(1, std::memory_order_release);
  return true;
}

const mr_map::slot* mr_map::from_desc(const void* desc) const noexcept {
  const uint64_t h = reinterpret_cast<uintptr_t>(desc);
  const uint32_t low = static_cast<uint32_t>(h);
  if (low == 0) return nullptr;
  const size_t idx = low - 1;
  if (idx >= slots_.size()) return nullptr;
  const slot& s = slots_[idx];
  if (!s.used || s.gen != static_cast<uint32_t>(h >> 32)) return nullptr;
  return &s;
}

int mr_map::check(uint64_t key, uint64_t addr, size_t len, uint64_t access, void** local_ptr) const noexcept {
  std::shared_lock lk(lock_);
  auto it = index_.find(key);
  if (it == index_.end()) [[unlikely]]
    return -FI_EINVAL;
  return mr_entry_check(slots_[it->second].e, addr, len, access, local_ptr);
}

int mr_map::resolve(uint64_t key, uint64_t addr, size_t len, uint64_t access, iovec* iov,
                    size_t* count) const noexcept {
  std::shared_lock lk(lock_);
  auto it = index_.find(key);
  if (it == index_.end()) [[unlikely]]
    return -FI_EINVAL;
  return mr_entry_resolve(slots_[it->second].e, addr, len, access, iov, count);
}

int mr_map::check_local(const void* desc, const void* buf, size_t len, uint64_t access,
                        uint64_t* key) const noexcept {
  std::shared_lock lk(lock_);
  const slot* s = from_desc(desc);
  if (!s) [[unlikely]]
    return -FI_EINVAL;
  const mr_entry& e = s->e;
  if (!(e.flags & mr_entry_enabled) || (access & ~e.access)) [[unlikely]]
    return -FI_EACCES;
  if (!covered(e, reinterpret_cast<uintptr_t>(buf), len)) [[unlikely]]
    return -FI_EINVAL;
  if (key) *key = e.key;
  return 0;
}

bool mr_map::find(uint64_t key, mr_entry* out) const noexcept {
  std::shared_lock lk(lock_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  *out = slots_[it->second].e;
  return true;
}

void* mr_map::owner(const void* desc) const noexcept {
  std::shared_lock lk(lock_);
  const slot* s = from_desc(desc);
  return s ? s->owner : nullptr;
}

size_t mr_map::size() const noexcept {
  std::shared_lock lk(lock_);
  return index_.size();
}

void mr_map::snapshot(std::vector<mr_entry>& out) const {
  std::shared_lock lk(lock_);
  out.clear();
  out.reserve(index_.size());
  for (const slot& s : slots_)
    if (s.used) out.push_back(s.e);
}

// ------------------------------------------------------------------ fid_mr

namespace {

[[noreturn, gnu::cold, gnu::noinline]] void reject(const domain& dom, int code, const char* why) {
  WEFT_LOG(FI_LOG_DEBUG, FI_LOG_MR, dom.prov ? dom.prov->name() : "core", "%s", why);
  fail(code, why);
}

domain& domain_of(fid* f) {
  if (!is_class(f, FI_CLASS_DOMAIN)) fail(FI_EINVAL, "not a domain");
  return *domain::of(reinterpret_cast<fid_domain*>(f));
}

size_t iov_limit(const domain& dom) noexcept {
  size_t limit = 1;
  if (dom.info && dom.info->domain_attr && dom.info->domain_attr->mr_iov_limit)
    limit = dom.info->domain_attr->mr_iov_limit;
  return std::min(limit, mr_iov_max);
}

uint64_t domain_caps(const domain& dom) noexcept {
  return dom.info ? dom.info->caps : 0;
}

// Tells the provider (prov_domain::mr_changed) that registration `key` changed, so
// it can publish it. Called after the map changed, outside the map's lock.
void changed(domain& dom, uint64_t key) noexcept {
  if (dom.pd) dom.pd->mr_changed(key);
}

// FI_MR_ALLOCATED: every page of [addr, addr+len) must be mapped now.
// mincore() fails with ENOMEM on a range holding unmapped pages.
bool mapped(uint64_t addr, uint64_t len) noexcept {
  const uint64_t pg = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t start = addr & ~(pg - 1);
  const uint64_t span = addr + len - start;  // no overflow: checked by the caller
  uint64_t pages = span / pg + (span % pg != 0);
  unsigned char vec[4096];
  while (pages) {
    const uint64_t n = std::min<uint64_t>(pages, sizeof(vec));
    if (mincore(reinterpret_cast<void*>(static_cast<uintptr_t>(start)), n * pg, vec) != 0) return false;
    start += n * pg;
    pages -= n;
  }
  return true;
}

int mr_close(fid* f) noexcept;
int mr_bind(fid* f, fid* bfid, uint64_t flags) noexcept;
int mr_control(fid* f, int command, void* arg) noexcept;

fi_ops mr_fi_ops = {sizeof(fi_ops),  mr_close,     mr_bind,       mr_control,
                    fid_no_ops_open, fid_no_tostr, fid_no_ops_set};

struct reg_request {
  const iovec* iov;
  size_t count;
  uint64_t access;
  uint64_t offset;
  uint64_t requested_key;
  uint64_t flags;
  void* context;
};

int do_register(domain& dom, const reg_request& r, fid_mr** out) {
  if (!out) reject(dom, FI_EINVAL, "mr: NULL fid_mr**");
  if (!dom.mrs) reject(dom, FI_EOPBADSTATE, "mr: domain has no registration map");
  if (!r.iov) reject(dom, FI_EINVAL, "mr: NULL iov");
  if (r.count == 0 || r.count > iov_limit(dom))
    reject(dom, FI_EINVAL, "mr: iov_count is 0 or above mr_iov_limit");
  if (!only(r.access, mr_access_bits)) reject(dom, FI_EINVAL, "mr: unknown access bits");
  uint64_t allowed = FI_RMA_EVENT;
  if (domain_caps(dom) & FI_RMA_PMEM) allowed |= FI_RMA_PMEM;
  if (domain_caps(dom) & FI_HMEM) allowed |= FI_HMEM_DEVICE_ONLY | FI_HMEM_HOST_ALLOC;
  if (!only(r.flags, allowed)) reject(dom, FI_EBADFLAGS, "mr: unsupported registration flags");

  const uint64_t mode = dom.mr_mode;
  mr_entry e{};
  e.access = r.access;
  e.iov_count = static_cast<uint32_t>(r.count);
  uint64_t total = 0;
  for (size_t i = 0; i < r.count; ++i) {
    const uint64_t addr = reinterpret_cast<uintptr_t>(r.iov[i].iov_base);
    const uint64_t len = r.iov[i].iov_len;
    if (len == 0) reject(dom, FI_EINVAL, "mr: zero-length buffer");
    if (len > u64_max - addr) reject(dom, FI_EINVAL, "mr: buffer wraps around the address space");
    if (len > u64_max - total) reject(dom, FI_EINVAL, "mr: total length overflows");
    total += len;
    e.seg[i] = {addr, len};
  }
  e.len = total;
  // The man page reserves `offset`; weft gives it the one meaning it can have
  // without FI_MR_VIRT_ADDR (the address peers use for byte 0) and ignores it
  // with FI_MR_VIRT_ADDR, as other implementations do.
  e.base = (mode & FI_MR_VIRT_ADDR) ? e.seg[0].addr : r.offset;
  if (total > u64_max - e.base) reject(dom, FI_EINVAL, "mr: region's address range overflows");
  if (mode & FI_MR_ALLOCATED)
    for (size_t i = 0; i < r.count; ++i)
      if (!mapped(e.seg[i].addr, e.seg[i].len))
        reject(dom, FI_EINVAL, "mr: FI_MR_ALLOCATED and buffer not mapped");

  auto m = std::make_unique<mr>();
  m->dom = &dom;
  m->flags = r.flags;
  m->context = r.context;
  m->needs_ep = (mode & FI_MR_ENDPOINT) != 0;
  m->needs_enable = m->needs_ep || ((mode & FI_MR_RMA_EVENT) && (r.flags & FI_RMA_EVENT));
  m->enabled = !m->needs_enable;
  e.flags = m->enabled ? mr_entry_enabled : 0;
  e.key = r.requested_key;

  uint64_t desc = 0;
  // Legacy basic mode: the provider chooses the key, and weft chooses the
  // one the application asked for when it is free. Programs written for
  // libfabric, whose basic-mode keys are small integers handed out in order,
  // pass their requested keys to peers and expect them to work.
  const mr_map::key_choice keys = !(mode & FI_MR_PROV_KEY) ? mr_map::key_choice::requested
                                  : dom.mr_legacy_basic    ? mr_map::key_choice::requested_if_free
                                                           : mr_map::key_choice::provider;
  int ret = dom.mrs->insert(e, m.get(), keys, &desc);
  if (ret)
    reject(dom, -ret, ret == -FI_ENOKEY ? "mr: requested key in use" : "mr: key rejected or no key left");
  m->entry = e;
  m->fid_.fid.fclass = FI_CLASS_MR;
  m->fid_.fid.context = r.context;
  m->fid_.fid.ops = &mr_fi_ops;
  m->fid_.mem_desc = reinterpret_cast<void*>(static_cast<uintptr_t>(desc));
  m->fid_.key = (mode & FI_MR_RAW) ? FI_KEY_NOTAVAIL : e.key;
  dom.users_.add();
  changed(dom, e.key);

  if (dom.eq) {
    // Asynchronous registration (domain bound with FI_REG_MR): the fid_mr is
    // written before the event can be read, and the event is only posted on success.
    fid_mr* const previous = *out;
    *out = &m->fid_;
    fi_eq_entry ev{&m->fid_.fid, r.context, 0};
    const ssize_t posted = eq_post(dom.eq, FI_MR_COMPLETE, &ev, sizeof(ev), 0);
    if (posted < 0) {
      *out = previous;
      dom.mrs->erase(e.key);
      changed(dom, e.key);
      dom.users_.drop();
      return static_cast<int>(posted);
    }
    m.release();
    return 0;
  }
  *out = &m.release()->fid_;
  return 0;
}

int mr_reg(fid* f, const void* buf, size_t len, uint64_t access, uint64_t offset, uint64_t requested_key,
           uint64_t flags, fid_mr** out, void* context) noexcept {
  return guard([&] {
    domain& dom = domain_of(f);
    iovec iov{const_cast<void*>(buf), len};
    return do_register(dom, {&iov, 1, access, offset, requested_key, flags, context}, out);
  });
}

int mr_regv(fid* f, const iovec* iov, size_t count, uint64_t access, uint64_t offset, uint64_t requested_key,
            uint64_t flags, fid_mr** out, void* context) noexcept {
  return guard([&] {
    domain& dom = domain_of(f);
    return do_register(dom, {iov, count, access, offset, requested_key, flags, context}, out);
  });
}

int mr_regattr(fid* f, const fi_mr_attr* attr, uint64_t flags, fid_mr** out) noexcept {
  return guard([&] {
    domain& dom = domain_of(f);
    if (!attr) reject(dom, FI_EINVAL, "mr: NULL attr");
    // fi_mr_attr grew: auth keys with 1.5, iface/device with FI_HMEM (1.10).
    // Read only the fields the caller's API version has.
    if (dom.api_version >= FI_VERSION(1, 5) && attr->auth_key_size != 0)
      reject(dom, FI_EINVAL, "mr: authorization keys are not supported");
    if ((domain_caps(dom) & FI_HMEM) && dom.api_version >= FI_VERSION(1, 10) && attr->iface != FI_HMEM_SYSTEM)
      reject(dom, FI_ENOSYS, "mr: device memory is not supported");
    return do_register(dom,
                       {attr->mr_iov, attr->iov_count, attr->access, attr->offset, attr->requested_key, flags,
                        attr->context},
                       out);
  });
}

int mr_close(fid* f) noexcept {
  return guard([&] {
    mr* m = from_fid<mr>(f);
    domain& dom = *m->dom;
    const uint64_t key = m->entry.key;
    dom.mrs->erase(key);
    changed(dom, key);
    if (m->cntr) cntr_drop(m->cntr);
    delete m;
    dom.users_.drop();
    return 0;
  });
}

int mr_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  return guard([&] {
    mr& m = *from_fid<mr>(f);
    if (!bfid) return -FI_EINVAL;
    std::lock_guard lk(m.lock_);
    // After fi_mr_enable of a region created disabled, no more bindings.
    const bool sealed = m.needs_enable && m.enabled;
    switch (bfid->fclass) {
      case FI_CLASS_EP:
      case FI_CLASS_SEP:
        if (flags) return -FI_EBADFLAGS;
        if (sealed) return -FI_EOPBADSTATE;
        if (m.ep && m.ep != bfid) return -FI_EINVAL;  // one endpoint per region
        m.ep = bfid;
        return 0;
      case FI_CLASS_CNTR:
        if (!is_cntr(bfid)) return -FI_EINVAL;
        if (!(domain_caps(*m.dom) & FI_RMA_EVENT)) return -FI_ENOSYS;  // no remote-access events
        if (!flags || !only(flags, FI_REMOTE_READ | FI_REMOTE_WRITE)) return -FI_EBADFLAGS;
        if ((m.dom->mr_mode & FI_MR_RMA_EVENT) && !(m.flags & FI_RMA_EVENT)) return -FI_EINVAL;
        if (sealed) return -FI_EOPBADSTATE;
        if (m.cntr && &m.cntr->fid != bfid) return -FI_EINVAL;  // one counter per region
        if (!m.cntr) {
          m.cntr = reinterpret_cast<fid_cntr*>(bfid);
          cntr_take(m.cntr);  // the counter stays open while the region counts into it
        }
        m.cntr_flags |= flags;
        return 0;
      default:
        return -FI_EINVAL;
    }
  });
}

int mr_enable(mr& m) {
  std::lock_guard lk(m.lock_);
  if (m.enabled) return 0;
  if (m.needs_ep && !m.ep) return -FI_EOPBADSTATE;  // FI_MR_ENDPOINT: bind first
  m.dom->mrs->update_flags(m.entry.key, mr_entry_enabled, 0);
  m.entry.flags |= mr_entry_enabled;
  m.enabled = true;
  changed(*m.dom, m.entry.key);
  return 0;
}

int mr_get_raw(mr& m, struct fi_mr_raw_attr* a) {
  if (!a || !a->key_size || !a->base_addr) return -FI_EINVAL;
  if (a->flags) return -FI_EBADFLAGS;
  const size_t need = m.dom->mrs->key_size();
  if (*a->key_size < need) {
    *a->key_size = need;
    return -FI_ETOOSMALL;
  }
  if (!a->raw_key) return -FI_EINVAL;
  for (size_t i = 0; i < need; ++i) a->raw_key[i] = static_cast<uint8_t>(m.entry.key >> (8 * i));
  *a->key_size = need;
  *a->base_addr = m.entry.base;
  return 0;
}

// weft keeps no page translations (CMA and sockets resolve pages at each
// access), so a refresh has nothing to update: it checks its arguments.
int mr_refresh(mr& m, const fi_mr_modify* mod) {
  if (!mod) return -FI_EINVAL;
  if (mod->flags) return -FI_EBADFLAGS;
  const fi_mr_attr& a = mod->attr;
  if (a.iov_count && !a.mr_iov) return -FI_EINVAL;
  for (size_t i = 0; i < a.iov_count; ++i)
    if (!covered(m.entry, reinterpret_cast<uintptr_t>(a.mr_iov[i].iov_base), a.mr_iov[i].iov_len))
      return -FI_EINVAL;
  return 0;
}

int mr_control(fid* f, int command, void* arg) noexcept {
  return guard([&] {
    mr& m = *from_fid<mr>(f);
    switch (command) {
      case FI_ENABLE:
        return mr_enable(m);
      case FI_GET_RAW_MR:
        return mr_get_raw(m, static_cast<struct fi_mr_raw_attr*>(arg));
      case FI_REFRESH:
        return mr_refresh(m, static_cast<const fi_mr_modify*>(arg));
      default:
        return -FI_ENOSYS;
    }
  });
}

uint64_t random_seed() noexcept {
  uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  try {
    std::random_device rd;
    seed ^= (uint64_t{rd()} << 32) ^ rd();
  } catch (...) {
    // the clock alone will do
  }
  return seed;
}

}  // namespace

fi_ops_mr mr_ops = {sizeof(fi_ops_mr), mr_reg, mr_regv, mr_regattr};

void mr_map_create(domain& dom) {
  size_t key_size = 8;
  if (dom.info && dom.info->domain_attr) key_size = dom.info->domain_attr->mr_key_size;
  dom.mrs = new mr_map(key_size, random_seed());
}

void mr_map_destroy(domain& dom) noexcept {
  delete dom.mrs;
  dom.mrs = nullptr;
}

int mr_map_raw(domain& dom, struct fi_mr_map_raw* a) noexcept {
  if (!a || !a->raw_key || !a->key) return -FI_EINVAL;
  if (a->flags) return -FI_EBADFLAGS;
  if (!dom.mrs) return -FI_EOPBADSTATE;
  if (a->key_size == 0 || a->key_size > dom.mrs->key_size()) return -FI_EINVAL;
  uint64_t key = 0;
  for (size_t i = 0; i < a->key_size; ++i) key |= uint64_t{a->raw_key[i]} << (8 * i);
  *a->key = key;
  return 0;
}

int mr_unmap_key(domain&, const uint64_t* key) noexcept {
  return key ? 0 : -FI_EINVAL;
}

}  // namespace weft
