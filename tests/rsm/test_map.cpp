// SPDX-License-Identifier: BSD-3-Clause
// Mapping an import segment for load/store on the exporter's node: stores
// and loads seen on both sides byte for byte, read-only mappings, fixed
// addresses, every error, the mapping following a rebind and being revoked
// when the segment is unpublished; private memory cannot be mapped.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <fstream>
#include <string>

#include "harness.hpp"

using namespace rsmt;

namespace {

constexpr size_t seg_size = 64 * 1024;

// The permissions column of /proc/self/maps for the mapping holding addr.
std::string prot_of(const void* addr) {
  std::ifstream f("/proc/self/maps");
  std::string line;
  auto a = reinterpret_cast<uintptr_t>(addr);
  while (std::getline(f, line)) {
    unsigned long s, e;
    char perms[8];
    if (sscanf(line.c_str(), "%lx-%lx %7s", &s, &e, perms) == 3 && a >= s && a < e) return perms;
  }
  return "";
}

// The [start, end) of the mapping holding addr (0, 0 if none).
std::pair<uintptr_t, uintptr_t> range_of(const void* addr) {
  std::ifstream f("/proc/self/maps");
  std::string line;
  auto a = reinterpret_cast<uintptr_t>(addr);
  while (std::getline(f, line)) {
    unsigned long s, e;
    if (sscanf(line.c_str(), "%lx-%lx", &s, &e) == 2 && a >= s && a < e) return {s, e};
  }
  return {0, 0};
}

}  // namespace

RSM_CHILD(map_exporter) {
  auto ctl = open_ctl();
  auto* m1 = static_cast<uint8_t*>(alloc_pages(seg_size, true));
  auto* m2 = static_cast<uint8_t*>(alloc_pages(seg_size, true));
  void* priv = alloc_pages(seg_size, false);
  fill_pattern(m1, seg_size, 1);
  fill_pattern(m2, seg_size, 2);
  rsm_memseg_export_handle_t ex, ep;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, m1, seg_size, RSM_ALLOW_REBIND), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_create(ctl, &ep, priv, seg_size, 0), RSM_SUCCESS);
  rsm_memseg_id_t id = 0, pid = 0;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, nullptr, 0), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_publish(ep, &pid, nullptr, 0), RSM_SUCCESS);
  sh->u32[0] = id;
  sh->u32[1] = pid;
  set_step(0, 1);
  wait_step(1, 1);  // the importer stored through its mapping
  REQ(check_pattern(m1, 4096, 5));
  REQ(check_pattern(m1 + 4096, seg_size - 4096, 1) == false);  // (pattern 1 continues, offset-shifted)
  std::vector<uint8_t> want(seg_size);
  fill_pattern(want.data(), seg_size, 1);
  REQ(memcmp(m1 + 4096, want.data() + 4096, seg_size - 4096) == 0);
  fill_pattern(m1 + 8192, 4096, 6);  // for the importer's loads
  set_step(2, 1);
  wait_step(3, 1);
  // Rebind: the importer's mapping follows to the new memory.
  REQ_EQ(rsm_memseg_export_rebind(ex, m2, 0, seg_size), RSM_SUCCESS);
  set_step(4, 1);
  wait_step(5, 1);
  REQ(check_pattern(m2 + 12288, 4096, 7));                  // its store after the rebind landed here
  REQ(memcmp(m1 + 12288, want.data() + 12288, 4096) == 0);  // and not in the old memory
  // Unpublish: the mapping is revoked.
  // Marks the importer's loads can tell from revoked (zero) pages.
  m2[0] = 0xaa;
  m2[seg_size - 1] = 0xaa;
  REQ_EQ(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
  set_step(6, 1);
  wait_step(7, 1);
  std::vector<uint8_t> want2(seg_size);
  fill_pattern(want2.data(), seg_size, 2);
  REQ(memcmp(m2 + 16384, want2.data() + 16384, 4096) == 0);  // its stores after the revocation went nowhere
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_destroy(ep), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(map_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  rsm_memseg_import_handle_t im, ro, priv;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_RDWR, &im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_READ, &ro), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[1], RSM_PERM_RDWR, &priv), RSM_SUCCESS);
  void* addr = nullptr;
  // Argument checks.
  REQ_EQ(rsm_memseg_import_map(im, nullptr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, seg_size), RSMERR_BAD_ADDR);
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, 0, 0, seg_size), RSMERR_BAD_PERMS);
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_WRITE, 0, seg_size), RSMERR_BAD_PERMS);
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, 0700, 0, seg_size), RSMERR_BAD_PERMS);
  REQ_EQ(rsm_memseg_import_map(ro, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, seg_size), RSMERR_BAD_PERMS);
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, 0), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 4096, seg_size), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, seg_size, 4096), RSMERR_BAD_OFFSET);
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 2 * seg_size, 4096), RSMERR_BAD_OFFSET);
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 100, 4096), RSMERR_BAD_MEM_ALIGNMENT);
  void* odd = reinterpret_cast<void*>(0x10000123);
  REQ_EQ(rsm_memseg_import_map(im, &odd, RSM_MAP_FIXED, RSM_PERM_RDWR, 0, 4096), RSMERR_BAD_MEM_ALIGNMENT);
  // A C caller may pass any int for the attribute (C++ cannot form one).
  using map_with_int = int (*)(rsm_memseg_import_handle_t, void**, int, rsm_permission_t, off_t, size_t);
  auto map_int = reinterpret_cast<map_with_int>(&rsm_memseg_import_map);
  REQ_EQ(map_int(im, &addr, 7, RSM_PERM_RDWR, 0, 4096), RSMERR_MAP_FAILED);
  REQ_EQ(rsm_memseg_import_unmap(im), RSMERR_SEG_NOT_MAPPED);
  // Private exporter memory cannot be shared.
  REQ_EQ(rsm_memseg_import_map(priv, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, seg_size), RSMERR_MAP_FAILED);
  // Read/write mapping: stores reach the exporter, its stores are seen.
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 0, seg_size), RSM_SUCCESS);
  REQ(addr != nullptr);
  auto* p = static_cast<uint8_t*>(addr);
  std::vector<uint8_t> want(seg_size);
  fill_pattern(want.data(), seg_size, 1);
  REQ(memcmp(p, want.data(), seg_size) == 0);
  fill_pattern(p, 4096, 5);
  void* again = nullptr;
  REQ_EQ(rsm_memseg_import_map(im, &again, RSM_MAP_NONE, RSM_PERM_READ, 0, 4096), RSMERR_SEG_ALREADY_MAPPED);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSMERR_SEG_STILL_MAPPED);
  set_step(1, 1);
  wait_step(2, 1);
  REQ(check_pattern(p + 8192, 4096, 6));
  // Read-only mapping of the read-only connection, at a fixed address.
  void* fixed = mmap(nullptr, 3 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* want_at = static_cast<char*>(fixed) + 4096;
  void* got = want_at;
  REQ_EQ(rsm_memseg_import_map(ro, &got, RSM_MAP_FIXED, RSM_PERM_READ, 8192, 4096), RSM_SUCCESS);
  REQ(got == want_at);
  REQ(check_pattern(got, 4096, 6));
  REQ(prot_of(got) == "r--s");
  REQ(prot_of(p) == "rw-s");
  // A held poll descriptor keeps the mapping.
  pollfd pfd;
  REQ_EQ(rsm_memseg_get_pollfd(ro, &pfd), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_unmap(ro), RSMERR_POLLFD_IN_USE);
  REQ_EQ(rsm_memseg_release_pollfd(ro), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_unmap(ro), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_unmap(ro), RSMERR_SEG_NOT_MAPPED);
  set_step(3, 1);
  wait_step(4, 1);
  // After the rebind the same addresses show the new memory.
  std::vector<uint8_t> want2(seg_size);
  fill_pattern(want2.data(), seg_size, 2);
  REQ(memcmp(p, want2.data(), seg_size) == 0);
  fill_pattern(p + 12288, 4096, 7);
  set_step(5, 1);
  wait_step(6, 1);
  // Unpublished: the connection is cut and the mapping no longer reaches the
  // exporter (zero pages: loads read zeros, stores go nowhere).
  // (The exporter set both ends to 0xaa just before it unpublished; the
  // connection is marked aborted before the mapping is replaced.)
  for (int i = 0; i < 10000 && (p[0] != 0 || p[seg_size - 1] != 0); i++) usleep(1000);
  REQ_EQ(p[0], 0);
  REQ_EQ(p[seg_size - 1], 0);
  memset(p + 16384, 0xee, 4096);
  void* other = nullptr;
  REQ_EQ(rsm_memseg_import_unmap(im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_map(im, &other, RSM_MAP_NONE, RSM_PERM_READ, 0, 4096), RSMERR_CONN_ABORTED);
  uint8_t b;
  REQ_EQ(rsm_memseg_import_get8(im, 0, &b, 1), RSMERR_CONN_ABORTED);
  set_step(7, 1);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(ro), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(priv), RSM_SUCCESS);
  return 0;
}

TEST(RsmMap, LoadStore) {
  new_shared();
  RUN_ACTORS(60, spawn("map_exporter"), spawn("map_importer"));
}

// A partial mapping: 8 KiB from offset 16 KiB of a 64 KiB segment. Stores
// through it land at that offset and nowhere else, the exporter's stores
// there are seen at the mapping's start, the mapping is exactly that long,
// and after a rebind it shows the same part of the new memory.
RSM_CHILD(pmap_exporter) {
  auto ctl = open_ctl();
  auto* m1 = static_cast<uint8_t*>(alloc_pages(seg_size, true));
  auto* m2 = static_cast<uint8_t*>(alloc_pages(seg_size, true));
  fill_pattern(m1, seg_size, 1);
  fill_pattern(m2, seg_size, 2);
  rsm_memseg_export_handle_t ex;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, m1, seg_size, RSM_ALLOW_REBIND), RSM_SUCCESS);
  rsm_memseg_id_t id = 0;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, nullptr, 0), RSM_SUCCESS);
  sh->u32[0] = id;
  set_step(0, 1);
  wait_step(1, 1);  // the importer stored 100 bytes at its mapping's start
  std::vector<uint8_t> want(seg_size);
  fill_pattern(want.data(), seg_size, 1);
  fill_pattern(want.data() + 16384, 100, 5);
  REQ(memcmp(m1, want.data(), seg_size) == 0);  // there, and nowhere else
  fill_pattern(m1 + 16384 + 4096, 64, 6);       // seen at mapping + 4096
  set_step(2, 1);
  wait_step(3, 1);
  REQ_EQ(rsm_memseg_export_rebind(ex, m2, 0, seg_size), RSM_SUCCESS);
  set_step(4, 1);
  wait_step(5, 1);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(pmap_importer) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  rsm_memseg_import_handle_t im;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_RDWR, &im), RSM_SUCCESS);
  void* addr = nullptr;
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_RDWR, 16384, 8192), RSM_SUCCESS);
  auto* p = static_cast<uint8_t*>(addr);
  std::vector<uint8_t> want(seg_size);
  fill_pattern(want.data(), seg_size, 1);
  REQ(memcmp(p, want.data() + 16384, 8192) == 0);  // the segment's bytes from the offset on
  REQ(prot_of(p) == "rw-s");
  const auto r = range_of(p);  // exactly the 8 KiB asked for
  REQ(r.first == reinterpret_cast<uintptr_t>(p));
  REQ(r.second == reinterpret_cast<uintptr_t>(p) + 8192);
  fill_pattern(p, 100, 5);
  set_step(1, 1);
  wait_step(2, 1);
  REQ(check_pattern(p + 4096, 64, 6));
  set_step(3, 1);
  wait_step(4, 1);
  fill_pattern(want.data(), seg_size, 2);
  for (int i = 0; i < 5000 && memcmp(p, want.data() + 16384, 8192) != 0; i++) usleep(1000);
  REQ(memcmp(p, want.data() + 16384, 8192) == 0);  // the same part of the new memory
  REQ_EQ(rsm_memseg_import_unmap(im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  set_step(5, 1);
  return 0;
}

TEST(RsmMap, PartialMapping) {
  new_shared();
  RUN_ACTORS(60, spawn("pmap_exporter"), spawn("pmap_importer"));
}
