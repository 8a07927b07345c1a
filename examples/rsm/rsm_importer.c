// SPDX-License-Identifier: BSD-3-Clause
/*
 * rsm_importer: sends messages into an exporter's segment (see
 * rsm_exporter.c) the RSMAPI way: in explicit barrier mode, each message is
 * one rsm_memseg_import_putv (header from a local memory handle, text from
 * its address) inside an open/close barrier, retried if the barrier fails,
 * with RSM_IMPLICIT_SIGPOST waking the exporter; the exporter's answer is
 * awaited on our own poll descriptor with poll(2).
 *
 *   mkdir -p build/examples
 *   flags=$(PKG_CONFIG_PATH=build/lib/pkgconfig pkg-config --cflags --libs weft-rsm)
 *   cc examples/rsm/rsm_importer.c $flags -o build/examples/rsm_importer
 *   LD_LIBRARY_PATH=build/lib build/examples/rsm_importer [controller [node [segment-id [count]]]]
 */
#include <poll.h>
#include <rsmapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSG_OFFSET 4096
#define WAIT_S 10 /* how long to wait for the exporter */

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
  fprintf(stderr, "rsm_importer: %s failed: %s: %s\n", what, name ? name : "RSMERR_?", rsm_strerror(err));
  exit(1);
}

int main(int argc, char** argv) {
  char* ctlname = argc > 1 ? argv[1] : "shm";
  rsm_node_id_t node = argc > 2 ? (rsm_node_id_t)strtoul(argv[2], NULL, 0) : 1;
  rsm_memseg_id_t segid = argc > 3 ? (rsm_memseg_id_t)strtoul(argv[3], NULL, 0) : 0x600001;
  int count = argc > 4 ? atoi(argv[4]) : 5;
  rsmapi_controller_handle_t ctl;
  rsm_memseg_import_handle_t seg;
  rsm_localmemory_handle_t hdr_handle;
  rsmapi_barrier_t bar;
  struct msg_header* hdr;
  struct pollfd pfd;
  char text[128];
  int err, i, tries;

  if ((err = rsm_get_controller(ctlname, &ctl)) != RSM_SUCCESS) die("rsm_get_controller", err);
  /* The exporter may not have published yet: try for a while, saying what
   * we wait for. */
  for (tries = 0;; tries++) {
    err = rsm_memseg_import_connect(ctl, node, segid, RSM_PERM_RDWR, &seg);
    if (err == RSM_SUCCESS) break;
    if (err == RSMERR_SEG_NOT_PUBLISHED && tries == 0) {
      fprintf(stderr,
              "rsm_importer: waiting up to %d s for segment %#x to be published on node %u (controller %s): "
              "start rsm_exporter %s %#x\n",
              WAIT_S, segid, (unsigned)node, ctlname, ctlname, segid);
    }
    if (err != RSMERR_SEG_NOT_PUBLISHED || tries == WAIT_S * 10) {
      if (err == RSMERR_SEG_NOT_PUBLISHED)
        fprintf(stderr, "rsm_importer: no exporter published segment %#x on node %u within %d s\n", segid,
                (unsigned)node, WAIT_S);
      die("rsm_memseg_import_connect", err);
    }
    usleep(100 * 1000);
  }
  if ((err = rsm_memseg_import_set_mode(seg, RSM_BARRIER_MODE_EXPLICIT)) != RSM_SUCCESS)
    die("rsm_memseg_import_set_mode", err);
  if ((err = rsm_memseg_import_init_barrier(seg, RSM_BAR_DEFAULT, &bar)) != RSM_SUCCESS)
    die("rsm_memseg_import_init_barrier", err);
  hdr = valloc(4096);
  if (!hdr) {
    fprintf(stderr, "rsm_importer: out of memory\n");
    exit(1);
  }
  memset(hdr, 0, 4096);
  if ((err = rsm_create_localmemory_handle(ctl, &hdr_handle, (caddr_t)hdr, 4096)) != RSM_SUCCESS)
    die("rsm_create_localmemory_handle", err);
  if ((err = rsm_memseg_get_pollfd(seg, &pfd)) != RSM_SUCCESS) die("rsm_memseg_get_pollfd", err);

  for (i = 1; i <= count + 1; i++) {
    rsm_iovec_t iov[2];
    rsm_scat_gath_t sg;
    int n;

    if (i <= count)
      snprintf(text, sizeof text, "hello %d from pid %d", i, (int)getpid());
    else
      strcpy(text, "quit");
    hdr->seq = (uint32_t)i;
    hdr->length = (uint32_t)strlen(text);
    hdr->checksum = sum(text, hdr->length);

    /* The text, then the header that makes it valid. */
    iov[0].io_type = RSM_VA_TYPE;
    iov[0].local.vaddr = text;
    iov[0].local_offset = 0;
    iov[0].remote_offset = MSG_OFFSET;
    iov[0].transfer_length = hdr->length;
    iov[1].io_type = RSM_HANDLE_TYPE;
    iov[1].local.handle = hdr_handle;
    iov[1].local_offset = 0;
    iov[1].remote_offset = 0;
    iov[1].transfer_length = sizeof *hdr;
    memset(&sg, 0, sizeof sg);
    sg.io_request_count = 2;
    sg.remote_handle = seg;
    sg.iovec = iov;
    sg.flags = RSM_IMPLICIT_SIGPOST;

    for (tries = 0;; tries++) {
      if ((err = rsm_memseg_import_open_barrier(&bar)) != RSM_SUCCESS)
        die("rsm_memseg_import_open_barrier", err);
      err = rsm_memseg_import_putv(&sg);
      if (err != RSM_SUCCESS && err != RSMERR_BARRIER_FAILURE) die("rsm_memseg_import_putv", err);
      err = rsm_memseg_import_close_barrier(&bar);
      if (err == RSM_SUCCESS) break;
      if (err != RSMERR_BARRIER_FAILURE || tries == 3) die("rsm_memseg_import_close_barrier", err);
    }
    /* Wait for the exporter's acknowledgement on our poll descriptor. */
    pfd.revents = 0;
    n = poll(&pfd, 1, 10000);
    if (n != 1 || !(pfd.revents & POLLRDNORM)) {
      fprintf(stderr, "rsm_importer: no answer from the exporter within 10 s\n");
      exit(1);
    }
    if ((err = rsm_intr_signal_wait(seg, 0)) != RSM_SUCCESS) die("rsm_intr_signal_wait", err);
    printf("sent: %s\n", text);
  }

  rsm_memseg_release_pollfd(seg);
  rsm_free_localmemory_handle(ctl, hdr_handle);
  rsm_memseg_import_destroy_barrier(&bar);
  if ((err = rsm_memseg_import_disconnect(seg)) != RSM_SUCCESS) die("rsm_memseg_import_disconnect", err);
  rsm_release_controller(ctl);
  free(hdr);
  return 0;
}
