// SPDX-License-Identifier: BSD-3-Clause
// Address vectors (man fi_av): TABLE and MAP, insert / insertsvc / insertsym /
// remove / lookup / straddr, FI_EVENT asynchronous inserts through a bound
// EQ, and named AVs shared by the processes of one host.
//
// Choices the man page leaves to the provider:
// * FI_AV_UNSPEC is the domain's av_type if it names one, else FI_AV_TABLE.
//   MAP and TABLE hand out the same fi_addr_t (the slot index, see av.hpp),
//   so an fi_addr_t is valid in every process sharing a named AV, whatever
//   map_addr each one passes.
// * Freed indices are reused lowest first ("the lowest index that corresponds
//   to an unused table location").
// * Duplicates are not detected: each insert takes a new slot.
// * fi_av_insert with a NULL addr inserts `count` "any" entries (0.0.0.0's
//   meaning, man fi_av): no bytes (fi_av_lookup says length 0). A directed
//   receive from one accepts every sender (util/rx.hpp); nothing can be sent
//   to one (-FI_EINVAL, as for an address not in the AV): there is no peer.
// * FI_ADDR_STR addresses to fi_av_insert are packed NUL-terminated strings
//   one after another (as libfabric's shm provider reads them), each at most
//   the domain's addrlen bytes with its NUL and starting with "fi_<prov>://".
// * FI_SYNC_ERR writes 0 or a positive FI_E* code per address.
// * Asynchronous (FI_EVENT) inserts complete before the call returns: the
//   error entries (data = index of the address in the call, err = FI_E*) and
//   then one FI_AV_COMPLETE (data = count inserted) are queued on the EQ.
//   The bound EQ is referenced (fi_close(eq) is -FI_EBUSY) until the AV closes;
//   one EQ per AV (a second fi_av_bind is -FI_EBUSY). If the EQ refuses an
//   entry, the insert returns that error, though the addresses stay inserted.
// * Errors: unknown flags -FI_EBADFLAGS; bad arguments, unknown attr type,
//   fi_addr out of range or not in use (lookup/remove) -FI_EINVAL; insert or
//   remove on an FI_READ AV -FI_EACCES; FI_READ of a missing name -FI_ENOENT.
//   Per address (sync: fi_addr FI_ADDR_NOTAVAIL, FI_SYNC_ERR code; FI_EVENT:
//   an error entry): FI_EINVAL (malformed address or name), FI_EADDRNOTAVAIL /
//   FI_ENODATA (name resolution), FI_ENOSPC (named AV full), FI_ENOMEM.
// * Named AVs: a region "/weft-av-<uid>-<prov>-<name>" under /dev/shm, mode
//   0600, checked to belong to us. The processes that have it open are listed
//   in it; the last to close it unlinks the name. A region whose listed
//   processes are all dead is stale: reopening it for writing starts it
//   afresh, opening it FI_READ fails with -FI_ENOENT, like a missing one.
//   Its capacity is fixed when created (attr->count, default 1024).
//   attr->map_addr is a hint for where the region is mapped; the address
//   used is returned there when it was 0.
#include "util/av.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "util/addr.hpp"
#include "util/coll.hpp"
#include "util/eq.hpp"
#include "util/util.hpp"

namespace weft {

namespace {

constexpr uint64_t av_open_flags = FI_EVENT | FI_READ | FI_SYMMETRIC;
constexpr uint64_t av_insert_flags = FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID;
constexpr int max_rx_ctx_bits = 31;
constexpr uint64_t max_slots = (uint64_t{1} << av::chunk0_shift) * ((uint64_t{1} << av::max_chunks) - 1);
constexpr uint64_t private_prealloc_max = uint64_t{1} << 16;  // attr->count hint honoured up to this
constexpr uint64_t named_default_count = 1024;
constexpr uint64_t named_max_count = uint64_t{1} << 24;

constexpr size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}
// First slot index of chunk k.
constexpr uint64_t chunk_start(unsigned k) {
  return ((uint64_t{1} << av::chunk0_shift) << k) - (uint64_t{1} << av::chunk0_shift);
}
constexpr uint64_t chunk_slots(unsigned k) {
  return (uint64_t{1} << av::chunk0_shift) << k;
}

static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);
static_assert(alignof(av::slot_hdr) == 8);

uint32_t load_state(const av::slot_hdr* s) noexcept {
  return std::atomic_ref<const uint32_t>(s->state).load(std::memory_order_acquire);
}
void store_state(av::slot_hdr* s, uint32_t v) noexcept {
  std::atomic_ref<uint32_t>(s->state).store(v, std::memory_order_release);
}

}  // namespace

// ------------------------------------------------------------------ private

// Hash of address bytes, transparent so that find() looks up a string_view
// without building a std::string (no allocation).
struct bytes_hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct av_private {
  std::mutex mu;
  // Address bytes -> the entries holding them: the first inserted of those
  // still in the AV (what find answers), and how many there are, so that
  // removing that one hands the answer to another instead of losing it.
  struct holders {
    uint64_t idx;
    uint64_t n;
  };
  std::unordered_map<std::string, holders, bytes_hash, std::equal_to<>> rev;
  std::vector<unsigned char*> owned;  // chunks to free
};

// ------------------------------------------------------------------- shared

namespace {

constexpr uint64_t shared_magic = 0x7765667441560001ull;  // "weftAV", layout 1
constexpr size_t max_attach = 1024;

// The head of a named AV's region; the slots follow at slots_offset. All
// fields but magic are written under `lock` (or by the creator before magic
// is published). pthread_mutex_t is glibc's layout: every sharer runs on this
// host's libc.
struct shared_region {
  uint64_t magic;  // atomic_ref; stored last (release) by the creator
  uint32_t addr_format;
  uint32_t unlinked;  // the last closer unlinked the name: reopen
  uint64_t max_len;
  uint64_t stride;
  uint64_t capacity;
  uint64_t hint;  // no free slot below
  uint64_t high;  // no slot at or above was ever used
  char prov[16];
  pthread_mutex_t lock;  // process-shared, robust
  uint32_t nattached;
  int32_t pids[max_attach];  // processes that have it open (one entry per open)
};
static_assert(std::is_standard_layout_v<shared_region>);
static_assert(std::is_trivially_copyable_v<shared_region>);
constexpr size_t slots_offset = round_up(sizeof(shared_region), 64);

bool alive(int32_t pid) noexcept {
  return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

// Drops dead processes from the list. Under the region lock.
void prune(shared_region* r) noexcept {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->nattached && i < max_attach; ++i)
    if (alive(r->pids[i])) r->pids[n++] = r->pids[i];
  r->nattached = n;
}

void lock_region(shared_region* r) noexcept {
  int rc = pthread_mutex_lock(&r->lock);
  if (rc == EOWNERDEAD) {
    // A process died holding the lock: its update may be half done, but the
    // table stays usable (each slot's state word is published last).
    WEFT_WARN(FI_LOG_AV, "named AV: previous lock owner died");
    pthread_mutex_consistent(&r->lock);
  }
}

std::string shared_path(const char* prov, const char* name) {
  std::string p = "/weft-av-" + std::to_string(geteuid()) + "-" + prov + "-";
  static constexpr char hex[] = "0123456789abcdef";
  for (const unsigned char* c = reinterpret_cast<const unsigned char*>(name); *c; ++c) {
    if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
        *c == '_' || *c == '-') {
      p.push_back(char(*c));
    } else {
      p.push_back('%');
      p.push_back(hex[*c >> 4]);
      p.push_back(hex[*c & 15]);
    }
  }
  return p;
}

}  // namespace

struct av_shared {
  std::string path;
  int fd = -1;
  void* base = MAP_FAILED;
  size_t size = 0;
  shared_region* hdr = nullptr;
  bool attached = false;  // listed in the region: detach() on close

  ~av_shared() {
    if (base != MAP_FAILED) munmap(base, size);
    if (fd >= 0) close(fd);
  }

  unsigned char* slots() const noexcept { return static_cast<unsigned char*>(base) + slots_offset; }

  // Creates or opens the region for `a`; the fields of `a` (format, sizes)
  // are already set. Throws weft::error.
  void open(av& a, const fi_av_attr& attr) {
    path = shared_path(a.dom_->prov->name(), attr.name);
    if (path.size() > 250) fail(FI_EINVAL, "AV name too long");
    void* hint = attr.map_addr;
    for (int attempt = 0; attempt < 8; ++attempt) {
      if (!a.read_only_) {
        fd = shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) return create(a, attr, hint);
        if (errno != EEXIST) fail(FI_EOTHER, "shm_open");
      }
      fd = shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0);
      if (fd < 0) {
        if (errno != ENOENT) fail(errno == EACCES ? FI_EACCES : FI_EOTHER, "shm_open");
        if (a.read_only_) fail(FI_ENOENT, "named AV does not exist");
        continue;  // unlinked between our two calls: create it
      }
      if (attach(a, hint)) return;
      // It was being unlinked, or is stale: start over.
      reset();
    }
    fail(FI_EAGAIN, "named AV keeps changing");
  }

  void reset() noexcept {
    if (base != MAP_FAILED) munmap(base, size);
    if (fd >= 0) close(fd);
    base = MAP_FAILED;
    fd = -1;
    hdr = nullptr;
  }

  void map(void* hint) {
    base = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) fail(FI_ENOMEM, "mmap named AV");
    hdr = static_cast<shared_region*>(base);
  }

  void create(av& a, const fi_av_attr& attr, void* hint) {
    struct unlink_on_fail {
      av_shared* s;
      ~unlink_on_fail() {
        if (s) shm_unlink(s->path.c_str());
      }
    } guard{this};
    uint64_t cap = attr.count ? attr.count : named_default_count;
    size = slots_offset + size_t(cap) * a.stride_;
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, off_t(size)) != 0) fail(FI_ENOMEM, "ftruncate named AV");
    map(hint);
    shared_region* r = hdr;
    r->addr_format = a.format_;
    r->unlinked = 0;
    r->max_len = a.max_len_;
    r->stride = a.stride_;
    r->capacity = cap;
    r->hint = r->high = 0;
    std::strncpy(r->prov, a.dom_->prov->name(), sizeof r->prov - 1);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&r->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    if (rc != 0) fail(FI_EOTHER, "pthread_mutex_init");
    r->nattached = 1;
    r->pids[0] = getpid();
    std::atomic_ref<uint64_t>(r->magic).store(shared_magic, std::memory_order_release);
    guard.s = nullptr;
    attached = true;
    publish(a);
  }

  // Opens an existing region. false: retry (being unlinked, or stale).
  bool attach(av& a, void* hint) {
    struct stat st;
    // The creator sizes the file before anything else, then publishes magic.
    for (int i = 0;; ++i) {
      if (fstat(fd, &st) != 0) fail(FI_EOTHER, "fstat named AV");
      if (st.st_uid != geteuid() || (st.st_mode & 077)) fail(FI_EACCES, "named AV not ours, or not private");
      if (size_t(st.st_size) >= slots_offset) break;
      if (i == 200) fail(FI_ETIMEDOUT, "named AV never initialised");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    size = size_t(st.st_size);
    map(hint);
    for (int i = 0; std::atomic_ref<uint64_t>(hdr->magic).load(std::memory_order_acquire) != shared_magic;
         ++i) {
      if (i == 200) fail(FI_ETIMEDOUT, "named AV never initialised");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    shared_region* r = hdr;
    if (r->addr_format != a.format_ || r->max_len != a.max_len_ || r->stride != a.stride_ ||
        strncmp(r->prov, a.dom_->prov->name(), sizeof r->prov) != 0 ||
        slots_offset + r->capacity * r->stride > size)
      fail(FI_EINVAL, "named AV of another provider or address format");
    lock_region(r);
    if (r->unlinked) {
      pthread_mutex_unlock(&r->lock);
      return false;
    }
    prune(r);
    if (r->nattached == 0) {
      // Stale: every process that had it open died without closing it.
      if (a.read_only_) {
        r->unlinked = 1;
        shm_unlink(path.c_str());
        pthread_mutex_unlock(&r->lock);
        fail(FI_ENOENT, "named AV is stale");
      }
      std::memset(slots(), 0, size_t(r->capacity) * r->stride);
      r->hint = r->high = 0;
    }
    if (r->nattached == max_attach) {
      pthread_mutex_unlock(&r->lock);
      fail(FI_ENOSPC, "named AV opened by too many processes");
    }
    r->pids[r->nattached++] = getpid();
    pthread_mutex_unlock(&r->lock);
    attached = true;
    publish(a);
    return true;
  }

  // Points a's chunk table into the region.
  void publish(av& a) noexcept {
    uint64_t cap = hdr->capacity;
    for (unsigned k = 0; k < av::max_chunks && chunk_start(k) < cap; ++k)
      a.chunks_[k].store(slots() + chunk_start(k) * a.stride_, std::memory_order_relaxed);
    a.capacity_.store(cap, std::memory_order_release);
  }

  void detach() noexcept {
    if (!attached) return;
    attached = false;
    shared_region* r = hdr;
    lock_region(r);
    int32_t me = getpid();
    for (uint32_t i = 0; i < r->nattached; ++i) {
      if (r->pids[i] == me) {
        r->pids[i] = r->pids[--r->nattached];
        break;
      }
    }
    prune(r);
    if (r->nattached == 0) {
      r->unlinked = 1;
      shm_unlink(path.c_str());
    }
    pthread_mutex_unlock(&r->lock);
  }
};

// ---------------------------------------------------------------------- av

av::av(domain& d, const fi_av_attr& attr, void* context)
    : dom_(&d),
      type_(attr.type),
      rx_ctx_bits_(attr.rx_ctx_bits),
      index_mask_(attr.rx_ctx_bits ? ~uint64_t{0} >> attr.rx_ctx_bits : ~uint64_t{0}),
      flags_(attr.flags),
      format_(d.addr_format),
      max_len_(addr::max_len(d.addr_format, d.addrlen)),
      stride_(round_up(sizeof(slot_hdr) + max_len_, alignof(slot_hdr))),
      read_only_(attr.flags & FI_READ) {
  std::memset(&fid_, 0, sizeof fid_);
  fid_.fid.fclass = FI_CLASS_AV;
  fid_.fid.context = context;
  if (format_ == FI_ADDR_STR) prefix_ = addr::str_prefix(d.prov->name());
}

av::~av() {
  if (eq_) eq_drop(eq_);
  if (shared_) {
    shared_->detach();
    delete shared_;
  }
  if (priv_) {
    for (unsigned char* c : priv_->owned) std::free(c);
    delete priv_;
  }
}

std::string_view av::str_prefix() const noexcept {
  return prefix_;
}

void av::lock() const {
  if (shared_)
    lock_region(shared_->hdr);
  else
    priv_->mu.lock();
}

void av::unlock() const noexcept {
  if (shared_)
    pthread_mutex_unlock(&shared_->hdr->lock);
  else
    priv_->mu.unlock();
}

// Adds chunks until `need` slots exist. Private AVs only; under the lock.
void av::grow(uint64_t need) {
  uint64_t cap = capacity_.load(std::memory_order_relaxed);
  while (cap < need) {
    unsigned k = 0;
    while (chunk_start(k) < cap) ++k;
    if (k >= max_chunks) fail(FI_ENOSPC, "AV full");
    auto* c = static_cast<unsigned char*>(std::calloc(chunk_slots(k), stride_));
    if (!c) throw std::bad_alloc();
    priv_->owned.push_back(c);
    chunks_[k].store(c, std::memory_order_relaxed);
    cap = chunk_start(k + 1);
    capacity_.store(cap, std::memory_order_release);
  }
}

// Under the lock. Returns 0 or a positive FI_E* code.
int av::insert_one(const void* addr, size_t len, uint64_t user_id, bool use_user_id, fi_addr_t& out) {
  uint64_t& hint = shared_ ? shared_->hdr->hint : hint_;
  uint64_t& high = shared_ ? shared_->hdr->high : high_;
  uint64_t idx = hint;
  while (idx < high && (load_state(slot_at(idx)) & 1)) ++idx;
  if (idx > index_mask_ || idx >= max_slots) return FI_ENOSPC;
  if (idx >= capacity_.load(std::memory_order_relaxed)) {
    if (shared_) return FI_ENOSPC;
    grow(idx + 1);
  }
  if (dom_->pd)
    if (int err = dom_->pd->av_filled(*this, idx, addr, len)) return err;
  if (priv_ && len) rev_add(addr, len, idx);
  slot_hdr* s = slot_at(idx);
  std::memcpy(s + 1, addr, len);
  s->len = uint32_t(len);
  s->user_id = use_user_id ? user_id : idx;
  uint32_t gen = (load_state(s) >> 1) + 1;
  store_state(s, (gen << 1) | 1);
  hint = idx + 1;
  if (idx >= high) high = idx + 1;
  out = idx;
  return 0;
}

// The reverse map of a private AV, under the lock. An insert adds a holder
// (the answer stays the first one); a removal takes one away, and when it
// was the answer, the lowest other in-use slot with the same bytes becomes
// it (a walk only when duplicates exist).
void av::rev_add(const void* addr, size_t len, uint64_t idx) {
  auto [it, added] = priv_->rev.try_emplace(std::string(static_cast<const char*>(addr), len),
                                            av_private::holders{idx, 1});
  if (!added) ++it->second.n;
}

void av::rev_drop(uint64_t idx) noexcept {
  const slot_hdr* s = slot_at(idx);
  const std::string_view bytes(reinterpret_cast<const char*>(s + 1), s->len);
  if (bytes.empty()) return;
  auto it = priv_->rev.find(bytes);
  if (it == priv_->rev.end()) return;
  if (--it->second.n == 0) {
    priv_->rev.erase(it);
    return;
  }
  if (it->second.idx != idx) return;
  for (uint64_t i = 0; i < high_; ++i) {
    const slot_hdr* o = i == idx ? nullptr : slot_of(i);
    if (o && o->len == s->len && std::memcmp(o + 1, s + 1, s->len) == 0) {
      it->second.idx = i;
      return;
    }
  }
  priv_->rev.erase(it);  // the count was wrong: nothing else holds them
}

int av::remove(const fi_addr_t* fi_addr, size_t count) {
  lock();
  std::unique_lock<const av> held(*this, std::adopt_lock);
  for (size_t i = 0; i < count; ++i)
    if (!slot_of(index(fi_addr[i]))) return -FI_EINVAL;
  uint64_t& hint = shared_ ? shared_->hdr->hint : hint_;
  for (size_t i = 0; i < count; ++i) {
    uint64_t idx = index(fi_addr[i]);
    slot_hdr* s = slot_at(idx);
    uint32_t st = load_state(s);
    if (!(st & 1)) continue;  // listed twice
    if (priv_) rev_drop(idx);
    store_state(s, st & ~uint32_t{1});
    if (idx < hint) hint = idx;
    if (dom_->pd) dom_->pd->av_emptied(*this, idx);
  }
  return 0;
}

int av::insert_at(uint64_t idx, const void* addr, size_t len, uint64_t user_id) {
  if (!priv_ || len > max_len_ || idx > index_mask_ || idx >= max_slots) return FI_EINVAL;
  std::lock_guard<av> held(*this);
  if (idx >= capacity_.load(std::memory_order_relaxed)) grow(idx + 1);
  slot_hdr* s = slot_at(idx);
  const uint32_t st = load_state(s);
  if (st & 1) rev_drop(idx);  // refilled: the old bytes lose this holder
  rev_add(addr, len, idx);
  std::memcpy(s + 1, addr, len);
  s->len = uint32_t(len);
  s->user_id = user_id;
  store_state(s, (((st >> 1) + 1) << 1) | 1);
  if (idx >= high_) high_ = idx + 1;
  if (hint_ == idx) hint_ = idx + 1;
  return 0;
}

void av::erase_at(uint64_t idx) noexcept {
  fi_addr_t a = idx;
  (void)remove(&a, 1);
}

fi_addr_t av::find(const void* addr, size_t len) const noexcept {
  try {
    lock();
    std::unique_lock<const av> held(*this, std::adopt_lock);
    if (priv_) {
      auto it = priv_->rev.find(std::string_view(static_cast<const char*>(addr), len));
      return it == priv_->rev.end() ? FI_ADDR_NOTAVAIL : it->second.idx;
    }
    uint64_t high = shared_->hdr->high;
    for (uint64_t i = 0; i < high; ++i) {
      const slot_hdr* s = slot_of(i);
      if (s && s->len == len && std::memcmp(s + 1, addr, len) == 0) return i;
    }
    return FI_ADDR_NOTAVAIL;
  } catch (...) {
    return FI_ADDR_NOTAVAIL;
  }
}

// ---------------------------------------------------------------- ops

namespace {

// One address of an insert call: a view of its bytes, or why it is invalid.
struct candidate {
  const void* p = nullptr;
  size_t len = 0;
  int err = 0;  // positive FI_E*
};

// Checks shared by the three insert calls. Returns 0 or -FI_E*.
int check_insert(const av& a, size_t count, const fi_addr_t* fi_addr, uint64_t flags, const void* context) {
  if (!only(flags, av_insert_flags)) return -FI_EBADFLAGS;
  if (count > max_slots) return -FI_EINVAL;
  if ((flags & FI_AV_USER_ID) && !fi_addr && count) return -FI_EINVAL;
  if (flags & FI_SYNC_ERR) {
    if (a.flags() & FI_EVENT) return -FI_EINVAL;  // synchronous inserts only
    if (!context && count) return -FI_EINVAL;
  }
  if (a.read_only()) return -FI_EACCES;
  if ((a.flags() & FI_EVENT) && !a.eq()) return -FI_ENOEQ;
  return 0;
}

// Inserts `count` addresses produced by next(i) -> candidate and reports
// the outcome as the man page asks for sync and FI_EVENT AVs.
template <class Next>
int commit(av& a, size_t count, Next&& next, fi_addr_t* fi_addr, uint64_t flags, void* context) {
  int* sync_err = (flags & FI_SYNC_ERR) ? static_cast<int*>(context) : nullptr;
  bool event = a.flags() & FI_EVENT;
  std::vector<std::pair<size_t, int>> failed;  // FI_EVENT: (index, err)
  size_t inserted = 0;
  {
    std::unique_lock<av> held(a);
    for (size_t i = 0; i < count; ++i) {
      candidate c = next(i);
      fi_addr_t out = FI_ADDR_NOTAVAIL;
      int err = c.err;
      if (!err) {
        try {
          err = a.insert_one(c.p, c.len, fi_addr ? fi_addr[i] : 0, flags & FI_AV_USER_ID, out);
        } catch (const error& e) {
          err = e.code();
        } catch (const std::bad_alloc&) {
          err = FI_ENOMEM;
        }
      }
      if (fi_addr) fi_addr[i] = out;
      if (sync_err) sync_err[i] = err;
      if (err) {
        if (event) failed.emplace_back(i, err);
      } else {
        ++inserted;
      }
    }
  }
  if (!event) return int(inserted > size_t(INT32_MAX) ? INT32_MAX : inserted);
  fid_eq* eq = a.eq();
  for (auto [i, err] : failed) {
    int rc = eq_post_error(eq, &a.fid_.fid, context, i, err, 0, nullptr, 0);
    if (rc < 0) return rc;
  }
  fi_eq_entry done{&a.fid_.fid, context, inserted};
  ssize_t rc = eq_post(eq, FI_AV_COMPLETE, &done, sizeof done, 0);
  return rc < 0 ? int(rc) : 0;
}

// The bytes of the address at `p` for fi_av_insert, and the offset of the next one.
candidate parse_one(const av& a, const unsigned char*& cursor) noexcept {
  candidate c;
  c.p = cursor;
  c.len = addr::valid_len(a.addr_format(), cursor, a.max_addrlen(), a.str_prefix());
  if (!c.len) c.err = FI_EINVAL;
  switch (a.addr_format()) {
    case FI_ADDR_STR:
      // Packed strings: the next one starts after this one's NUL, however long.
      cursor += c.len ? c.len : std::strlen(reinterpret_cast<const char*>(cursor)) + 1;
      break;
    case FI_SOCKADDR:
      cursor += c.len ? c.len : sizeof(sockaddr);
      break;
    default:
      cursor += a.max_addrlen();
      break;
  }
  return c;
}

int av_insert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
              void* context) noexcept {
  return guard([&]() -> int {
    if (!is_class(&f->fid, FI_CLASS_AV)) return -FI_EINVAL;
    av& a = *av::of(f);
    if (int rc = check_insert(a, count, fi_addr, flags, context)) return rc;
    if (!addr) {
      // "A NULL value for an address may be used to indicate that an entry
      // should be associated with 'any' address": entries of no bytes.
      return commit(
          a, count, [](size_t) { return candidate{"", 0, 0}; }, fi_addr, flags, context);
    }
    const auto* cursor = static_cast<const unsigned char*>(addr);
    return commit(
        a, count, [&](size_t) { return parse_one(a, cursor); }, fi_addr, flags, context);
  });
}

// "fi_<something>://...": an FI_ADDR_STR formatted address.
bool is_formatted(std::string_view node) noexcept {
  return node.starts_with("fi_") && node.find("://") != std::string_view::npos;
}

// Resolved addresses of insertsvc / insertsym: bytes, or an error per address.
struct resolved {
  std::string bytes;
  int err = 0;
};

int commit_resolved(av& a, std::vector<resolved>& r, fi_addr_t* fi_addr, uint64_t flags, void* context) {
  auto next = [&](size_t i) {
    candidate c;
    if (r[i].err) {
      c.err = r[i].err;
    } else {
      c.p = r[i].bytes.data();
      c.len = r[i].bytes.size();
    }
    return c;
  };
  return commit(a, r.size(), next, fi_addr, flags, context);
}

resolved resolve_one(const av& a, const char* node, const char* service) {
  resolved r;
  int rc = addr::resolve(a.addr_format(), a.str_prefix(), a.max_addrlen(), node, service, r.bytes);
  // What we produced must also be what fi_av_insert would accept.
  if (!rc &&
      addr::valid_len(a.addr_format(), r.bytes.data(), r.bytes.size(), a.str_prefix()) != r.bytes.size())
    rc = -FI_EINVAL;
  r.err = -rc;
  return r;
}

int av_insertsvc(fid_av* f, const char* node, const char* service, fi_addr_t* fi_addr, uint64_t flags,
                 void* context) noexcept {
  return guard([&]() -> int {
    if (!is_class(&f->fid, FI_CLASS_AV)) return -FI_EINVAL;
    av& a = *av::of(f);
    if (int rc = check_insert(a, 1, fi_addr, flags, context)) return rc;
    if (!node && !service) return -FI_EINVAL;
    if (node && service && is_formatted(node)) return -FI_EINVAL;  // man fi_av: then service must be NULL
    std::vector<resolved> r;
    r.push_back(resolve_one(a, node, service));
    return commit_resolved(a, r, fi_addr, flags, context);
  });
}

int av_insertsym(fid_av* f, const char* node, size_t nodecnt, const char* service, size_t svccnt,
                 fi_addr_t* fi_addr, uint64_t flags, void* context) noexcept {
  return guard([&]() -> int {
    if (!is_class(&f->fid, FI_CLASS_AV)) return -FI_EINVAL;
    av& a = *av::of(f);
    if (!node || !service) return -FI_EINVAL;
    if (nodecnt && svccnt > max_slots / nodecnt) return -FI_EINVAL;
    size_t total = nodecnt * svccnt;
    if (int rc = check_insert(a, total, fi_addr, flags, context)) return rc;
    // Name arithmetic first: a range that cannot be counted is a bad call.
    std::vector<std::string> nodes(nodecnt), services(svccnt);
    for (size_t n = 0; n < nodecnt; ++n)
      if (addr::node_add(node, n, nodes[n])) return -FI_EINVAL;
    for (size_t s = 0; s < svccnt; ++s)
      if (addr::service_add(service, s, services[s])) return -FI_EINVAL;
    std::vector<resolved> r;
    r.reserve(total);
    for (size_t n = 0; n < nodecnt; ++n)
      for (size_t s = 0; s < svccnt; ++s) r.push_back(resolve_one(a, nodes[n].c_str(), services[s].c_str()));
    return commit_resolved(a, r, fi_addr, flags, context);
  });
}

int av_remove(fid_av* f, fi_addr_t* fi_addr, size_t count, uint64_t flags) noexcept {
  return guard([&]() -> int {
    if (!is_class(&f->fid, FI_CLASS_AV)) return -FI_EINVAL;
    av& a = *av::of(f);
    if (flags) return -FI_EBADFLAGS;
    if (count == 0) return 0;
    if (!fi_addr || count > max_slots) return -FI_EINVAL;
    if (a.read_only()) return -FI_EACCES;
    return a.remove(fi_addr, count);
  });
}

int av_lookup(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) noexcept {
  if (!is_class(&f->fid, FI_CLASS_AV) || !addrlen || (!addr && *addrlen)) return -FI_EINVAL;
  size_t len = 0;
  const void* p = av::of(f)->lookup(fi_addr, &len);
  if (!p) return -FI_EINVAL;
  if (addr) std::memcpy(addr, p, *addrlen < len ? *addrlen : len);
  *addrlen = len;
  return 0;
}

const char* av_straddr(fid_av* f, const void* addr, char* buf, size_t* len) noexcept {
  if (!is_class(&f->fid, FI_CLASS_AV) || !addr || !len || (!buf && *len)) return nullptr;
  const av& a = *av::of(f);
  *len = addr::to_string(a.addr_format(), addr, a.max_addrlen(), buf, *len);
  return buf;
}

int av_set(fid_av* f, fi_av_set_attr* attr, fid_av_set** set, void* context) noexcept {
  if (!is_class(&f->fid, FI_CLASS_AV)) return -FI_EINVAL;
  return av_set_open(*av::of(f), attr, set, context);
}

int av_close(fid* f) noexcept {
  auto* a = from_fid<av>(f);
  if (a->user_count() != 0) return -FI_EBUSY;
  domain& d = a->dom();
  if (d.pd) d.pd->av_closed(*a);
  delete a;
  d.users_.drop();
  return 0;
}

int av_bind(fid* f, fid* bfid, uint64_t flags) noexcept {
  return guard([&]() -> int {
    if (!is_eq(bfid)) return -FI_EINVAL;
    if (flags) return -FI_EBADFLAGS;
    from_fid<av>(f)->bind_eq(reinterpret_cast<fid_eq*>(bfid));
    return 0;
  });
}

fi_ops av_fi_ops = {
    sizeof(fi_ops), av_close, av_bind, fid_no_control, fid_no_ops_open, fid_no_tostr, fid_no_ops_set,
};

fi_ops_av av_ops = {
    sizeof(fi_ops_av), av_insert, av_insertsvc, av_insertsym, av_remove, av_lookup, av_straddr, av_set,
};

}  // namespace

av* av::from(fid* f) noexcept {
  return is_class(f, FI_CLASS_AV) && f->ops == &av_fi_ops ? from_fid<av>(f) : nullptr;
}

void av::bind_eq(fid_eq* eq) {
  lock();
  std::unique_lock<const av> held(*this, std::adopt_lock);
  if (eq_) fail(FI_EBUSY, "AV already bound to an EQ");
  eq_take(eq);
  eq_ = eq;
}

int av_open(domain& dom, fi_av_attr* attr, fid_av** out, void* context) noexcept {
  return guard([&]() -> int {
    if (!attr || !out) return -FI_EINVAL;
    fi_av_type domain_type =
        dom.info && dom.info->domain_attr ? dom.info->domain_attr->av_type : FI_AV_UNSPEC;
    // Read as an int: a value outside the enum must not be loaded as one.
    int raw_type;
    std::memcpy(&raw_type, &attr->type, sizeof raw_type);
    static_assert(sizeof(raw_type) == sizeof(attr->type));
    fi_av_type type = FI_AV_UNSPEC;
    switch (raw_type) {
      case FI_AV_UNSPEC:
        type = domain_type != FI_AV_UNSPEC ? domain_type : FI_AV_TABLE;
        break;
      case FI_AV_MAP:
      case FI_AV_TABLE:
        type = fi_av_type(raw_type);
        if (domain_type != FI_AV_UNSPEC && domain_type != type) {
          WEFT_INFO(FI_LOG_AV, "AV type %d differs from the domain's %d", int(type), int(domain_type));
          return -FI_EINVAL;
        }
        break;
      default:
        return -FI_EINVAL;
    }
    if (!only(attr->flags, av_open_flags)) return -FI_EBADFLAGS;
    if (attr->rx_ctx_bits < 0 || attr->rx_ctx_bits > max_rx_ctx_bits) return -FI_EINVAL;
    bool named = attr->name != nullptr;
    if ((attr->flags & FI_READ) && !named) return -FI_EINVAL;  // read-only AVs must be named
    if (named && (!*attr->name || attr->count > named_max_count)) return -FI_EINVAL;
    if (addr::max_len(dom.addr_format, dom.addrlen) == 0) return -FI_EINVAL;

    fi_av_attr eff = *attr;
    eff.type = type;
    auto a = std::make_unique<av>(dom, eff, context);
    a->fid_.fid.ops = &av_fi_ops;
    a->fid_.ops = &av_ops;
    if (named) {
      a->shared_ = new av_shared;
      a->shared_->open(*a, eff);
    } else {
      a->priv_ = new av_private;
      if (attr->count) {
        std::lock_guard<av> held(*a);
        a->grow(attr->count < private_prealloc_max ? attr->count : private_prealloc_max);
      }
    }
    if (dom.pd) dom.pd->av_opened(*a);
    attr->type = type;
    if (named && !attr->map_addr) attr->map_addr = a->shared_->base;
    dom.users_.add();
    *out = &a.release()->fid_;
    return 0;
  });
}

}  // namespace weft
