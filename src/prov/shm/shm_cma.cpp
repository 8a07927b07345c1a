// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: moving data between address spaces — cross-memory attach
// (process_vm_readv/writev), and mappings of a peer's registrations whose
// memory is a shrink-sealed memfd (see backing_valid in shm_proto.hpp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "prov/shm/shm.hpp"

namespace weft::shm {

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

peer::~peer() {
  for (remote_map& m : maps)
    if (m.base) munmap(m.base, m.size);
}

bool map_domain(peer& p) noexcept {
  if (p.domain_region.base()) return true;
  if (!p.domain_region.open(p.pid, p.view().hdr()->domain_fd, domain_region_size)) return false;
  auto* h = reinterpret_cast<const domain_hdr*>(p.domain_region.base());
  if (h->magic != domain_magic || h->version != proto_version || h->pid != p.pid) {
    p.domain_region.reset();
    return false;
  }
  return true;
}

namespace {
// Mapped backings kept per peer (the oldest is unmapped past this).
constexpr size_t remote_maps_max = 16;
}  // namespace

unsigned char* mapped_mr(peer& p, const mr_entry& me) noexcept {
  if (!(me.prov[0] & backing_valid) || me.iov_count != 1) return nullptr;
  const uint32_t gen = backing_gen(me.prov[0]);
  const uint64_t off = me.prov[1];
  // Accesses are bounded by the segment (what mr_entry_resolve checks against).
  const uint64_t len = me.seg[0].len;
  if (off > UINT64_MAX - len) return nullptr;
  for (peer::remote_map& m : p.maps)
    if (m.gen == gen) {
      if (!m.base) return nullptr;
      if (off + len <= m.size) return m.base + off;
      // The file has grown since we mapped it: map it again below.
      munmap(m.base, m.size);
      m = p.maps.back();
      p.maps.pop_back();
      break;
    }
  peer::remote_map m{gen, nullptr, 0};
  // The owner's duplicate of the fd, fetched with the same ptrace check as CMA.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, p.pid, 0));
  int fd = pidfd < 0 ? -1 : static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, backing_fd(me.prov[0]), 0));
  if (pidfd >= 0) close(pidfd);
  struct stat st;
  const int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
  // Trust nothing the table says: same inode, regular file, sealed against
  // shrinking (so the mapping can never fault), and long enough.
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_ino) == me.prov[2] && seals >= 0 && (seals & F_SEAL_SHRINK) &&
      static_cast<uint64_t>(st.st_size) >= off + len) {
    void* base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base != MAP_FAILED) {
      m.base = static_cast<unsigned char*>(base);
      m.size = static_cast<size_t>(st.st_size);
    }
  }
  if (fd >= 0) close(fd);
  try {
    if (p.maps.size() >= remote_maps_max) {
      if (p.maps.front().base) munmap(p.maps.front().base, p.maps.front().size);
      p.maps.erase(p.maps.begin());
    }
    p.maps.push_back(m);
  } catch (...) {
    if (m.base) munmap(m.base, m.size);
    return nullptr;
  }
  return m.base ? m.base + off : nullptr;
}

}  // namespace weft::shm
