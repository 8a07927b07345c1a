// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: the domain — the provider's part of fi_domain, and the
// registration table it publishes so that initiators validate and move RMA
// data themselves.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "core/params.hpp"
#include "prov/shm/shm.hpp"

namespace weft::shm {

config read_config() {
  config c;
  c.cma = cma_usable(param_bool_or_default("shm", "disable_cma"));
  c.split = c.cma && param_bool_or_default("shm", "split_copy");
  c.map_mr = c.cma && param_bool_or_default("shm", "map_mr");
  c.inject_size = static_cast<size_t>(param_int_or_default("shm", "inject_size"));
  return c;
}

shm_domain::shm_domain(domain& d) : dom(d), cfg(read_config()) {
  region.create(region_label("domain"), domain_region_size);
  auto* h = reinterpret_cast<domain_hdr*>(region.base());
  h->version = proto_version;
  h->pid = getpid();
  h->slots = mr_table_slots;
  h->size = domain_region_size;
  h->table_off = domain_table_off;
  h->magic = domain_magic;
}

int shm_domain::endpoint(fi_info* info, fid_ep** out, void* context) {
  if (!info || !out) return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_DGRAM &&
      info->ep_attr->type != FI_EP_UNSPEC)
    return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type == FI_EP_DGRAM && info->ep_attr->max_msg_size > dgram_max)
    return -FI_EINVAL;
  if (info->fabric_attr && info->fabric_attr->prov_name && !names_provider(info->fabric_attr->prov_name, "shm"))
    return -FI_EINVAL;
  if (info->tx_attr && info->tx_attr->inject_size > inject_max) return -FI_EINVAL;
  if (info->ep_attr && ((info->ep_attr->tx_ctx_cnt > 1 && info->ep_attr->tx_ctx_cnt != FI_SHARED_CONTEXT) ||
                        (info->ep_attr->rx_ctx_cnt > 1 && info->ep_attr->rx_ctx_cnt != FI_SHARED_CONTEXT)))
    return -FI_EINVAL;  // several contexts: fi_scalable_ep
  auto e = make_ep(dom, info, context, ep_role::endpoint, endpoint_name(info, ""));
  dom.users_.add();
  *out = &e.release()->fid_;
  return 0;
}

int shm_domain::stx_ctx(fi_tx_attr* attr, fid_stx** out, void* context) {
  return stx_open(dom, attr, out, context, inject_max);
}

int shm_domain::srx_ctx(fi_rx_attr* attr, fid_ep** out, void* context) {
  return srx_open(dom, attr, out, context);
}

int shm_domain::query_atomic(fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) {
  return shm::query_atomic(dt, op, attr, flags);
}

namespace {
mr_slot* table(unsigned char* base) {
  return reinterpret_cast<mr_slot*>(base + domain_table_off);
}

// A slot's state and entry are read while they may be written (the sequence
// lock then sends the reader round again): both sides move them word by word
// as relaxed atomics, which is what makes that race defined.
using word = uint64_t __attribute__((may_alias));
constexpr size_t entry_words = sizeof(mr_entry) / sizeof(word);
static_assert(sizeof(mr_entry) % sizeof(word) == 0 && offsetof(mr_slot, entry) % alignof(word) == 0);

void write_slot(mr_slot& s, uint32_t state, const mr_entry* e) noexcept {
  // Sequence lock: odd while writing. The acquire RMW keeps the data writes
  // after it; the release store publishes them.
  uint64_t seq = s.seq.fetch_add(1, std::memory_order_acq_rel);
  __atomic_store_n(&s.state, state, __ATOMIC_RELAXED);
  if (e) {
    word w[entry_words];
    memcpy(w, e, sizeof w);
    auto* to = reinterpret_cast<word*>(&s.entry);
    for (size_t i = 0; i < entry_words; ++i) __atomic_store_n(&to[i], w[i], __ATOMIC_RELAXED);
  }
  s.seq.store(seq + 2, std::memory_order_release);
}

void read_slot(const mr_slot& s, uint32_t* state, mr_entry* e) noexcept {
  *state = __atomic_load_n(&s.state, __ATOMIC_RELAXED);
  word w[entry_words];
  auto* from = reinterpret_cast<const word*>(&s.entry);
  for (size_t i = 0; i < entry_words; ++i) w[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
  memcpy(e, w, sizeof w);
}
}  // namespace

shm_domain::~shm_domain() {
  for (backing& b : backings)
    if (b.fd >= 0) close(b.fd);
}

namespace {
// A read-write fd of that file, sealed against shrinking, or -1.
bool usable_backing(int fd, uint64_t dev, uint64_t ino) noexcept {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != dev || st.st_ino != ino) return false;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & O_ACCMODE) != O_RDWR) return false;
  int seals = fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (seals & F_SEAL_SHRINK);
}

int find_backing_fd(uint64_t dev, uint64_t ino, uint64_t start, uint64_t end) noexcept {
  // An fd of the file the application still holds ...
  if (DIR* dir = opendir("/proc/self/fd")) {
    int own = dirfd(dir);
    int found = -1;
    while (dirent* de = readdir(dir)) {
      char* stop = nullptr;
      long n = strtol(de->d_name, &stop, 10);
      if (!*de->d_name || *stop || n < 0 || n == own) continue;
      if (usable_backing(static_cast<int>(n), dev, ino)) {
        found = fcntl(static_cast<int>(n), F_DUPFD_CLOEXEC, 3);
        break;
      }
    }
    closedir(dir);
    if (found >= 0) return found;
  }
  // ... or the mapping itself (needs CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN).
  char path[64];
  snprintf(path, sizeof path, "/proc/self/map_files/%lx-%lx", static_cast<unsigned long>(start),
           static_cast<unsigned long>(end));
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  if (usable_backing(fd, dev, ino)) return fd;
  close(fd);
  return -1;
}

void drop_backing(shm_domain& sd, shm_domain::published& pub) noexcept {
  if (pub.backing == SIZE_MAX) return;
  shm_domain::backing& b = sd.backings[pub.backing];
  if (--b.refs == 0 && b.fd >= 0) {
    close(b.fd);
    b = shm_domain::backing{};
  }
  pub.backing = SIZE_MAX;
}

// Fills e.prov with the registration's shared backing, when it has one.
void attach_backing(shm_domain& sd, mr_entry& e) noexcept {
  if (!sd.cfg.map_mr || e.iov_count != 1 || !e.seg[0].len) return;
  try {
    auto [it, fresh] = sd.by_key.try_emplace(e.key);
    shm_domain::published& pub = it->second;
    if (!fresh && pub.addr == e.seg[0].addr && pub.len == e.seg[0].len) {
      memcpy(e.prov, pub.prov, sizeof e.prov);  // re-published (enable): nothing changed
      return;
    }
    drop_backing(sd, pub);
    pub = shm_domain::published{e.seg[0].addr, e.seg[0].len, {}, SIZE_MAX};
    shared_mapping m;
    if (!shared_mapping_of(sd.vmas, e.seg[0].addr, e.seg[0].len, &m)) return;
    auto [dev, ino, off, start, end] = m;
    size_t idx = SIZE_MAX, free_idx = SIZE_MAX;
    for (size_t i = 0; i < sd.backings.size(); ++i) {
      if (sd.backings[i].refs && sd.backings[i].dev == dev && sd.backings[i].ino == ino) idx = i;
      if (!sd.backings[i].refs && free_idx == SIZE_MAX) free_idx = i;
    }
    if (idx == SIZE_MAX) {
      int fd = find_backing_fd(dev, ino, start, end);
      if (fd < 0) return;
      if (free_idx == SIZE_MAX) {
        sd.backings.emplace_back();
        free_idx = sd.backings.size() - 1;
      }
      idx = free_idx;
      uint32_t gen = sd.next_gen++ & 0x7fffffffu;
      if (!gen) gen = sd.next_gen++;
      sd.backings[idx] = shm_domain::backing{dev, ino, fd, gen, 0};
    }
    shm_domain::backing& b = sd.backings[idx];
    ++b.refs;
    pub.backing = idx;
    pub.prov[0] = backing_valid | uint64_t{b.gen} << 32 | static_cast<uint32_t>(b.fd);
    pub.prov[1] = off;
    pub.prov[2] = ino;
    memcpy(e.prov, pub.prov, sizeof e.prov);
  } catch (...) {
    // No backing published: initiators use CMA.
  }
}

void detach_backing(shm_domain& sd, uint64_t key) noexcept {
  auto it = sd.by_key.find(key);
  if (it == sd.by_key.end()) return;
  drop_backing(sd, it->second);
  sd.by_key.erase(it);
}
}  // namespace

namespace {
// The distance from the slot `from` forward to `to`.
uint32_t forward(uint32_t from, uint32_t to) noexcept {
  return (to - from) & (mr_table_slots - 1);
}
}  // namespace

// A withdrawn entry leaves a hole that the entries after it fill, each moved
// back as far as its home slot allows, until an empty slot (deletion by
// backward shift). Tombstones instead would pile up: registrations made and
// withdrawn one after another (the UCP face's rendezvous sends, each with a
// fresh key) left them faster than inserts reused them, and every insert and
// every lookup of a missing key walked them. A lookup in another process
// may pass a hole before an entry moves into it and reach the entry's old
// slot after it moved on: it found nothing, but table_moves changed, and it
// looks again (lookup_mr).
void write_table(domain_hdr* h, mr_slot* t, uint64_t key, bool live, const mr_entry& e) noexcept {
  constexpr uint32_t mask = mr_table_slots - 1;
  const uint32_t start = mr_hash(key) & mask;
  for (uint32_t i = 0; i < mr_table_slots; ++i) {
    const uint32_t at = (start + i) & mask;
    mr_slot& s = t[at];
    if (s.state == 0) {
      if (live) write_slot(s, 1, &e);
      return;
    }
    if (s.entry.key != key) continue;
    if (live) {
      write_slot(s, 1, &e);
      return;
    }
    uint32_t hole = at;
    for (uint32_t j = (hole + 1) & mask; j != at && t[j].state != 0; j = (j + 1) & mask) {
      // The entry at j may move to the hole if its home is not after it.
      const uint32_t home = mr_hash(t[j].entry.key) & mask;
      if (forward(home, j) < forward(hole, j)) continue;
      write_slot(t[hole], 1, &t[j].entry);
      h->table_moves.fetch_add(1, std::memory_order_acq_rel);
      hole = j;
    }
    write_slot(t[hole], 0, nullptr);
    return;
  }
}

void shm_domain::mr_changed(uint64_t key) noexcept {
  std::lock_guard g(lock);
  mr_entry e;
  bool live = dom.mrs && dom.mrs->find(key, &e);
  if (live) attach_backing(*this, e);
  write_table(reinterpret_cast<domain_hdr*>(region.base()), table(region.base()), key, live, e);
  // A withdrawn registration's backing fd closes only once no initiator can
  // read it from the table any more.
  if (!live) detach_backing(*this, key);
}

namespace {
// One pass over the probe sequence of `key`.
bool probe(const mr_slot* t, uint64_t key, mr_entry* out) noexcept {
  uint32_t start = mr_hash(key) & (mr_table_slots - 1);
  for (uint32_t i = 0; i < mr_table_slots; ++i) {
    const mr_slot& s = t[(start + i) & (mr_table_slots - 1)];
    for (int attempt = 0; attempt < 100; ++attempt) {
      uint64_t seq = s.seq.load(std::memory_order_acquire);
      if (seq & 1) continue;
      uint32_t state;
      mr_entry e;
      read_slot(s, &state, &e);
      // The release RMW keeps the copies above before the re-check.
      if (const_cast<mr_slot&>(s).seq.fetch_add(0, std::memory_order_acq_rel) != seq) continue;
      if (state == 0) return false;
      if (e.key == key) {
        *out = e;
        return true;
      }
      break;
    }
  }
  return false;
}
}  // namespace

bool lookup_mr(const unsigned char* base, uint64_t key, mr_entry* out) noexcept {
  auto* h = const_cast<domain_hdr*>(reinterpret_cast<const domain_hdr*>(base));
  const mr_slot* t = reinterpret_cast<const mr_slot*>(base + domain_table_off);
  // An entry found is right whenever it was read; nothing found is right
  // only if no entry moved meanwhile (write_table).
  for (int pass = 0; pass < 100; ++pass) {
    uint64_t moves = h->table_moves.load(std::memory_order_acquire);
    if (probe(t, key, out)) return true;
    if (h->table_moves.fetch_add(0, std::memory_order_acq_rel) == moves) return false;
  }
  return false;
}

}  // namespace weft::shm
