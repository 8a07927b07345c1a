// SPDX-License-Identifier: BSD-3-Clause
// Import side transfers between two processes: get/put of 8 to 64 bits with
// every argument check, permissions, connect errors, byte swapping, bulk and
// scatter/gather. Data is checked byte for byte on both sides.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <vector>

#include "harness.hpp"

using namespace rsmt;

namespace {

constexpr size_t seg_size = 64 * 1024;

}  // namespace

// ---------------------------------------------------------------- get/put 8..64

RSM_CHILD(putget_exporter) {
  auto ctl = open_ctl();
  void* mem;
  auto ex = export_one(ctl, &mem, seg_size, 1, 0);
  set_step(0, 1);
  wait_step(1, 1);  // the importer is done writing
  auto* b = static_cast<uint8_t*>(mem);
  // What the importer wrote, byte for byte, in this host's byte order.
  std::vector<uint8_t> want(seg_size);
  fill_pattern(want.data(), seg_size, 1);
  fill_pattern(want.data(), 4096, 2);
  fill_pattern(want.data() + 4096, 4096, 3);
  fill_pattern(want.data() + 8192, 4096, 4);
  fill_pattern(want.data() + 12288, 4096, 5);
  uint64_t last = 0x0123456789abcdefull;
  memcpy(want.data() + seg_size - 8, &last, 8);
  REQ(memcmp(b, want.data(), seg_size) == 0);
  set_step(2, 1);
  wait_step(3, 1);  // the importer disconnected
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  REQ_EQ(rsm_release_controller(ctl), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(putget_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  rsm_memseg_id_t id = sh->u32[0];
  rsm_memseg_import_handle_t im = nullptr;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
  alignas(8) uint8_t buf[4096 + 16];
  // Implicit mode (the default) needs an initialised barrier.
  rsm_barrier_mode_t mode;
  REQ_EQ(rsm_memseg_import_get_mode(im, &mode), RSM_SUCCESS);
  REQ_EQ(mode, RSM_BARRIER_MODE_IMPLICIT);
  REQ_EQ(rsm_memseg_import_get8(im, 0, buf, 8), RSMERR_BARRIER_UNINITIALIZED);
  REQ_EQ(rsm_memseg_import_put8(im, 0, buf, 8), RSMERR_BARRIER_UNINITIALIZED);
  rsmapi_barrier_t bar;
  REQ_EQ(rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, &bar), RSM_SUCCESS);
  // Reads see the exporter's pattern.
  REQ_EQ(rsm_memseg_import_get8(im, 0, buf, 4096), RSM_SUCCESS);
  std::vector<uint8_t> want(seg_size);
  fill_pattern(want.data(), seg_size, 1);
  REQ(memcmp(buf, want.data(), 4096) == 0);
  REQ_EQ(rsm_memseg_import_get64(im, 8192, reinterpret_cast<uint64_t*>(buf), 512), RSM_SUCCESS);
  REQ(memcmp(buf, want.data() + 8192, 4096) == 0);
  // Writes of each width, read back.
  fill_pattern(buf, 4096, 2);
  REQ_EQ(rsm_memseg_import_put8(im, 0, buf, 4096), RSM_SUCCESS);
  fill_pattern(buf, 4096, 3);
  REQ_EQ(rsm_memseg_import_put16(im, 4096, reinterpret_cast<uint16_t*>(buf), 2048), RSM_SUCCESS);
  fill_pattern(buf, 4096, 4);
  REQ_EQ(rsm_memseg_import_put32(im, 8192, reinterpret_cast<uint32_t*>(buf), 1024), RSM_SUCCESS);
  fill_pattern(buf, 4096, 5);
  REQ_EQ(rsm_memseg_import_put64(im, 12288, reinterpret_cast<uint64_t*>(buf), 512), RSM_SUCCESS);
  uint64_t last = 0x0123456789abcdefull, back = 0;
  REQ_EQ(rsm_memseg_import_put64(im, seg_size - 8, &last, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get64(im, seg_size - 8, &back, 1), RSM_SUCCESS);
  REQ_EQ(back, last);
  for (int w = 0; w < 4; w++) {
    uint32_t seed = 2 + static_cast<uint32_t>(w);
    memset(buf, 0, sizeof buf);
    off_t off = 4096 * w;
    int r = w == 0   ? rsm_memseg_import_get8(im, off, buf, 4096)
            : w == 1 ? rsm_memseg_import_get16(im, off, reinterpret_cast<uint16_t*>(buf), 2048)
            : w == 2 ? rsm_memseg_import_get32(im, off, reinterpret_cast<uint32_t*>(buf), 1024)
                     : rsm_memseg_import_get64(im, off, reinterpret_cast<uint64_t*>(buf), 512);
    REQ_EQ(r, RSM_SUCCESS);
    REQ(check_pattern(buf, 4096, seed));
  }
  // Alignment of the offset and of the local pointer, to the width.
  uint16_t* odd16 = reinterpret_cast<uint16_t*>(buf + 1);
  REQ_EQ(rsm_memseg_import_put16(im, 1, reinterpret_cast<uint16_t*>(buf), 1), RSMERR_BAD_MEM_ALIGNMENT);
  REQ_EQ(rsm_memseg_import_put16(im, 2, odd16, 1), RSMERR_BAD_MEM_ALIGNMENT);
  REQ_EQ(rsm_memseg_import_get32(im, 2, reinterpret_cast<uint32_t*>(buf), 1), RSMERR_BAD_MEM_ALIGNMENT);
  REQ_EQ(rsm_memseg_import_get32(im, 4, reinterpret_cast<uint32_t*>(buf + 2), 1), RSMERR_BAD_MEM_ALIGNMENT);
  REQ_EQ(rsm_memseg_import_put64(im, 4, reinterpret_cast<uint64_t*>(buf), 1), RSMERR_BAD_MEM_ALIGNMENT);
  REQ_EQ(rsm_memseg_import_get64(im, 8, reinterpret_cast<uint64_t*>(buf + 4), 1), RSMERR_BAD_MEM_ALIGNMENT);
  // Offsets and lengths.
  REQ_EQ(rsm_memseg_import_get8(im, -1, buf, 1), RSMERR_BAD_OFFSET);
  REQ_EQ(rsm_memseg_import_get8(im, seg_size, buf, 1), RSMERR_BAD_OFFSET);
  REQ_EQ(rsm_memseg_import_put64(im, seg_size, &last, 1), RSMERR_BAD_OFFSET);
  REQ_EQ(rsm_memseg_import_get8(im, 0, buf, 0), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_import_put32(im, seg_size - 4, reinterpret_cast<uint32_t*>(buf), 2), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_import_get64(im, 0, reinterpret_cast<uint64_t*>(buf), ~0ul), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_import_get(im, 16, buf, seg_size), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_import_put(im, 0, buf, 0), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_import_get8(im, 0, nullptr, 1), RSMERR_BAD_ADDR);
  REQ_EQ(rsm_memseg_import_put64(im, 0, nullptr, 1), RSMERR_BAD_ADDR);
  REQ_EQ(rsm_memseg_import_get(im, 0, nullptr, 8), RSMERR_BAD_ADDR);
  // Barrier modes.
  // A C caller may pass any int for the mode (C++ cannot form one).
  using set_mode_with_int = int (*)(rsm_memseg_import_handle_t, int);
  auto set_mode_int = reinterpret_cast<set_mode_with_int>(&rsm_memseg_import_set_mode);
  REQ_EQ(set_mode_int(im, 7), RSMERR_BAD_MODE);
  REQ_EQ(rsm_memseg_import_get_mode(im, nullptr), RSMERR_BAD_ADDR);
  REQ_EQ(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get_mode(im, &mode), RSM_SUCCESS);
  REQ_EQ(mode, RSM_BARRIER_MODE_EXPLICIT);
  REQ_EQ(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
  // Explicit mode does not need a barrier.
  REQ_EQ(rsm_memseg_import_get64(im, seg_size - 8, &back, 1), RSM_SUCCESS);
  REQ_EQ(back, last);
  set_step(1, 1);
  wait_step(2, 1);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSMERR_BAD_SEG_HNDL);  // stale
  set_step(3, 1);
  REQ_EQ(rsm_release_controller(ctl), RSM_SUCCESS);
  return 0;
}

TEST(RsmTransfer, PutGetWidths) {
  new_shared();
  RUN_ACTORS(60, spawn("putget_exporter"), spawn("putget_importer"));
}

// ---------------------------------------------------------------- permissions

RSM_CHILD(perm_exporter) {
  auto ctl = open_ctl();
  uint32_t me = local_node();
  // Node me may read and write; the second segment only lets it read; the
  // third is published to another node only.
  rsmapi_access_entry_t rw[] = {{me, 0600}, {me + 1, 0400}};
  rsmapi_access_entry_t ro[] = {{me, 0444}};
  rsmapi_access_entry_t other[] = {{me + 1, 0666}};
  void *m1, *m2, *m3;
  auto e1 = export_one(ctl, &m1, 8192, 1, 0, rw, 2);
  auto e2 = export_one(ctl, &m2, 8192, 2, 1, ro, 1);
  auto e3 = export_one(ctl, &m3, 8192, 3, 2, other, 1);
  set_step(0, 1);
  wait_step(1, 1);
  // The write-only importer wrote its pattern at offset 0; the read-only one
  // and the refused ones changed nothing.
  std::vector<uint8_t> want(8192);
  fill_pattern(want.data(), 8192, 1);
  fill_pattern(want.data(), 64, 9);
  REQ(memcmp(m1, want.data(), 8192) == 0);
  REQ(check_pattern(m2, 8192, 2));
  REQ(check_pattern(m3, 8192, 3));
  set_step(2, 1);
  wait_step(3, 1);
  REQ_EQ(rsm_memseg_export_destroy(e1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_destroy(e2), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_destroy(e3), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(perm_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  uint32_t me = local_node();
  rsm_memseg_id_t id1 = sh->u32[0], id2 = sh->u32[1], id3 = sh->u32[2];
  rsm_memseg_import_handle_t r = nullptr, w = nullptr, n = nullptr, x = nullptr;
  uint8_t buf[64];
  rsmapi_barrier_t b1, b2;
  // Read-only connection: reads work, writes are refused.
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id1, RSM_PERM_READ, &r), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_init_barrier(r, RSM_BAR_DEFAULT, &b1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get(r, 0, buf, 64), RSM_SUCCESS);
  REQ(check_pattern(buf, 64, 1));
  REQ_EQ(rsm_memseg_import_put(r, 0, buf, 64), RSMERR_PERM_DENIED);
  REQ_EQ(rsm_memseg_import_put8(r, 0, buf, 1), RSMERR_PERM_DENIED);
  // Write-only: writes work, reads are refused.
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id1, RSM_PERM_WRITE, &w), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_init_barrier(w, RSM_BAR_DEFAULT, &b2), RSM_SUCCESS);
  fill_pattern(buf, 64, 9);
  REQ_EQ(rsm_memseg_import_put(w, 0, buf, 64), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get(w, 0, buf, 64), RSMERR_PERM_DENIED);
  // "perm is restricted to" 0400, 0200 and 0600: no connection asks for nothing.
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id1, RSM_PERM_NONE, &n), RSMERR_PERM_DENIED);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id1, 0004, &n), RSMERR_PERM_DENIED);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id1, 0440, &n), RSMERR_PERM_DENIED);
  // The access list and the permission bits decide.
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id2, RSM_PERM_RDWR, &x), RSMERR_PERM_DENIED);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id2, RSM_PERM_WRITE, &x), RSMERR_PERM_DENIED);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id1, 0700, &x), RSMERR_PERM_DENIED);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id1, 0666, &x), RSMERR_PERM_DENIED);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id3, RSM_PERM_READ, &x), RSMERR_SEG_NOT_PUBLISHED_TO_NODE);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, id2, RSM_PERM_READ, &x), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(x), RSM_SUCCESS);
  // Connect errors: nothing published under that id, an id that cannot be,
  // a node shm cannot reach.
  REQ_EQ(rsm_memseg_import_connect(ctl, me, 0x700001, RSM_PERM_READ, &x), RSMERR_SEG_NOT_PUBLISHED);
  REQ_EQ(rsm_memseg_import_connect(ctl, me, 0, RSM_PERM_READ, &x), RSMERR_SEG_NOT_PUBLISHED);
  if (!strcmp(ctl_name(), "shm"))
    REQ_EQ(rsm_memseg_import_connect(ctl, me + 6, id1, RSM_PERM_READ, &x), RSMERR_REMOTE_NODE_UNREACHABLE);
  set_step(1, 1);
  wait_step(2, 1);
  REQ_EQ(rsm_memseg_import_disconnect(r), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(w), RSM_SUCCESS);
  set_step(3, 1);
  return 0;
}

TEST(RsmTransfer, Permissions) {
  new_shared();
  RUN_ACTORS(60, spawn("perm_exporter"), spawn("perm_importer"));
}

// ---------------------------------------------------------------- byte order

// The exporter announces big-endian: an importer of the other byte order
// writes values the exporter reads natively, i.e. swapped in memory here.
RSM_CHILD(swap_exporter) {
  auto ctl = open_ctl();
  void* mem;
  auto ex = export_one(ctl, &mem, 8192, 1, 0);
  memset(mem, 0, 8192);
  set_step(0, 1);
  wait_step(1, 1);
  auto* b = static_cast<uint8_t*>(mem);
  const uint8_t w16[] = {0x12, 0x34};
  const uint8_t w32[] = {0x12, 0x34, 0x56, 0x78};
  const uint8_t w64[] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  // Big-endian images of 0x1234, 0x12345678, 0x0123456789abcdef.
  REQ(memcmp(b + 0, w16, 2) == 0);
  REQ(memcmp(b + 8, w32, 4) == 0);
  REQ(memcmp(b + 16, w64, 8) == 0);
  for (int i = 0; i < 100; i++) REQ(memcmp(b + 64 + 4 * i, w32, 4) == 0);
  REQ_EQ(b[1024], 0xab);  // 8 bits: nothing to swap
  REQ(memcmp(b + 2048, "bulk is bytes", 13) == 0);
  set_step(2, 1);
  wait_step(3, 1);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(swap_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  rsm_memseg_import_handle_t im;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_RDWR, &im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
  uint16_t v16 = 0x1234;
  uint32_t v32 = 0x12345678;
  uint64_t v64 = 0x0123456789abcdefull;
  uint8_t v8 = 0xab;
  REQ_EQ(rsm_memseg_import_put16(im, 0, &v16, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_put32(im, 8, &v32, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_put64(im, 16, &v64, 1), RSM_SUCCESS);
  std::vector<uint32_t> many(100, v32);
  REQ_EQ(rsm_memseg_import_put32(im, 64, many.data(), 100), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_put8(im, 1024, &v8, 1), RSM_SUCCESS);
  char text[] = "bulk is bytes";
  REQ_EQ(rsm_memseg_import_put(im, 2048, text, 13), RSM_SUCCESS);
  // Reading back swaps again: the values come back as written.
  uint16_t r16 = 0;
  uint32_t r32 = 0;
  uint64_t r64 = 0;
  REQ_EQ(rsm_memseg_import_get16(im, 0, &r16, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get32(im, 8, &r32, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get64(im, 16, &r64, 1), RSM_SUCCESS);
  REQ_EQ(r16, v16);
  REQ_EQ(r32, v32);
  REQ_EQ(r64, v64);
  std::vector<uint32_t> back(100);
  REQ_EQ(rsm_memseg_import_get32(im, 64, back.data(), 100), RSM_SUCCESS);
  REQ(back == many);
  set_step(1, 1);
  wait_step(2, 1);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  set_step(3, 1);
  return 0;
}

TEST(RsmTransfer, ByteSwap) {
  new_shared();
  RUN_ACTORS(60, spawn("swap_exporter", {}, {"WEFT_RSM_BYTE_ORDER=big"}),
             spawn("swap_importer", {}, {"WEFT_RSM_BYTE_ORDER=little"}));
}

// ---------------------------------------------------------------- implicit signals
// RSM_IMPLICIT_SIGPOST on putv and getv posts one signal to the exporter
// after the list; with RSM_SIGPOST_NO_ACCUMULATE it adds one only if none
// is pending: three such lists leave one event, two without it leave two.
RSM_CHILD(sgsig_exporter) {
  auto ctl = open_ctl();
  void* mem;
  auto ex = export_one(ctl, &mem, 16384, 1, 0);
  set_step(0, 1);
  wait_step(1, 1);  // three lists with NO_ACCUMULATE, all arrived
  REQ_EQ(rsm_intr_signal_wait(ex, 5000), RSM_SUCCESS);
  REQ_EQ(rsm_intr_signal_wait(ex, 300), RSMERR_TIMEOUT);
  REQ(check_pattern(static_cast<char*>(mem) + 4096, 256, 42));  // the putv's data is there
  set_step(2, 1);
  wait_step(3, 1);  // two lists that accumulate
  REQ_EQ(rsm_intr_signal_wait(ex, 5000), RSM_SUCCESS);
  REQ_EQ(rsm_intr_signal_wait(ex, 5000), RSM_SUCCESS);
  REQ_EQ(rsm_intr_signal_wait(ex, 300), RSMERR_TIMEOUT);
  set_step(4, 1);
  wait_step(5, 1);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(sgsig_importer) {
  auto ctl = open_ctl();
  rsmapi_barrier_t bar{};
  rsm_memseg_import_handle_t im = import_first(ctl, &bar);
  uint8_t out[256], in[256];
  fill_pattern(out, sizeof out, 42);
  rsm_iovec_t io{};
  io.io_type = RSM_VA_TYPE;
  io.remote_offset = 4096;
  io.transfer_length = sizeof out;
  rsm_scat_gath_t sg{};
  sg.remote_handle = im;
  sg.iovec = &io;
  sg.io_request_count = 1;
  sg.flags = RSM_IMPLICIT_SIGPOST | RSM_SIGPOST_NO_ACCUMULATE;
  io.local.vaddr = reinterpret_cast<caddr_t>(out);
  REQ_EQ(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
  io.local.vaddr = reinterpret_cast<caddr_t>(in);
  REQ_EQ(rsm_memseg_import_getv(&sg), RSM_SUCCESS);
  REQ(memcmp(in, out, sizeof in) == 0);
  usleep(200 * 1000);  // every post has arrived before the exporter looks
  set_step(1, 1);
  wait_step(2, 1);
  sg.flags = RSM_IMPLICIT_SIGPOST;
  REQ_EQ(rsm_memseg_import_getv(&sg), RSM_SUCCESS);
  io.local.vaddr = reinterpret_cast<caddr_t>(out);
  REQ_EQ(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
  usleep(200 * 1000);
  set_step(3, 1);
  wait_step(4, 1);
  REQ_EQ(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  set_step(5, 1);
  return 0;
}

TEST(RsmTransfer, ImplicitSignalsOnScatterGather) {
  new_shared();
  RUN_ACTORS(60, spawn("sgsig_exporter"), spawn("sgsig_importer"));
}

// ---------------------------------------------------------------- bulk and scatter/gather

RSM_CHILD(sg_exporter) {
  auto ctl = open_ctl();
  void* mem;
  const size_t size = 2 << 20;
  auto ex = export_one(ctl, &mem, size, 1, 0);
  set_step(0, 1);
  // The putv with RSM_IMPLICIT_SIGPOST signals us once it is all there.
  REQ_EQ(rsm_intr_signal_wait(ex, 20000), RSM_SUCCESS);
  auto* b = static_cast<uint8_t*>(mem);
  for (int i = 0; i < 16; i++)
    REQ(check_pattern(b + (1 << 20) + i * 8192, 4096, 100 + static_cast<uint32_t>(i)));
  set_step(1, 1);
  wait_step(2, 1);
  // Bulk: the first MiB is the importer's pattern 7.
  REQ(check_pattern(b, 1 << 20, 7));
  // The failed putv wrote its first three entries and nothing after.
  for (int i = 0; i < 3; i++)
    REQ(check_pattern(b + 1536 * 1024 + i * 4096, 4096, 200 + static_cast<uint32_t>(i)));
  std::vector<uint8_t> orig(size);
  fill_pattern(orig.data(), size, 1);
  REQ(memcmp(b + 1536 * 1024 + 3 * 4096, orig.data() + 1536 * 1024 + 3 * 4096, 4096) == 0);
  set_step(3, 1);
  wait_step(4, 1);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(sg_importer) {
  auto ctl = open_ctl();
  rsmapi_barrier_t bar{};
  rsm_memseg_import_handle_t im = import_first(ctl, &bar);
  // Scatter/gather: 16 entries, alternately through a local memory handle
  // and an immediate address.
  const size_t local_len = 16 * 8192;
  auto* local = static_cast<char*>(alloc_pages(local_len, false));
  for (int i = 0; i < 16; i++) fill_pattern(local + i * 8192, 4096, 100 + static_cast<uint32_t>(i));
  rsm_localmemory_handle_t lh;
  REQ_EQ(rsm_create_localmemory_handle(ctl, &lh, local, local_len), RSM_SUCCESS);
  rsm_iovec_t io[17];
  for (int i = 0; i < 17; i++) {
    io[i] = {};
    if (i % 2) {
      io[i].io_type = RSM_VA_TYPE;
      io[i].local.vaddr = local;
    } else {
      io[i].io_type = RSM_HANDLE_TYPE;
      io[i].local.handle = lh;
    }
    io[i].local_offset = static_cast<size_t>(i % 16) * 8192;
    io[i].remote_offset = (1 << 20) + static_cast<size_t>(i % 16) * 8192;
    io[i].transfer_length = 4096;
  }
  rsm_scat_gath_t sg{};
  sg.local_nodeid = local_node();
  sg.remote_handle = im;
  sg.iovec = io;
  sg.io_request_count = 0;
  REQ_EQ(rsm_memseg_import_putv(&sg), RSMERR_BAD_SGIO);
  sg.io_request_count = 17;
  REQ_EQ(rsm_memseg_import_putv(&sg), RSMERR_BAD_SGIO);
  sg.io_request_count = 16;
  sg.iovec = nullptr;
  REQ_EQ(rsm_memseg_import_putv(&sg), RSMERR_BAD_SGIO);
  sg.iovec = io;
  sg.flags = 0x80;
  REQ_EQ(rsm_memseg_import_putv(&sg), RSMERR_BAD_SGIO);
  sg.flags = RSM_IMPLICIT_SIGPOST;
  REQ_EQ(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
  REQ_EQ(sg.io_residual_count, 0u);
  wait_step(1, 1);
  // getv brings the same bytes back into a second buffer.
  auto* back = static_cast<char*>(alloc_pages(local_len, false));
  rsm_iovec_t gio[16];
  for (int i = 0; i < 16; i++) {
    gio[i] = {};
    gio[i].io_type = RSM_VA_TYPE;
    gio[i].local.vaddr = back;
    gio[i].local_offset = static_cast<size_t>(i) * 8192;
    gio[i].remote_offset = (1 << 20) + static_cast<size_t>(i) * 8192;
    gio[i].transfer_length = 4096;
  }
  rsm_scat_gath_t gsg{};
  gsg.remote_handle = im;
  gsg.iovec = gio;
  gsg.io_request_count = 16;
  REQ_EQ(rsm_memseg_import_getv(&gsg), RSM_SUCCESS);
  for (int i = 0; i < 16; i++) REQ(memcmp(back + i * 8192, local + i * 8192, 4096) == 0);
  // Bulk put and get of a MiB.
  std::vector<uint8_t> big(1 << 20), got(1 << 20);
  fill_pattern(big.data(), big.size(), 7);
  REQ_EQ(rsm_memseg_import_put(im, 0, big.data(), big.size()), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get(im, 0, got.data(), got.size()), RSM_SUCCESS);
  REQ(got == big);
  // A list that goes wrong at its fourth entry: three done, residual 13.
  for (int i = 0; i < 16; i++) {
    io[i].remote_offset = 1536 * 1024 + static_cast<size_t>(i) * 4096;
    fill_pattern(local + i * 8192, 4096, 200 + static_cast<uint32_t>(i));
  }
  sg.flags = 0;
  auto check_residual = [&](int bad, int expect) {
    sg.io_residual_count = 99;
    REQ_EQ(rsm_memseg_import_putv(&sg), expect);
    REQ_EQ(sg.io_residual_count, 16u - static_cast<unsigned>(bad));
  };
  rsm_iovec_t keep = io[3];
  io[3].io_type = 9;
  check_residual(3, RSMERR_BAD_SGIO);
  io[3] = keep;
  io[3].io_type = RSM_HANDLE_TYPE;
  io[3].local.handle = reinterpret_cast<rsm_localmemory_handle_t>(0x4242424204ull);
  check_residual(3, RSMERR_BAD_LOCALMEM_HNDL);
  io[3] = keep;
  io[3].remote_offset = 2 << 20;
  check_residual(3, RSMERR_BAD_OFFSET);
  io[3] = keep;
  io[3].transfer_length = (2 << 20);
  check_residual(3, RSMERR_BAD_LENGTH);
  io[3] = keep;
  io[3].io_type = RSM_VA_TYPE;
  io[3].local.vaddr = nullptr;
  check_residual(3, RSMERR_BAD_ADDR);
  io[3] = keep;
  io[2].local_offset = local_len;  // past the local handle's memory
  keep = io[2];
  REQ_EQ(io[2].io_type, RSM_HANDLE_TYPE);
  check_residual(2, RSMERR_BAD_OFFSET);
  io[2].local_offset = 2 * 8192;
  io[3].io_type = 9;
  check_residual(3, RSMERR_BAD_SGIO);
  set_step(2, 1);
  wait_step(3, 1);
  REQ_EQ(rsm_free_localmemory_handle(ctl, lh), RSM_SUCCESS);
  // A freed handle in a list is refused.
  io[0].io_type = RSM_HANDLE_TYPE;
  io[0].local.handle = lh;
  sg.io_request_count = 1;
  REQ_EQ(rsm_memseg_import_putv(&sg), RSMERR_BAD_LOCALMEM_HNDL);
  REQ_EQ(sg.io_residual_count, 1u);
  REQ_EQ(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  set_step(4, 1);
  return 0;
}

TEST(RsmTransfer, BulkAndScatterGather) {
  new_shared();
  RUN_ACTORS(60, spawn("sg_exporter"), spawn("sg_importer"));
}
