// prov/tcp: registration and addresses. Its endpoints are not written yet:
// until they are, the provider offers no fi_info (fi_getinfo finds nothing
// for "tcp", fi_info -l does not list it) and its domain opens no endpoint.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "core/provider.hpp"

namespace weft {
namespace {

class tcp_provider final : public provider {
public:
  const char* name() const noexcept override { return "tcp"; }
  uint32_t version() const noexcept override { return FI_VERSION(1, 0); }

  std::unique_ptr<prov_domain> open_domain(domain&) override { return std::make_unique<prov_domain>(); }

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
    void*& slot = source ? info->src_addr : info->dest_addr;
    size_t& slot_len = source ? info->src_addrlen : info->dest_addrlen;
    free(slot);
    slot = addr;
    slot_len = len;
    return 0;
  }

protected:
  info_list build_templates() const override { return {}; }
};

}  // namespace

WEFT_REGISTER_PROVIDER(tcp_provider, 20);

}  // namespace weft
