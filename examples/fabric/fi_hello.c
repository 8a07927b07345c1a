// SPDX-License-Identifier: BSD-3-Clause
/*
 * fi_hello: one message from a client to a server over a libfabric RDM
 * endpoint, to see how providers name endpoints (the README's libfabric
 * example; fi_weft_shm(7) on shm's names). Plain libfabric: it builds
 * against Debian's headers and runs over weft's libfabric or Debian's.
 *
 *   mkdir -p build/examples
 *   cc examples/fabric/fi_hello.c -lfabric -o build/examples/fi_hello
 *   LD_LIBRARY_PATH=build/lib build/examples/fi_hello PROVIDER server NODE SERVICE [SECONDS]
 *   LD_LIBRARY_PATH=build/lib build/examples/fi_hello PROVIDER client NODE SERVICE [SECONDS]
 *
 * NODE or SERVICE "-" means none. The server opens its endpoint at
 * fi_getinfo(NODE, SERVICE, FI_SOURCE), prints the address it got and waits
 * (up to SECONDS, default 60) for one message. The client sends one message
 * to the address fi_getinfo(NODE, SERVICE, 0) names, retrying for up to
 * SECONDS (default 10) while the send returns -FI_EAGAIN (shm: nobody holds
 * that name yet) or ends in an error (tcp: nobody listens there yet), then
 * prints what happened:
 *   "sent to ADDR"
 *   "no endpoint at ADDR took the message within S s: N sends returned
 *    -FI_EAGAIN, E ended in an error (last: the error's text)"   (exit 1)
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A failed call: its name and the error's text; exit 1. */
static void die(const char* what, int err) {
  fprintf(stderr, "fi_hello: %s failed: %s\n", what, fi_strerror(err < 0 ? -err : err));
  exit(1);
}
#define CALL(what, call)         \
  do {                           \
    int ret_ = (int)(call);      \
    if (ret_) die(what, ret_);   \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6 || (strcmp(argv[2], "server") && strcmp(argv[2], "client"))) {
    fprintf(stderr, "usage: fi_hello PROVIDER server|client NODE|- SERVICE|- [SECONDS]\n");
    return 2;
  }
  const char* prov = argv[1];
  int server = !strcmp(argv[2], "server");
  const char* node = strcmp(argv[3], "-") ? argv[3] : NULL;
  const char* service = strcmp(argv[4], "-") ? argv[4] : NULL;
  double seconds = argc > 5 ? atof(argv[5]) : server ? 60 : 10;

  struct fi_info *hints = fi_allocinfo(), *info = NULL;
  if (!hints) die("fi_allocinfo", -FI_ENOMEM);
  hints->fabric_attr->prov_name = strdup(prov);
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
  CALL("fi_getinfo", fi_getinfo(FI_VERSION(1, 17), node, service, server ? FI_SOURCE : 0, hints, &info));

  struct fid_fabric* fabric;
  struct fid_domain* domain;
  struct fid_av* av;
  struct fid_cq* cq;
  struct fid_ep* ep;
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
  CALL("fi_fabric", fi_fabric(info->fabric_attr, &fabric, NULL));
  CALL("fi_domain", fi_domain(fabric, info, &domain, NULL));
  CALL("fi_av_open", fi_av_open(domain, &av_attr, &av, NULL));
  CALL("fi_cq_open", fi_cq_open(domain, &cq_attr, &cq, NULL));
  CALL("fi_endpoint", fi_endpoint(domain, info, &ep, NULL));
  CALL("fi_ep_bind", fi_ep_bind(ep, &av->fid, 0));
  CALL("fi_ep_bind", fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
  CALL("fi_enable", fi_enable(ep));

  char msg[64], addr[256];
  size_t addrlen = sizeof addr;
  struct fi_cq_tagged_entry entry;
  struct fi_cq_err_entry err;
  double end = now_s() + seconds;
  int rc = 0;
  if (server) {
    char name[256];
    size_t namelen = sizeof name;
    CALL("fi_getname", fi_getname(&ep->fid, name, &namelen));
    printf("server: listening at %s\n", fi_av_straddr(av, name, addr, &addrlen));
    fflush(stdout);
    memset(msg, 0, sizeof msg);
    CALL("fi_trecv", fi_trecv(ep, msg, sizeof msg - 1, NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
    ssize_t n;
    while ((n = fi_cq_read(cq, &entry, 1)) == -FI_EAGAIN && now_s() < end) usleep(1000);
    if (n == 1) {
      printf("server: received \"%s\"\n", msg);
    } else {
      printf("server: no message within %.0f s\n", seconds);
      rc = 1;
    }
  } else {
    fi_addr_t dest;
    if (fi_av_insert(av, info->dest_addr, 1, &dest, 0, NULL) != 1) die("fi_av_insert", -FI_EINVAL);
    fi_av_straddr(av, info->dest_addr, addr, &addrlen);
    snprintf(msg, sizeof msg, "hello from pid %d", (int)getpid());
    long eagain = 0, errors = 0;
    int last_err = 0, sent = 0;
    while (!sent && now_s() < end) {
      ssize_t r = fi_tsend(ep, msg, strlen(msg) + 1, NULL, dest, 1, NULL);
      if (r == -FI_EAGAIN) {
        eagain++;
        (void)fi_cq_read(cq, &entry, 1); /* progress */
        usleep(1000);
        continue;
      }
      if (r) die("fi_tsend", (int)r);
      ssize_t n;
      while ((n = fi_cq_read(cq, &entry, 1)) == -FI_EAGAIN && now_s() < end) usleep(100);
      if (n == -FI_EAGAIN) break; /* taken, but not completed in time */
      if (n == 1) {
        sent = 1;
      } else if (n == -FI_EAVAIL && fi_cq_readerr(cq, &err, 0) == 1) {
        errors++;
        last_err = err.err;
        usleep(10000);
      } else {
        die("fi_cq_read", (int)n);
      }
    }
    if (sent) {
      printf("client: sent to %s\n", addr);
    } else {
      printf("client: no endpoint at %s took the message within %.1f s: %ld sends returned -FI_EAGAIN, "
             "%ld ended in an error%s%s%s\n",
             addr, seconds, eagain, errors, last_err ? " (last: " : "", last_err ? fi_strerror(last_err) : "",
             last_err ? ")" : "");
      rc = 1;
    }
  }
  fi_close(&ep->fid);
  fi_close(&cq->fid);
  fi_close(&av->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(info);
  fi_freeinfo(hints);
  return rc;
}
