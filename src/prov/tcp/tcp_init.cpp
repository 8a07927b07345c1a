// prov/tcp: registration and attributes. The data path lands with the tcp
// provider issue; until then fi_endpoint/fi_passive_ep return -FI_ENOSYS.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <climits>
#include <cstring>

#include "core/prov_template.hpp"
#include "core/provider.hpp"
#include "util/object.hpp"

namespace weft {
namespace {

fi_info* make_template(fi_ep_type type, uint32_t addr_format, uint32_t prov_version) {
  fi_info* i = info_alloc();
  if (!i) throw std::bad_alloc();
  constexpr uint64_t caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND |
                            FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV |
                            FI_RMA_EVENT | FI_SOURCE | FI_DIRECTED_RECV | FI_LOCAL_COMM |
                            FI_REMOTE_COMM | FI_FENCE;
  i->caps = caps;
  i->addr_format = addr_format;
  i->tx_attr->caps = caps & tx_cap_mask;
  i->tx_attr->msg_order = FI_ORDER_SAS;
  i->tx_attr->comp_order = FI_ORDER_NONE;
  i->tx_attr->inject_size = 128;
  i->tx_attr->size = 1024;
  i->tx_attr->iov_limit = 4;
  i->tx_attr->rma_iov_limit = 4;
  i->rx_attr->caps = caps & rx_cap_mask;
  i->rx_attr->msg_order = FI_ORDER_SAS;
  i->rx_attr->comp_order = FI_ORDER_NONE;
  i->rx_attr->size = 1024;
  i->rx_attr->iov_limit = 4;
  i->ep_attr->type = type;
  i->ep_attr->protocol = type == FI_EP_MSG ? FI_PROTO_SOCK_TCP : FI_PROTO_XNET;
  i->ep_attr->protocol_version = 1;
  i->ep_attr->max_msg_size = SIZE_MAX;
  i->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
  i->ep_attr->tx_ctx_cnt = 1;
  i->ep_attr->rx_ctx_cnt = 1;
  fi_domain_attr* d = i->domain_attr;
  d->name = strdup("tcp");
  d->threading = FI_THREAD_SAFE;
  d->control_progress = FI_PROGRESS_AUTO;
  d->data_progress = FI_PROGRESS_MANUAL;
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = FI_AV_UNSPEC;
  d->mr_mode = FI_MR_VIRT_ADDR;
  d->mr_key_size = 8;
  d->cq_data_size = 8;
  d->cq_cnt = 1024;
  d->ep_cnt = 1024;
  d->tx_ctx_cnt = 1024;
  d->rx_ctx_cnt = 1024;
  d->max_ep_tx_ctx = 1;
  d->max_ep_rx_ctx = 1;
  d->max_ep_stx_ctx = 1;
  d->max_ep_srx_ctx = 1;
  d->cntr_cnt = 1024;
  d->mr_iov_limit = 4;
  d->max_err_data = 64;
  d->mr_cnt = 65536;
  i->fabric_attr->name = strdup("tcp");
  i->fabric_attr->prov_name = strdup("tcp");
  i->fabric_attr->prov_version = prov_version;
  i->fabric_attr->api_version = FI_VERSION(1, 17);
  if (!d->name || !i->fabric_attr->name || !i->fabric_attr->prov_name) throw std::bad_alloc();
  return i;
}

class tcp_provider_t final : public provider {
public:
  tcp_provider_t() {
    templates_.push_back(make_template(FI_EP_RDM, FI_SOCKADDR_IN, version()));
    templates_.push_back(make_template(FI_EP_MSG, FI_SOCKADDR_IN, version()));
    templates_.push_back(make_template(FI_EP_RDM, FI_SOCKADDR_IN6, version()));
    templates_.push_back(make_template(FI_EP_MSG, FI_SOCKADDR_IN6, version()));
  }

  ~tcp_provider_t() override {
    for (const fi_info* t : templates_) info_free(const_cast<fi_info*>(t));
  }

  const char* name() const noexcept override { return "tcp"; }
  uint32_t version() const noexcept override { return FI_VERSION(1, 0); }
  const std::vector<const fi_info*>& templates() const override { return templates_; }

  // node/service → a sockaddr of the template's family (man fi_getinfo: with
  // FI_SOURCE, or without a node, they name the local address).
  int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const override {
    if (!node && !service) return 0;
    const int family = info->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
    const bool source = (flags & FI_SOURCE) || !node;
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (source ? AI_PASSIVE : 0) |
                     ((flags & FI_NUMERICHOST) ? AI_NUMERICHOST : 0);
    addrinfo* res = nullptr;
    if (getaddrinfo(node, service ? service : "0", &hints, &res) || !res) return -FI_ENODATA;
    size_t len = res->ai_addrlen;
    void* addr = malloc(len);
    if (!addr) {
      freeaddrinfo(res);
      return -FI_ENOMEM;
    }
    memcpy(addr, res->ai_addr, len);
    freeaddrinfo(res);
    if (source) {
      free(info->src_addr);
      info->src_addr = addr;
      info->src_addrlen = len;
    } else {
      free(info->dest_addr);
      info->dest_addr = addr;
      info->dest_addrlen = len;
    }
    return 0;
  }

private:
  std::vector<const fi_info*> templates_;
};

}  // namespace

provider* tcp_provider() {
  static tcp_provider_t p;
  return &p;
}

}  // namespace weft
