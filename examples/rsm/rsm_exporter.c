// SPDX-License-Identifier: BSD-3-Clause
/*
 * rsm_exporter: exports a message area and prints what importers put there.
 *
 * An importer (rsm_importer) writes a message with rsm_memseg_import_putv
 * and signals; we wait on our segment's poll descriptor together with the
 * terminal, check the message, and signal back so the importer can send the
 * next one. A message whose text is "quit" ends the program.
 *
 *   mkdir -p build/examples
 *   flags=$(PKG_CONFIG_PATH=build/lib/pkgconfig pkg-config --cflags --libs weft-rsm)
 *   cc examples/rsm/rsm_exporter.c $flags -o build/examples/rsm_exporter
 *   LD_LIBRARY_PATH=build/lib build/examples/rsm_exporter [controller [segment-id]]
 */
#include <poll.h>
#include <rsmapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEGSIZE (64 * 1024)
#define MSG_OFFSET 4096 /* the header page, then the text */

struct msg_header {
  uint32_t seq;
  uint32_t length;
  uint32_t checksum;
  uint32_t pad;
};

static uint32_t sum(const char* p, uint32_t n) {
  uint32_t s = 0;
  while (n--) s = s * 31 + (unsigned char)*p++;
  return s;
}

/* An RSMAPI call failed: its name, and the error's name and text
 * (rsm_errname and rsm_strerror, rsm_strerror(3)). */
static void die(const char* what, int err) {
  const char* name = rsm_errname(err);
  fprintf(stderr, "rsm_exporter: %s failed: %s: %s\n", what, name ? name : "RSMERR_?", rsm_strerror(err));
  exit(1);
}

int main(int argc, char** argv) {
  char* ctlname = argc > 1 ? argv[1] : "shm";
  rsm_memseg_id_t segid = argc > 2 ? (rsm_memseg_id_t)strtoul(argv[2], NULL, 0) : 0x600001;
  rsmapi_controller_handle_t ctl;
  rsm_memseg_export_handle_t seg;
  rsm_topology_t* topo;
  struct pollfd fds[2];
  char* area;
  int err, expected = 1;

  if ((err = rsm_get_controller(ctlname, &ctl)) != RSM_SUCCESS) die("rsm_get_controller", err);
  if ((err = rsm_get_interconnect_topology(&topo)) != RSM_SUCCESS) die("rsm_get_interconnect_topology", err);
  printf("node %u, controller %s\n", topo->topology_hdr.local_nodeid, ctlname);
  rsm_free_interconnect_topology(topo);

  /* Page-aligned memory, as rsm_memseg_export_create wants it. */
  area = valloc(SEGSIZE);
  if (!area) {
    fprintf(stderr, "rsm_exporter: out of memory\n");
    exit(1);
  }
  memset(area, 0, SEGSIZE);
  if ((err = rsm_memseg_export_create(ctl, &seg, area, SEGSIZE, 0)) != RSM_SUCCESS)
    die("rsm_memseg_export_create", err);
  /* No access list: every node may read and write. */
  if ((err = rsm_memseg_export_publish(seg, &segid, NULL, 0)) != RSM_SUCCESS)
    die("rsm_memseg_export_publish", err);
  printf("exported segment %#x\n", segid);
  fflush(stdout);

  if ((err = rsm_memseg_get_pollfd(seg, &fds[0])) != RSM_SUCCESS) die("rsm_memseg_get_pollfd", err);
  /* "quit" typed on the terminal also ends it. */
  fds[1].fd = isatty(STDIN_FILENO) ? STDIN_FILENO : -1;
  fds[1].events = POLLIN;

  for (;;) {
    int n = 0;
    fds[0].revents = fds[1].revents = 0;
    err = rsm_intr_signal_wait_pollfd(fds, 2, 30000, &n);
    if (err == RSMERR_TIMEOUT) {
      fprintf(stderr, "rsm_exporter: no importer for 30 s\n");
      break;
    }
    if (err != RSM_SUCCESS) die("rsm_intr_signal_wait_pollfd", err);
    if (fds[1].revents) {
      char line[64];
      if (!fgets(line, sizeof line, stdin) || !strncmp(line, "quit", 4)) break;
    }
    if (fds[0].revents & POLLRDNORM) {
      struct msg_header h;
      memcpy(&h, area, sizeof h);
      if (h.seq != (uint32_t)expected || h.length >= SEGSIZE - MSG_OFFSET ||
          sum(area + MSG_OFFSET, h.length) != h.checksum) {
        fprintf(stderr, "rsm_exporter: bad message %u (expected %d)\n", h.seq, expected);
        exit(1);
      }
      printf("message %u: %.*s\n", h.seq, (int)h.length, area + MSG_OFFSET);
      fflush(stdout);
      expected++;
      /* Tell the importer we have it: it may write the next one. */
      if ((err = rsm_intr_signal_post(seg, 0)) != RSM_SUCCESS) die("rsm_intr_signal_post", err);
      if (h.length == 4 && !memcmp(area + MSG_OFFSET, "quit", 4)) break;
    }
  }

  rsm_memseg_release_pollfd(seg);
  if ((err = rsm_memseg_export_unpublish(seg)) != RSM_SUCCESS) die("rsm_memseg_export_unpublish", err);
  if ((err = rsm_memseg_export_destroy(seg)) != RSM_SUCCESS) die("rsm_memseg_export_destroy", err);
  rsm_release_controller(ctl);
  free(area);
  printf("%d messages\n", expected - 1);
  return 0;
}
