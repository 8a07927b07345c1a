// SPDX-License-Identifier: BSD-3-Clause
// prov/udp: registration, parameters, attributes and addresses.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "core/params.hpp"
#include "core/prov_template.hpp"
#include "core/provider.hpp"
#include "prov/udp/udp.hpp"

namespace weft::udp {

config read_config() noexcept {
  config c;
  c.mtu = static_cast<size_t>(param_int_or_default("udp", "mtu"));
  c.max_msg = max_msg_for(c.mtu);
  return c;
}

int addr_from(const void* p, size_t len, sockaddr_in& out) noexcept {
  if (!p || len != sizeof(sockaddr_in)) return -FI_EINVAL;
  sockaddr_in a;
  memcpy(&a, p, sizeof a);
  if (a.sin_family != AF_INET) return -FI_EINVAL;
  out = sockaddr_in{};  // sin_zero cleared: addresses compare as bytes in the AV
  out.sin_family = AF_INET;
  out.sin_port = a.sin_port;
  out.sin_addr = a.sin_addr;
  return 0;
}

std::string addr_str(const sockaddr_in& a) {
  char host[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(ntohs(a.sin_port));
}

namespace {

sockaddr_in ipv4(in_addr_t host_order) noexcept {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(host_order);
  return a;
}

// The source address the kernel picks toward `to` (connecting a UDP socket
// sends nothing).
bool route_source(const sockaddr_in& to, sockaddr_in& out) noexcept {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in dst = to;
  if (!dst.sin_port) dst.sin_port = htons(9);
  socklen_t len = sizeof out;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&dst), sizeof dst) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&out), &len) == 0 && out.sin_family == AF_INET;
  ::close(fd);
  return ok;
}

// The IPv4 address of interface `name`.
bool iface_addr(const char* name, sockaddr_in& out) noexcept {
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, name)) continue;
    memcpy(&out, i->ifa_addr, sizeof out);
    found = true;
  }
  freeifaddrs(ifs);
  return found;
}

}  // namespace

sockaddr_in default_addr(const sockaddr_in* to) noexcept {
  sockaddr_in a{};
  const char* iface = param_raw("udp", "iface");
  if (!(to && route_source(*to, a)) && !(iface && *iface && iface_addr(iface, a))) {
    if (iface && *iface) {
      try {
        param_report("udp", "iface", iface, std::string("no interface '") + iface + "' has an IPv4 address",
                     "endpoints take loopback's address (the default)");
      } catch (...) {
      }
    }
    a = ipv4(INADDR_LOOPBACK);  // reachable on this host only: no traffic leaves it unasked
  }
  sockaddr_in out;
  addr_from(&a, sizeof a, out);
  out.sin_port = 0;
  return out;
}

namespace {

void set_addr(fi_info* info, bool source, const sockaddr_in& a) {
  void*& slot = source ? info->src_addr : info->dest_addr;
  size_t& len = source ? info->src_addrlen : info->dest_addrlen;
  void* copy = malloc(sizeof a);
  if (!copy) throw std::bad_alloc();
  memcpy(copy, &a, sizeof a);
  free(slot);
  slot = copy;
  len = sizeof a;
}

constexpr provider::param udp_params[] = {
    {.name = "iface",
     .type = FI_PARAM_STRING,
     .help = "Interface whose address an endpoint takes when no address is given and no peer is named",
     .dflt = "loopback",
     .accepts = "an interface with an IPv4 address"},
    {.name = "mtu",
     .type = FI_PARAM_SIZE_T,
     .help =
         "MTU of the paths datagrams take: max_msg_size is this less 52 bytes (IPv4, UDP and weft headers)",
     .def = default_mtu,
     .min = min_mtu,
     .max = max_mtu},
};

class udp_provider final : public provider {
public:
  const char* name() const noexcept override { return "udp"; }
  uint32_t version() const noexcept override { return FI_VERSION(1, 0); }
  std::span<const param> params() const noexcept override { return udp_params; }
  std::unique_ptr<prov_domain> open_domain(domain& d) override { return std::make_unique<domain_part>(d); }

  // node/service -> a sockaddr_in (man fi_getinfo: with FI_SOURCE, or
  // without a node, they name the local address; a service alone is the
  // wildcard address). The source address is always filled: without one
  // given, the address toward the destination, else FI_UDP_IFACE's, else
  // loopback, port 0.
  int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const override {
    return guard([&]() -> int {
      sockaddr_in given;
      if ((info->src_addr && addr_from(info->src_addr, info->src_addrlen, given)) ||
          (info->dest_addr && addr_from(info->dest_addr, info->dest_addrlen, given)))
        return -FI_ENODATA;  // hints with an address of another format
      const bool source = (flags & FI_SOURCE) || !node;
      if (node || service) {
        addrinfo hints{};
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_DGRAM;
        hints.ai_flags =
            AI_NUMERICSERV | (source ? AI_PASSIVE : 0) | ((flags & FI_NUMERICHOST) ? AI_NUMERICHOST : 0);
        addrinfo* res = nullptr;
        if (getaddrinfo(node, service ? service : "0", &hints, &res) || !res) return -FI_ENODATA;
        sockaddr_in a;
        const int bad = addr_from(res->ai_addr, res->ai_addrlen, a);
        freeaddrinfo(res);
        if (bad) return -FI_ENODATA;
        set_addr(info, source, a);
        if (!source && !info->src_addr) set_addr(info, true, default_addr(&a));
        return 0;
      }
      if (!info->src_addr) {
        sockaddr_in to;
        const bool toward = info->dest_addr && addr_from(info->dest_addr, info->dest_addrlen, to) == 0;
        set_addr(info, true, default_addr(toward ? &to : nullptr));
      }
      return 0;
    });
  }

protected:
  info_list build_templates() const override {
    const config cfg = read_config();
    constexpr uint64_t caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTICAST | FI_MULTI_RECV | FI_SOURCE |
                              FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM;
    fi_info* i = make_template(
        {"udp", version(), caps, FI_SOCKADDR_IN, FI_EP_DGRAM, FI_PROTO_UDP, cfg.max_msg, 256, 1});
    i->ep_attr->max_msg_size = cfg.max_msg;
    // Datagrams may overtake each other on a network; completions are
    // written in the order operations complete.
    i->tx_attr->msg_order = FI_ORDER_NONE;
    i->rx_attr->msg_order = FI_ORDER_NONE;
    i->tx_attr->rma_iov_limit = 0;
    i->domain_attr->max_ep_stx_ctx = 0;
    i->domain_attr->max_ep_srx_ctx = 0;
    info_list list;
    list.emplace_back(i);
    return list;
  }
};

}  // namespace
}  // namespace weft::udp

namespace weft {
using udp_provider = udp::udp_provider;
WEFT_REGISTER_PROVIDER(udp_provider, 30);
}  // namespace weft
