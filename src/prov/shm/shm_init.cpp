// prov/shm: registration and attributes.
#include <unistd.h>

#include <climits>
#include <cstring>
#include <string>

#include "core/prov_template.hpp"
#include "core/provider.hpp"
#include "prov/shm/shm_ep.hpp"
#include "util/object.hpp"

namespace weft {
namespace {

using shm::shm_prefix;
constexpr size_t shm_addrlen = 64;  // FI_ADDR_STR slot size in AVs

class shm_provider_t final : public provider {
public:
  shm_provider_t() {
    templates_.push_back(
        make_template({"shm", version(),
                       FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_RECV |
                           FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_RMA_EVENT | FI_SOURCE |
                           FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_FENCE,
                       FI_ADDR_STR, FI_EP_RDM, FI_PROTO_SHM, shm::inject_max, 256, 16}));
  }

  ~shm_provider_t() override {
    for (const fi_info* t : templates_) info_free(const_cast<fi_info*>(t));
  }

  const char* name() const noexcept override { return "shm"; }
  uint32_t version() const noexcept override { return FI_VERSION(1, 0); }
  const std::vector<const fi_info*>& templates() const override { return templates_; }

  int endpoint(domain& dom, fi_info* info, fid_ep** ep, void* context) override {
    return shm::endpoint_open(dom, info, ep, context);
  }
  int scalable_ep(domain& dom, fi_info* info, fid_ep** sep, void* context) override {
    return shm::scalable_ep_open(dom, info, sep, context);
  }
  int stx_ctx(domain& dom, fi_tx_attr* attr, fid_stx** stx, void* context) override {
    return shm::stx_open(dom, attr, stx, context);
  }
  int srx_ctx(domain& dom, fi_rx_attr* attr, fid_ep** rx, void* context) override {
    return shm::srx_open(dom, attr, rx, context);
  }
  int query_atomic(domain& dom, fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) override {
    return shm::query_atomic(dom, dt, op, attr, flags);
  }

  // shm addresses are names: "fi_shm://<name>". A node that already has the
  // prefix is taken as is; otherwise node[:service] becomes the name.
  int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const override {
    if (!node && !service) return 0;
    std::string name;
    if (node && !strncmp(node, shm_prefix, strlen(shm_prefix))) {
      name = node;
    } else {
      name = shm_prefix;
      if (node) name += node;
      if (service) {
        if (node) name += ':';
        name += service;
      }
    }
    if (name.size() + 1 > shm_addrlen) return -FI_EINVAL;
    char* addr = strdup(name.c_str());
    if (!addr) return -FI_ENOMEM;
    bool source = (flags & FI_SOURCE) || !node;
    if (source) {
      free(info->src_addr);
      info->src_addr = addr;
      info->src_addrlen = name.size() + 1;
    } else {
      free(info->dest_addr);
      info->dest_addr = addr;
      info->dest_addrlen = name.size() + 1;
    }
    return 0;
  }

private:
  std::vector<const fi_info*> templates_;
};

}  // namespace

provider* shm_provider() {
  static shm_provider_t p;
  return &p;
}

}  // namespace weft
