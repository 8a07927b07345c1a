// SPDX-License-Identifier: BSD-3-Clause
// The header's values, controllers, topology, the segment id range file,
// error names, every call's refusal of null, forged and stale handles.
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <string>

#include "harness.hpp"

using namespace rsmt;

TEST(RsmApi, HeaderValues) {
  // RSMAPI's numbers: programs compiled against Solaris's header agree.
  int codes[] = {RSMERR_BAD_LIBRARY_VERSION,
                 RSMERR_BAD_TOPOLOGY_PTR,
                 RSMERR_BAD_CTLR_HNDL,
                 RSMERR_CTLR_NOT_PRESENT,
                 RSMERR_BAD_SEG_HNDL,
                 RSMERR_SEG_ALREADY_PUBLISHED,
                 RSMERR_SEG_NOT_PUBLISHED,
                 RSMERR_SEG_NOT_PUBLISHED_TO_NODE,
                 RSMERR_SEG_ALREADY_MAPPED,
                 RSMERR_SEG_STILL_MAPPED,
                 RSMERR_SEG_NOT_MAPPED,
                 RSMERR_NOT_CREATOR,
                 RSMERR_BAD_BARRIER_PTR,
                 RSMERR_BAD_SGIO,
                 RSMERR_BAD_LOCALMEM_HNDL,
                 RSMERR_BAD_ADDR,
                 RSMERR_BAD_MEM_ALIGNMENT,
                 RSMERR_BAD_OFFSET,
                 RSMERR_MISALIGNED_OFFSET,
                 RSMERR_BAD_LENGTH,
                 RSMERR_BAD_ACL,
                 RSMERR_BAD_SEGID,
                 RSMERR_RESERVED_SEGID,
                 RSMERR_SEGID_IN_USE,
                 RSMERR_BAD_MODE,
                 RSMERR_BAD_PERMS,
                 RSMERR_PERM_DENIED,
                 RSMERR_LOCKS_NOT_SUPPORTED,
                 RSMERR_LOCKS_NOT_ENABLED,
                 RSMERR_REBIND_NOT_ALLOWED,
                 RSMERR_INSUFFICIENT_RESOURCES,
                 RSMERR_INSUFFICIENT_MEM,
                 RSMERR_MAP_FAILED,
                 RSMERR_POLLFD_IN_USE,
                 RSMERR_BARRIER_UNINITIALIZED,
                 RSMERR_BARRIER_OPEN_FAILED,
                 RSMERR_BARRIER_NOT_OPENED,
                 RSMERR_BARRIER_FAILURE,
                 RSMERR_REMOTE_NODE_UNREACHABLE,
                 RSMERR_CONN_ABORTED,
                 RSMERR_INTERRUPTED,
                 RSMERR_TIMEOUT,
                 RSMERR_BAD_APPID,
                 RSMERR_BAD_CONF,
                 RSMERR_SEG_NOT_CONNECTED};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) EXPECT_EQ(codes[i], static_cast<int>(i) + 1);
  EXPECT_EQ(RSM_SUCCESS, 0);
  EXPECT_EQ(RSM_PERM_NONE, 0);
  EXPECT_EQ(RSM_PERM_READ, 0400);
  EXPECT_EQ(RSM_PERM_WRITE, 0200);
  EXPECT_EQ(RSM_PERM_RDWR, 0600);
  EXPECT_EQ(RSM_ALLOW_REBIND, 0x01);
  EXPECT_EQ(RSM_CREATE_SEG_DONTWAIT, 0x02);
  EXPECT_EQ(RSM_MAP_NONE, 0);
  EXPECT_EQ(RSM_MAP_FIXED, 1);
  EXPECT_EQ(RSM_MAX_SGIOREQS, 16);
  EXPECT_EQ(RSM_HANDLE_TYPE, 1);
  EXPECT_EQ(RSM_VA_TYPE, 2);
  EXPECT_EQ(RSM_IMPLICIT_SIGPOST, 0x01);
  EXPECT_EQ(RSM_SIGPOST_NO_ACCUMULATE, 0x02);
  EXPECT_EQ(RSM_BAR_DEFAULT, RSM_BARRIER_SEGMENT);
  EXPECT_EQ(RSM_BARRIER_SEGMENT, 0x01);
  EXPECT_EQ(RSM_BARRIER_NODE, 0x02);
  EXPECT_EQ(RSM_BARRIER_SEGMENT_THREAD, 0x11);
  EXPECT_EQ(RSM_BARRIER_NODE_THREAD, 0x12);
  EXPECT_EQ(RSM_BARRIER_MODE_EXPLICIT, 0);
  EXPECT_EQ(RSM_BARRIER_MODE_IMPLICIT, 1);
  EXPECT_EQ(RSM_CONNECTION_ACTIVE, 3);
  EXPECT_EQ(sizeof(rsm_node_id_t), 4u);
  EXPECT_EQ(sizeof(rsm_memseg_id_t), 4u);
  EXPECT_EQ(sizeof(rsm_permission_t), 4u);
  EXPECT_EQ(sizeof(rsm_addr_t), 8u);
  // Both spellings of the topology fields name the same storage.
  rsm_topology_t t{};
  t.topology_hdr.local_nodeid = 7;
  EXPECT_EQ(t.local_nodeid, 7u);
  rsm_connections_t c{};
  c.hdr.remote_cntlr_count = 3;
  EXPECT_EQ(c.remote_cntlr_count, 3);
}

TEST(RsmApi, ErrorNames) {
  // rsm_errname gives each value its macro's name, rsm_strerror a text;
  // a value RSMAPI does not define has no name and a text that says which.
#define NAMED(code) \
  { code, #code }
  struct {
    int code;
    const char* name;
  } named[] = {NAMED(RSM_SUCCESS),
               NAMED(RSMERR_BAD_LIBRARY_VERSION),
               NAMED(RSMERR_BAD_CTLR_HNDL),
               NAMED(RSMERR_SEG_NOT_PUBLISHED),
               NAMED(RSMERR_PERM_DENIED),
               NAMED(RSMERR_BARRIER_FAILURE),
               NAMED(RSMERR_CONN_ABORTED),
               NAMED(RSMERR_TIMEOUT),
               NAMED(RSMERR_SEG_NOT_CONNECTED)};
#undef NAMED
  for (const auto& n : named) EXPECT_STREQ(rsm_errname(n.code), n.name);
  EXPECT_STREQ(rsm_strerror(RSMERR_SEG_NOT_PUBLISHED), "the segment is not published (yet)");
  EXPECT_STREQ(rsm_strerror(RSM_SUCCESS), "success");
  for (int e = RSM_SUCCESS; e <= RSMERR_SEG_NOT_CONNECTED; e++) {
    ASSERT_NE(rsm_errname(e), nullptr) << e;
    EXPECT_EQ(strncmp(rsm_errname(e), e ? "RSMERR_" : "RSM_SUCCESS", e ? 7 : 12), 0) << rsm_errname(e);
    EXPECT_STRNE(rsm_strerror(e), "") << e;
    EXPECT_EQ(strstr(rsm_strerror(e), "unknown"), nullptr) << e;
  }
  for (int e : {-1, RSMERR_SEG_NOT_CONNECTED + 1, 1000}) {
    EXPECT_EQ(rsm_errname(e), nullptr) << e;
    EXPECT_EQ(std::string(rsm_strerror(e)), "unknown RSMAPI error " + std::to_string(e));
  }
  EXPECT_EQ(RSM_HAVE_STRERROR, 1);
}

TEST(RsmApi, Controller) {
  rsmapi_controller_handle_t a = nullptr, b = nullptr, d = nullptr;
  EXPECT_EQ(rsm_get_controller(const_cast<char*>("shm"), nullptr), RSMERR_BAD_CTLR_HNDL);
  EXPECT_EQ(rsm_get_controller(const_cast<char*>("nosuch0"), &a), RSMERR_CTLR_NOT_PRESENT);
  EXPECT_EQ(rsm_get_controller(const_cast<char*>("shm1"), &a), RSMERR_CTLR_NOT_PRESENT);
  EXPECT_EQ(rsm_get_controller(const_cast<char*>(""), &a), RSMERR_CTLR_NOT_PRESENT);
  std::string longname(300, 'x');
  EXPECT_EQ(rsm_get_controller(longname.data(), &a), RSMERR_CTLR_NOT_PRESENT);
  ASSERT_EQ(rsm_get_controller(const_cast<char*>("shm"), &a), RSM_SUCCESS);
  // "shm", "shm0", "loopback" and no name are one controller, counted.
  ASSERT_EQ(rsm_get_controller(const_cast<char*>("loopback"), &b), RSM_SUCCESS);
  ASSERT_EQ(rsm_get_controller(nullptr, &d), RSM_SUCCESS);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, d);
  rsmapi_controller_attr_t attr{};
  EXPECT_EQ(rsm_get_controller_attr(a, nullptr), RSMERR_BAD_ADDR);
  ASSERT_EQ(rsm_get_controller_attr(a, &attr), RSM_SUCCESS);
  EXPECT_EQ(attr.attr_page_size, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(attr.attr_direct_access_sizes, static_cast<uint_t>(RSM_DAS8 | RSM_DAS16 | RSM_DAS32 | RSM_DAS64));
  EXPECT_GT(attr.attr_max_export_segment_size, 0u);
  EXPECT_GE(attr.attr_tot_export_segment_size, attr.attr_max_export_segment_size);
  EXPECT_GT(attr.attr_max_export_segments, 0u);
  EXPECT_GT(attr.attr_max_import_segments, 0u);
  EXPECT_EQ(rsm_release_controller(a), RSM_SUCCESS);
  EXPECT_EQ(rsm_release_controller(b), RSM_SUCCESS);
  EXPECT_EQ(rsm_release_controller(d), RSM_SUCCESS);
  // Released for good: the handle is refused.
  EXPECT_EQ(rsm_release_controller(a), RSMERR_BAD_CTLR_HNDL);
  EXPECT_EQ(rsm_get_controller_attr(a, &attr), RSMERR_BAD_CTLR_HNDL);
  auto forged = reinterpret_cast<rsmapi_controller_handle_t>(0x12345678);
  EXPECT_EQ(rsm_get_controller_attr(forged, &attr), RSMERR_BAD_CTLR_HNDL);
  EXPECT_EQ(rsm_release_controller(forged), RSMERR_BAD_CTLR_HNDL);
  EXPECT_EQ(rsm_release_controller(nullptr), RSMERR_BAD_CTLR_HNDL);
  // Opened again after the last release.
  ASSERT_EQ(rsm_get_controller(const_cast<char*>("shm0"), &a), RSM_SUCCESS);
  EXPECT_EQ(rsm_release_controller(a), RSM_SUCCESS);
}

TEST(RsmApi, Topology) {
  EXPECT_EQ(rsm_get_interconnect_topology(nullptr), RSMERR_BAD_TOPOLOGY_PTR);
  rsm_topology_t* t = nullptr;
  ASSERT_EQ(rsm_get_interconnect_topology(&t), RSM_SUCCESS);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->topology_hdr.local_nodeid, 1u);  // the one-host default
  ASSERT_GE(t->topology_hdr.local_cntlr_count, 1u);
  rsm_connections_t* shm = t->connections[0];
  EXPECT_STREQ(shm->hdr.cntlr_name, "shm0");
  ASSERT_EQ(shm->hdr.remote_cntlr_count, 1);  // shm reaches this node only
  EXPECT_EQ(shm->remote_cntlr[0].remote_nodeid, 1u);
  EXPECT_EQ(shm->remote_cntlr[0].connection_state, static_cast<uint_t>(RSM_CONNECTION_ACTIVE));
  // tcp is listed exactly when its provider can open endpoints (weft's and
  // Debian's both can).
  bool has_tcp = false;
  for (uint_t i = 0; i < t->topology_hdr.local_cntlr_count; i++)
    if (!strcmp(t->connections[i]->hdr.cntlr_name, "tcp0")) has_tcp = true;
  rsmapi_controller_handle_t tcp = nullptr;
  int r = rsm_get_controller(const_cast<char*>("tcp"), &tcp);
  EXPECT_EQ(has_tcp, r == RSM_SUCCESS);
  if (r == RSM_SUCCESS) rsm_release_controller(tcp);
  EXPECT_TRUE(has_tcp);
  rsm_free_interconnect_topology(t);
  rsm_free_interconnect_topology(nullptr);
}

TEST(RsmApi, SegmentIdRange) {
  rsm_memseg_id_t base = 0;
  uint32_t len = 0;
  char path[] = "/tmp/rsmt-segid-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  FILE* f = fdopen(fd, "w");
  fprintf(
      f,
      "# appid base length\nreserved SUNW.demo 0x600000 4096\n\nreserved other.app 0x700000 16 # trailing\n");
  fclose(f);
  setenv("WEFT_RSM_SEGMENTID_FILE", path, 1);
  EXPECT_EQ(rsm_get_segmentid_range(nullptr, &base, &len), RSMERR_BAD_ADDR);
  EXPECT_EQ(rsm_get_segmentid_range("SUNW.demo", nullptr, &len), RSMERR_BAD_ADDR);
  EXPECT_EQ(rsm_get_segmentid_range("SUNW.demo", &base, nullptr), RSMERR_BAD_ADDR);
  ASSERT_EQ(rsm_get_segmentid_range("SUNW.demo", &base, &len), RSM_SUCCESS);
  EXPECT_EQ(base, 0x600000u);
  EXPECT_EQ(len, 4096u);
  ASSERT_EQ(rsm_get_segmentid_range("other.app", &base, &len), RSM_SUCCESS);
  EXPECT_EQ(base, 0x700000u);
  EXPECT_EQ(len, 16u);
  EXPECT_EQ(rsm_get_segmentid_range("nobody", &base, &len), RSMERR_BAD_APPID);
  // A malformed line, and a range outside the application ids.
  f = fopen(path, "w");
  fprintf(f, "reserved broken 0x600000\n");
  fclose(f);
  EXPECT_EQ(rsm_get_segmentid_range("broken", &base, &len), RSMERR_BAD_CONF);
  f = fopen(path, "w");
  fprintf(f, "reserved low 0x100 16\n");
  fclose(f);
  EXPECT_EQ(rsm_get_segmentid_range("low", &base, &len), RSMERR_BAD_CONF);
  unlink(path);
  EXPECT_EQ(rsm_get_segmentid_range("SUNW.demo", &base, &len), RSMERR_BAD_CONF);  // no file
  unsetenv("WEFT_RSM_SEGMENTID_FILE");
}

// Every call that takes a handle refuses a null one, a forged one and one of
// the wrong kind, and never crashes on them.
TEST(RsmApi, BadHandles) {
  rsmapi_controller_handle_t ctl = nullptr;
  ASSERT_EQ(rsm_get_controller(nullptr, &ctl), RSM_SUCCESS);
  auto forged_im = reinterpret_cast<rsm_memseg_import_handle_t>(0xdeadbeefcafe0003ull);
  auto forged_ex = reinterpret_cast<rsm_memseg_export_handle_t>(0x1200000102ull);
  // A controller handle passed where a segment is wanted: right shape, wrong kind.
  auto wrong_kind = reinterpret_cast<rsm_memseg_import_handle_t>(ctl);
  uint64_t v = 0;
  char buf[64];
  for (rsm_memseg_import_handle_t h : {rsm_memseg_import_handle_t{}, forged_im, wrong_kind}) {
    EXPECT_EQ(rsm_memseg_import_disconnect(h), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_get8(h, 0, reinterpret_cast<uint8_t*>(buf), 1), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_get16(h, 0, reinterpret_cast<uint16_t*>(buf), 1), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_get32(h, 0, reinterpret_cast<uint32_t*>(buf), 1), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_get64(h, 0, &v, 1), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_put8(h, 0, reinterpret_cast<uint8_t*>(buf), 1), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_put16(h, 0, reinterpret_cast<uint16_t*>(buf), 1), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_put32(h, 0, reinterpret_cast<uint32_t*>(buf), 1), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_put64(h, 0, &v, 1), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_get(h, 0, buf, 8), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_put(h, 0, buf, 8), RSMERR_BAD_SEG_HNDL);
    void* addr = nullptr;
    EXPECT_EQ(rsm_memseg_import_map(h, &addr, RSM_MAP_NONE, RSM_PERM_READ, 0, 4096), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_unmap(h), RSMERR_BAD_SEG_HNDL);
    rsmapi_barrier_t bar{};
    EXPECT_EQ(rsm_memseg_import_init_barrier(h, RSM_BAR_DEFAULT, &bar), RSMERR_BAD_SEG_HNDL);
    rsm_barrier_mode_t mode;
    EXPECT_EQ(rsm_memseg_import_get_mode(h, &mode), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_set_mode(h, RSM_BARRIER_MODE_EXPLICIT), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_intr_signal_post(h, 0), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_intr_signal_wait(h, 0), RSMERR_BAD_SEG_HNDL);
    pollfd pfd;
    EXPECT_EQ(rsm_memseg_get_pollfd(h, &pfd), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_release_pollfd(h), RSMERR_BAD_SEG_HNDL);
    rsm_iovec_t io{};
    io.io_type = RSM_VA_TYPE;
    io.local.vaddr = buf;
    io.transfer_length = 8;
    rsm_scat_gath_t sg{};
    sg.io_request_count = 1;
    sg.remote_handle = h;
    sg.iovec = &io;
    EXPECT_EQ(rsm_memseg_import_putv(&sg), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_import_getv(&sg), RSMERR_BAD_SEG_HNDL);
  }
  for (rsm_memseg_export_handle_t h :
       {rsm_memseg_export_handle_t{}, forged_ex, reinterpret_cast<rsm_memseg_export_handle_t>(ctl)}) {
    rsm_memseg_id_t id = 0;
    EXPECT_EQ(rsm_memseg_export_destroy(h), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_export_publish(h, &id, nullptr, 0), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_export_unpublish(h), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_export_republish(h, nullptr, 0), RSMERR_BAD_SEG_HNDL);
    EXPECT_EQ(rsm_memseg_export_rebind(h, buf, 0, 4096), RSMERR_BAD_SEG_HNDL);
  }
  // Barriers: a null pointer, and one never initialised.
  EXPECT_EQ(rsm_memseg_import_open_barrier(nullptr), RSMERR_BAD_BARRIER_PTR);
  EXPECT_EQ(rsm_memseg_import_close_barrier(nullptr), RSMERR_BAD_BARRIER_PTR);
  EXPECT_EQ(rsm_memseg_import_order_barrier(nullptr), RSMERR_BAD_BARRIER_PTR);
  EXPECT_EQ(rsm_memseg_import_destroy_barrier(nullptr), RSMERR_BAD_BARRIER_PTR);
  rsmapi_barrier_t zero{};
  EXPECT_EQ(rsm_memseg_import_open_barrier(&zero), RSMERR_BARRIER_UNINITIALIZED);
  EXPECT_EQ(rsm_memseg_import_close_barrier(&zero), RSMERR_BARRIER_UNINITIALIZED);
  EXPECT_EQ(rsm_memseg_import_order_barrier(&zero), RSMERR_BARRIER_UNINITIALIZED);
  EXPECT_EQ(rsm_memseg_import_destroy_barrier(&zero), RSMERR_BARRIER_UNINITIALIZED);
  rsmapi_barrier_t garbage{reinterpret_cast<void*>(0x55), 3, reinterpret_cast<void*>(0x777777)};
  EXPECT_EQ(rsm_memseg_import_open_barrier(&garbage), RSMERR_BARRIER_UNINITIALIZED);
  // Scatter/gather and local memory handles.
  EXPECT_EQ(rsm_memseg_import_putv(nullptr), RSMERR_BAD_SGIO);
  EXPECT_EQ(rsm_memseg_import_getv(nullptr), RSMERR_BAD_SGIO);
  rsm_localmemory_handle_t lh = nullptr;
  EXPECT_EQ(rsm_create_localmemory_handle(nullptr, &lh, buf, 64), RSMERR_BAD_CTLR_HNDL);
  EXPECT_EQ(rsm_create_localmemory_handle(ctl, nullptr, buf, 64), RSMERR_BAD_LOCALMEM_HNDL);
  EXPECT_EQ(rsm_create_localmemory_handle(ctl, &lh, nullptr, 64), RSMERR_BAD_ADDR);
  EXPECT_EQ(rsm_create_localmemory_handle(ctl, &lh, buf, 0), RSMERR_BAD_LENGTH);
  EXPECT_EQ(rsm_free_localmemory_handle(ctl, nullptr), RSMERR_BAD_LOCALMEM_HNDL);
  EXPECT_EQ(rsm_free_localmemory_handle(ctl, reinterpret_cast<rsm_localmemory_handle_t>(0x999904ull)),
            RSMERR_BAD_LOCALMEM_HNDL);
  EXPECT_EQ(rsm_free_localmemory_handle(nullptr, lh), RSMERR_BAD_CTLR_HNDL);
  ASSERT_EQ(rsm_create_localmemory_handle(ctl, &lh, buf, sizeof buf), RSM_SUCCESS);
  EXPECT_EQ(rsm_free_localmemory_handle(ctl, lh), RSM_SUCCESS);
  EXPECT_EQ(rsm_free_localmemory_handle(ctl, lh), RSMERR_BAD_LOCALMEM_HNDL);  // stale
  // Export create and connect: their out-pointers and controllers.
  rsm_memseg_export_handle_t ex = nullptr;
  void* mem = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_EQ(rsm_memseg_export_create(nullptr, &ex, mem, 8192, 0), RSMERR_BAD_CTLR_HNDL);
  EXPECT_EQ(rsm_memseg_export_create(ctl, nullptr, mem, 8192, 0), RSMERR_BAD_SEG_HNDL);
  rsm_memseg_import_handle_t im = nullptr;
  EXPECT_EQ(rsm_memseg_import_connect(nullptr, 1, 0x600000, RSM_PERM_READ, &im), RSMERR_BAD_CTLR_HNDL);
  EXPECT_EQ(rsm_memseg_import_connect(ctl, 1, 0x600000, RSM_PERM_READ, nullptr), RSMERR_BAD_ADDR);
  // Signals: no fds is a plain timeout; a null array with a count is refused.
  int nready = -1;
  EXPECT_EQ(rsm_intr_signal_wait_pollfd(nullptr, 3, 0, &nready), RSMERR_BAD_ADDR);
  EXPECT_EQ(rsm_intr_signal_wait_pollfd(nullptr, 0, 10, &nready), RSMERR_TIMEOUT);
  EXPECT_EQ(rsm_memseg_get_pollfd(forged_im, nullptr), RSMERR_BAD_ADDR);
  munmap(mem, 8192);
  EXPECT_EQ(rsm_release_controller(ctl), RSM_SUCCESS);
}
