// SPDX-License-Identifier: BSD-3-Clause
// Barriers (open/close/order/destroy, their errors, a failure caused by a
// rebind and the retry that follows) and signals (both directions,
// accumulation, poll descriptors and their reference counts,
// rsm_intr_signal_wait_pollfd, timeouts and interruptions).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/time.h>

#include <vector>

#include "harness.hpp"

using namespace rsmt;

namespace {
void on_alarm(int) {}
// An interval timer whose SIGALRM interrupts the waits (no SA_RESTART).
void arm_alarm(int ms) {
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval it{};
  it.it_value.tv_sec = ms / 1000;
  it.it_value.tv_usec = (ms % 1000) * 1000;
  setitimer(ITIMER_REAL, &it, nullptr);
}
}  // namespace

// ---------------------------------------------------------------- barriers

RSM_CHILD(bar_exporter) {
  auto ctl = open_ctl();
  const size_t size = 16384;
  void* m1 = alloc_pages(size, false);
  void* m2 = alloc_pages(size, false);
  fill_pattern(m1, size, 1);
  fill_pattern(m2, size, 2);
  rsm_memseg_export_handle_t ex;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, m1, size, RSM_ALLOW_REBIND), RSM_SUCCESS);
  rsm_memseg_id_t id = 0;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, nullptr, 0), RSM_SUCCESS);
  sh->u32[0] = id;
  set_step(0, 1);
  wait_step(1, 1);  // the importer opened a barrier and wrote
  // Point the segment at other memory: importers keep their connection, but
  // the barrier open across the rebind must fail.
  REQ_EQ(rsm_memseg_export_rebind(ex, m2, 0, size), RSM_SUCCESS);
  set_step(2, 1);
  wait_step(3, 1);                          // retried
  REQ(check_pattern(m2, 100, 2) == false);  // the retry landed in the new memory
  std::vector<uint8_t> want(size);
  fill_pattern(want.data(), size, 2);
  fill_pattern(want.data(), 100, 9);
  REQ(memcmp(m2, want.data(), size) == 0);
  // The first write reached the old memory, which the segment no longer is.
  fill_pattern(want.data(), size, 1);
  fill_pattern(want.data(), 100, 9);
  REQ(memcmp(m1, want.data(), size) == 0);
  set_step(4, 1);
  wait_step(5, 1);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(bar_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  rsm_memseg_import_handle_t im;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_RDWR, &im), RSM_SUCCESS);
  rsmapi_barrier_t bar{};
  REQ_EQ(rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, nullptr), RSMERR_BAD_BARRIER_PTR);
  REQ_EQ(rsm_memseg_import_init_barrier(im, RSM_BARRIER_NODE, &bar), RSMERR_BAD_MODE);
  REQ_EQ(rsm_memseg_import_init_barrier(im, RSM_BARRIER_SEGMENT_THREAD, &bar), RSMERR_BAD_MODE);
  REQ_EQ(rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, &bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_close_barrier(&bar), RSMERR_BARRIER_NOT_OPENED);
  REQ_EQ(rsm_memseg_import_order_barrier(&bar), RSMERR_BARRIER_NOT_OPENED);
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSMERR_BARRIER_OPEN_FAILED);
  REQ_EQ(rsm_memseg_import_order_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);
  // A barrier struct whose segment field was tampered with is refused.
  rsmapi_barrier_t copy = bar;
  copy.seg = reinterpret_cast<void*>(0x1234);
  REQ_EQ(rsm_memseg_import_open_barrier(&copy), RSMERR_BAD_BARRIER_PTR);
  // Explicit mode: writes between open and close, then the exporter rebinds.
  REQ_EQ(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
  uint8_t data[100];
  fill_pattern(data, 100, 9);
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_put(im, 0, data, 100), RSM_SUCCESS);
  set_step(1, 1);
  wait_step(2, 1);
  REQ_EQ(rsm_memseg_import_close_barrier(&bar), RSMERR_BARRIER_FAILURE);
  // The caller retries what it wrote since open.
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_put(im, 0, data, 100), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_order_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);
  uint8_t back[200];
  REQ_EQ(rsm_memseg_import_get(im, 0, back, 200), RSM_SUCCESS);
  REQ(memcmp(back, data, 100) == 0);
  std::vector<uint8_t> want(200);
  fill_pattern(want.data(), 200, 2);
  REQ(memcmp(back + 100, want.data() + 100, 100) == 0);  // the new memory's own bytes
  set_step(3, 1);
  wait_step(4, 1);
  REQ_EQ(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_destroy_barrier(&bar), RSMERR_BARRIER_UNINITIALIZED);
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSMERR_BARRIER_UNINITIALIZED);
  // Implicit mode with its barrier gone: refused until another is initialised.
  REQ_EQ(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_IMPLICIT), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get(im, 0, back, 8), RSMERR_BARRIER_UNINITIALIZED);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  set_step(5, 1);
  return 0;
}

TEST(RsmBarrier, FailureAndRetry) {
  new_shared();
  RUN_ACTORS(60, spawn("bar_exporter"), spawn("bar_importer"));
}

// "After the barrier open and until the barrier close, failures of
// individual data access operations are not reported": in explicit mode,
// transfers on a connection the exporter cut answer RSM_SUCCESS while a
// barrier is open (putv leaves its residual count), and close_barrier
// reports the failure; with no barrier open, and in implicit mode, the
// transfer itself does.
RSM_CHILD(defer_exporter) {
  auto ctl = open_ctl();
  void* mem = nullptr;
  rsm_memseg_export_handle_t ex = export_one(ctl, &mem, 8192, 3, 0);
  set_step(0, 1);
  wait_step(1, 1);  // the importer opened its barrier and wrote
  REQ(check_pattern(mem, 64, 8));  // its write landed
  REQ_EQ(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
  set_step(2, 1);
  wait_step(3, 1);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(defer_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  rsm_memseg_import_handle_t im;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_RDWR, &im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
  rsmapi_barrier_t bar{};
  REQ_EQ(rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, &bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
  uint8_t data[64];
  fill_pattern(data, sizeof data, 8);
  REQ_EQ(rsm_memseg_import_put(im, 0, data, sizeof data), RSM_SUCCESS);
  set_step(1, 1);
  wait_step(2, 1);
  // The cut reaches us: order_barrier (a barrier call) says so.
  int r = RSM_SUCCESS;
  for (int i = 0; i < 5000 && r == RSM_SUCCESS; i++) {
    r = rsm_memseg_import_order_barrier(&bar);
    if (r == RSM_SUCCESS) usleep(1000);
  }
  REQ_EQ(r, RSMERR_CONN_ABORTED);
  // Inside the open barrier: not reported by the accesses.
  uint64_t v = 5;
  REQ_EQ(rsm_memseg_import_put64(im, 8, &v, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get(im, 0, data, sizeof data), RSM_SUCCESS);
  rsm_iovec_t iov[2] = {};
  for (auto& e : iov) {
    e.io_type = RSM_VA_TYPE;
    e.local.vaddr = reinterpret_cast<caddr_t>(data);
    e.transfer_length = 8;
  }
  rsm_scat_gath_t sg{};
  sg.io_request_count = 2;
  sg.remote_handle = im;
  sg.iovec = iov;
  REQ_EQ(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
  REQ_EQ(sg.io_residual_count, 2u);  // neither entry completed
  // Argument errors are no data access: they are reported at once.
  REQ_EQ(rsm_memseg_import_put(im, 8192, data, 8), RSMERR_BAD_OFFSET);
  REQ_EQ(rsm_memseg_import_put(im, 0, nullptr, 8), RSMERR_BAD_ADDR);
  // The close reports them.
  REQ_EQ(rsm_memseg_import_close_barrier(&bar), RSMERR_CONN_ABORTED);
  // No barrier open: the access reports its own failure.
  REQ_EQ(rsm_memseg_import_put64(im, 8, &v, 1), RSMERR_CONN_ABORTED);
  REQ_EQ(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_IMPLICIT), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get(im, 0, data, 8), RSMERR_CONN_ABORTED);
  REQ_EQ(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  set_step(3, 1);
  return 0;
}

TEST(RsmBarrier, ExplicitModeReportsFailuresAtClose) {
  new_shared();
  RUN_ACTORS(60, spawn("defer_exporter"), spawn("defer_importer"));
}

// ---------------------------------------------------------------- signals

RSM_CHILD(sig_exporter) {
  auto ctl = open_ctl();
  void* mem = alloc_pages(4096, false);
  rsm_memseg_export_handle_t ex;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, 4096, 0), RSM_SUCCESS);
  rsm_memseg_id_t id = 0;
  REQ_EQ(rsm_intr_signal_post(ex, 0), RSMERR_SEG_NOT_PUBLISHED);
  REQ_EQ(rsm_memseg_export_publish(ex, &id, nullptr, 0), RSM_SUCCESS);
  sh->u32[0] = id;
  set_step(0, 1);
  // Three posts accumulate: three waits succeed, the fourth times out.
  wait_step(1, 1);
  for (int i = 0; i < 3; i++) REQ_EQ(rsm_intr_signal_wait(ex, 5000), RSM_SUCCESS);
  REQ_EQ(rsm_intr_signal_wait(ex, 50), RSMERR_TIMEOUT);
  REQ_EQ(rsm_intr_signal_wait(ex, 0), RSMERR_TIMEOUT);
  // Three posts with RSM_SIGPOST_NO_ACCUMULATE: one event.
  set_step(2, 1);
  wait_step(3, 1);
  REQ_EQ(rsm_intr_signal_wait(ex, 5000), RSM_SUCCESS);
  REQ_EQ(rsm_intr_signal_wait(ex, 100), RSMERR_TIMEOUT);
  // Poll descriptors: counted references; the segment cannot go while held.
  pollfd p1, p2;
  REQ_EQ(rsm_memseg_get_pollfd(ex, nullptr), RSMERR_BAD_ADDR);
  REQ_EQ(rsm_memseg_get_pollfd(ex, &p1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_get_pollfd(ex, &p2), RSM_SUCCESS);
  REQ_EQ(p1.fd, p2.fd);
  REQ_EQ(p1.events, POLLRDNORM);
  REQ_EQ(rsm_memseg_export_unpublish(ex), RSMERR_POLLFD_IN_USE);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSMERR_POLLFD_IN_USE);
  REQ_EQ(rsm_memseg_release_pollfd(ex), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSMERR_POLLFD_IN_USE);
  // wait_pollfd: nothing yet, then the importer's post and a pipe of ours.
  int pipefd[2];
  REQ(pipe(pipefd) == 0);
  pollfd fds[2] = {{pipefd[0], POLLIN, 0}, p1};
  int n = -1;
  REQ_EQ(rsm_intr_signal_wait_pollfd(fds, 2, 50, &n), RSMERR_TIMEOUT);
  REQ_EQ(n, 0);
  set_step(4, 1);
  REQ_EQ(rsm_intr_signal_wait_pollfd(fds, 2, 5000, &n), RSM_SUCCESS);
  REQ_EQ(n, 1);
  REQ_EQ(fds[1].revents, POLLRDNORM);
  REQ_EQ(fds[0].revents, 0);
  REQ_EQ(write(pipefd[1], "x", 1), 1);
  fds[0].revents = fds[1].revents = 0;
  REQ_EQ(rsm_intr_signal_wait_pollfd(fds, 2, 5000, nullptr), RSM_SUCCESS);
  REQ_EQ(fds[0].revents, POLLIN);
  REQ_EQ(fds[1].revents, 0);  // its event was consumed by the previous call
  char c;
  REQ_EQ(read(pipefd[0], &c, 1), 1);
  // Interrupted waits.
  arm_alarm(100);
  REQ_EQ(rsm_intr_signal_wait(ex, 5000), RSMERR_INTERRUPTED);
  arm_alarm(100);
  REQ_EQ(rsm_intr_signal_wait_pollfd(fds, 2, 5000, &n), RSMERR_INTERRUPTED);
  REQ_EQ(rsm_memseg_release_pollfd(ex), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_release_pollfd(ex), RSM_SUCCESS);  // extra release: no count below zero
  // From the export side a post reaches every importer.
  REQ_EQ(rsm_intr_signal_post(ex, 0x40), RSMERR_BAD_MODE);
  REQ_EQ(rsm_intr_signal_post(ex, 0), RSM_SUCCESS);
  set_step(5, 1);
  wait_step(6, 1);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(sig_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  rsm_memseg_import_handle_t im, im2;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_READ, &im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_READ, &im2), RSM_SUCCESS);
  REQ_EQ(rsm_intr_signal_post(im, 0x40), RSMERR_BAD_MODE);
  for (int i = 0; i < 3; i++) REQ_EQ(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
  set_step(1, 1);
  wait_step(2, 1);
  for (int i = 0; i < 3; i++) REQ_EQ(rsm_intr_signal_post(im2, RSM_SIGPOST_NO_ACCUMULATE), RSM_SUCCESS);
  usleep(200 * 1000);  // all three have arrived before the exporter looks
  set_step(3, 1);
  wait_step(4, 1);
  REQ_EQ(rsm_intr_signal_post(im, 0), RSM_SUCCESS);
  // An import handle's poll descriptor holds the connection.
  pollfd p;
  REQ_EQ(rsm_memseg_get_pollfd(im, &p), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSMERR_POLLFD_IN_USE);
  wait_step(5, 1);
  // The exporter's post reaches both connections.
  pollfd fds[1] = {p};
  int n = 0;
  REQ_EQ(rsm_intr_signal_wait_pollfd(fds, 1, 5000, &n), RSM_SUCCESS);
  REQ_EQ(n, 1);
  REQ_EQ(rsm_intr_signal_wait(im2, 5000), RSM_SUCCESS);
  REQ_EQ(rsm_intr_signal_wait(im2, 50), RSMERR_TIMEOUT);
  REQ_EQ(rsm_memseg_release_pollfd(im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im2), RSM_SUCCESS);
  set_step(6, 1);
  return 0;
}

TEST(RsmSignal, PostWaitPoll) {
  new_shared();
  RUN_ACTORS(60, spawn("sig_exporter"), spawn("sig_importer"));
}
