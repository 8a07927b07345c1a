// prov/shm: region files, the receive queue, and the published registration table.
#include <cpuid.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "core/log.hpp"
#include "core/params.hpp"
#include "prov/shm/shm.hpp"

namespace weft::shm {

// ------------------------------------------------------------------ files
std::string region_file(const std::string& name) {
  return "weft_" + std::to_string(getuid()) + "_" + name;
}

bool valid_name(const std::string& name) noexcept {
  if (name.empty() || name.size() >= name_max) return false;
  for (char c : name)
    if (c == '/' || c == '\0' || c == '#') return false;  // '#' separates context suffixes
  return name != "." && name != "..";
}

// Region files this process owns: unlinked at exit even when the
// application never closes its endpoints or domains.
namespace {
struct owned_files {
  std::mutex lock;
  std::set<std::string> files;
  ~owned_files() {
    std::lock_guard g(lock);
    for (const std::string& f : files) unlink(("/dev/shm/" + f).c_str());
  }
};
owned_files& owned() {
  static owned_files o;
  return o;
}
}  // namespace

std::string shm_address(const std::string& name) {
  return shm_prefix + name;
}

std::string shm_name_of(const void* addr, size_t len) {
  if (!addr || !len) return {};
  const char* s = static_cast<const char*>(addr);
  std::string a(s, strnlen(s, len));
  if (a.compare(0, shm_prefix_len, shm_prefix) != 0) return {};
  std::string name = a.substr(shm_prefix_len);
  return valid_name(name) ? name : std::string{};
}

void mapping::create(const std::string& file, size_t size) {
  reset();
  std::string path = "/dev/shm/" + file;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) fail(FI_EADDRINUSE, "shm region exists");
    fail(FI_EIO, "cannot create shm region");
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    ::close(fd);
    unlink(path.c_str());
    fail(FI_ENOMEM, "cannot size shm region");
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    unlink(path.c_str());
    fail(FI_ENOMEM, "cannot map shm region");
  }
  base_ = static_cast<unsigned char*>(p);
  size_ = size;
  file_ = file;
  owner_ = true;
  owned_files& o = owned();
  std::lock_guard g(o.lock);
  o.files.insert(file);
}

bool mapping::open(const std::string& file, size_t min_size) {
  reset();
  std::string path = "/dev/shm/" + file;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_uid != getuid() || static_cast<size_t>(st.st_size) < min_size) {
    ::close(fd);
    return false;
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return false;
  base_ = static_cast<unsigned char*>(p);
  size_ = static_cast<size_t>(st.st_size);
  file_ = file;
  owner_ = false;
  return true;
}

void mapping::reset() noexcept {
  if (!base_) return;
  munmap(base_, size_);
  if (owner_) {
    unlink(("/dev/shm/" + file_).c_str());
    owned_files& o = owned();
    std::lock_guard g(o.lock);
    o.files.erase(file_);
  }
  base_ = nullptr;
  size_ = 0;
  owner_ = false;
  file_.clear();
}

// A process that exited but was not reaped yet (a zombie) is gone for us.
// getpid() is a system call: the data path uses this cache, reset in a
// forked child.
namespace {
std::atomic<int32_t> cached_pid{0};
void forget_pid() {
  cached_pid.store(0, std::memory_order_relaxed);
}
}  // namespace

int32_t self_pid() noexcept {
  int32_t p = cached_pid.load(std::memory_order_relaxed);
  if (p) [[likely]]
    return p;
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, forget_pid); });
  p = getpid();
  cached_pid.store(p, std::memory_order_relaxed);
  return p;
}

bool pid_alive(int32_t pid) noexcept {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return true;
  buf[n] = 0;
  const char* paren = strrchr(buf, ')');  // the state follows the command name
  return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

bool cma_usable() noexcept {
  if (param_bool("shm", "disable_cma").value_or(false)) {
    WEFT_DEBUG(FI_LOG_CORE, "shm: CMA disabled by FI_SHM_DISABLE_CMA");
    return false;
  }
  // A process that is not dumpable cannot be attached to by its peers.
  if (prctl(PR_GET_DUMPABLE) != 1) {
    WEFT_DEBUG(FI_LOG_CORE, "shm: process not dumpable, peers cannot attach; using bounce buffers");
    return false;
  }
  static const bool usable = [] {
    // Yama's ptrace_scope >= 1 lets a process attach only to its
    // descendants: peers could not pull from each other both ways.
    if (FILE* f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
      int scope = 0;
      bool got = fscanf(f, "%d", &scope) == 1;
      fclose(f);
      if (got && scope > 0) {
        WEFT_DEBUG(FI_LOG_CORE, "shm: yama ptrace_scope %d refuses CMA between peers; using bounce buffers",
                   scope);
        return false;
      }
    }
    uint64_t src = 0x1234, dst = 0;
    iovec l{&dst, sizeof dst}, r{&src, sizeof src};
    bool ok = process_vm_readv(getpid(), &l, 1, &r, 1, 0) == sizeof dst && dst == src;
    if (!ok) WEFT_DEBUG(FI_LOG_CORE, "shm: CMA refused (%s); using bounce buffers", strerror(errno));
    return ok;
  }();
  return usable;
}

// Regions of this uid whose owner is gone: left by a killed process.
void remove_stale_regions() noexcept {
  std::string prefix = "weft_" + std::to_string(getuid()) + "_";
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size())) continue;
    std::string path = std::string("/dev/shm/") + e->d_name;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    uint64_t magic = 0;
    int32_t pid = 0;
    bool stale = false;
    if (pread(fd, &magic, sizeof magic, 0) == sizeof magic &&
        (magic == region_magic || magic == domain_magic) && pread(fd, &pid, sizeof pid, 12) == sizeof pid)
      stale = pid > 0 && !pid_alive(pid);
    ::close(fd);
    if (stale) {
      WEFT_DEBUG(FI_LOG_CORE, "shm: removing stale region %s (pid %d gone)", e->d_name, pid);
      unlink(path.c_str());
    }
  }
  closedir(dir);
}

// ------------------------------------------------------------------ queue
void region_init(unsigned char* base, const std::string& name, const std::string& domain_file,
                 bool cma) noexcept {
  region_view r{base};
  region_hdr* h = r.hdr();
  h->version = proto_version;
  h->pid = getpid();
  h->queue_cells = queue_cells;
  h->cell_size = sizeof(cell);
  h->peer_slots = peer_slots;
  h->size = region_size;
  h->peers_off = region_peers_off;
  h->queue_off = region_queue_off;
  h->inject_size = inject_max;
  h->cma = cma;
  strncpy(h->name, name.c_str(), name_max - 1);
  strncpy(h->domain_region, domain_file.c_str(), name_max - 1);
  cell* cells = r.cells();
  for (uint32_t i = 0; i < queue_cells; ++i) cells[i].h.seq.store(i, std::memory_order_relaxed);
  r.ctl()->tail.store(0, std::memory_order_relaxed);
  r.ctl()->head.store(0, std::memory_order_relaxed);
  h->magic = region_magic;
  h->state.store(state_ready, std::memory_order_release);
}

// PREFETCHW (AMD64; Intel since Broadwell), checked once with CPUID.
const bool has_prefetchw = [] {
  unsigned a, b, c, d;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8));
}();

void queue_release_n(region_view r, uint32_t n) noexcept {
  queue_ctl* q = r.ctl();
  uint64_t head = q->head.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; ++i) {
    cell* c = &r.cells()[(head + i) & (queue_cells - 1)];
    c->h.producer = 0;
    c->h.seq.store(head + i + queue_cells, std::memory_order_release);
  }
  q->head.store(head + n, std::memory_order_release);
}

// The head cell was claimed but never committed and its producer is dead:
// turn it into a nop so the queue moves on. Called from the periodic checks,
// never on the polling path (it reads the producers' cache line).
cell* queue_stalled(region_view r) noexcept {
  queue_ctl* q = r.ctl();
  uint64_t head = q->head.load(std::memory_order_relaxed);
  cell* c = &r.cells()[head & (queue_cells - 1)];
  if (c->h.seq.load(std::memory_order_acquire) != head || q->tail.load(std::memory_order_acquire) <= head)
    return nullptr;
  int32_t pid = c->h.producer;
  if (pid <= 0 || pid_alive(pid)) return nullptr;
  c->h.opcode = op::nop;
  c->h.seq.store(head + 1, std::memory_order_release);
  return c;
}

void queue_release(region_view r, cell*) noexcept {
  queue_release_n(r, 1);
}

// ------------------------------------------------------------------ registrations
namespace {
std::atomic<uint32_t> domain_counter{0};

void close_domain(domain& d) noexcept {
  delete static_cast<shm_domain*>(d.prov_ctx);
  d.prov_ctx = nullptr;
}
}  // namespace

shm_domain& shm_domain::of(domain& d) {
  if (d.prov_ctx) return *static_cast<shm_domain*>(d.prov_ctx);
  auto sd = std::make_unique<shm_domain>();
  remove_stale_regions();
  // (Built up in steps: GCC 12 at -O3 warns falsely on "d" + std::string.)
  std::string name = "d";
  name += std::to_string(getpid());
  name += '_';
  name += std::to_string(domain_counter++);
  sd->file = region_file(name);
  sd->region.create(sd->file, domain_region_size);
  auto* h = reinterpret_cast<domain_hdr*>(sd->region.base());
  h->version = proto_version;
  h->pid = getpid();
  h->slots = mr_table_slots;
  h->size = domain_region_size;
  h->table_off = domain_table_off;
  h->magic = domain_magic;
  sd->map_mr = cma_usable() && param_bool("shm", "map_mr").value_or(true);
  d.prov_ctx = sd.release();
  d.prov_close = close_domain;
  d.mr_changed = publish_mr;
  // Registrations made before the first endpoint.
  std::vector<mr_entry> all;
  if (d.mrs) d.mrs->snapshot(all);
  for (const mr_entry& e : all) publish_mr(d, e.key);
  return *static_cast<shm_domain*>(d.prov_ctx);
}

namespace {
mr_slot* table(unsigned char* base) {
  return reinterpret_cast<mr_slot*>(base + domain_table_off);
}

void write_slot(mr_slot& s, uint32_t state, const mr_entry* e) noexcept {
  // Sequence lock: odd while writing. The acquire RMW keeps the data writes
  // after it; the release store publishes them.
  uint64_t seq = s.seq.fetch_add(1, std::memory_order_acq_rel);
  s.state = state;
  if (e) s.entry = *e;
  s.seq.store(seq + 2, std::memory_order_release);
}
}  // namespace

shm_domain::~shm_domain() {
  for (backing& b : backings)
    if (b.fd >= 0) close(b.fd);
}

namespace {
// The shared mapping that holds [addr, addr + len) in this process, from
// /proc/self/maps: its file's device and inode and the file offset of addr.
// Only a writable shared mapping that covers the whole range qualifies.
bool shared_mapping_of(uint64_t addr, uint64_t len, uint64_t* dev, uint64_t* ino, uint64_t* off,
                       uint64_t* start, uint64_t* end) noexcept {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const char* line = text.c_str() + pos;  // the fields end before the newline
    pos = eol + 1;
    unsigned long lo = 0, hi = 0, foff = 0, inode = 0;
    unsigned maj = 0, min = 0;
    char perms[8] = {};
    if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perms, &foff, &maj, &min, &inode) != 7) continue;
    if (addr < lo || addr >= hi) continue;
    if (addr + len > hi || len > hi - lo || inode == 0 || perms[0] != 'r' || perms[1] != 'w' ||
        perms[3] != 's')
      return false;
    *dev = makedev(maj, min);
    *ino = inode;
    *off = foff + (addr - lo);
    *start = lo;
    *end = hi;
    return true;
  }
  return false;
}

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
  if (!sd.map_mr || e.iov_count != 1 || !e.seg[0].len) return;
  try {
    auto [it, fresh] = sd.by_key.try_emplace(e.key);
    shm_domain::published& pub = it->second;
    if (!fresh && pub.addr == e.seg[0].addr && pub.len == e.seg[0].len) {
      memcpy(e.prov, pub.prov, sizeof e.prov);  // re-published (enable): nothing changed
      return;
    }
    drop_backing(sd, pub);
    pub = shm_domain::published{e.seg[0].addr, e.seg[0].len, {}, SIZE_MAX};
    uint64_t dev, ino, off, start, end;
    if (!shared_mapping_of(e.seg[0].addr, e.seg[0].len, &dev, &ino, &off, &start, &end)) return;
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
// Writes the table slot of `key`: entry e when live, a tombstone otherwise.
void write_table(mr_slot* t, uint64_t key, bool live, const mr_entry& e) noexcept {
  uint32_t start = mr_hash(key) & (mr_table_slots - 1);
  mr_slot* tomb = nullptr;
  for (uint32_t i = 0; i < mr_table_slots; ++i) {
    mr_slot& s = t[(start + i) & (mr_table_slots - 1)];
    if (s.state == 1 && s.entry.key == key) {
      write_slot(s, live ? 1 : 2, live ? &e : nullptr);
      return;
    }
    if (s.state == 2 && !tomb) tomb = &s;
    if (s.state == 0) {
      if (live) write_slot(tomb ? *tomb : s, 1, &e);
      return;
    }
  }
  if (live && tomb) write_slot(*tomb, 1, &e);
}
}  // namespace

void publish_mr(domain& d, uint64_t key) noexcept {
  if (!d.prov_ctx) return;
  auto& sd = *static_cast<shm_domain*>(d.prov_ctx);
  std::lock_guard lock(sd.lock);
  mr_entry e;
  bool live = d.mrs && d.mrs->find(key, &e);
  if (live) attach_backing(sd, e);
  write_table(table(sd.region.base()), key, live, e);
  // A withdrawn registration's backing fd closes only once no initiator can
  // read it from the table any more.
  if (!live) detach_backing(sd, key);
}

bool lookup_mr(const unsigned char* base, uint64_t key, mr_entry* out) noexcept {
  const mr_slot* t = reinterpret_cast<const mr_slot*>(base + domain_table_off);
  uint32_t start = mr_hash(key) & (mr_table_slots - 1);
  for (uint32_t i = 0; i < mr_table_slots; ++i) {
    const mr_slot& s = t[(start + i) & (mr_table_slots - 1)];
    for (int attempt = 0; attempt < 100; ++attempt) {
      uint64_t seq = s.seq.load(std::memory_order_acquire);
      if (seq & 1) continue;
      uint32_t state = s.state;
      mr_entry e = s.entry;
      // The release RMW keeps the copies above before the re-check.
      if (const_cast<mr_slot&>(s).seq.fetch_add(0, std::memory_order_acq_rel) != seq) continue;
      if (state == 0) return false;
      if (state == 1 && e.key == key) {
        *out = e;
        return true;
      }
      break;
    }
  }
  return false;
}

// ------------------------------------------------------------------ cross-memory attach
int cma_copy(bool write, int32_t pid, const iovec* local, size_t lc, const iovec* remote, size_t rc,
             size_t off, size_t len) noexcept {
  // Both lists are cut to [off + done, off + len): process_vm_* may move
  // less than asked, and then the copy resumes where it stopped.
  auto cut = [](const iovec* v, size_t c, size_t skip, size_t want, iovec* out, size_t& oc) {
    for (size_t i = 0; i < c && want && oc < iov_max * mr_iov_max; ++i) {
      if (skip >= v[i].iov_len) {
        skip -= v[i].iov_len;
        continue;
      }
      size_t n = std::min(v[i].iov_len - skip, want);
      out[oc++] = {static_cast<char*>(v[i].iov_base) + skip, n};
      want -= n;
      skip = 0;
    }
  };
  size_t done = 0;
  while (done < len) {
    iovec l2[iov_max * mr_iov_max], r2[iov_max * mr_iov_max];
    size_t l2c = 0, r2c = 0;
    cut(local, lc, off + done, len - done, l2, l2c);
    cut(remote, rc, off + done, len - done, r2, r2c);
    if (!l2c || !r2c) return FI_EINVAL;
    ssize_t n =
        write ? process_vm_writev(pid, l2, l2c, r2, r2c, 0) : process_vm_readv(pid, l2, l2c, r2, r2c, 0);
    if (n <= 0) return errno == ESRCH ? FI_EIO : FI_EACCES;
    done += static_cast<size_t>(n);
  }
  return 0;
}

int pull_desc(const rndv_desc& d, const iovec* iov, size_t count, size_t off, size_t len) noexcept {
  iovec remote[iov_max];
  size_t rc = std::min<size_t>(d.iov_count, iov_max);
  for (size_t i = 0; i < rc; ++i) remote[i] = {reinterpret_cast<void*>(d.iov[i].base), d.iov[i].len};
  return cma_copy(false, d.pid, iov, count, remote, rc, off, len);
}

}  // namespace weft::shm
