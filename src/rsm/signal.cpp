// SPDX-License-Identifier: BSD-3-Clause
// Signals and poll descriptors. Each import and export handle has an event
// count: a post from the other side adds one (unless
// RSM_SIGPOST_NO_ACCUMULATE finds one pending), a wait takes one. A pipe
// holding one byte while the count is not zero is the poll descriptor
// rsm_memseg_get_pollfd hands out, reference-counted; rsm_intr_signal_wait_pollfd consumes the events of
// the segment descriptors among the ones poll(2) reports.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "import.hpp"
#include "proto.hpp"
#include "service.hpp"

namespace weft::rsm {

sigstate::sigstate() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe");
  rfd = fds[0];
  wfd = fds[1];
}

sigstate::~sigstate() {
  close(rfd);
  close(wfd);
}

void sigstate::post(bool no_accumulate) noexcept {
  std::lock_guard<std::mutex> l(mtx);
  if (broken || (no_accumulate && pending > 0)) return;
  if (pending++ == 0) (void)!write(wfd, "s", 1);
}

void sigstate::wake_all() noexcept {
  std::lock_guard<std::mutex> l(mtx);
  if (broken) return;
  broken = true;
  // Readable for good: pollers wake, come in and find out.
  if (pending == 0) (void)!write(wfd, "x", 1);
}

// Events posted before the connection went are still delivered; once they
// are taken, waiters learn that it is gone.
bool sigstate::consume() noexcept {
  std::lock_guard<std::mutex> l(mtx);
  if (pending == 0) return false;
  if (--pending == 0 && !broken) {
    char b;
    (void)!read(rfd, &b, 1);
  }
  return true;
}

bool sigstate::pollfd_held() noexcept {
  std::lock_guard<std::mutex> l(mtx);
  return pollfd_refs > 0;
}

namespace {

std::mutex table_mtx;
std::unordered_map<int, std::shared_ptr<sigstate>>& pollfd_table() {
  static auto* t = new std::unordered_map<int, std::shared_ptr<sigstate>>;
  return *t;
}

// The event state of an import or export handle; keeps it alive while a
// waiter sleeps on it even if the handle goes away meanwhile.
int sig_of(void* h, std::shared_ptr<sigstate>* out, bool* is_import) {
  if (!h) return RSMERR_BAD_SEG_HNDL;
  void* obj = nullptr;
  controller* c = nullptr;
  uint64_t v = hval(h);
  if (handle_kind(v) == kind::importer) {
    if (!handle_get(v, kind::importer, &obj, &c)) return RSMERR_BAD_SEG_HNDL;
    std::lock_guard<std::mutex> l(c->data_mtx);
    if (!handle_get(v, kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    *out = static_cast<import_seg*>(obj)->sig;
    *is_import = true;
    return RSM_SUCCESS;
  }
  if (handle_kind(v) == kind::exporter) {
    if (!handle_get(v, kind::exporter, &obj, &c)) return RSMERR_BAD_SEG_HNDL;
    auto* s = static_cast<export_seg*>(obj);
    if (s->creator != getpid()) return RSMERR_NOT_CREATOR;
    std::lock_guard<std::mutex> l(c->ctl_mtx);
    if (!handle_get(v, kind::exporter, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
    *out = s->sig;
    *is_import = false;
    return RSM_SUCCESS;
  }
  return RSMERR_BAD_SEG_HNDL;
}

int poll_error(int e) {
  switch (e) {
    case EINTR:
      return RSMERR_INTERRUPTED;
    case ENOMEM:
      return RSMERR_INSUFFICIENT_MEM;
    case EAGAIN:
      return RSMERR_INSUFFICIENT_RESOURCES;
    default:
      return RSMERR_BAD_ADDR;  // EFAULT, EINVAL: the array or its size
  }
}

}  // namespace
}  // namespace weft::rsm

using namespace weft::rsm;

RSM_API int rsm_intr_signal_post(void* memseg, uint_t flags) {
  return guard([&]() -> int {
    if (!memseg) return RSMERR_BAD_SEG_HNDL;
    if (flags & ~static_cast<uint_t>(RSM_SIGPOST_NO_ACCUMULATE)) return RSMERR_BAD_MODE;
    uint64_t v = hval(memseg);
    void* obj = nullptr;
    controller* c = nullptr;
    if (handle_kind(v) == kind::importer) {
      if (!handle_get(v, kind::importer, &obj, &c)) return RSMERR_BAD_SEG_HNDL;
      std::lock_guard<std::mutex> l(c->data_mtx);
      if (!handle_get(v, kind::importer, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
      auto* im = static_cast<import_seg*>(obj);
      if (int a = im->aborted.load()) return a;
      proto::writer w(proto::signal_to_export, c->instance);
      w.u64(im->conn_id).u64(im->conn_token).u32(flags);
      service_send(c, im->p, std::move(w.out()));
      return RSM_SUCCESS;
    }
    if (handle_kind(v) == kind::exporter) {
      if (!handle_get(v, kind::exporter, &obj, &c)) return RSMERR_BAD_SEG_HNDL;
      auto* s = static_cast<export_seg*>(obj);
      if (s->creator != getpid()) return RSMERR_NOT_CREATOR;
      std::lock_guard<std::mutex> l(c->ctl_mtx);
      if (!handle_get(v, kind::exporter, nullptr, nullptr)) return RSMERR_BAD_SEG_HNDL;
      if (!s->published) return RSMERR_SEG_NOT_PUBLISHED;
      // From the export side: every importer.
      for (auto& [id, cn] : s->conns) {
        if (!cn->p || cn->p->dead) continue;
        proto::writer w(proto::signal_to_import, c->instance);
        w.u64(cn->import_id).u64(cn->import_token).u32(flags);
        service_send(c, cn->p, std::move(w.out()));
      }
      return RSM_SUCCESS;
    }
    return RSMERR_BAD_SEG_HNDL;
  });
}

RSM_API int rsm_intr_signal_wait(void* memseg, int timeout) {
  return guard([&]() -> int {
    std::shared_ptr<sigstate> st;
    bool is_import = false;
    if (int r = sig_of(memseg, &st, &is_import)) return r;
    deadline d(timeout);
    for (;;) {
      if (st->consume()) return RSM_SUCCESS;
      if (st->broken) return is_import ? RSMERR_CONN_ABORTED : RSMERR_BAD_SEG_HNDL;
      pollfd pf{st->rfd, POLLIN, 0};
      int n = poll(&pf, 1, d.remaining_ms());
      if (n < 0) return poll_error(errno);
      if (n == 0) return RSMERR_TIMEOUT;
    }
  });
}

RSM_API int rsm_memseg_get_pollfd(void* memseg, struct pollfd* fd) {
  return guard([&]() -> int {
    if (!fd) return RSMERR_BAD_ADDR;
    std::shared_ptr<sigstate> st;
    bool is_import = false;
    if (int r = sig_of(memseg, &st, &is_import)) return r;
    std::lock_guard<std::mutex> tl(table_mtx);
    std::lock_guard<std::mutex> l(st->mtx);
    if (st->pollfd_refs == 0) pollfd_table()[st->rfd] = st;
    st->pollfd_refs++;
    fd->fd = st->rfd;
    fd->events = POLLRDNORM;
    fd->revents = 0;
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_memseg_release_pollfd(void* memseg) {
  return guard([&]() -> int {
    std::shared_ptr<sigstate> st;
    bool is_import = false;
    if (int r = sig_of(memseg, &st, &is_import)) return r;
    std::lock_guard<std::mutex> tl(table_mtx);
    std::lock_guard<std::mutex> l(st->mtx);
    if (st->pollfd_refs > 0 && --st->pollfd_refs == 0) pollfd_table().erase(st->rfd);
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_intr_signal_wait_pollfd(struct pollfd fds[], nfds_t nfds, int timeout, int* numfdsp) {
  return guard([&]() -> int {
    if (numfdsp) *numfdsp = 0;
    if (nfds > 0 && !fds) return RSMERR_BAD_ADDR;
    deadline d(timeout);
    for (;;) {
      int n = poll(fds, nfds, d.remaining_ms());
      if (n < 0) return poll_error(errno);
      if (n == 0) return RSMERR_TIMEOUT;
      int ready = 0;
      for (nfds_t i = 0; i < nfds; i++) {
        if (!fds[i].revents) continue;
        std::shared_ptr<sigstate> st;
        {
          std::lock_guard<std::mutex> tl(table_mtx);
          auto it = pollfd_table().find(fds[i].fd);
          if (it != pollfd_table().end()) st = it->second;
        }
        if (st) {
          // A segment's descriptor: report POLLRDNORM for an event this call
          // took, POLLERR for a connection that is gone (and has none left).
          fds[i].revents = st->consume() ? POLLRDNORM : st->broken ? POLLERR : 0;
        }
        if (fds[i].revents) ready++;
      }
      if (ready > 0) {
        if (numfdsp) *numfdsp = ready;
        return RSM_SUCCESS;
      }
      if (d.expired()) return RSMERR_TIMEOUT;  // others took the events first
    }
  });
}
