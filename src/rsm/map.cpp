// SPDX-License-Identifier: BSD-3-Clause
// Mapping an import segment for load/store. Only an importer on the
// exporter's node can, and only if the exported memory is shareable (a
// /dev/shm object, a memfd, a shared file mapping): the importer asks the
// exporter's service thread, over the exporter's Unix socket, for a
// descriptor of that memory, which comes read-only for a read-only
// connection, and maps it. The socket stays open while mapped: a rebind
// pushes the new memory on it (the mapping is replaced in place), and a cut
// connection replaces the mapping with private zero pages, so the importer
// can no longer reach the exporter's memory (it does not fault either).
#include <errno.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "import.hpp"
#include "proto.hpp"
#include "service.hpp"

namespace weft::rsm {

bool send_fd_msg(int sock, const std::vector<uint8_t>& bytes, int fd) noexcept {
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    memset(ctrl, 0, sizeof ctrl);
    mh.msg_control = ctrl;
    mh.msg_controllen = sizeof ctrl;
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  }
  return sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(bytes.size());
}

ssize_t recv_fd_msg(int sock, void* buf, size_t len, int* fd) noexcept {
  *fd = -1;
  iovec iov{buf, len};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int) * 4)];
  mh.msg_control = ctrl;
  mh.msg_controllen = sizeof ctrl;
  ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int got;
      memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof got);
      if (*fd < 0)
        *fd = got;
      else
        close(got);  // more than asked for: not ours to keep
    }
  }
  return n;
}

void import_revoke_mapping(import_seg* im) noexcept {
  std::lock_guard<std::mutex> l(im->map_mtx);
  if (im->map_addr) {
    void* r = mmap(im->map_addr, im->map_len, im->map_prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) RSM_LOG("could not revoke a mapping: %s", strerror(errno));
  }
  if (im->map_sock >= 0) {
    close(im->map_sock);
    im->map_sock = -1;
  }
}

void import_remap(import_seg* im, int fd, uint64_t file_off) noexcept {
  std::unique_lock<std::mutex> l(im->map_mtx);
  if (!im->map_addr) return;
  void* r = mmap(im->map_addr, im->map_len, im->map_prot, MAP_FIXED | MAP_SHARED, fd,
                 static_cast<off_t>(file_off + static_cast<uint64_t>(im->map_off)));
  if (r == MAP_FAILED) {
    l.unlock();
    import_revoke_mapping(im);
  }
}

namespace {

size_t page_size() {
  long v = sysconf(_SC_PAGESIZE);
  return static_cast<size_t>(v > 0 ? v : 4096);
}

// Asks the exporter for the descriptor; returns the connected socket (kept
// for pushes) or -1 with *status set.
int fetch_fd(import_seg* im, int* fd, uint64_t* file_off, int* status) {
  *fd = -1;
  *status = RSMERR_MAP_FAILED;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  timeval tv{2, 0};  // the exporter's service thread answers at once; bound it anyway
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string path = map_socket_path(im->exporter_pid, im->exporter_instance);
  if (path.size() >= sizeof sa.sun_path) {
    close(s);
    return -1;
  }
  memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(s);
    return -1;
  }
  proto::writer w(proto::map_req, im->ctl->instance);
  w.u64(im->conn_id).u64(im->conn_token);
  if (send(s, w.out().data(), w.out().size(), MSG_NOSIGNAL) != static_cast<ssize_t>(w.out().size())) {
    close(s);
    return -1;
  }
  uint8_t buf[64];
  pollfd pf{s, POLLIN, 0};
  if (poll(&pf, 1, 2000) != 1) {
    close(s);
    return -1;
  }
  ssize_t n = recv_fd_msg(s, buf, sizeof buf, fd);
  proto::reader r(buf, n > 0 ? static_cast<size_t>(n) : 0);
  uint16_t t;
  uint64_t sender;
  bool good = n > 0 && r.header(&t, &sender) && t == proto::map_rep;
  uint32_t st = r.u32();
  *file_off = r.u64();
  r.u64();
  if (!good || !r.ok() || st != RSM_SUCCESS || *fd < 0) {
    // The exporter no longer knows the connection: it is lost.
    if (good && r.ok() && st == RSMERR_SEG_NOT_CONNECTED) *status = RSMERR_CONN_ABORTED;
    if (*fd >= 0) close(*fd);
    *fd = -1;
    close(s);
    return -1;
  }
  *status = RSM_SUCCESS;
  return s;
}

}  // namespace
}  // namespace weft::rsm

using namespace weft::rsm;

RSM_API int rsm_memseg_import_map(rsm_memseg_import_handle_t h, void** address, rsm_attribute_t attr_arg,
                                  rsm_permission_t perm, off_t offset, size_t length) {
  return guard([&]() -> int {
    int attr = enum_value(attr_arg);
    import_seg* im;
    controller* c;
    if (int r = import_lookup(h, &im, &c)) return r;
    if (!address) return RSMERR_BAD_ADDR;
    // The data mutex keeps the handle alive (and other maps of it out) while
    // the exporter is asked; the controller and map locks are not held then.
    std::lock_guard<std::mutex> dl(c->data_mtx);
    if (!handle_get(hval(h), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    {
      std::lock_guard<std::mutex> ml(im->map_mtx);
      if (im->map_addr) return RSMERR_SEG_ALREADY_MAPPED;
    }
    if (im->aborted.load()) return RSMERR_CONN_ABORTED;  // the connection is lost
    // Linux cannot map memory write-only: a mapping reads too.
    if (perm == 0 || (perm & ~static_cast<rsm_permission_t>(RSM_PERM_RDWR)) || !(perm & RSM_PERM_READ) ||
        (perm & ~im->perm))
      return RSMERR_BAD_PERMS;
    const target* t = im->tgt.load(std::memory_order_acquire);
    if (length == 0) return RSMERR_BAD_LENGTH;
    if (offset < 0) return RSMERR_BAD_OFFSET;
    if (static_cast<uint64_t>(offset) >= t->size) return RSMERR_BAD_OFFSET;  // past the end
    if (length > t->size - static_cast<uint64_t>(offset)) return RSMERR_BAD_LENGTH;
    if (static_cast<uint64_t>(offset) & (page_size() - 1)) return RSMERR_BAD_MEM_ALIGNMENT;
    if (attr != RSM_MAP_NONE && attr != RSM_MAP_FIXED) return RSMERR_MAP_FAILED;
    if (attr == RSM_MAP_FIXED && (!*address || (reinterpret_cast<uintptr_t>(*address) & (page_size() - 1))))
      return RSMERR_BAD_MEM_ALIGNMENT;
    if (!im->same_node || !im->map_ok) return RSMERR_MAP_FAILED;
    {
      std::lock_guard<std::mutex> l(c->ctl_mtx);
      if (c->map_bytes + length > cfg().tot_map_size) return RSMERR_INSUFFICIENT_RESOURCES;
    }
    int fd = -1, status = 0;
    uint64_t file_off = 0;
    int sock = fetch_fd(im, &fd, &file_off, &status);
    if (sock < 0) return status;
    int prot = PROT_READ | ((perm & RSM_PERM_WRITE) ? PROT_WRITE : 0);
    void* want = attr == RSM_MAP_FIXED ? *address : nullptr;
    void* va = mmap(want, length, prot, MAP_SHARED | (attr == RSM_MAP_FIXED ? MAP_FIXED : 0), fd,
                    static_cast<off_t>(file_off + static_cast<uint64_t>(offset)));
    int e = errno;
    close(fd);
    if (va == MAP_FAILED) {
      close(sock);
      return e == ENOMEM ? RSMERR_INSUFFICIENT_RESOURCES : e == EACCES ? RSMERR_BAD_PERMS : RSMERR_MAP_FAILED;
    }
    std::lock_guard<std::mutex> l(c->ctl_mtx);
    std::lock_guard<std::mutex> ml(im->map_mtx);
    if (im->aborted.load()) {
      munmap(va, length);  // cut while we asked
      close(sock);
      return RSMERR_CONN_ABORTED;
    }
    im->map_addr = va;
    im->map_len = length;
    im->map_off = offset;
    im->map_prot = prot;
    im->map_sock = sock;
    c->map_bytes += length;
    *address = va;
    service_wake(c);  // watch the socket from now on
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_import_unmap(rsm_memseg_import_handle_t h) {
  return guard([&]() -> int {
    import_seg* im;
    controller* c;
    if (int r = import_lookup(h, &im, &c)) return r;
    std::lock_guard<std::mutex> dl(c->data_mtx);
    if (!handle_get(hval(h), kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    if (im->sig->pollfd_held()) return RSMERR_POLLFD_IN_USE;
    std::lock_guard<std::mutex> l(c->ctl_mtx);
    std::lock_guard<std::mutex> ml(im->map_mtx);
    if (!im->map_addr) return RSMERR_SEG_NOT_MAPPED;
    munmap(im->map_addr, im->map_len);
    c->map_bytes -= im->map_len;
    im->map_addr = nullptr;
    im->map_len = 0;
    if (im->map_sock >= 0) close(im->map_sock);  // the exporter forgets our mapping
    im->map_sock = -1;
    return RSM_SUCCESS;
  });
}
