#pragma once
// A provider as the core sees it: a name, a version, the fi_info templates it
// can offer, and the hooks the generic objects call into.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <string>
#include <vector>

namespace weft {

struct domain;
struct fabric;

class provider {
public:
  virtual ~provider() = default;
  virtual const char* name() const noexcept = 0;
  virtual uint32_t version() const noexcept = 0;  // prov_version

  // Fully-populated fi_info entries (newest API), best first. Owned by the
  // provider; the core duplicates, filters and adjusts them for each caller.
  virtual const std::vector<const fi_info*>& templates() const = 0;

  // Address format helpers for this provider's addresses.
  // Fill info->src_addr / dest_addr for a candidate from node/service/flags.
  // Returns 0, or -FI_ENODATA when node/service do not name this provider's
  // addresses.
  virtual int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const = 0;

  // Endpoints: -FI_ENOSYS until the provider's data path exists.
  virtual int endpoint(domain&, fi_info*, fid_ep**, void*) { return -FI_ENOSYS; }
  virtual int scalable_ep(domain&, fi_info*, fid_ep**, void*) { return -FI_ENOSYS; }
  virtual int passive_ep(fabric&, fi_info*, fid_pep**, void*) { return -FI_ENOSYS; }
  virtual int stx_ctx(domain&, fi_tx_attr*, fid_stx**, void*) { return -FI_ENOSYS; }
  virtual int srx_ctx(domain&, fi_rx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
  virtual int query_atomic(domain&, fi_datatype, fi_op, fi_atomic_attr*, uint64_t) { return -FI_ENOSYS; }
};

// All registered providers, in preference order.
const std::vector<provider*>& providers();
provider* find_provider(const char* name);

provider* shm_provider();
provider* tcp_provider();

}  // namespace weft
