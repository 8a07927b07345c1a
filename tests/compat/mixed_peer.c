// SPDX-License-Identifier: BSD-3-Clause
/* One side of a pair whose other side may run another libfabric: built
 * against Debian's headers and linked to libfabric.so.1, it runs over
 * Debian's library, or over weft's with LD_LIBRARY_PATH. It prints what an
 * application sees (addresses, the error entries' err, prov_errno and
 * fi_cq_strerror/fi_eq_strerror text), and every wait has a bound.
 *
 *   mixed_peer PROV rdm|msg server FILE SECONDS
 *   mixed_peer PROV rdm|msg client FILE SECONDS
 *
 * The server opens its endpoint (rdm) or passive endpoint (msg) on
 * 127.0.0.1 (tcp) or with the provider's default name (shm), writes its
 * address to FILE (hex) and waits SECONDS for one message, printing each
 * event it reads. The client reads FILE, inserts the address (rdm) or
 * connects to it (msg) and sends one message, retrying while a send
 * returns -FI_EAGAIN, until it completes, an error entry comes or SECONDS
 * pass. Lines printed:
 *   "ROLE: address ADDR (N bytes: HEX)"
 *   "ROLE: fi_av_insert: RET (TEXT)"                          (exit 3)
 *   "ROLE: error entry: err N (TEXT), prov_errno P: STRERROR"  (exit 1)
 *   "ROLE: sent" / "ROLE: received"                           (exit 0)
 *   "ROLE: nothing within S s (N sends returned -FI_EAGAIN)"   (exit 2)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char* role = "?";

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char* what, int err) {
  printf("%s: %s failed: %d (%s)\n", role, what, err, fi_strerror(err < 0 ? -err : err));
  exit(4);
}
static void call(const char* what, int ret) {
  if (ret) die(what, ret);
}

/* The address as text: the AV's (rdm), else IPv4's as the AV would write it
 * (a passive endpoint's name) or the string itself (shm's FI_ADDR_STR). */
static void print_addr(struct fid_av* av, const void* a, size_t len) {
  char s[256] = "?";
  size_t sl = sizeof s;
  const unsigned char* p = a;
  const struct sockaddr_in* in = a;
  if (av) {
    fi_av_straddr(av, a, s, &sl);
  } else if (len >= sizeof *in && in->sin_family == AF_INET) {
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    snprintf(s, sizeof s, "fi_sockaddr_in://%s:%u", ip, (unsigned)ntohs(in->sin_port));
  } else if (len && len < sizeof s && !p[len - 1]) {
    memcpy(s, a, len);
  }
  printf("%s: address %s (%zu bytes: ", role, s, len);
  for (size_t i = 0; i < len; ++i) printf("%02x", p[i]);
  printf(")\n");
  fflush(stdout);
}

static void write_file(const char* path, const void* a, size_t len) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (!f) die("fopen", -FI_EIO);
  const unsigned char* p = a;
  for (size_t i = 0; i < len; ++i) fprintf(f, "%02x", p[i]);
  fprintf(f, "\n");
  fclose(f);
  if (rename(tmp, path)) die("rename", -FI_EIO);
}

/* The address in FILE, waiting for it until `end`. */
static size_t read_file(const char* path, unsigned char* a, size_t max, double end) {
  for (;;) {
    FILE* f = fopen(path, "r");
    if (f) {
      size_t n = 0;
      unsigned v;
      while (n < max && fscanf(f, "%2x", &v) == 1) a[n++] = (unsigned char)v;
      fclose(f);
      if (n) return n;
    }
    if (now_s() > end) {
      printf("%s: no address in %s\n", role, path);
      exit(2);
    }
    usleep(10000);
  }
}

static void print_cq_err(struct fid_cq* cq) {
  struct fi_cq_err_entry err;
  char buf[512];
  memset(&err, 0, sizeof err);
  if (fi_cq_readerr(cq, &err, 0) != 1) die("fi_cq_readerr", -FI_EOTHER);
  const char* s = fi_cq_strerror(cq, err.prov_errno, err.err_data, buf, sizeof buf);
  printf("%s: error entry: err %d (%s), prov_errno %d: %s\n", role, err.err, fi_strerror(err.err), err.prov_errno,
         s ? s : "(null)");
  fflush(stdout);
}

static void print_eq_err(struct fid_eq* eq) {
  struct fi_eq_err_entry err;
  char buf[512];
  memset(&err, 0, sizeof err);
  ssize_t n = fi_eq_readerr(eq, &err, 0); /* the entry's size */
  if (n < 0) die("fi_eq_readerr", (int)n);
  const char* s = fi_eq_strerror(eq, err.prov_errno, err.err_data, buf, sizeof buf);
  printf("%s: error entry: err %d (%s), prov_errno %d: %s\n", role, err.err, fi_strerror(err.err), err.prov_errno,
         s ? s : "(null)");
  fflush(stdout);
}

static struct fi_info* get_info(const char* prov, int msg, int server, const void* dest, size_t dest_len) {
  struct fi_info *hints = fi_allocinfo(), *info = NULL;
  if (!hints) die("fi_allocinfo", -FI_ENOMEM);
  hints->fabric_attr->prov_name = strdup(prov);
  hints->ep_attr->type = msg ? FI_EP_MSG : FI_EP_RDM;
  hints->caps = msg ? FI_MSG : FI_TAGGED;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_ENDPOINT;
  const int tcp = !strcmp(prov, "tcp");
  if (dest) {
    hints->addr_format = tcp ? FI_SOCKADDR_IN : FI_FORMAT_UNSPEC;
    hints->dest_addr = malloc(dest_len);
    memcpy(hints->dest_addr, dest, dest_len);
    hints->dest_addrlen = dest_len;
  }
  const char* node = tcp && !dest ? "127.0.0.1" : NULL;
  call("fi_getinfo", fi_getinfo(FI_VERSION(1, 17), node, NULL, server && tcp ? FI_SOURCE : 0, hints, &info));
  fi_freeinfo(hints);
  return info;
}

int main(int argc, char** argv) {
  if (argc != 6 || (strcmp(argv[2], "rdm") && strcmp(argv[2], "msg")) ||
      (strcmp(argv[3], "server") && strcmp(argv[3], "client"))) {
    fprintf(stderr, "usage: mixed_peer PROV rdm|msg server|client FILE SECONDS\n");
    return 2;
  }
  const char* prov = argv[1];
  const int msg = !strcmp(argv[2], "msg");
  const int server = !strcmp(argv[3], "server");
  const char* path = argv[4];
  const double seconds = atof(argv[5]);
  const double end = now_s() + seconds;
  role = server ? "server" : "client";
  setvbuf(stdout, NULL, _IOLBF, 0);

  unsigned char dest[256];
  size_t dest_len = server ? 0 : read_file(path, dest, sizeof dest, end);
  struct fi_info* info = get_info(prov, msg, server, server ? NULL : dest, dest_len);
  struct fid_fabric* fabric;
  struct fid_domain* domain;
  struct fid_eq* eq = NULL;
  struct fid_av* av = NULL;
  struct fid_cq* cq;
  struct fid_ep* ep = NULL;
  struct fid_pep* pep = NULL;
  struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
  call("fi_fabric", fi_fabric(info->fabric_attr, &fabric, NULL));
  call("fi_eq_open", fi_eq_open(fabric, &eq_attr, &eq, NULL));
  call("fi_domain", fi_domain(fabric, info, &domain, NULL));
  call("fi_cq_open", fi_cq_open(domain, &cq_attr, &cq, NULL));
  if (!msg) call("fi_av_open", fi_av_open(domain, &av_attr, &av, NULL));

  static char buf[64];
  static struct fi_context ctx[2];
  long eagain = 0;
  int rc = 2;
  struct fi_cq_tagged_entry entry;

  if (msg && server) {
    call("fi_passive_ep", fi_passive_ep(fabric, info, &pep, NULL));
    call("fi_pep_bind", fi_pep_bind(pep, &eq->fid, 0));
    call("fi_listen", fi_listen(pep));
    unsigned char name[256];
    size_t len = sizeof name;
    call("fi_getname", fi_getname(&pep->fid, name, &len));
    print_addr(NULL, name, len);
    write_file(path, name, len);
  } else {
    call("fi_endpoint", fi_endpoint(domain, info, &ep, NULL));
    if (msg) call("fi_ep_bind", fi_ep_bind(ep, &eq->fid, 0));
    if (av) call("fi_ep_bind", fi_ep_bind(ep, &av->fid, 0));
    call("fi_ep_bind", fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    call("fi_enable", fi_enable(ep));
  }

  if (!msg && server) {
    unsigned char name[256];
    size_t len = sizeof name;
    call("fi_getname", fi_getname(&ep->fid, name, &len));
    print_addr(av, name, len);
    write_file(path, name, len);
  }
  fi_addr_t to = FI_ADDR_UNSPEC;
  if (!msg && !server) {
    print_addr(av, dest, dest_len);
    int n = fi_av_insert(av, dest, 1, &to, 0, NULL);
    if (n != 1) {
      printf("%s: fi_av_insert: %d (%s)\n", role, n, fi_strerror(n < 0 ? -n : FI_EINVAL));
      return 3;
    }
  }
  if (msg && !server) {
    print_addr(NULL, dest, dest_len);
    call("fi_connect", fi_connect(ep, dest, NULL, 0));
  }

  /* Events until the end: connection events, then the one message. */
  int posted = 0, connected = !msg;
  while (now_s() < end) {
    if (msg) {
      struct fi_eq_cm_entry cm;
      uint32_t event;
      ssize_t n = fi_eq_read(eq, &event, &cm, sizeof cm, 0);
      if (n == -FI_EAVAIL) {
        print_eq_err(eq);
        rc = 1;
        break;
      }
      if (n > 0 && event == FI_CONNREQ && pep) {
        printf("%s: FI_CONNREQ\n", role);
        call("fi_endpoint", fi_endpoint(domain, cm.info, &ep, NULL));
        call("fi_ep_bind", fi_ep_bind(ep, &eq->fid, 0));
        call("fi_ep_bind", fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
        call("fi_accept", fi_accept(ep, NULL, 0));
        fi_freeinfo(cm.info);
      } else if (n > 0 && event == FI_CONNECTED) {
        printf("%s: FI_CONNECTED\n", role);
        connected = 1;
      } else if (n > 0) {
        printf("%s: event %u\n", role, event);
      }
    }
    if (ep && connected && !posted) {
      ssize_t r;
      if (server)
        r = msg ? fi_recv(ep, buf, sizeof buf, NULL, 0, &ctx[0])
                : fi_trecv(ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 1, 0, &ctx[0]);
      else
        r = msg ? fi_send(ep, "hello", 6, NULL, 0, &ctx[1]) : fi_tsend(ep, "hello", 6, NULL, to, 1, &ctx[1]);
      if (r == -FI_EAGAIN) {
        eagain++;
      } else if (r) {
        die(server ? "receive" : "send", (int)r);
      } else {
        posted = 1;
      }
    }
    ssize_t n = fi_cq_read(cq, &entry, 1);
    if (n == 1) {
      printf("%s: %s\n", role, server ? "received" : "sent");
      rc = 0;
      break;
    }
    if (n == -FI_EAVAIL) {
      print_cq_err(cq);
      rc = 1;
      break;
    }
    if (n != -FI_EAGAIN) die("fi_cq_read", (int)n);
    usleep(1000);
  }
  if (rc == 2) printf("%s: nothing within %.1f s (%ld sends returned -FI_EAGAIN)\n", role, seconds, eagain);
  if (ep) fi_close(&ep->fid);
  if (pep) fi_close(&pep->fid);
  if (av) fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&domain->fid);
  fi_close(&eq->fid);
  fi_close(&fabric->fid);
  fi_freeinfo(info);
  return rc;
}
