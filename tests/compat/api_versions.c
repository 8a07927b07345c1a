// SPDX-License-Identifier: BSD-3-Clause
/* Built against Debian's real headers and linked to libfabric.so.1 by SONAME:
 * asks for FI_VERSION(MAJOR, MINOR) from argv and checks the structures it gets.
 * Usage: api_versions MAJOR MINOR */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
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

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  uint32_t version = FI_VERSION(atoi(argv[1]), atoi(argv[2]));
  struct fi_info *hints = fi_allocinfo(), *info = NULL, *i;
  CHECK(hints);
  hints->fabric_attr->prov_name = strdup("shm");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED;
  if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
    hints->domain_attr->mr_mode = FI_MR_BASIC;
    hints->mode = FI_LOCAL_MR | FI_CONTEXT;
  } else {
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  }
  int ret = fi_getinfo(version, NULL, NULL, 0, hints, &info);
  CHECK(ret == 0 && info);
  for (i = info; i; i = i->next) {
    CHECK(i->tx_attr && i->rx_attr && i->ep_attr && i->domain_attr && i->fabric_attr);
    CHECK(strcmp(i->fabric_attr->prov_name, "shm") == 0);
    CHECK(i->fabric_attr->api_version == version);
    CHECK(i->ep_attr->type == FI_EP_RDM);
    CHECK(i->caps & FI_TAGGED);
    if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
      CHECK(i->domain_attr->mr_mode == FI_MR_BASIC);
    else
      CHECK((i->domain_attr->mr_mode & (FI_MR_BASIC | FI_MR_SCALABLE)) == 0);
  }
  struct fid_fabric* fabric;
  struct fid_domain* domain;
  CHECK(fi_fabric(info->fabric_attr, &fabric, NULL) == 0);
  CHECK(fabric->api_version == version);
  CHECK(fi_domain(fabric, info, &domain, NULL) == 0);
  CHECK(fi_close(&domain->fid) == 0);
  CHECK(fi_close(&fabric->fid) == 0);
  struct fi_info* dup = fi_dupinfo(info);
  CHECK(dup && dup != info && strcmp(dup->fabric_attr->prov_name, "shm") == 0);
  fi_freeinfo(dup);
  fi_freeinfo(info);
  fi_freeinfo(hints);
  printf("api %u.%u: OK\n", FI_MAJOR(version), FI_MINOR(version));
  return 0;
}
