// SPDX-License-Identifier: BSD-3-Clause
/* One program, compiled twice: against Debian 12's libfabric 1.17 headers
 * (abi_pair, binding fi_getinfo@FABRIC_1.3) and against Debian 13's 2.x
 * headers (abi_pair_v2, linked to 2.x's libfabric.so.1: fi_getinfo@FABRIC_1.8,
 * fi_fabric2). Each asks for the API of its headers, checks the structures
 * it gets in its own layout, and the two exchange tagged messages over one
 * libfabric.so.1 (weft's), data checked both ways.
 *   abi_pair PROV server FILE [N] | abi_pair PROV client FILE [N]
 * The server writes its address to FILE; the client reads it, sends its own
 * address (tag 1), then N messages of growing sizes (tag 2, received by the
 * server with a receive directed at the client), each echoed back
 * transformed (tag 3), and a last word (tag 4). */
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

#define CHECK(c)                                                                          \
  do {                                                                                    \
    if (!(c)) {                                                                           \
      fprintf(stderr, "FAIL %s (api %d.%d) %s:%d: %s\n", role, FI_MAJOR_VERSION,          \
              FI_MINOR_VERSION, __FILE__, __LINE__, #c);                                  \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)
#define CALL(c)                                                                          \
  do {                                                                                   \
    int ret_ = (int)(c);                                                                 \
    if (ret_) {                                                                          \
      fprintf(stderr, "FAIL %s (api %d.%d) %s:%d: %s = %d (%s)\n", role, FI_MAJOR_VERSION, \
              FI_MINOR_VERSION, __FILE__, __LINE__, #c, ret_, fi_strerror(-ret_));       \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

static const char* role = "?";
static struct fid_cq* cq;
static struct fid_ep* ep;

/* One completion, within 20 s. */
static void wait_cq(struct fi_cq_tagged_entry* e) {
  time_t end = time(NULL) + 20;
  for (;;) {
    ssize_t n = fi_cq_read(cq, e, 1);
    if (n == 1) return;
    if (n == -FI_EAVAIL) {
      struct fi_cq_err_entry err;
      memset(&err, 0, sizeof err);
      fi_cq_readerr(cq, &err, 0);
      fprintf(stderr, "FAIL %s: completion error %d (%s)\n", role, err.err, fi_strerror(err.err));
      exit(1);
    }
    CHECK(n == -FI_EAGAIN);
    CHECK(time(NULL) < end);
  }
}

static void post_send(const void* buf, size_t len, fi_addr_t to, uint64_t tag) {
  ssize_t r;
  while ((r = fi_tsend(ep, buf, len, NULL, to, tag, NULL)) == -FI_EAGAIN) {
    struct fi_cq_tagged_entry e;
    if (fi_cq_read(cq, &e, 1) == 1) CHECK(0); /* nothing else is outstanding */
  }
  CALL(r);
}

static unsigned char pattern(size_t i, size_t k, int echo) {
  return (unsigned char)(i * 31 + k * 7 + (echo ? 101 : 3));
}

/* What each build's own headers let it see of the fi_info it got. */
static void check_info(const struct fi_info* i, uint32_t version, const char* prov) {
  CHECK(i && i->fabric_attr && i->domain_attr && i->ep_attr && i->tx_attr && i->rx_attr);
  CHECK(i->fabric_attr->api_version == version);
  CHECK(strcmp(i->fabric_attr->prov_name, prov) == 0);
  CHECK(i->ep_attr->type == FI_EP_RDM);
  CHECK((i->caps & (FI_TAGGED | FI_DIRECTED_RECV)) == (FI_TAGGED | FI_DIRECTED_RECV));
  CHECK((i->domain_attr->mr_mode & 3) == 0); /* never FI_MR_BASIC/FI_MR_SCALABLE at API >= 1.5 */
#if FI_MAJOR_VERSION >= 2
  /* 2.x: the tagged-only directed receive asked for, the attributes ABI 1.7
   * and 1.8 appended, one progress model, no deprecated order bits. */
  CHECK(i->caps & FI_TAGGED_DIRECTED_RECV);
  CHECK(i->rx_attr->caps & FI_TAGGED_DIRECTED_RECV);
  CHECK(i->domain_attr->max_group_id == 0);
  CHECK(i->domain_attr->max_ep_auth_key == (strcmp(prov, "tcp") == 0 ? 1u : 0u));
  CHECK(i->domain_attr->progress == FI_PROGRESS_MANUAL);
  CHECK(i->tx_attr->comp_order == 0 && i->rx_attr->comp_order == 0);
#else
  CHECK(i->domain_attr->data_progress == FI_PROGRESS_MANUAL);
#endif
}

/* What the API of each build refuses or takes. */
static void check_versioned_refusals(uint32_t version, const char* prov) {
  struct fi_info *h = fi_allocinfo(), *i = NULL;
  CHECK(h);
  h->fabric_attr->prov_name = strdup(prov);
  h->ep_attr->type = FI_EP_RDM;
#if FI_MAJOR_VERSION >= 2
  /* FI_MR_BASIC is gone from 2.x; a group id asked for is not offered. */
  h->domain_attr->mr_mode = 1 << 0;
  CHECK(fi_getinfo(version, NULL, NULL, 0, h, &i) == -FI_ENODATA && !i);
  h->domain_attr->mr_mode = 0;
  h->domain_attr->max_group_id = 1;
  CHECK(fi_getinfo(version, NULL, NULL, 0, h, &i) == -FI_ENODATA && !i);
  h->domain_attr->max_group_id = 0;
  h->domain_attr->progress = FI_PROGRESS_CONTROL_UNIFIED;
  CALL(fi_getinfo(version, NULL, NULL, 0, h, &i));
  CHECK(i->domain_attr->progress == FI_PROGRESS_CONTROL_UNIFIED);
  fi_freeinfo(i);
  i = NULL;
  h->domain_attr->progress = FI_PROGRESS_UNSPEC;
  h->caps = FI_TAGGED | FI_TAGGED_MULTI_RECV; /* a tagged receive takes no FI_MULTI_RECV */
  CHECK(fi_getinfo(version, NULL, NULL, 0, h, &i) == -FI_ENODATA && !i);
#else
  /* 1.x keeps FI_MR_BASIC (three mode bits) and answers with it. */
  h->domain_attr->mr_mode = FI_MR_BASIC;
  CALL(fi_getinfo(version, NULL, NULL, 0, h, &i));
  CHECK(i->domain_attr->mr_mode == FI_MR_BASIC);
  fi_freeinfo(i);
#endif
  fi_freeinfo(h);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PROV server|client FILE [N]\n", argv[0]);
    return 2;
  }
  const char* prov = argv[1];
  role = argv[2];
  const char* file = argv[3];
  const int n = argc > 4 ? atoi(argv[4]) : 20;
  const int server = strcmp(role, "server") == 0;
  const uint32_t version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

  check_versioned_refusals(version, prov);

  struct fi_info *hints = fi_allocinfo(), *info = NULL;
  CHECK(hints);
  hints->fabric_attr->prov_name = strdup(prov);
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_DIRECTED_RECV;
#if FI_MAJOR_VERSION >= 2
  hints->caps |= FI_TAGGED_DIRECTED_RECV;
#endif
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  CALL(fi_getinfo(version, NULL, NULL, 0, hints, &info));
  check_info(info, version, prov);
  struct fi_info* dup = fi_dupinfo(info);
  CHECK(dup && strcmp(dup->fabric_attr->prov_name, prov) == 0);
#if FI_MAJOR_VERSION >= 2
  CHECK(dup->domain_attr->max_ep_auth_key == info->domain_attr->max_ep_auth_key);
#endif
  fi_freeinfo(dup);

  struct fid_fabric* fabric;
  struct fid_domain* domain;
  struct fid_av* av;
#if FI_MAJOR_VERSION >= 2
  CHECK(fi_fabric2(info, &fabric, 1, NULL) == -FI_EINVAL); /* no flags are defined */
  CALL(fi_fabric2(info, &fabric, 0, NULL));
#else
  CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
#endif
  CHECK(fabric->api_version == version);
  CALL(fi_domain(fabric, info, &domain, NULL));
  struct fi_av_attr av_attr;
  memset(&av_attr, 0, sizeof av_attr);
  av_attr.type = FI_AV_TABLE;
  CALL(fi_av_open(domain, &av_attr, &av, NULL));
  struct fi_cq_attr cq_attr;
  memset(&cq_attr, 0, sizeof cq_attr);
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  CALL(fi_cq_open(domain, &cq_attr, &cq, NULL));
  CALL(fi_endpoint(domain, info, &ep, NULL));
  CALL(fi_ep_bind(ep, &av->fid, 0));
  CALL(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
  CALL(fi_enable(ep));
  char name[256];
  size_t namelen = sizeof name;
  CALL(fi_getname(&ep->fid, name, &namelen));

  enum { max_size = 65536 };
  static unsigned char buf[max_size], peer_name[256];
  struct fi_cq_tagged_entry e;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  if (server) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE* f = fopen(tmp, "wb");
    CHECK(f && fwrite(name, 1, namelen, f) == namelen && fclose(f) == 0);
    CHECK(rename(tmp, file) == 0);
    CALL(fi_trecv(ep, peer_name, sizeof peer_name, NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
    wait_cq(&e);
    CHECK(e.tag == 1 && e.len > 0);
    CHECK(fi_av_insert(av, peer_name, 1, &peer, 0, NULL) == 1);
  } else {
    size_t got = 0;
    time_t end = time(NULL) + 20;
    for (;;) {
      FILE* f = fopen(file, "rb");
      if (f) {
        got = fread(peer_name, 1, sizeof peer_name, f);
        fclose(f);
        break;
      }
      CHECK(time(NULL) < end);
      usleep(10000);
    }
    CHECK(got > 0);
    CHECK(fi_av_insert(av, peer_name, 1, &peer, 0, NULL) == 1);
    post_send(name, namelen, peer, 1);
    wait_cq(&e);
  }

  for (int k = 0; k < n; ++k) {
    const size_t len = (size_t)1 << (k % 17); /* 1 B ... 64 KiB */
    if (server) {
      /* A receive directed at the client, tag 2. */
      CALL(fi_trecv(ep, buf, max_size, NULL, peer, 2, 0, NULL));
      wait_cq(&e);
      CHECK(e.tag == 2 && e.len == len);
      for (size_t i = 0; i < len; ++i) CHECK(buf[i] == pattern(i, (size_t)k, 0));
      for (size_t i = 0; i < len; ++i) buf[i] = pattern(i, (size_t)k, 1);
      post_send(buf, len, peer, 3);
      wait_cq(&e);
    } else {
      for (size_t i = 0; i < len; ++i) buf[i] = pattern(i, (size_t)k, 0);
      post_send(buf, len, peer, 2);
      wait_cq(&e);
      memset(buf, 0, len);
      CALL(fi_trecv(ep, buf, max_size, NULL, peer, 3, 0, NULL));
      wait_cq(&e);
      CHECK(e.tag == 3 && e.len == len);
      for (size_t i = 0; i < len; ++i) CHECK(buf[i] == pattern(i, (size_t)k, 1));
    }
  }

  /* The client's last word: the server closes only once it has it. */
  if (server) {
    CALL(fi_trecv(ep, buf, max_size, NULL, peer, 4, 0, NULL));
    wait_cq(&e);
    CHECK(e.tag == 4);
  } else {
    post_send(buf, 1, peer, 4);
    wait_cq(&e);
  }

  CALL(fi_close(&ep->fid));
  CALL(fi_close(&cq->fid));
  CALL(fi_close(&av->fid));
  CALL(fi_close(&domain->fid));
  CALL(fi_close(&fabric->fid));
  fi_freeinfo(info);
  fi_freeinfo(hints);
  printf("%s %s (api %d.%d): %d messages OK\n", prov, role, FI_MAJOR_VERSION, FI_MINOR_VERSION, n);
  return 0;
}
