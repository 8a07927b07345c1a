// SPDX-License-Identifier: BSD-3-Clause
// Every call is safe from several threads: four threads transfer through
// their own import handles and two share one, while another thread trades
// signals with the exporter; all data is checked byte for byte.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "harness.hpp"

using namespace rsmt;

namespace {
constexpr size_t seg_size = 1 << 20;
constexpr size_t slice = 64 * 1024;
constexpr int rounds = 40;
}  // namespace

RSM_CHILD(mt_exporter) {
  auto ctl = open_ctl();
  void* m;
  rsm_memseg_export_handle_t ex = export_one(ctl, &m, seg_size, 0, 0);
  auto* mem = static_cast<uint8_t*>(m);
  set_step(0, 1);
  // Answer each of the importer's signals with one of ours.
  for (int i = 0; i < rounds; i++) {
    REQ_EQ(rsm_intr_signal_wait(ex, 20000), RSM_SUCCESS);
    REQ_EQ(rsm_intr_signal_post(ex, 0), RSM_SUCCESS);
  }
  wait_step(1, 1);
  for (int t = 0; t < 6; t++)
    REQ(check_pattern(mem + t * slice, slice, 1000 + static_cast<uint32_t>(t) * 100 + rounds - 1));
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(mt_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  uint32_t id = sh->u32[0];
  rsm_memseg_import_handle_t shared;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), id, RSM_PERM_RDWR, &shared), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_set_mode(shared, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
  std::atomic<int> bad{0};
  auto worker = [&](int t, rsm_memseg_import_handle_t h) {
    std::vector<uint8_t> out(slice), in(slice);
    for (int r = 0; r < rounds; r++) {
      uint32_t seed = 1000 + static_cast<uint32_t>(t) * 100 + static_cast<uint32_t>(r);
      fill_pattern(out.data(), slice, seed);
      if (rsm_memseg_import_put(h, t * slice, out.data(), slice) != RSM_SUCCESS) bad++;
      if (rsm_memseg_import_get(h, t * slice, in.data(), slice) != RSM_SUCCESS || in != out) bad++;
    }
  };
  std::vector<std::thread> ts;
  std::vector<rsm_memseg_import_handle_t> own(4);
  for (int t = 0; t < 4; t++) {
    REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), id, RSM_PERM_RDWR, &own[t]), RSM_SUCCESS);
    REQ_EQ(rsm_memseg_import_set_mode(own[t], RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
    ts.emplace_back(worker, t, own[t]);
  }
  ts.emplace_back(worker, 4, shared);
  ts.emplace_back(worker, 5, shared);
  ts.emplace_back([&] {
    for (int i = 0; i < rounds; i++) {
      if (rsm_intr_signal_post(shared, 0) != RSM_SUCCESS) bad++;
      if (rsm_intr_signal_wait(shared, 20000) != RSM_SUCCESS) bad++;
    }
  });
  for (auto& t : ts) t.join();
  REQ_EQ(bad.load(), 0);
  for (auto h : own) REQ_EQ(rsm_memseg_import_disconnect(h), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(shared), RSM_SUCCESS);
  set_step(1, 1);
  return 0;
}

TEST(RsmThreads, ConcurrentTransfersAndSignals) {
  new_shared();
  RUN_ACTORS(120, spawn("mt_exporter"), spawn("mt_importer"));
}
