// SPDX-License-Identifier: BSD-3-Clause
// Connections that end: an exporter killed mid-session (its importers see
// RSMERR_CONN_ABORTED within a bound, a blocked signal wait wakes), unpublish,
// destroy, and a republish that revokes one importer's right while another
// keeps its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>

#include <thread>

#include "harness.hpp"

using namespace rsmt;

namespace {
double seconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec / 1e9;
}
}  // namespace

RSM_CHILD(doomed_exporter) {
  auto ctl = open_ctl();
  void* mem;
  export_one(ctl, &mem, 8192, 1, 0);
  sh->u32[1] = static_cast<uint32_t>(getpid());
  set_step(0, 1);
  sleep(60);  // killed long before
  return 1;
}

RSM_CHILD(orphan_importer) {
  auto ctl = open_ctl();
  rsmapi_barrier_t bar{};
  rsm_memseg_import_handle_t im = import_first(ctl, &bar);
  uint64_t v = 42;
  REQ_EQ(rsm_memseg_import_put64(im, 0, &v, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
  // A thread blocked in a signal wait must wake when the exporter dies.
  int waited = -1;
  std::thread waiter([&] { waited = rsm_intr_signal_wait(im, 30000); });
  usleep(100 * 1000);
  double t0 = seconds();
  REQ_EQ(kill(static_cast<pid_t>(sh->u32[1]), SIGKILL), 0);
  // Transfers fail with RSMERR_CONN_ABORTED, soon, and never hang.
  int r = RSM_SUCCESS;
  while (r == RSM_SUCCESS && seconds() - t0 < 20) {
    r = rsm_memseg_import_put64(im, 0, &v, 1);
    usleep(1000);
  }
  REQ_EQ(r, RSMERR_CONN_ABORTED);
  waiter.join();
  REQ_EQ(waited, RSMERR_CONN_ABORTED);
  REQ(seconds() - t0 < 10);
  REQ_EQ(rsm_memseg_import_get64(im, 0, &v, 1), RSMERR_CONN_ABORTED);
  REQ_EQ(rsm_intr_signal_post(im, 0), RSMERR_CONN_ABORTED);
  REQ_EQ(rsm_memseg_import_close_barrier(&bar), RSMERR_CONN_ABORTED);
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSMERR_CONN_ABORTED);
  void* addr = nullptr;
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_READ, 0, 4096), RSMERR_CONN_ABORTED);
  // Nothing is published under that id any more.
  rsm_memseg_import_handle_t again;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_READ, &again),
         RSMERR_SEG_NOT_PUBLISHED);
  REQ_EQ(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  return 0;
}

TEST(RsmAbort, ExporterKilled) {
  new_shared();
  pid_t e = spawn("doomed_exporter");
  pid_t i = spawn("orphan_importer");
  std::vector<pid_t> pids{i};
  std::string why;
  int rc = wait_all(pids, 60, &why);
  kill(e, SIGKILL);
  waitpid(e, nullptr, 0);
  forget_killed(e);
  ASSERT_EQ(rc, 0) << why;
}

RSM_CHILD(cut_exporter) {
  auto ctl = open_ctl();
  void *m1, *m2;
  rsm_memseg_export_handle_t e1 = export_one(ctl, &m1, 8192, 1, 0);
  rsm_memseg_export_handle_t e2 = export_one(ctl, &m2, 8192, 3, 1);
  set_step(0, 1);
  wait_step(1, 1);
  // Node 1 keeps read permission only: the read/write connection is cut, the
  // read-only one stays.
  rsmapi_access_entry_t ro[] = {{local_node(), 0444}};
  REQ_EQ(rsm_memseg_export_republish(e2, ro, 1), RSM_SUCCESS);
  set_step(2, 1);
  wait_step(3, 1);
  REQ_EQ(rsm_memseg_export_unpublish(e1), RSM_SUCCESS);
  set_step(4, 1);
  wait_step(5, 1);
  REQ_EQ(rsm_memseg_export_destroy(e2), RSM_SUCCESS);
  set_step(6, 1);
  wait_step(7, 1);
  REQ(check_pattern(m2, 8192, 3));  // nobody wrote after losing the right
  REQ_EQ(rsm_memseg_export_destroy(e1), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(cut_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  uint32_t me = local_node();
  rsm_memseg_import_handle_t a, rw, r;
  REQ_EQ(rsm_memseg_import_connect(ctl, me, sh->u32[0], RSM_PERM_RDWR, &a), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, sh->u32[1], RSM_PERM_RDWR, &rw), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, sh->u32[1], RSM_PERM_READ, &r), RSM_SUCCESS);
  for (auto h : {a, rw, r}) REQ_EQ(rsm_memseg_import_set_mode(h, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
  uint8_t buf[64];
  REQ_EQ(rsm_memseg_import_get(rw, 0, buf, 64), RSM_SUCCESS);
  set_step(1, 1);
  wait_step(2, 1);
  // The exporter's republish waited for nothing from us: the cut is
  // immediate on its side, and our side learns within a moment.
  int got = RSM_SUCCESS;
  for (int i = 0; i < 2000 && got == RSM_SUCCESS; i++) {
    got = rsm_memseg_import_get(rw, 0, buf, 64);
    usleep(1000);
  }
  REQ_EQ(got, RSMERR_CONN_ABORTED);
  REQ_EQ(rsm_memseg_import_put(rw, 0, buf, 64), RSMERR_CONN_ABORTED);
  REQ_EQ(rsm_memseg_import_get(r, 0, buf, 64), RSM_SUCCESS);
  REQ(check_pattern(buf, 64, 3));
  // A new read/write connection is refused; read-only is still allowed.
  rsm_memseg_import_handle_t x;
  REQ_EQ(rsm_memseg_import_connect(ctl, me, sh->u32[1], RSM_PERM_RDWR, &x), RSMERR_PERM_DENIED);
  set_step(3, 1);
  wait_step(4, 1);
  got = RSM_SUCCESS;
  for (int i = 0; i < 2000 && got == RSM_SUCCESS; i++) {
    got = rsm_memseg_import_get(a, 0, buf, 64);
    usleep(1000);
  }
  REQ_EQ(got, RSMERR_CONN_ABORTED);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, sh->u32[0], RSM_PERM_READ, &x), RSMERR_SEG_NOT_PUBLISHED);
  set_step(5, 1);
  wait_step(6, 1);
  got = RSM_SUCCESS;
  for (int i = 0; i < 2000 && got == RSM_SUCCESS; i++) {
    got = rsm_memseg_import_get(r, 0, buf, 64);
    usleep(1000);
  }
  REQ_EQ(got, RSMERR_CONN_ABORTED);
  for (auto h : {a, rw, r}) REQ_EQ(rsm_memseg_import_disconnect(h), RSM_SUCCESS);
  set_step(7, 1);
  return 0;
}

TEST(RsmAbort, UnpublishRepublishDestroy) {
  new_shared();
  RUN_ACTORS(60, spawn("cut_exporter"), spawn("cut_importer"));
}
