// SPDX-License-Identifier: BSD-3-Clause
/* Calls the FABRIC_1.0 … 1.2 versions of fi_getinfo/fi_dupinfo/fi_freeinfo/
 * fi_fabric, as binaries built against libfabric 1.4 … 1.8 do, and the
 * FABRIC_1.3, 1.7, 1.8 and 1.9 ones (libfabric 1.9, 1.20, 2.0, 2.6) with
 * domain attributes of exactly their size (found with dlvsym: Debian 12's
 * library, which this program links, has no such nodes). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                   \
  do {                                                             \
    if (!(c)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
      return 1;                                                    \
    }                                                              \
  } while (0)

/* ABI 1.0's fi_fabric_attr: no api_version. */
struct fabric_attr_1_0 {
  void* fabric;
  char* name;
  char* prov_name;
  uint32_t prov_version;
};

int getinfo_1_0(uint32_t, const char*, const char*, uint64_t, const void*, struct fi_info**);
void freeinfo_1_0(void*);
struct fi_info* dupinfo_1_0(const void*);
int fabric_1_0(struct fabric_attr_1_0*, struct fid_fabric**, void*);
int getinfo_1_2(uint32_t, const char*, const char*, uint64_t, const void*, struct fi_info**);
__asm__(".symver getinfo_1_0,fi_getinfo@FABRIC_1.0");
__asm__(".symver freeinfo_1_0,fi_freeinfo@FABRIC_1.0");
__asm__(".symver dupinfo_1_0,fi_dupinfo@FABRIC_1.0");
__asm__(".symver fabric_1_0,fi_fabric@FABRIC_1.0");
__asm__(".symver getinfo_1_2,fi_getinfo@FABRIC_1.2");

/* What ABI 1.7, 1.8 and 1.9 appended to fi_domain_attr, after the 1.3 one
 * (Debian 12's headers). */
struct tail {
  size_t max_ep_auth_key;
  uint32_t max_group_id;
  uint64_t max_cntr_value;
  uint64_t max_err_cntr_value;
};
#define TAIL(d) ((struct tail*)((char*)(d) + sizeof(struct fi_domain_attr)))
static const size_t size_1_7 = sizeof(struct fi_domain_attr) + offsetof(struct tail, max_group_id);
static const size_t size_1_8 = sizeof(struct fi_domain_attr) + offsetof(struct tail, max_cntr_value);
static const size_t size_1_9 = sizeof(struct fi_domain_attr) + sizeof(struct tail);

typedef int getinfo_fn(uint32_t, const char*, const char*, uint64_t, const struct fi_info*, struct fi_info**);
typedef struct fi_info* dupinfo_fn(const struct fi_info*);
typedef void freeinfo_fn(struct fi_info*);
typedef int fabric2_fn(struct fi_info*, struct fid_fabric**, uint64_t, void*);

static void* node_fn(const char* name, const char* node) {
  void* f = dlvsym(RTLD_DEFAULT, name, node);
  if (!f) fprintf(stderr, "FAIL: no %s@%s\n", name, node);
  return f;
}

/* Hints for `prov` whose domain attributes are a separate allocation of
 * exactly `size` bytes (a reading past them is a heap overflow under ASan). */
static struct fi_info* hints_of_size(const char* prov, size_t size) {
  struct fi_info* h = fi_allocinfo();
  if (!h) return NULL;
  free(h->domain_attr);
  h->domain_attr = calloc(1, size);
  h->fabric_attr->prov_name = strdup(prov);
  return h;
}

static int new_nodes(void) {
  getinfo_fn* gi13 = node_fn("fi_getinfo", "FABRIC_1.3");
  getinfo_fn* gi17 = node_fn("fi_getinfo", "FABRIC_1.7");
  getinfo_fn* gi18 = node_fn("fi_getinfo", "FABRIC_1.8");
  getinfo_fn* gi19 = node_fn("fi_getinfo", "FABRIC_1.9");
  dupinfo_fn* dup17 = node_fn("fi_dupinfo", "FABRIC_1.7");
  freeinfo_fn* free19 = node_fn("fi_freeinfo", "FABRIC_1.9");
  fabric2_fn* fabric2 = node_fn("fi_fabric2", "FABRIC_1.8");
  CHECK(gi13 && gi17 && gi18 && gi19 && dup17 && free19 && fabric2);
  CHECK(fi_version() == FI_VERSION(2, 6));
  struct fi_info *h, *info = NULL;

  /* FABRIC_1.3 asked for API 2.1: the hints end with the 1.3 layout. */
  CHECK((h = hints_of_size("shm", sizeof(struct fi_domain_attr))));
  CHECK(gi13(FI_VERSION(2, 1), NULL, NULL, 0, h, &info) == 0 && info);
  CHECK(info->fabric_attr->api_version == FI_VERSION(2, 1));
  CHECK(TAIL(info->domain_attr)->max_cntr_value == UINT64_MAX); /* results are the newest layout */
  free19(info), info = NULL;
  fi_freeinfo(h);

  /* FABRIC_1.7 (1.20): max_ep_auth_key; shm has no authorization keys. */
  CHECK((h = hints_of_size("shm", size_1_7)));
  TAIL(h->domain_attr)->max_ep_auth_key = 1;
  CHECK(gi17(FI_VERSION(1, 20), NULL, NULL, 0, h, &info) == -FI_ENODATA && !info);
  TAIL(h->domain_attr)->max_ep_auth_key = 0;
  CHECK(gi17(FI_VERSION(1, 20), NULL, NULL, 0, h, &info) == 0 && info);
  CHECK(TAIL(info->domain_attr)->max_ep_auth_key == 0 && TAIL(info->domain_attr)->max_group_id == 0);
  struct fi_info* d = dup17(h);
  CHECK(d && d->domain_attr != h->domain_attr && strcmp(d->fabric_attr->prov_name, "shm") == 0);
  CHECK(TAIL(d->domain_attr)->max_cntr_value == 0); /* beyond the 1.7 layout: zero */
  free19(d);
  free19(info), info = NULL;
  /* A key kept in the AV (FI_AV_AUTH_KEY) is not offered. */
  h->domain_attr->auth_key_size = SIZE_MAX;
  CHECK(gi17(FI_VERSION(1, 20), NULL, NULL, 0, h, &info) == -FI_ENODATA && !info);
  fi_freeinfo(h);
  /* tcp presents one key per endpoint. */
  CHECK((h = hints_of_size("tcp", size_1_7)));
  TAIL(h->domain_attr)->max_ep_auth_key = 1;
  CHECK(gi17(FI_VERSION(1, 20), NULL, NULL, 0, h, &info) == 0 && info);
  CHECK(TAIL(info->domain_attr)->max_ep_auth_key == 1);
  free19(info), info = NULL;
  fi_freeinfo(h);

  /* FABRIC_1.8 (2.0): max_group_id; no peer groups. */
  CHECK((h = hints_of_size("shm", size_1_8)));
  TAIL(h->domain_attr)->max_group_id = 1;
  CHECK(gi18(FI_VERSION(2, 0), NULL, NULL, 0, h, &info) == -FI_ENODATA && !info);
  TAIL(h->domain_attr)->max_group_id = 0;
  CHECK(gi18(FI_VERSION(2, 0), NULL, NULL, 0, h, &info) == 0 && info);
  CHECK(fabric2(info, NULL, 1, NULL) == -FI_EINVAL && fabric2(NULL, NULL, 0, NULL) == -FI_EINVAL);
  struct fid_fabric* fab = NULL;
  CHECK(fabric2(info, &fab, 0, NULL) == 0 && fab && fab->api_version == FI_VERSION(2, 0));
  CHECK(fi_close(&fab->fid) == 0);
  free19(info), info = NULL;
  fi_freeinfo(h);

  /* FABRIC_1.9 (2.6): the counters' full range. */
  CHECK((h = hints_of_size("shm", size_1_9)));
  TAIL(h->domain_attr)->max_cntr_value = UINT64_MAX;
  TAIL(h->domain_attr)->max_err_cntr_value = UINT64_MAX;
  CHECK(gi19(FI_VERSION(2, 6), NULL, NULL, 0, h, &info) == 0 && info);
  CHECK(TAIL(info->domain_attr)->max_cntr_value == UINT64_MAX);
  CHECK(TAIL(info->domain_attr)->max_err_cntr_value == UINT64_MAX);
  free19(info), info = NULL;
  /* Versions: 1.x of any minor and 2.0 ... 2.6; none newer. */
  CHECK(gi19(FI_VERSION(1, 22), NULL, NULL, 0, h, &info) == 0 && info);
  free19(info), info = NULL;
  CHECK(gi19(FI_VERSION(2, 7), NULL, NULL, 0, h, &info) == -FI_ENOSYS && !info);
  CHECK(gi19(FI_VERSION(3, 0), NULL, NULL, 0, h, &info) == -FI_ENOSYS && !info);
  fi_freeinfo(h);
  puts("ABI nodes FABRIC_1.3/1.7/1.8/1.9: OK");
  return 0;
}

int main(void) {
  /* Hints in the 1.0 layout: only the prefix of each struct is valid. */
  struct fi_info *hints = dupinfo_1_0(NULL), *info = NULL;
  CHECK(hints && hints->fabric_attr && hints->domain_attr);
  hints->fabric_attr->prov_name = strdup("shm");
  hints->domain_attr->mr_mode = FI_MR_SCALABLE;
  CHECK(getinfo_1_0(FI_VERSION(1, 0), "127.0.0.1", "7000", 0, hints, &info) == 0);
  CHECK(info && strcmp(info->fabric_attr->prov_name, "shm") == 0);
  CHECK(info->domain_attr->mr_mode == FI_MR_SCALABLE);
  CHECK(info->dest_addr && info->addr_format == FI_ADDR_STR);
  CHECK(strcmp((const char*)info->dest_addr, "fi_shm://127.0.0.1:7000") == 0);
  struct fabric_attr_1_0 fa = {NULL, info->fabric_attr->name, info->fabric_attr->prov_name, 0};
  struct fid_fabric* fabric = NULL;
  CHECK(fabric_1_0(&fa, &fabric, NULL) == 0 && fabric);
  CHECK(fabric->api_version == FI_VERSION(1, 0));
  CHECK(fi_close(&fabric->fid) == 0);
  struct fi_info* dup = dupinfo_1_0(info);
  CHECK(dup && strcmp(dup->fabric_attr->prov_name, "shm") == 0);
  freeinfo_1_0(dup);
  freeinfo_1_0(info);
  freeinfo_1_0(hints);
  info = NULL;
  CHECK(getinfo_1_2(FI_VERSION(1, 8), NULL, NULL, 0, NULL, &info) == 0 && info);
  fi_freeinfo(info);
  puts("ABI nodes FABRIC_1.0/1.2: OK");
  return new_nodes();
}
