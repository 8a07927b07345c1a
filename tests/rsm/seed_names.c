// SPDX-License-Identifier: BSD-3-Clause
/*
 * A program written with the names of the RSMAPI programming guide's own
 * example ("Example 2-1"): rsm_iovec_t's import_segment_offset
 * and local.virtual_addr, and rsm_map_attr_t for rsm_memseg_import_map's
 * attribute. It compiles against weft's rsmapi.h as it is, exports a
 * segment, imports it in the same process, moves data with putv/getv and
 * reads it through a mapping. Exit 0: passed, 77: skipped, else failed.
 */
#define _GNU_SOURCE
#include <rsmapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SEGSIZE (64 * 1024)

static int check(const char* what, int got, int want) {
  if (got == want) return 0;
  fprintf(stderr, "seed_names: %s returned %d, expected %d\n", what, got, want);
  exit(1);
}

int main(void) {
  rsmapi_controller_handle_t ctl;
  rsm_memseg_export_handle_t ex;
  rsm_memseg_import_handle_t im;
  rsm_memseg_id_t segid = 0;
  rsm_topology_t* topo;
  rsm_iovec_t iov[2];
  rsm_scat_gath_t sg;
  rsm_map_attr_t attr = RSM_MAP_NONE;
  char text[2][32] = {"written by putv", "and its second entry"};
  char back[2][32];
  void* mapped = NULL;
  int fd, i;
  char* area;

  check("rsm_get_controller", rsm_get_controller("shm", &ctl), RSM_SUCCESS);
  check("rsm_get_interconnect_topology", rsm_get_interconnect_topology(&topo), RSM_SUCCESS);
  rsm_node_id_t me = topo->topology_hdr.local_nodeid;
  rsm_free_interconnect_topology(topo);
  /* Shareable memory, so that the importer may map it. */
  fd = memfd_create("seed_names", 0);
  if (fd < 0 || ftruncate(fd, SEGSIZE) != 0) return 77;
  area = mmap(NULL, SEGSIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (area == MAP_FAILED) return 77;
  memset(area, 0, SEGSIZE);
  check("rsm_memseg_export_create", rsm_memseg_export_create(ctl, &ex, area, SEGSIZE, 0), RSM_SUCCESS);
  check("rsm_memseg_export_publish", rsm_memseg_export_publish(ex, &segid, NULL, 0), RSM_SUCCESS);
  check("rsm_memseg_import_connect", rsm_memseg_import_connect(ctl, me, segid, RSM_PERM_RDWR, &im), RSM_SUCCESS);

  /* putv with the guide's spelling of the fields */
  for (i = 0; i < 2; i++) {
    iov[i].io_type = RSM_VA_TYPE;
    iov[i].local.virtual_addr = text[i];
    iov[i].local_offset = 0;
    iov[i].import_segment_offset = (size_t)(i * 4096 + 128);
    iov[i].transfer_length = sizeof text[i];
  }
  memset(&sg, 0, sizeof sg);
  sg.io_request_count = 2;
  sg.remote_handle = im;
  sg.iovec = iov;
  rsmapi_barrier_t bar;
  check("rsm_memseg_import_init_barrier", rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, &bar), RSM_SUCCESS);
  check("rsm_memseg_import_putv", rsm_memseg_import_putv(&sg), RSM_SUCCESS);
  if (sg.io_residual_count != 0) return 1;
  if (strcmp(area + 128, text[0]) || strcmp(area + 4096 + 128, text[1])) {
    fprintf(stderr, "seed_names: putv wrote elsewhere\n");
    return 1;
  }
  /* Solaris's spelling reaches the same fields. */
  if (iov[1].remote_offset != 4096 + 128 || iov[1].local.vaddr != text[1]) return 1;
  /* getv back */
  for (i = 0; i < 2; i++) iov[i].local.virtual_addr = back[i];
  check("rsm_memseg_import_getv", rsm_memseg_import_getv(&sg), RSM_SUCCESS);
  if (memcmp(back, text, sizeof text)) {
    fprintf(stderr, "seed_names: getv read something else\n");
    return 1;
  }
  /* The mapping, with the guide's attribute type. */
  check("rsm_memseg_import_map", rsm_memseg_import_map(im, &mapped, attr, RSM_PERM_RDWR, 0, SEGSIZE), RSM_SUCCESS);
  if (strcmp((char*)mapped + 4096 + 128, text[1])) {
    fprintf(stderr, "seed_names: the mapping shows something else\n");
    return 1;
  }
  check("rsm_memseg_import_unmap", rsm_memseg_import_unmap(im), RSM_SUCCESS);
  check("rsm_memseg_import_destroy_barrier", rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
  check("rsm_memseg_import_disconnect", rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  check("rsm_memseg_export_destroy", rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  check("rsm_release_controller", rsm_release_controller(ctl), RSM_SUCCESS);
  printf("seed_names: passed\n");
  return 0;
}
