// SPDX-License-Identifier: BSD-3-Clause
// Connects that cannot complete: an "exporter" whose registry entry is real
// but that never answers (a plain libfabric endpoint), so the connect is
// bounded (RSMERR_REMOTE_NODE_UNREACHABLE) and a signal interrupts it
// (RSMERR_INTERRUPTED); and the limit on import segments.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#include <string>

#include "harness.hpp"
#include "raw_ep.hpp"

using namespace rsmt;

namespace {
double seconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec / 1e9;
}
void on_alarm(int) {}
unsigned long long start_time_of_self() {
  FILE* f = fopen("/proc/self/stat", "r");
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  int field = 2;
  for (char* s = p + 1; *s; s++)
    if (*s == ' ' && ++field == 22) return strtoull(s + 1, nullptr, 10);
  return 0;
}
}  // namespace

// A process with a service address and a registry entry for segment
// 0x600300 that reads nothing and answers nothing.
RSM_CHILD(silent_exporter) {
  raw_ep r;
  r.open("shm", nullptr, FI_MSG);
  // The registry entry, as the library writes it (see src/rsm/registry.cpp).
  std::string dir = std::string(getenv("WEFT_RSM_RUNDIR")) + "/shm";
  mkdir(dir.c_str(), 0700);
  dir += "/1";
  mkdir(dir.c_str(), 0700);
  FILE* f = fopen((dir + "/00600300").c_str(), "w");
  fprintf(f, "%llx %u %llu ", 0x51e27ull, static_cast<unsigned>(getpid()), start_time_of_self());
  for (uint8_t b : r.addr) fprintf(f, "%02x", b);
  fprintf(f, "\n");
  fclose(f);
  set_step(0, 1);
  wait_step(1, 1, 60000);
  r.close_all();
  return 0;
}

RSM_CHILD(hopeful_importer) {
  auto ctl = open_ctl("shm");
  wait_step(0, 1);
  rsm_memseg_import_handle_t im = nullptr;
  double t0 = seconds();
  REQ_EQ(rsm_memseg_import_connect(ctl, 1, 0x600300, RSM_PERM_READ, &im), RSMERR_REMOTE_NODE_UNREACHABLE);
  double took = seconds() - t0;
  REQ(took >= 0.3 && took < 3);  // WEFT_RSM_CONNECT_TIMEOUT_MS=400
  // A signal (no SA_RESTART) during the wait interrupts it.
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval it{};
  it.it_value.tv_usec = 100 * 1000;
  setitimer(ITIMER_REAL, &it, nullptr);
  t0 = seconds();
  REQ_EQ(rsm_memseg_import_connect(ctl, 1, 0x600300, RSM_PERM_READ, &im), RSMERR_INTERRUPTED);
  REQ(seconds() - t0 < 0.35);
  REQ(im == nullptr);
  // One import segment at most (WEFT_RSM_MAX_IMPORT_SEGMENTS=1).
  void* mem = alloc_pages(4096, false);
  rsm_memseg_export_handle_t ex;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, 4096, 0), RSM_SUCCESS);
  rsm_memseg_id_t id = 0;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, nullptr, 0), RSM_SUCCESS);
  rsm_memseg_import_handle_t a, b;
  REQ_EQ(rsm_memseg_import_connect(ctl, 1, id, RSM_PERM_READ, &a), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_connect(ctl, 1, id, RSM_PERM_READ, &b), RSMERR_INSUFFICIENT_RESOURCES);
  REQ_EQ(rsm_memseg_import_disconnect(a), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_connect(ctl, 1, id, RSM_PERM_READ, &b), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(b), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  set_step(1, 1);
  return 0;
}

TEST(RsmConnect, SilentExporterAndLimits) {
  new_shared();
  RUN_ACTORS(
      60, spawn("silent_exporter"),
      spawn("hopeful_importer", {}, {"WEFT_RSM_CONNECT_TIMEOUT_MS=400", "WEFT_RSM_MAX_IMPORT_SEGMENTS=1"}));
}

// A malformed node table is RSMERR_BAD_CONF for every controller and for the
// topology; a table that names none of this host's addresses leaves tcp
// without a local node (RSMERR_CTLR_NOT_PRESENT) while shm still works.
RSM_CHILD(bad_table) {
  rsmapi_controller_handle_t c = nullptr;
  rsm_topology_t* t = nullptr;
  REQ_EQ(rsm_get_controller(const_cast<char*>("shm"), &c), RSMERR_BAD_CONF);
  REQ_EQ(rsm_get_controller(const_cast<char*>("tcp"), &c), RSMERR_BAD_CONF);
  REQ_EQ(rsm_get_interconnect_topology(&t), RSMERR_BAD_CONF);
  return 0;
}

RSM_CHILD(foreign_table) {
  rsmapi_controller_handle_t c = nullptr;
  REQ_EQ(rsm_get_controller(const_cast<char*>("tcp"), &c), RSMERR_CTLR_NOT_PRESENT);
  REQ_EQ(rsm_get_controller(const_cast<char*>("shm"), &c), RSM_SUCCESS);
  REQ_EQ(rsm_release_controller(c), RSM_SUCCESS);
  return 0;
}

TEST(RsmConnect, NodeTable) {
  new_shared();
  RUN_ACTORS(60, spawn("bad_table", {}, {"WEFT_RSM_NODES=1=10.0.0.1 two=10.0.0.2"}),
             spawn("bad_table", {}, {"WEFT_RSM_NODES=1=10.0.0.1 1=10.0.0.2"}),
             spawn("bad_table", {}, {"WEFT_RSM_NODES=1=10.0.0.1:99999"}),
             spawn("bad_table", {}, {"WEFT_RSM_CONFIG=/nonexistent/rsm.conf"}),
             spawn("bad_table", {}, {"WEFT_RSM_NODE_ID=zero"}),
             spawn("foreign_table", {}, {"WEFT_RSM_NODES=5=192.0.2.55 6=192.0.2.56"}));
}
