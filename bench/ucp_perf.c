// SPDX-License-Identifier: BSD-3-Clause
/*
 * ucp-perf: a small UCP benchmark written on ucp.h only, built against
 * Debian's UCX headers and linked to libucp.so.0 by SONAME without RPATH. The
 * same binary measures real UCX (default; e.g. UCX_TLS=posix,cma,self) and
 * weft's face (LD_LIBRARY_PATH=build/lib). Its first line names the libucp
 * the loader picked.
 *
 *   ucp-perf [-t tag_lat|tag_bw|put_bw|all] [-s SIZE] [-n ITERS] [-w WINDOW]
 *            [--cpus A,B] [--check]
 *
 * Two processes on this host (fork; the peer's worker address comes over a
 * socketpair), pinned to CPUs A and B (default: the first two allowed).
 *   tag_lat  ping-pong of SIZE-byte tagged messages (default 8 B): one-way
 *            latency, median and mean of the round trips / 2, in us
 *   tag_bw   WINDOW tagged sends of SIZE bytes (default 1 MiB, window 64),
 *            one buffer per side as ucx_perftest uses, then an ack: MB/s
 *   put_bw   WINDOW puts of SIZE bytes into memory of ucp_mem_map (allocated:
 *            shared memory for both), a flush per window: MB/s
 * Output: one line per test, "name size value unit".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include "tool_util.h"

static int sock;
static int is_child;
static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_ep_h ep;
static int check;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char* what) {
  fprintf(stderr, "ucp-perf (%s): %s\n", is_child ? "peer" : "initiator", what);
  exit(1);
}

/* A UCS status by name and text ("UCS_ERR_NO_DEVICE: No such device"). */
static const char* status_name(ucs_status_t st) {
#define UCS_NAME(s) \
  case s:           \
    return #s;
  switch (st) {
    UCS_NAME(UCS_OK)
    UCS_NAME(UCS_INPROGRESS)
    UCS_NAME(UCS_ERR_NO_MESSAGE)
    UCS_NAME(UCS_ERR_NO_RESOURCE)
    UCS_NAME(UCS_ERR_IO_ERROR)
    UCS_NAME(UCS_ERR_NO_MEMORY)
    UCS_NAME(UCS_ERR_INVALID_PARAM)
    UCS_NAME(UCS_ERR_UNREACHABLE)
    UCS_NAME(UCS_ERR_INVALID_ADDR)
    UCS_NAME(UCS_ERR_NOT_IMPLEMENTED)
    UCS_NAME(UCS_ERR_MESSAGE_TRUNCATED)
    UCS_NAME(UCS_ERR_NO_PROGRESS)
    UCS_NAME(UCS_ERR_BUFFER_TOO_SMALL)
    UCS_NAME(UCS_ERR_NO_ELEM)
    UCS_NAME(UCS_ERR_SOME_CONNECTS_FAILED)
    UCS_NAME(UCS_ERR_NO_DEVICE)
    UCS_NAME(UCS_ERR_BUSY)
    UCS_NAME(UCS_ERR_CANCELED)
    UCS_NAME(UCS_ERR_SHMEM_SEGMENT)
    UCS_NAME(UCS_ERR_ALREADY_EXISTS)
    UCS_NAME(UCS_ERR_OUT_OF_RANGE)
    UCS_NAME(UCS_ERR_TIMED_OUT)
    UCS_NAME(UCS_ERR_EXCEEDS_LIMIT)
    UCS_NAME(UCS_ERR_UNSUPPORTED)
    UCS_NAME(UCS_ERR_REJECTED)
    UCS_NAME(UCS_ERR_NOT_CONNECTED)
    UCS_NAME(UCS_ERR_CONNECTION_RESET)
    UCS_NAME(UCS_ERR_ENDPOINT_TIMEOUT)
    default:
      return "UCS_ERR_?";
  }
#undef UCS_NAME
}

static void die_status(const char* what, ucs_status_t st) {
  fprintf(stderr, "ucp-perf (%s): %s: %s: %s\n", is_child ? "peer" : "initiator", what, status_name(st),
          ucs_status_string(st));
  exit(1);
}

/* A UCP call that must succeed. */
#define UCS_CHECK(call, what)              \
  do {                                     \
    ucs_status_t st_ = (call);             \
    if (st_ != UCS_OK) die_status(what, st_); \
  } while (0)

static void xfer(void* p, size_t n, int out) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = out ? write(sock, (char*)p + done, n - done) : read(sock, (char*)p + done, n - done);
    if (k <= 0) die("control socket");
    done += (size_t)k;
  }
}

/* Progress until the request completes; its status is looked at only when
 * progress did something (as ucx_perftest's loops, a lean poll). */
static void wait_req(void* r) {
  if (r == NULL) return;
  if (UCS_PTR_IS_ERR(r)) die_status("request", UCS_PTR_STATUS(r));
  while (ucp_request_check_status(r) == UCS_INPROGRESS)
    while (!ucp_worker_progress(worker)) {}
  UCS_CHECK(ucp_request_check_status(r), "request");
  ucp_request_free(r);
}

static void barrier(void) {
  char c = 0;
  xfer(&c, 1, 1);
  xfer(&c, 1, 0);
}

/* A barrier during which this side keeps progressing its worker (a put's
 * target may take part in the copy, as weft's shm does). */
static void progress_barrier(void) {
  char c = 0;
  xfer(&c, 1, 1);
  struct pollfd p = {sock, POLLIN, 0};
  for (unsigned i = 0;; i++) {
    ucp_worker_progress(worker);
    if (!(i & 1023) && poll(&p, 1, 0) != 0) break;
  }
  xfer(&c, 1, 0);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* TSC ticks per second, measured against CLOCK_MONOTONIC. */
static double tsc_hz(void) {
  double t0 = now();
  uint64_t c0 = __builtin_ia32_rdtsc();
  while (now() - t0 < 0.02) {}
  return (double)(__builtin_ia32_rdtsc() - c0) / (now() - t0);
}

/* Ping-pong in weft-perf's tagged_lat order (fi_tinject, post the next
 * receive, wait for the posted one; one TSC read per round trip; the
 * responder keeps the receives for the next two messages posted): the same
 * operations, so the two compare the face with the raw calls. */
static void tag_lat(size_t size, long iters) {
  char* buf = calloc(1, size ? size : 1);
  char* rbuf = calloc(1, size ? size : 1);
  uint64_t* tsc = malloc(sizeof(uint64_t) * (size_t)(iters + 1));
  long warm = iters / 10, total = warm + iters; /* messages each way in the loop; one more follows */
  ucp_request_param_t p = {0};
  double hz = tsc_hz();
  barrier();
  ucp_tag_t in = is_child ? 1 : 2, out = is_child ? 2 : 1;
  void* r[2] = {ucp_tag_recv_nbx(worker, rbuf, size, in, ~0ull, &p), NULL};
  if (is_child) r[1] = ucp_tag_recv_nbx(worker, rbuf, size, in, ~0ull, &p);
  for (long k = 0; k < total; k++) {
    if (!is_child) {
      wait_req(ucp_tag_send_nbx(ep, buf, size, out, &p));
      if (k >= warm) tsc[k - warm] = __builtin_ia32_rdtsc(); /* after the send, as weft-perf reads it */
      r[(k + 1) & 1] = ucp_tag_recv_nbx(worker, rbuf, size, in, ~0ull, &p); /* reply k + 1 */
      wait_req(r[k & 1]);
    } else {
      wait_req(r[k & 1]);
      wait_req(ucp_tag_send_nbx(ep, buf, size, out, &p));
      r[k & 1] = k + 2 <= total ? ucp_tag_recv_nbx(worker, rbuf, size, in, ~0ull, &p) : NULL; /* message k + 2 */
    }
  }
  tsc[iters] = __builtin_ia32_rdtsc();
  /* the last receive of each side matches a final message */
  wait_req(ucp_tag_send_nbx(ep, buf, size, out, &p));
  wait_req(r[total & 1]);
  if (!is_child) {
    double* rtt = malloc(sizeof(double) * (size_t)iters);
    for (long i = 0; i < iters; i++) rtt[i] = (double)(tsc[i + 1] - tsc[i]) / hz;
    double sum = (double)(tsc[iters] - tsc[0]) / hz;
    qsort(rtt, (size_t)iters, sizeof(double), cmp_double);
    printf("tag_lat %zu %.3f us_oneway_median %.3f us_oneway_mean\n", size, rtt[iters / 2] / 2 * 1e6,
           sum / iters / 2 * 1e6);
    free(rtt);
  }
  barrier();
  free(buf);
  free(rbuf);
  free(tsc);
}

static void tag_bw(size_t size, long iters, int window) {
  char* buf = malloc(size);
  memset(buf, 0x5a, size);
  void** reqs = malloc(sizeof(void*) * (size_t)window);
  ucp_request_param_t p = {0};
  long rounds = iters / window;
  if (rounds < 2) rounds = 2;
  char ack = 0;
  barrier();
  double t0 = 0;
  for (long r = -1; r < rounds; r++) {
    if (r == 0) t0 = now();
    for (int k = 0; k < window; k++)
      reqs[k] = is_child ? ucp_tag_recv_nbx(worker, buf, size, 3, ~0ull, &p)
                         : ucp_tag_send_nbx(ep, buf, size, 3, &p);
    for (int k = 0; k < window; k++) wait_req(reqs[k]);
    /* the receiver says it has the whole window */
    if (is_child)
      wait_req(ucp_tag_send_nbx(ep, &ack, 1, 4, &p));
    else
      wait_req(ucp_tag_recv_nbx(worker, &ack, 1, 4, ~0ull, &p));
  }
  double t = now() - t0;
  if (!is_child) printf("tag_bw %zu %.1f MB/s\n", size, (double)size * window * rounds / t / 1e6);
  if (check && is_child)
    for (size_t i = 0; i < size; i++)
      if (buf[i] != 0x5a) die("tag_bw: data differs");
  barrier();
  free(buf);
  free(reqs);
}

static void put_bw(size_t size, long iters, int window) {
  ucp_mem_map_params_t mp = {0};
  mp.field_mask =
      UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS | UCP_MEM_MAP_PARAM_FIELD_ADDRESS;
  mp.length = size;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  mp.address = NULL;
  ucp_mem_h memh;
  UCS_CHECK(ucp_mem_map(ctx, &mp, &memh), "ucp_mem_map");
  ucp_mem_attr_t ma = {0};
  ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  ucp_mem_query(memh, &ma);
  char* local = ma.address;
  memset(local, is_child ? 0 : 0x77, size);
  void* kb;
  size_t ks;
  UCS_CHECK(ucp_rkey_pack(ctx, memh, &kb, &ks), "ucp_rkey_pack");
  uint64_t addr = (uintptr_t)local, n = ks;
  xfer(&addr, 8, 1);
  xfer(&n, 8, 1);
  xfer(kb, ks, 1);
  ucp_rkey_buffer_release(kb);
  uint64_t raddr, rn;
  xfer(&raddr, 8, 0);
  xfer(&rn, 8, 0);
  char* pk = malloc(rn);
  xfer(pk, rn, 0);
  ucp_rkey_h rkey;
  UCS_CHECK(ucp_ep_rkey_unpack(ep, pk, &rkey), "ucp_ep_rkey_unpack");
  free(pk);
  barrier();
  if (!is_child) {
    void** reqs = malloc(sizeof(void*) * (size_t)window);
    ucp_request_param_t p = {0};
    long rounds = iters / window;
    if (rounds < 2) rounds = 2;
    double t0 = 0;
    for (long r = -1; r < rounds; r++) {
      if (r == 0) t0 = now();
      for (int k = 0; k < window; k++) reqs[k] = ucp_put_nbx(ep, local, size, raddr, rkey, &p);
      for (int k = 0; k < window; k++) wait_req(reqs[k]);
      wait_req(ucp_ep_flush_nbx(ep, &p));
    }
    double t = now() - t0;
    printf("put_bw %zu %.1f MB/s\n", size, (double)size * window * rounds / t / 1e6);
    free(reqs);
  }
  progress_barrier();
  if (check && is_child)
    for (size_t i = 0; i < size; i++)
      if (local[i] != 0x77) die("put_bw: data differs");
  barrier();
  ucp_rkey_destroy(rkey);
  ucp_mem_unmap(ctx, memh);
}

static int which_lib(struct dl_phdr_info* info, size_t sz, void* data) {
  (void)sz;
  if (strstr(info->dlpi_name, "libucp.so")) {
    snprintf(data, 512, "%s", info->dlpi_name);
    return 1;
  }
  return 0;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

int main(int argc, char** argv) {
  const char* test = "all";
  size_t size = 0;
  long iters = 0;
  int window = 64, cpu_a = -1, cpu_b = -1;
  static const char usage[] =
      "usage: ucp-perf [-t tag_lat|tag_bw|put_bw|all] [-s SIZE] [-n ITERS] [-w WINDOW] [--cpus A,B] [--check]\n"
      "A UCP benchmark in two processes on this host: real UCX by default, weft's UCP face with\n"
      "LD_LIBRARY_PATH=build/lib (the first line names the libucp in use).\n"
      "  -t TEST      tag_lat: one-way latency of SIZE-byte tagged messages (us, median and mean);\n"
      "               tag_bw: WINDOW tagged sends of SIZE bytes, then an ack (MB/s);\n"
      "               put_bw: WINDOW puts of SIZE bytes, a flush per window (MB/s); all (default)\n"
      "  -s SIZE      message size in bytes (default 8 for tag_lat, 1 MiB otherwise)\n"
      "  -n ITERS     iterations (default: per test)\n"
      "  -w WINDOW    operations in flight, 1 to 1024 (default 64)\n"
      "  --cpus A,B   the two processes' CPUs (default: the first two allowed)\n"
      "  --check      verify the data moved\n"
      "  -h, --help   this text\n";
  if (tool_help_asked(argc, argv)) tool_help(usage);
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    long v;
    int has_value = i + 1 < argc;
    if (!strcmp(a, "--check")) {
      check = 1;
      continue;
    }
    if (strcmp(a, "-t") && strcmp(a, "-s") && strcmp(a, "-n") && strcmp(a, "-w") && strcmp(a, "--cpus"))
      tool_usage_error("ucp-perf", "unknown option %s", a);
    if (!has_value) tool_usage_error("ucp-perf", "option %s needs an argument", a);
    const char* val = argv[++i];
    if (!strcmp(a, "-t")) {
      if (strcmp(val, "tag_lat") && strcmp(val, "tag_bw") && strcmp(val, "put_bw") && strcmp(val, "all"))
        tool_usage_error("ucp-perf", "-t takes tag_lat, tag_bw, put_bw or all, not '%s'", val);
      test = val;
    } else if (!strcmp(a, "-s")) {
      if (!tool_parse_long(val, 1, 1L << 30, &v)) tool_usage_error("ucp-perf", "bad -s '%s' (1 to 2^30 bytes)", val);
      size = (size_t)v;
    } else if (!strcmp(a, "-n")) {
      if (!tool_parse_long(val, 1, 1L << 40, &v)) tool_usage_error("ucp-perf", "bad -n '%s'", val);
      iters = v;
    } else if (!strcmp(a, "-w")) {
      if (!tool_parse_long(val, 1, 1024, &v)) tool_usage_error("ucp-perf", "bad -w '%s' (1 to 1024)", val);
      window = (int)v;
    } else if (sscanf(val, "%d,%d", &cpu_a, &cpu_b) != 2 || cpu_a < 0 || cpu_b < 0) {
      tool_usage_error("ucp-perf", "--cpus takes two CPU numbers, e.g. 0,1 (not '%s')", val);
    }
  }
  if (cpu_a < 0) {
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    for (int c = 0; c < CPU_SETSIZE && cpu_b < 0; c++)
      if (CPU_ISSET(c, &set)) {
        if (cpu_a < 0)
          cpu_a = c;
        else
          cpu_b = c;
      }
    if (cpu_b < 0) cpu_b = cpu_a;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) die("socketpair");
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) die("fork");
  is_child = pid == 0;
  sock = sv[is_child];
  close(sv[!is_child]);
  pin(is_child ? cpu_b : cpu_a);

  ucp_params_t params = {0};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
  ucp_config_t* cfg;
  UCS_CHECK(ucp_config_read(NULL, NULL, &cfg), "ucp_config_read");
  UCS_CHECK(ucp_init(&params, cfg, &ctx), "ucp_init");
  ucp_config_release(cfg);
  ucp_worker_params_t wp = {0};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  UCS_CHECK(ucp_worker_create(ctx, &wp, &worker), "ucp_worker_create");
  ucp_address_t* addr;
  size_t alen;
  UCS_CHECK(ucp_worker_get_address(worker, &addr, &alen), "ucp_worker_get_address");
  uint64_t l = alen;
  xfer(&l, 8, 1);
  xfer(addr, alen, 1);
  ucp_worker_release_address(worker, addr);
  uint64_t pl;
  xfer(&pl, 8, 0);
  void* peer = malloc(pl);
  xfer(peer, pl, 0);
  ucp_ep_params_t epp = {0};
  epp.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  epp.address = peer;
  UCS_CHECK(ucp_ep_create(worker, &epp, &ep), "ucp_ep_create");
  free(peer);
  if (!is_child) {
    char lib[512] = "?";
    dl_iterate_phdr(which_lib, lib);
    printf("# libucp: %s (cpus %d,%d)\n", lib, cpu_a, cpu_b);
  }

  int all = !strcmp(test, "all");
  if (all || !strcmp(test, "tag_lat")) tag_lat(size && !all ? size : 8, iters && !all ? iters : 100000);
  if (all || !strcmp(test, "tag_bw"))
    tag_bw(size && !all ? size : 1 << 20, iters && !all ? iters : 4000, window);
  if (all || !strcmp(test, "put_bw"))
    put_bw(size && !all ? size : 1 << 20, iters && !all ? iters : 8000, window);

  ucp_request_param_t cp = {0};
  cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
  barrier();
  void* r = ucp_ep_close_nbx(ep, &cp);
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(r);
  }
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
  if (!is_child) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
  }
  return 0;
}
