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

fi_info* tcp_template(fi_ep_type type, uint32_t addr_format, uint32_t prov_version) {
  return make_template({"tcp", prov_version,
                        FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_RECV |
                            FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_RMA_EVENT | FI_SOURCE |
                            FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_FENCE,
                        addr_format, type,
                        type == FI_EP_MSG ? uint32_t{FI_PROTO_SOCK_TCP} : uint32_t{FI_PROTO_XNET}, 128, 1024,
                        1});
}

class tcp_provider_t final : public provider {
public:
  tcp_provider_t() {
    templates_.push_back(tcp_template(FI_EP_RDM, FI_SOCKADDR_IN, version()));
    templates_.push_back(tcp_template(FI_EP_MSG, FI_SOCKADDR_IN, version()));
    templates_.push_back(tcp_template(FI_EP_RDM, FI_SOCKADDR_IN6, version()));
    templates_.push_back(tcp_template(FI_EP_MSG, FI_SOCKADDR_IN6, version()));
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
    hints.ai_flags =
        AI_NUMERICSERV | (source ? AI_PASSIVE : 0) | ((flags & FI_NUMERICHOST) ? AI_NUMERICHOST : 0);
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
