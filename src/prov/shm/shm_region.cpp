// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: regions (memfds reached through /proc), endpoint names
// (abstract unix sockets), the receive queue, processes.
#include <cpuid.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/log.hpp"
#include "prov/shm/shm.hpp"

namespace weft::shm {

// ------------------------------------------------------------------ names
bool valid_name(const std::string& name) noexcept {
  if (name.empty() || name.size() >= name_max) return false;
  for (char c : name)
    if (c == '/' || c == '\0' || c == '#') return false;  // '#' separates context suffixes
  return name != "." && name != "..";
}

std::string region_label(const std::string& name) {
  return "weft_" + std::to_string(getuid()) + "_" + name;
}

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

namespace {
std::atomic<uint32_t> name_counter{0};
}

std::string endpoint_name(const fi_info* info, const char* kind) {
  std::string name = info ? shm_name_of(info->src_addr, info->src_addrlen) : std::string{};
  if (name.find(':') != std::string::npos) return name;  // spelled out in full
  // "<base>:<pid>.<kind><n>": unique in this process, and it names the
  // process, so a peer can tell an endpoint that is gone from one that is
  // not enabled yet.
  if (name.empty()) name = std::to_string(getpid());
  name += ':' + std::to_string(getpid()) + '.' + kind + std::to_string(name_counter++);
  if (!valid_name(name)) fail(FI_EINVAL, "shm: endpoint name too long");
  return name;
}

int32_t pid_of_name(const std::string& name) noexcept {
  size_t colon = name.rfind(':');
  if (colon == std::string::npos) return 0;
  const char* s = name.c_str() + colon + 1;
  char* end = nullptr;
  long pid = strtol(s, &end, 10);
  if (end == s || *end != '.' || pid <= 0 || pid > INT32_MAX) return 0;
  return static_cast<int32_t>(pid);
}

std::vector<std::string> names_on_host() {
  // Lines end in the socket's path; an abstract one prints as "@<name>".
  std::vector<std::string> names;
  FILE* f = fopen("/proc/net/unix", "re");
  if (!f) return names;
  const std::string label = "@" + region_label("");
  char line[512];
  while (fgets(line, sizeof line, f)) {
    const char* at = strstr(line, label.c_str());
    if (!at) continue;
    std::string name(at + label.size());
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    // Contexts ("#t0", "#r1") are not valid names; a name shows once per
    // connection peers made to it, too.
    if (valid_name(name) && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(std::move(name));
  }
  fclose(f);
  return names;
}

// ------------------------------------------------------------------ mappings
void mapping::create(const std::string& label, size_t size, size_t map_size, bool seal) {
  reset();
  map_size = std::max(map_size, size);
  int fd = memfd_create(label.c_str(), MFD_CLOEXEC | (seal ? MFD_ALLOW_SEALING : 0));
  if (fd < 0) fail(FI_ENOMEM, "shm: cannot create a region");
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)) {
    ::close(fd);
    fail(FI_ENOMEM, "shm: cannot size a region");
  }
  void* p = mmap(nullptr, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    fail(FI_ENOMEM, "shm: cannot map a region");
  }
  base_ = static_cast<unsigned char*>(p);
  size_ = map_size;
  fd_ = fd;
}

bool mapping::open(int32_t pid, int fd, size_t min_size, size_t map_size, bool keep_fd) noexcept {
  reset();
  if (pid <= 0 || fd < 0) return false;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
  int own = ::open(path, O_RDWR | O_CLOEXEC);
  if (own < 0) return false;
  struct stat st;
  if (fstat(own, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
      static_cast<size_t>(st.st_size) < min_size) {
    ::close(own);
    return false;
  }
  const size_t len = std::max(static_cast<size_t>(st.st_size), map_size);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  if (p == MAP_FAILED) {
    ::close(own);
    return false;
  }
  if (keep_fd)
    fd_ = own;
  else
    ::close(own);
  base_ = static_cast<unsigned char*>(p);
  size_ = len;
  return true;
}

void mapping::close_fd() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void mapping::reset() noexcept {
  if (base_) munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

// ------------------------------------------------------------------ name claims
namespace {
socklen_t abstract_address(const std::string& name, sockaddr_un* sa) noexcept {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  std::string label = region_label(name);
  size_t n = std::min(label.size(), sizeof sa->sun_path - 1);
  memcpy(sa->sun_path + 1, label.data(), n);  // sun_path[0] = 0: the abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}
}  // namespace

// A new sender learns our pid by connecting to the name, and the connection
// waits in the listen backlog until our progress accepts and closes it
// (drain, every 100 ms while we progress). The backlog is how many senders
// may look us up between two drains, or while we do not progress at all
// (busy elsewhere: forking the very senders, say); one past it hears "not
// yet" (-FI_EAGAIN) until the next drain. At 512, 1,024 senders started
// while their receiver forked them (bench/shm_peers_mem.cpp, 20 s of that
// on 2 CPUs) lost a third of their sends. The kernel caps it at
// net.core.somaxconn (4,096 since Linux 5.4).
constexpr int name_backlog = 4096;

void name_claim::claim(const std::string& name) {
  reset();
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(FI_EMFILE, "shm: no socket for the endpoint name");
  sockaddr_un sa;
  socklen_t len = abstract_address(name, &sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) fail(FI_EADDRINUSE, "shm: endpoint name in use");
    fail(FI_EIO, "shm: cannot claim the endpoint name");
  }
  if (listen(fd, name_backlog) != 0) {
    ::close(fd);
    fail(FI_EIO, "shm: cannot listen on the endpoint name");
  }
  fd_ = fd;
}

void name_claim::drain() noexcept {
  if (fd_ < 0) return;
  // Bounded by the backlog: at most what can wait there.
  for (int i = 0; i < name_backlog; ++i) {
    int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) break;
    ::close(c);
  }
}

void name_claim::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// ------------------------------------------------------------------ bells
namespace {
socklen_t bell_address(const char* name, size_t len, sockaddr_un* sa) noexcept {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "weftbell_%u_%.*s", static_cast<unsigned>(getuid()),
                   static_cast<int>(len), name);
  size_t used = std::min(static_cast<size_t>(n < 0 ? 0 : n), sizeof sa->sun_path - 2);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + used);
}
}  // namespace

int bell_open(const std::string& name) noexcept {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un sa;
  socklen_t len = bell_address(name.data(), name.size(), &sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void bell_drain(int fd) noexcept {
  char buf[64];
  while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) >= 0) {}
}

// Cold: the owner armed its bell in fi_trywait. The first sender to see it
// asleep rings (asleep -> rung); the owner's next progress sets it awake.
void ring_bell(region_view r) noexcept {
  uint32_t expect = asleep;
  if (!r.ctl()->sleeping.compare_exchange_strong(expect, rung, std::memory_order_seq_cst)) return;
  // One unbound datagram socket per process sends every ring.
  static const int sender = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (sender < 0) return;
  // The name is the owner's (a peer's shared page): bounded, never trusted
  // beyond choosing which of our uid's bells to ring.
  const char* name = r.hdr()->name;
  size_t len = strnlen(name, name_max - 1);
  sockaddr_un sa;
  socklen_t alen = bell_address(name, len, &sa);
  const char b = 1;
  // EAGAIN: earlier rings are still queued (the fd is readable already);
  // ECONNREFUSED: the owner is gone. Neither matters.
  (void)sendto(sender, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&sa), alen);
}

namespace {
// The pid of the process holding the name, from the listening socket's
// credentials (no help from that process needed); 0 when nobody holds it.
int32_t name_owner(const std::string& name, bool* refused) noexcept {
  *refused = false;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *refused = true;
    return 0;
  }
  sockaddr_un sa;
  socklen_t len = abstract_address(name, &sa);
  int32_t pid = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), len) == 0) {
    ucred cred{};
    socklen_t cl = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.uid == getuid())
      pid = cred.pid;
    else
      *refused = true;
  }
  ::close(fd);
  return pid;
}

// The fd number under which process `pid` holds the memfd labelled `label`.
int find_memfd(int32_t pid, const std::string& label) noexcept {
  char dir_path[64];
  snprintf(dir_path, sizeof dir_path, "/proc/%d/fd", pid);
  DIR* dir = opendir(dir_path);
  if (!dir) return -1;
  std::string want = "/memfd:" + label + " (deleted)";
  int found = -1;
  while (dirent* de = readdir(dir)) {
    char* stop = nullptr;
    long n = strtol(de->d_name, &stop, 10);
    if (!*de->d_name || *stop || n < 0) continue;
    char link[512], path[96];
    snprintf(path, sizeof path, "%s/%ld", dir_path, n);
    ssize_t got = readlink(path, link, sizeof link - 1);
    if (got <= 0) continue;
    link[got] = 0;
    if (want == link) {
      found = static_cast<int>(n);
      break;
    }
  }
  closedir(dir);
  return found;
}
}  // namespace

found open_region(const std::string& name, mapping& m, int32_t* pid, uint32_t* version) noexcept {
  try {
    bool refused = false;
    int32_t owner = name_owner(name, &refused);
    if (refused) return found::refused;
    if (!owner) return found::absent;
    int fd = find_memfd(owner, region_label(name));
    if (fd < 0 || !m.open(owner, fd, region_size, region_map_size, true))
      return pid_alive(owner) ? found::refused : found::absent;
    region_hdr* h = region_view{m.base()}.hdr();
    if (h->magic == region_magic && h->version != proto_version) {
      // weft's, of another version: only its first 16 bytes are read
      // (magic, version and pid stay where they are in every version).
      if (version) *version = h->version;
      m.reset();
      return found::other_version;
    }
    // The seal keeps every byte we may touch inside the file (a region that
    // could shrink under us could fault us).
    if (h->magic != region_magic || h->version != proto_version || h->pid != owner ||
        !(fcntl(m.fd(), F_GET_SEALS) & F_SEAL_SHRINK)) {
      m.reset();
      return found::refused;
    }
    if (h->state.load(std::memory_order_acquire) != state_ready) {
      m.reset();
      return found::absent;  // being set up, or closing
    }
    *pid = owner;
    return found::yes;
  } catch (...) {
    return found::refused;
  }
}

// libfabric's shm (prov/shm, smr_region) opens /dev/shm/<name> and starts
// it, in every version since the first, with uint8_t version, uint8_t
// resv, uint16_t flags, int pid: the owner.
std::string foreign_region(const std::string& name) {
  if (!valid_name(name)) return {};
  const std::string path = "/dev/shm/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return {};
  unsigned char head[8];
  struct stat st;
  const bool read_ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(sizeof head) &&
                       pread(fd, head, sizeof head, 0) == static_cast<ssize_t>(sizeof head);
  ::close(fd);
  if (!read_ok) return {};
  int32_t owner;
  memcpy(&owner, head + 4, sizeof owner);
  if (owner <= 0 || !pid_alive(owner)) return {};  // left behind by a process that is gone
  char what[160];
  if (head[0] >= 1 && head[0] < 64)
    snprintf(what, sizeof what, " is a region of libfabric's shm provider, version %u, of process %d", head[0],
             static_cast<int>(owner));
  else
    snprintf(what, sizeof what, " is a region of another shared-memory provider, of process %d",
             static_cast<int>(owner));
  return path + what;
}

// ------------------------------------------------------------------ processes
// getpid() is a system call: the data path uses this cache, reset in a
// forked child.
std::atomic<int32_t> cached_pid{0};
namespace {
void forget_pid() {
  cached_pid.store(0, std::memory_order_relaxed);
}
}  // namespace

int32_t self_pid_slow() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, forget_pid); });
  int32_t p = getpid();
  cached_pid.store(p, std::memory_order_relaxed);
  return p;
}

// A process that exited but was not reaped yet (a zombie) is gone for us.
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

bool cma_usable(bool disabled) noexcept {
  if (disabled) {
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

// ------------------------------------------------------------------ regions
void region_create(mapping& m, const std::string& name) {
  m.create(region_label(name), region_size, region_map_size, true);
}

uint32_t region_table_slots(region_view r, int fd) noexcept {
  const uint32_t published = std::min(r.hdr()->peer_count.load(std::memory_order_acquire), peer_slots_max);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < region_peers_off) return 0;
  const size_t in_file = (static_cast<size_t>(st.st_size) - region_peers_off) / sizeof(peer_slot);
  return static_cast<uint32_t>(std::min<size_t>(published, in_file));
}

// ------------------------------------------------------------------ queue
void region_init(unsigned char* base, const std::string& name, int domain_fd, bool cma) noexcept {
  region_view r{base};
  region_hdr* h = r.hdr();
  h->version = proto_version;
  h->pid = getpid();
  h->queue_cells = queue_cells;
  h->cell_size = cell_stride;
  h->peer_max = peer_slots_max;
  h->peer_count.store(peer_chunk, std::memory_order_relaxed);
  h->size = region_size;
  h->peers_off = region_peers_off;
  h->queue_off = region_queue_off;
  h->inject_size = inject_max;
  h->cma = cma;
  h->domain_fd = domain_fd;
  strncpy(h->name, name.c_str(), name_max - 1);
  // Neither claimed (index) nor committed (index + 1) at any index of the cell.
  for (uint32_t i = 0; i < queue_cells; ++i) r.cell_at(i)->h.seq.store(~uint64_t{0}, std::memory_order_relaxed);
  r.ctl()->tail.store(0, std::memory_order_relaxed);
  r.ctl()->limit.store(queue_cells, std::memory_order_relaxed);
  r.ctl()->head.store(0, std::memory_order_relaxed);
  h->magic = region_magic;
  h->state.store(state_ready, std::memory_order_release);
}

// PREFETCHW (AMD64; Intel since Broadwell), checked once with CPUID.
const bool has_prefetchw = [] {
  unsigned a, b, c, d;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8));
}();

bool queue_refill(queue_ctl* q, uint64_t pos) noexcept {
  uint64_t lim = q->head.load(std::memory_order_acquire) + queue_cells;
  if (static_cast<int64_t>(pos - lim) >= 0) return false;
  // Another producer may store a limit from an older head after us: that
  // only makes the next claim read head again, never claim a busy cell.
  q->limit.store(lim, std::memory_order_release);
  return true;
}

cell* queue_claim_lap_end(region_view r, uint64_t pos) noexcept {
  queue_ctl* q = r.ctl();
  const uint64_t to = pos + (queue_cells - short_lap);  // the next lap's index 0
  if (static_cast<int64_t>(to - q->limit.load(std::memory_order_acquire)) >= 0 && !queue_refill(q, to))
    return nullptr;
  // seq_cst, as the claim in queue_claim (against the owner's arm()).
  if (!q->tail.compare_exchange_strong(pos, to, std::memory_order_seq_cst, std::memory_order_relaxed))
    return nullptr;
  cell* c = r.cell_at(pos);
#if defined(__SANITIZE_THREAD__)
  (void)c->h.seq.load(std::memory_order_acquire);  // as in queue_claim
#endif
  // The pid negated: the consumer moves to the next lap's index 0 after
  // this cell (queue_step), and queue_stalled keeps the mark if we die
  // before the commit.
  c->h.producer = -self_pid();
  c->h.seq.store(pos, std::memory_order_release);
  return c;
}

// The head cell was claimed but never committed and its producer is dead:
// turn it into a nop so the queue moves on. Called from the periodic checks,
// never on the polling path (it reads the producers' cache line).
cell* queue_stalled(region_view r) noexcept {
  queue_ctl* q = r.ctl();
  uint64_t head = q->head.load(std::memory_order_relaxed);
  cell* c = r.cell_at(head);
  if (c->h.seq.load(std::memory_order_acquire) != head || q->tail.load(std::memory_order_acquire) <= head)
    return nullptr;
  int64_t pid = c->h.producer;
  if (pid < 0) pid = -pid;  // a claim that ended its lap: the nop keeps the mark (queue_step)
  if (pid <= 0 || pid > INT32_MAX || pid_alive(static_cast<int>(pid))) return nullptr;
  c->h.opcode = op::nop;
  c->h.seq.store(head + 1, std::memory_order_release);
  return c;
}

void queue_release(region_view r, const cell* c) noexcept {
  queue_release_n(r, queue_step(r, c));
}

}  // namespace weft::shm
