// SPDX-License-Identifier: BSD-3-Clause
// The export side. An export segment is page-aligned memory of this process
// plus, once published, a registry entry (segment id → our service address)
// and, per access level some importer was granted, one registration on the
// service domain: FI_REMOTE_READ for read-only importers, FI_REMOTE_WRITE
// for write-only ones, both for read/write ones. An importer only ever
// learns the key of its own level's registration, so a read-only importer
// that calls fi_write directly with what it knows is refused by the
// provider. Revoking a right (republish, unpublish) closes the registrations
// concerned and hands the importers that keep their right fresh keys.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "proto.hpp"
#include "rsm.hpp"
#include "service.hpp"

namespace weft::rsm {
namespace {

constexpr uint64_t access_of[3] = {FI_REMOTE_READ, FI_REMOTE_WRITE, FI_REMOTE_READ | FI_REMOTE_WRITE};
constexpr rsm_permission_t perm_of[3] = {RSM_PERM_READ, RSM_PERM_WRITE, RSM_PERM_RDWR};
constexpr rsm_permission_t default_perm = 0666;  // an empty access list: everyone may read and write

size_t page_size() {
  static const size_t p = [] {
    long v = sysconf(_SC_PAGESIZE);
    return static_cast<size_t>(v > 0 ? v : 4096);
  }();
  return p;
}

struct mapping_line {
  uintptr_t start = 0, end = 0;
  bool shared = false;
  uint64_t offset = 0;
  unsigned dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  std::string path;
};

std::vector<mapping_line> read_maps() {
  std::vector<mapping_line> out;
  std::string text;
  if (!read_file("/proc/self/maps", &text)) return out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    size_t end = nl == std::string::npos ? text.size() : nl;
    std::string line = text.substr(at, end - at);
    at = end + 1;
    mapping_line m;
    char perms[8] = {0};
    unsigned long long s, e, off, ino;
    unsigned maj, min;
    int pos = 0;
    if (sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &s, &e, perms, &off, &maj, &min, &ino,
               &pos) < 7)
      continue;
    m.start = s;
    m.end = e;
    m.shared = perms[3] == 's';
    m.offset = off;
    m.dev_major = maj;
    m.dev_minor = min;
    m.inode = ino;
    if (pos > 0 && static_cast<size_t>(pos) < line.size()) m.path = line.substr(static_cast<size_t>(pos));
    out.push_back(m);
  }
  return out;
}

// Is [vaddr, vaddr+size) mapped in this process? An unmapped range would
// make the provider's registration (or the peer's transfer) fail later.
bool range_mapped(const std::vector<mapping_line>& maps, uintptr_t a, size_t size) {
  uintptr_t end = a + size;
  for (const mapping_line& m : maps) {
    if (m.end <= a || m.start > a) continue;
    a = m.end;
    if (a >= end) return true;
  }
  return false;
}

bool same_file(int fd, const mapping_line& m) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_ino == m.inode && major(st.st_dev) == m.dev_major &&
         minor(st.st_dev) == m.dev_minor;
}

// Finds a file descriptor for the memory behind [vaddr, vaddr+size) if it is
// a shared mapping of one file (a /dev/shm object, a memfd, a regular file):
// that is what another process of this node can map too. Private memory
// (malloc, anonymous mmap) cannot be shared and the segment is then
// transfer-only (RSMERR_MAP_FAILED for importers that map).
void find_backing(binding* b) {
  uintptr_t a = reinterpret_cast<uintptr_t>(b->vaddr);
  std::vector<mapping_line> maps = read_maps();
  const mapping_line* first = nullptr;
  uintptr_t at = a, end = a + b->size;
  for (const mapping_line& m : maps) {
    if (m.end <= at || m.start > at) continue;
    if (!m.shared || m.inode == 0) return;
    if (!first) {
      first = &m;
    } else if (m.inode != first->inode || m.dev_major != first->dev_major ||
               m.dev_minor != first->dev_minor || m.offset - first->offset != m.start - first->start) {
      return;  // several files, or one file mapped out of order
    }
    at = m.end;
    if (at >= end) break;
  }
  if (!first || at < end) return;
  int fd = -1;
  const std::string deleted = " (deleted)";
  bool gone = first->path.size() >= deleted.size() &&
              first->path.compare(first->path.size() - deleted.size(), deleted.size(), deleted) == 0;
  if (!first->path.empty() && first->path[0] == '/' && !gone) {
    fd = open(first->path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0 && !same_file(fd, *first)) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    // A memfd or an unlinked file: find a descriptor of ours for it.
    if (dir_ptr d{opendir("/proc/self/fd")}) {
      while (dirent* de = readdir(d.get())) {
        int n = atoi(de->d_name);
        if (de->d_name[0] == '.' || n == dirfd(d.get())) continue;
        if (same_file(n, *first)) {
          char p[64];
          snprintf(p, sizeof p, "/proc/self/fd/%d", n);
          fd = open(p, O_RDWR | O_CLOEXEC);
          if (fd >= 0) break;
        }
      }
    }
  }
  if (fd < 0) {
    char p[96];
    snprintf(p, sizeof p, "/proc/self/map_files/%lx-%lx", static_cast<unsigned long>(first->start),
             static_cast<unsigned long>(first->end));
    fd = open(p, O_RDWR | O_CLOEXEC);  // needs CAP_SYS_ADMIN; shared anonymous memory
    if (fd >= 0 && !same_file(fd, *first)) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0) return;
  uint64_t off = first->offset + (a - first->start);
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < off + b->size) {
    close(fd);  // mapping past the end of the file would fault
    return;
  }
  b->backing_fd = fd;
  b->backing_off = off;
}

void free_binding(binding* b) noexcept {
  if (!b) return;
  for (fid_mr*& mr : b->mr)
    if (mr) {
      fi_close(&mr->fid);
      mr = nullptr;
    }
  if (b->backing_fd >= 0) close(b->backing_fd);
  b->backing_fd = -1;
}

int validate_acl(const rsmapi_access_entry_t* acl, uint_t n) {
  if (n > 0 && !acl) return RSMERR_BAD_ACL;
  if (n > 4096) return RSMERR_BAD_ACL;
  for (uint_t i = 0; i < n; i++) {
    if (acl[i].ae_node == 0 || (acl[i].ae_permission & ~0777u) || (acl[i].ae_permission & 0111u))
      return RSMERR_BAD_ACL;
    for (uint_t j = 0; j < i; j++)
      if (acl[j].ae_node == acl[i].ae_node) return RSMERR_BAD_ACL;
  }
  return RSM_SUCCESS;
}

// Looks an export handle up and locks its controller; waits while another
// thread's rebind or rotation waits for acknowledgements.
int lookup(void* h, controller** cp, export_seg** sp, std::unique_lock<std::mutex>* lk) {
  void* obj = nullptr;
  controller* c = nullptr;
  if (!h || !handle_get(hval(h), kind::exporter, &obj, &c)) return RSMERR_BAD_SEG_HNDL;
  auto* s = static_cast<export_seg*>(obj);
  if (s->creator != getpid()) return RSMERR_NOT_CREATOR;  // a forked child
  *lk = std::unique_lock<std::mutex>(c->ctl_mtx);
  for (;;) {
    if (!handle_get(hval(h), kind::exporter, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    if (!s->busy) break;
    c->cv.wait(*lk);
  }
  *cp = c;
  *sp = s;
  return RSM_SUCCESS;
}

// Which permission the access list gives an importer of node `node` with
// credentials uid/gid, in owner position (0600 style).
int granted(const export_seg* s, rsm_node_id_t node, uint32_t uid, uint32_t gid, rsm_permission_t* out) {
  rsm_permission_t p = default_perm;
  if (!s->acl.empty()) {
    bool found = false;
    for (const rsmapi_access_entry_t& e : s->acl)
      if (e.ae_node == node) {
        p = e.ae_permission;
        found = true;
      }
    if (!found) return RSMERR_SEG_NOT_PUBLISHED_TO_NODE;
  }
  // Owner, group, other as for files.
  rsm_permission_t digit = uid == geteuid() ? (p >> 6) & 7 : gid == getegid() ? (p >> 3) & 7 : p & 7;
  *out = (digit & 6) << 6;
  return RSM_SUCCESS;
}

// Sends every connection its target in the current binding (pushing the new
// memory to those that mapped it first), then waits, with the controller's
// lock released, for their acknowledgements. Those that do not answer in
// time are cut: they would go on using keys that are about to close.
void notify_rebind(controller* c, export_seg* s, std::unique_lock<std::mutex>& lk) {
  binding* b = s->bind.get();
  s->pending_acks = 0;
  for (auto& [id, cn] : s->conns) {
    if (!cn->p || cn->p->dead) continue;
    int level = level_of(cn->perm);
    if (cn->map_fd >= 0) {
      int fd = cn->node == c->node ? export_open_backing_for(b, cn->perm) : -1;
      proto::writer w(proto::map_push, c->instance);
      w.u32(fd >= 0 ? RSM_SUCCESS : RSMERR_MAP_FAILED).u64(fd >= 0 ? b->backing_off : 0).u64(b->size);
      send_fd_msg(cn->map_fd, w.out(), fd);
      if (fd >= 0) close(fd);
    }
    proto::writer w(proto::rebind, c->instance);
    w.u64(cn->import_id).u64(cn->import_token);
    w.u64(c->virt_addr ? reinterpret_cast<uint64_t>(b->vaddr) : 0).u64(level >= 0 ? b->key[level] : 0);
    w.u64(b->size).u32(s->gen).u8(b->backing_fd >= 0 && cn->node == c->node);
    service_send(c, cn->p, std::move(w.out()));
    s->pending_acks++;
  }
  if (!s->pending_acks) return;
  s->busy = true;
  deadline d(cfg().ack_timeout_ms);
  while (s->pending_acks > 0 && !d.expired())
    c->cv.wait_for(lk, std::chrono::milliseconds(std::max(1, d.remaining_ms())));
  s->busy = false;
  std::vector<conn*> late;
  for (auto& [id, cn] : s->conns)
    if (cn->acked_gen != s->gen) late.push_back(cn);
  for (conn* cn : late) export_cut(cn, RSMERR_CONN_ABORTED);
  s->pending_acks = 0;
  c->cv.notify_all();
}

// Points the segment at new memory (or at the same memory with fresh keys):
// registers the levels in use on the new memory, tells the importers, then
// closes the old registrations.
int rebind_locked(controller* c, export_seg* s, void* vaddr, std::unique_lock<std::mutex>& lk) {
  auto nb = std::make_unique<binding>();
  nb->vaddr = vaddr;
  nb->size = s->bind->size;
  find_backing(nb.get());
  for (int level = 0; level < 3; level++) {
    bool used = false;
    for (auto& [id, cn] : s->conns)
      if (level_of(cn->perm) == level) used = true;
    if (used && export_ensure_mr(s, nb.get(), level) != RSM_SUCCESS) {
      free_binding(nb.get());
      return RSMERR_INSUFFICIENT_RESOURCES;
    }
  }
  std::unique_ptr<binding> old = std::move(s->bind);
  s->bind = std::move(nb);
  s->gen++;
  notify_rebind(c, s, lk);
  free_binding(old.get());
  return RSM_SUCCESS;
}

void unpublish_locked(controller* c, export_seg* s) {
  std::vector<conn*> all;
  for (auto& [id, cn] : s->conns) all.push_back(cn);
  for (conn* cn : all) export_cut(cn, RSMERR_CONN_ABORTED);
  // Close the registrations: the keys the importers knew die with them.
  for (fid_mr*& mr : s->bind->mr)
    if (mr) {
      fi_close(&mr->fid);
      mr = nullptr;
    }
  registry_unpublish(c, s->segid);
  c->published.erase(s->segid);
  s->published = false;
  c->svc->published.fetch_sub(1);
  service_directory_update(c);
}

}  // namespace

export_seg::~export_seg() {
  free_binding(bind.get());
}

int export_perm_allowed(const export_seg* s, rsm_node_id_t node, uint32_t uid, uint32_t gid,
                        rsm_permission_t want) noexcept {
  if (want & ~static_cast<rsm_permission_t>(RSM_PERM_RDWR)) return RSMERR_PERM_DENIED;
  rsm_permission_t have = 0;
  int r = granted(s, node, uid, gid, &have);
  if (r) return r;
  return (want & have) == want ? RSM_SUCCESS : RSMERR_PERM_DENIED;
}

int export_ensure_mr(export_seg* s, binding* b, int level) noexcept {
  if (level < 0 || level > 2) return RSMERR_PERM_DENIED;
  if (b->mr[level]) return RSM_SUCCESS;
  controller* c = s->ctl;
  for (int attempt = 0; attempt < 8; attempt++) {
    uint64_t want = c->prov_key ? 0 : random64() & c->key_mask;
    fid_mr* mr = nullptr;
    int r = fi_mr_reg(c->svc_dom, b->vaddr, b->size, access_of[level], 0, want, 0, &mr, nullptr);
    if (r == -FI_ENOKEY) continue;  // that key is taken: draw another
    if (r) {
      RSM_LOG("fi_mr_reg: %s", fi_strerror(-r));
      return RSMERR_INSUFFICIENT_RESOURCES;
    }
    b->mr[level] = mr;
    b->key[level] = fi_mr_key(mr);
    return RSM_SUCCESS;
  }
  return RSMERR_INSUFFICIENT_RESOURCES;
}

int export_open_backing_for(const binding* b, rsm_permission_t perm) noexcept {
  if (!b || b->backing_fd < 0 || !(perm & RSM_PERM_READ)) return -1;
  char p[64];
  snprintf(p, sizeof p, "/proc/self/fd/%d", b->backing_fd);
  // A fresh open file description with only the access the connection has.
  return open(p, ((perm & RSM_PERM_WRITE) ? O_RDWR : O_RDONLY) | O_CLOEXEC);
}

void export_cut(conn* cn, int reason) noexcept {
  export_seg* s = cn->seg;
  controller* c = s->ctl;
  if (reason && cn->p && !cn->p->dead) {
    try {
      proto::writer w(proto::abort, c->instance);
      w.u64(cn->import_id).u64(cn->import_token).u32(static_cast<uint32_t>(reason));
      service_send(c, cn->p, std::move(w.out()));
    } catch (...) {
      // Out of memory: the importer learns from its failing transfers instead.
    }
  }
  if (cn->map_fd >= 0) close(cn->map_fd);
  if (cn->acked_gen != s->gen && s->pending_acks > 0) s->pending_acks--;
  s->conns.erase(cn->id);
  c->conns.erase(cn->id);
  if (cn->p) peer_put(c, cn->p);
  delete cn;
  c->cv.notify_all();
}

}  // namespace weft::rsm

using namespace weft::rsm;

RSM_API int rsm_memseg_export_create(rsmapi_controller_handle_t controller_h,
                                     rsm_memseg_export_handle_t* memseg, void* vaddr, size_t size,
                                     uint_t flags) {
  return guard([&]() -> int {
    controller* c = nullptr;
    int r = controller_lookup(controller_h, &c);
    if (r) return r;
    if (!memseg) return RSMERR_BAD_SEG_HNDL;
    *memseg = nullptr;
    if (!vaddr) return RSMERR_BAD_ADDR;
    if (size == 0) return RSMERR_BAD_LENGTH;
    if ((reinterpret_cast<uintptr_t>(vaddr) | size) & (page_size() - 1)) return RSMERR_BAD_MEM_ALIGNMENT;
    if (flags & ~static_cast<uint_t>(RSM_ALLOW_REBIND | RSM_CREATE_SEG_DONTWAIT)) return RSMERR_BAD_MODE;
    const config& k = cfg();
    if (size > k.max_segment_size) return RSMERR_BAD_LENGTH;
    if (!range_mapped(read_maps(), reinterpret_cast<uintptr_t>(vaddr), size)) return RSMERR_BAD_ADDR;
    auto s = std::make_unique<export_seg>();
    s->ctl = c;
    s->flags = flags;
    s->creator = getpid();
    s->sig = std::make_shared<sigstate>();
    s->bind = std::make_unique<binding>();
    s->bind->vaddr = vaddr;
    s->bind->size = size;
    find_backing(s->bind.get());
    {
      std::unique_lock<std::mutex> lk(c->ctl_mtx);
      // Segment count and total size are the controller's resources: without
      // RSM_CREATE_SEG_DONTWAIT wait (boundedly) for another segment to go.
      deadline d(k.timeout_ms);
      while (c->export_count >= k.max_export_segments || c->export_bytes + size > k.tot_export_size) {
        if ((flags & RSM_CREATE_SEG_DONTWAIT) || d.expired()) return RSMERR_INSUFFICIENT_RESOURCES;
        c->resources_cv.wait_for(lk, std::chrono::milliseconds(std::max(1, d.remaining_ms())));
      }
      s->handle = handle_add(kind::exporter, s.get(), c);
      c->export_count++;
      c->export_bytes += size;
    }
    controller_dep(c, +1);
    *memseg = reinterpret_cast<rsm_memseg_export_handle_t>(s->handle);
    RSM_LOG("export create %p+%zu%s", vaddr, size, s->bind->backing_fd >= 0 ? " (shareable)" : "");
    s.release();
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_export_destroy(rsm_memseg_export_handle_t memseg) {
  return guard([&]() -> int {
    controller* c = nullptr;
    export_seg* s = nullptr;
    std::unique_lock<std::mutex> lk;
    int r = lookup(memseg, &c, &s, &lk);
    if (r) return r;
    if (s->sig->pollfd_held()) return RSMERR_POLLFD_IN_USE;
    if (s->published) unpublish_locked(c, s);
    handle_remove(s->handle);
    c->export_count--;
    c->export_bytes -= s->bind->size;
    c->resources_cv.notify_all();
    lk.unlock();
    s->sig->wake_all();
    delete s;
    controller_dep(c, -1);
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_export_publish(rsm_memseg_export_handle_t memseg, rsm_memseg_id_t* segment_id,
                                      rsmapi_access_entry_t access_list[], uint_t access_list_length) {
  return guard([&]() -> int {
    if (!segment_id) return RSMERR_BAD_SEGID;
    controller* c = nullptr;
    export_seg* s = nullptr;
    std::unique_lock<std::mutex> lk;
    int r = lookup(memseg, &c, &s, &lk);
    if (r) return r;
    if ((r = validate_acl(access_list, access_list_length))) return r;
    if (s->published) return RSMERR_SEG_ALREADY_PUBLISHED;
    rsm_memseg_id_t id = *segment_id;
    if (id != 0 && (id <= RSM_OPS_ID_END || id >= RSM_SYSTEM_ID_BASE)) return RSMERR_RESERVED_SEGID;
    reg_entry e;
    e.instance = c->instance;
    e.pid = static_cast<uint32_t>(getpid());
    e.start_time = process_start_time(e.pid);
    e.addr = c->svc_addr;
    std::vector<rsmapi_access_entry_t> acl(access_list, access_list + access_list_length);
    if ((r = registry_publish(c, &id, e))) return r;
    try {
      c->published[id] = s;
    } catch (...) {
      registry_unpublish(c, id);
      throw;
    }
    s->acl = std::move(acl);
    s->segid = id;
    s->published = true;
    c->svc->published.fetch_add(1);
    service_directory_update(c);
    *segment_id = id;
    RSM_LOG("published segment %#x (%u access entries)", id, access_list_length);
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_export_unpublish(rsm_memseg_export_handle_t memseg) {
  return guard([&]() -> int {
    controller* c = nullptr;
    export_seg* s = nullptr;
    std::unique_lock<std::mutex> lk;
    int r = lookup(memseg, &c, &s, &lk);
    if (r) return r;
    if (!s->published) return RSMERR_SEG_NOT_PUBLISHED;
    if (s->sig->pollfd_held()) return RSMERR_POLLFD_IN_USE;
    unpublish_locked(c, s);
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_export_republish(rsm_memseg_export_handle_t memseg,
                                        rsmapi_access_entry_t access_list[], uint_t access_list_length) {
  return guard([&]() -> int {
    controller* c = nullptr;
    export_seg* s = nullptr;
    std::unique_lock<std::mutex> lk;
    int r = lookup(memseg, &c, &s, &lk);
    if (r) return r;
    if (!s->published) return RSMERR_SEG_NOT_PUBLISHED;
    if ((r = validate_acl(access_list, access_list_length))) return r;
    s->acl.assign(access_list, access_list + access_list_length);
    // A connection whose node lost the permission it connected with is cut
    // at once, and the keys it knew are replaced for everyone else.
    std::vector<conn*> cut;
    for (auto& [id, cn] : s->conns)
      if (export_perm_allowed(s, cn->node, cn->uid, cn->gid, cn->perm) != RSM_SUCCESS) cut.push_back(cn);
    bool lost[3] = {false, false, false};
    for (conn* cn : cut) {
      if (int l = level_of(cn->perm); l >= 0) lost[l] = true;
      export_cut(cn, RSMERR_CONN_ABORTED);
    }
    if (!cut.empty()) {
      // A registration nobody keeps a right to closes now; one that others
      // still use is replaced, and closed once they hold the new key.
      bool rotate = false;
      for (int l = 0; l < 3; l++) {
        if (!lost[l] || !s->bind->mr[l]) continue;
        bool kept = false;
        for (auto& [id, cn] : s->conns)
          if (level_of(cn->perm) == l) kept = true;
        if (kept) {
          rotate = true;
        } else {
          fi_close(&s->bind->mr[l]->fid);
          s->bind->mr[l] = nullptr;
        }
      }
      if (rotate && (r = rebind_locked(c, s, s->bind->vaddr, lk))) {
        // No fresh keys: nobody may keep the old ones either.
        std::vector<conn*> all;
        for (auto& [id, cn] : s->conns) all.push_back(cn);
        for (conn* cn : all) export_cut(cn, RSMERR_CONN_ABORTED);
      }
    }
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_export_rebind(rsm_memseg_export_handle_t memseg, void* vaddr, offset_t off,
                                     size_t size) {
  return guard([&]() -> int {
    controller* c = nullptr;
    export_seg* s = nullptr;
    std::unique_lock<std::mutex> lk;
    int r = lookup(memseg, &c, &s, &lk);
    if (r) return r;
    if (!(s->flags & RSM_ALLOW_REBIND)) return RSMERR_REBIND_NOT_ALLOWED;
    if (!vaddr) return RSMERR_BAD_ADDR;
    if (off < 0) return RSMERR_BAD_OFFSET;
    if (static_cast<uint64_t>(off) & (page_size() - 1)) return RSMERR_MISALIGNED_OFFSET;
    if (off != 0) return RSMERR_BAD_OFFSET;  // the whole segment is rebound, as on Solaris
    if (reinterpret_cast<uintptr_t>(vaddr) & (page_size() - 1)) return RSMERR_BAD_MEM_ALIGNMENT;
    if (size != s->bind->size) return RSMERR_BAD_LENGTH;
    if (!range_mapped(read_maps(), reinterpret_cast<uintptr_t>(vaddr), size)) return RSMERR_BAD_ADDR;
    return rebind_locked(c, s, vaddr, lk);
  });
}
