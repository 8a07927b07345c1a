// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: which mapping of this process holds a registered range, to
// publish its shared backing (see attach_backing in shm_domain.cpp).
// Asked at every registration, so it must be cheap: the kernel answers one
// address with PROCMAP_QUERY (Linux 6.11) on an fd of /proc/self/maps kept
// open (vma_source); older kernels only print
// /proc/self/maps whole, a line per mapping (100 us and more in an MPI
// process), so there a page of private anonymous memory, which most buffers
// are, is recognised first from one entry of /proc/self/pagemap.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>

#include "prov/shm/shm.hpp"

namespace weft::shm {

namespace {

// struct procmap_query of <linux/fs.h> (Linux 6.11), which Debian 12's
// headers do not have.
struct procmap_query {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start, vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major, dev_minor;
  uint32_t vma_name_size, build_id_size;
  uint64_t vma_name_addr, build_id_addr;
};
static_assert(sizeof(procmap_query) == 104);
constexpr unsigned long procmap_query_ioctl = 0xC0686611;  // _IOWR('f', 17, struct procmap_query)
constexpr uint64_t vma_readable = 0x1, vma_writable = 0x2, vma_shared = 0x8;

std::atomic<bool> no_query{false};  // this kernel has no PROCMAP_QUERY

enum class answer { yes, no, unknown };

// Fills *out when the mapping [start, end) holds the whole range and is a
// writable shared mapping of a file.
answer judge(uint64_t addr, uint64_t len, uint64_t start, uint64_t end, bool rw_shared, uint64_t offset,
             uint64_t dev, uint64_t ino, shared_mapping* out) noexcept {
  if (addr < start || addr >= end || len > end - addr || !rw_shared || ino == 0) return answer::no;
  *out = shared_mapping{dev, ino, offset + (addr - start), start, end};
  return answer::yes;
}

// The source's fd, opened in this process.
int maps_fd(vma_source& src) noexcept {
  pid_t me = getpid();
  if (src.fd >= 0 && src.pid == me) return src.fd;
  if (src.fd >= 0) close(src.fd);
  src.fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  src.pid = me;
  return src.fd;
}

answer by_query(vma_source& src, uint64_t addr, uint64_t len, shared_mapping* out) noexcept {
  if (no_query.load(std::memory_order_relaxed)) return answer::unknown;
  int fd = maps_fd(src);
  if (fd < 0) return answer::unknown;
  procmap_query q{};
  q.size = sizeof q;
  q.query_addr = addr;  // no flags: the mapping that covers addr, or ENOENT
  int rc = ioctl(fd, procmap_query_ioctl, &q);
  int err = errno;
  if (rc != 0) {
    if (err == ENOENT) return answer::no;  // nothing is mapped at addr
    if (err == ENOTTY || err == EINVAL) no_query.store(true, std::memory_order_relaxed);
    return answer::unknown;
  }
  constexpr uint64_t rw_shared = vma_readable | vma_writable | vma_shared;
  return judge(addr, len, q.vma_start, q.vma_end, (q.vma_flags & rw_shared) == rw_shared, q.vma_offset,
               makedev(q.dev_major, q.dev_minor), q.inode, out);
}

// A present page that is neither a file's nor shared anonymous memory: the
// mapping that holds it is private.
bool private_anon_page(uint64_t addr) noexcept {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t ent = 0;
  ssize_t n = pread(fd, &ent, sizeof ent, static_cast<off_t>(addr / page * sizeof ent));
  close(fd);
  constexpr uint64_t present = uint64_t{1} << 63, file_or_shared = uint64_t{1} << 61;
  return n == static_cast<ssize_t>(sizeof ent) && (ent & present) && !(ent & file_or_shared);
}

answer by_text(uint64_t addr, uint64_t len, shared_mapping* out) noexcept {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return answer::unknown;
  std::string text;
  try {
    char buf[16384];
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
  } catch (...) {
    close(fd);
    return answer::unknown;
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
    bool rw_shared = perms[0] == 'r' && perms[1] == 'w' && perms[3] == 's';
    return judge(addr, len, lo, hi, rw_shared, foff, makedev(maj, min), inode, out);
  }
  return answer::no;
}

}  // namespace

vma_source::~vma_source() {
  if (fd >= 0) close(fd);
}

bool shared_mapping_of(vma_source& src, uint64_t addr, uint64_t len, shared_mapping* out,
                       vma_lookup how) noexcept {
  if (how == vma_lookup::any) {
    answer a = by_query(src, addr, len, out);
    if (a != answer::unknown) return a == answer::yes;
  }
  if (private_anon_page(addr)) return false;
  return by_text(addr, len, out) == answer::yes;
}

}  // namespace weft::shm
