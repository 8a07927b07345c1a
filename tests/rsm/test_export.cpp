// SPDX-License-Identifier: BSD-3-Clause
// The export side: create, publish, republish, unpublish, rebind and destroy
// with every argument check; segment ids (reserved, system, in use across
// processes); resources (RSM_CREATE_SEG_DONTWAIT); a forked child is not the
// creator of its parent's segments.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <thread>

#include "harness.hpp"

using namespace rsmt;

RSM_CHILD(export_errors) {
  auto ctl = open_ctl();
  const size_t size = 16384;
  auto* mem = static_cast<char*>(alloc_pages(size, false));
  rsm_memseg_export_handle_t ex = nullptr, ex2 = nullptr;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, nullptr, size, 0), RSMERR_BAD_ADDR);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, 0, 0), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem + 1, size - 4096, 0), RSMERR_BAD_MEM_ALIGNMENT);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, 100, 0), RSMERR_BAD_MEM_ALIGNMENT);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, size, 0x80), RSMERR_BAD_MODE);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, 1 << 20, 0),
         RSMERR_BAD_LENGTH);  // over the configured maximum
  // Below vm.mmap_min_addr: page-aligned, and never mapped in any process.
  auto make_hole = [] { return reinterpret_cast<void*>(0x1000); };
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, make_hole(), size, 0), RSMERR_BAD_ADDR);  // nothing mapped there
  REQ(ex == nullptr);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, size, RSM_ALLOW_REBIND), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex2, mem, 4096, 0), RSM_SUCCESS);  // the same memory twice is fine

  // Publish: arguments, access lists, reserved ids.
  rsm_memseg_id_t id = 0;
  rsmapi_access_entry_t acl[2] = {{1, 0600}, {2, 0400}};
  REQ_EQ(rsm_memseg_export_publish(ex, nullptr, nullptr, 0), RSMERR_BAD_SEGID);
  REQ_EQ(rsm_memseg_export_publish(ex, &id, nullptr, 2), RSMERR_BAD_ACL);
  rsmapi_access_entry_t bad[][2] = {
      {{1, 0700}, {2, 0400}}, {{1, 01600}, {2, 0400}}, {{1, 0600}, {1, 0400}}, {{0, 0600}, {2, 0400}}};
  for (auto& b : bad) REQ_EQ(rsm_memseg_export_publish(ex, &id, b, 2), RSMERR_BAD_ACL);
  for (rsm_memseg_id_t r : {1u, 0x3FFFFFu, 0x400000u, 0x5FFFFFu, 0x80000000u, 0xFFFFFFFFu}) {
    id = r;
    REQ_EQ(rsm_memseg_export_publish(ex, &id, acl, 2), RSMERR_RESERVED_SEGID);
  }
  id = 0x600123;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, acl, 2), RSM_SUCCESS);
  REQ_EQ(id, 0x600123u);
  REQ_EQ(rsm_memseg_export_publish(ex, &id, acl, 2), RSMERR_SEG_ALREADY_PUBLISHED);
  rsm_memseg_id_t same = 0x600123;
  REQ_EQ(rsm_memseg_export_publish(ex2, &same, nullptr, 0), RSMERR_SEGID_IN_USE);
  sh->u32[0] = id;
  set_step(0, 1);
  wait_step(1, 1);  // another process tried the same id
  // System ids: 0 asks for one, allocated from 0x80000000 up.
  rsm_memseg_id_t sys = 0;
  REQ_EQ(rsm_memseg_export_publish(ex2, &sys, nullptr, 0), RSM_SUCCESS);
  REQ(sys >= RSM_SYSTEM_ID_BASE);
  // Republish and unpublish.
  rsmapi_access_entry_t acl1[1] = {{1, 0644}};
  REQ_EQ(rsm_memseg_export_republish(ex, acl1, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_republish(ex, nullptr, 1), RSMERR_BAD_ACL);
  REQ_EQ(rsm_memseg_export_republish(ex, bad[0], 2), RSMERR_BAD_ACL);
  REQ_EQ(rsm_memseg_export_unpublish(ex), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_unpublish(ex), RSMERR_SEG_NOT_PUBLISHED);
  REQ_EQ(rsm_memseg_export_republish(ex, acl1, 1), RSMERR_SEG_NOT_PUBLISHED);
  id = 0x600123;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, nullptr, 0), RSM_SUCCESS);  // the id is free again

  // Rebind: only with RSM_ALLOW_REBIND, the whole segment, page-aligned memory.
  auto* other = static_cast<char*>(alloc_pages(size, false));
  REQ_EQ(rsm_memseg_export_rebind(ex2, other, 0, 4096), RSMERR_REBIND_NOT_ALLOWED);
  REQ_EQ(rsm_memseg_export_rebind(ex, nullptr, 0, size), RSMERR_BAD_ADDR);
  REQ_EQ(rsm_memseg_export_rebind(ex, other, -4096, size), RSMERR_BAD_OFFSET);
  REQ_EQ(rsm_memseg_export_rebind(ex, other, 100, size), RSMERR_MISALIGNED_OFFSET);
  REQ_EQ(rsm_memseg_export_rebind(ex, other, 4096, size), RSMERR_BAD_OFFSET);
  REQ_EQ(rsm_memseg_export_rebind(ex, other + 8, 0, size), RSMERR_BAD_MEM_ALIGNMENT);
  REQ_EQ(rsm_memseg_export_rebind(ex, other, 0, size / 2), RSMERR_BAD_LENGTH);
  REQ_EQ(rsm_memseg_export_rebind(ex, make_hole(), 0, size), RSMERR_BAD_ADDR);
  REQ_EQ(rsm_memseg_export_rebind(ex, other, 0, size), RSM_SUCCESS);

  // A forked child is not the creator of these segments, and its copy of the
  // controller is not its own.
  pid_t pid = fork();
  if (pid == 0) {
    rsm_memseg_id_t cid = 0x600999;
    rsmapi_controller_attr_t attr;
    int bad_count = 0;
    bad_count += rsm_memseg_export_destroy(ex) != RSMERR_NOT_CREATOR;
    bad_count += rsm_memseg_export_publish(ex2, &cid, nullptr, 0) != RSMERR_NOT_CREATOR;
    bad_count += rsm_memseg_export_unpublish(ex) != RSMERR_NOT_CREATOR;
    bad_count += rsm_memseg_export_rebind(ex, mem, 0, size) != RSMERR_NOT_CREATOR;
    bad_count += rsm_intr_signal_post(ex, 0) != RSMERR_NOT_CREATOR;
    bad_count += rsm_get_controller_attr(ctl, &attr) != RSMERR_CTLR_NOT_PRESENT;
    bad_count += rsm_release_controller(ctl) != RSMERR_CTLR_NOT_PRESENT;
    _exit(bad_count);
  }
  int st = 0;
  REQ_EQ(waitpid(pid, &st, 0), pid);
  REQ(WIFEXITED(st));
  REQ_EQ(WEXITSTATUS(st), 0);

  // Destroy unpublishes; the handle is then stale.
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSMERR_BAD_SEG_HNDL);
  REQ_EQ(rsm_memseg_export_unpublish(ex), RSMERR_BAD_SEG_HNDL);
  REQ_EQ(rsm_memseg_export_destroy(ex2), RSM_SUCCESS);
  REQ_EQ(rsm_release_controller(ctl), RSM_SUCCESS);
  return 0;
}

RSM_CHILD(export_same_id) {
  auto ctl = open_ctl();
  wait_step(0, 1);
  void* mem = alloc_pages(4096, false);
  rsm_memseg_export_handle_t ex;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, 4096, 0), RSM_SUCCESS);
  rsm_memseg_id_t id = sh->u32[0];
  REQ_EQ(rsm_memseg_export_publish(ex, &id, nullptr, 0), RSMERR_SEGID_IN_USE);
  set_step(1, 1);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  return 0;
}

TEST(RsmExport, Errors) {
  new_shared();
  RUN_ACTORS(60, spawn("export_errors", {}, {"WEFT_RSM_MAX_SEGMENT_SIZE=65536"}), spawn("export_same_id"));
}

// Three segments at most: the fourth waits for one to go, or is refused at
// once with RSM_CREATE_SEG_DONTWAIT, or after the bound without it.
RSM_CHILD(export_resources) {
  auto ctl = open_ctl();
  auto* mem = static_cast<char*>(alloc_pages(4 * 4096, false));
  rsm_memseg_export_handle_t ex[4] = {};
  for (int i = 0; i < 3; i++)
    REQ_EQ(rsm_memseg_export_create(ctl, &ex[i], mem + i * 4096, 4096, 0), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex[3], mem + 3 * 4096, 4096, RSM_CREATE_SEG_DONTWAIT),
         RSMERR_INSUFFICIENT_RESOURCES);
  REQ_EQ(rsm_memseg_export_create(ctl, &ex[3], mem + 3 * 4096, 4096, 0), RSMERR_INSUFFICIENT_RESOURCES);
  rsmapi_controller_attr_t attr;
  REQ_EQ(rsm_get_controller_attr(ctl, &attr), RSM_SUCCESS);
  REQ_EQ(attr.attr_max_export_segments, 3u);
  std::thread t([&] {
    usleep(200 * 1000);
    rsm_memseg_export_destroy(ex[0]);
  });
  REQ_EQ(rsm_memseg_export_create(ctl, &ex[3], mem + 3 * 4096, 4096, 0), RSM_SUCCESS);
  t.join();
  for (int i = 1; i < 4; i++) REQ_EQ(rsm_memseg_export_destroy(ex[i]), RSM_SUCCESS);
  return 0;
}

TEST(RsmExport, Resources) {
  new_shared();
  RUN_ACTORS(60,
             spawn("export_resources", {}, {"WEFT_RSM_MAX_EXPORT_SEGMENTS=3", "WEFT_RSM_TIMEOUT_MS=1500"}));
}
