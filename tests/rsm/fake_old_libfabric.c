// SPDX-License-Identifier: BSD-3-Clause
/* A stand-in libfabric.so.1 that says it is libfabric 1.5: the RSM face
 * needs the 1.11 API and must refuse it with RSMERR_BAD_LIBRARY_VERSION
 * rather than misbehave. Only the entry points libweft_rsm imports exist. */
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

uint32_t fi_version(void) {
  return FI_VERSION(1, 5);
}
const char* fi_strerror(int errnum) {
  (void)errnum;
  return "unsupported";
}
int fi_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
               const struct fi_info* hints, struct fi_info** info) {
  (void)version, (void)node, (void)service, (void)flags, (void)hints, (void)info;
  return -FI_ENOSYS;
}
void fi_freeinfo(struct fi_info* info) {
  (void)info;
}
struct fi_info* fi_dupinfo(const struct fi_info* info) {
  (void)info;
  return 0;
}
int fi_fabric(struct fi_fabric_attr* attr, struct fid_fabric** fabric, void* context) {
  (void)attr, (void)fabric, (void)context;
  return -FI_ENOSYS;
}
