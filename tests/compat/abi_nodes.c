/* Calls the FABRIC_1.0 … 1.2 versions of fi_getinfo/fi_dupinfo/fi_freeinfo/
 * fi_fabric, as binaries built against libfabric 1.4 … 1.8 do. */
#include <rdma/fabric.h>
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
  return 0;
}
