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
    fi_info* i = info_alloc();
    if (!i) throw std::bad_alloc();
    constexpr uint64_t caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND |
                              FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV |
                              FI_RMA_EVENT | FI_SOURCE | FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_FENCE;
    i->caps = caps;
    i->mode = 0;
    i->addr_format = FI_ADDR_STR;
    i->tx_attr->caps = caps & tx_cap_mask;
    i->tx_attr->msg_order = FI_ORDER_SAS;
    i->tx_attr->comp_order = FI_ORDER_NONE;
    i->tx_attr->inject_size = 4096;
    i->tx_attr->size = 1024;
    i->tx_attr->iov_limit = 4;
    i->tx_attr->rma_iov_limit = 4;
    i->rx_attr->caps = caps & rx_cap_mask;
    i->rx_attr->msg_order = FI_ORDER_SAS;
    i->rx_attr->comp_order = FI_ORDER_NONE;
    i->rx_attr->total_buffered_recv = 0;
    i->rx_attr->size = 1024;
    i->rx_attr->iov_limit = 4;
    i->ep_attr->type = FI_EP_RDM;
    i->ep_attr->protocol = FI_PROTO_SHM;
    i->ep_attr->protocol_version = 1;
    i->ep_attr->max_msg_size = SIZE_MAX;
    i->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
    i->ep_attr->tx_ctx_cnt = 1;
    i->ep_attr->rx_ctx_cnt = 1;
    fi_domain_attr* d = i->domain_attr;
    d->name = strdup("shm");
    d->threading = FI_THREAD_SAFE;
    d->control_progress = FI_PROGRESS_AUTO;
    d->data_progress = FI_PROGRESS_MANUAL;
    d->resource_mgmt = FI_RM_ENABLED;
    d->av_type = FI_AV_UNSPEC;
    d->mr_mode = FI_MR_VIRT_ADDR;
    d->mr_key_size = 8;
    d->cq_data_size = 8;
    d->cq_cnt = 1024;
    d->ep_cnt = 256;
    d->tx_ctx_cnt = 1024;
    d->rx_ctx_cnt = 1024;
    d->max_ep_tx_ctx = 16;
    d->max_ep_rx_ctx = 16;
    d->max_ep_stx_ctx = 16;
    d->max_ep_srx_ctx = 16;
    d->cntr_cnt = 1024;
    d->mr_iov_limit = 4;
    d->max_err_data = 64;
    d->mr_cnt = 65536;
    i->fabric_attr->name = strdup("shm");
    i->fabric_attr->prov_name = strdup("shm");
    i->fabric_attr->prov_version = version();
    i->fabric_attr->api_version = FI_VERSION(1, 17);
    if (!d->name || !i->fabric_attr->name || !i->fabric_attr->prov_name) throw std::bad_alloc();
    templates_.push_back(i);
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
