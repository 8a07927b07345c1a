// prov/tcp: registration, attributes and addresses.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "core/params.hpp"
#include "core/prov_template.hpp"
#include "core/provider.hpp"
#include "prov/tcp/tcp.hpp"

namespace weft::tcp {

int default_src(const sock_addr* toward, int family, sock_addr& out) noexcept {
  // Toward a destination: the local address the kernel would route from (a
  // UDP socket's connect sends nothing).
  if (toward && toward->family() == family) {
    int fd = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      sock_addr to = *toward;
      if (!to.port()) to.set_port(9);
      int ok = ::connect(fd, to.sa(), to.len) == 0 && sock_local(fd, out) == 0;
      ::close(fd);
      if (ok) {
        out.set_port(0);
        return 0;
      }
    }
  }
  // Else the interface FI_TCP_IFACE names, else loopback: an endpoint with
  // no address given and no peer named is reachable on this host only.
  const char* iface = param_raw("tcp", "iface");
  ifaddrs* ifs = nullptr;
  if (iface && *iface && getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != family || strcmp(i->ifa_name, iface)) continue;
      if (family == AF_INET6 &&
          IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr))
        continue;
      int ret = sock_addr::from(i->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6), out);
      freeifaddrs(ifs);
      if (ret == 0) out.set_port(0);
      return ret;
    }
    freeifaddrs(ifs);
  }
  return sock_addr::parse(family == AF_INET ? "127.0.0.1" : "::1", 0, out);
}

void apply_params(conn_config& cfg) {
  cfg.user_timeout_ms = static_cast<int>(param_int("tcp", "user_timeout_ms").value_or(10000));
  cfg.keepalive_s = static_cast<int>(param_int("tcp", "keepalive_s").value_or(10));
}

namespace {

fi_info* tcp_template(fi_ep_type type, uint32_t addr_format, uint32_t prov_version) {
  uint64_t caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_RECV |
                  FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_RMA_EVENT | FI_LOCAL_COMM |
                  FI_REMOTE_COMM | FI_FENCE;
  if (type == FI_EP_RDM) caps |= FI_SOURCE | FI_DIRECTED_RECV;
  fi_info* i = make_template({"tcp", prov_version, caps, addr_format, type,
                              type == FI_EP_MSG ? uint32_t{FI_PROTO_SOCK_TCP} : uint32_t{FI_PROTO_XNET},
                              inject_max, 1024, 1});
  // Shared contexts come from the endpoint core; scalable endpoints are shm's only.
  i->domain_attr->max_ep_stx_ctx = 16;
  i->domain_attr->max_ep_srx_ctx = 16;
  return i;
}

void set_addr(fi_info* info, bool source, const sock_addr& a) {
  void*& slot = source ? info->src_addr : info->dest_addr;
  size_t& len = source ? info->src_addrlen : info->dest_addrlen;
  void* copy = malloc(a.len);
  if (!copy) throw std::bad_alloc();
  memcpy(copy, &a.ss, a.len);
  free(slot);
  slot = copy;
  len = a.len;
}

constexpr provider::param tcp_params[] = {
    {"iface", FI_PARAM_STRING,
     "Interface whose address an endpoint takes when no address is given and no peer is named "
     "(default: loopback)"},
    {"user_timeout_ms", FI_PARAM_INT,
     "Data a peer has not acknowledged for this long fails its connection and its operations (default 10000; "
     "0: the kernel's)"},
    {"keepalive_s", FI_PARAM_INT, "Idle seconds before a connection's peer is probed (default 10; 0: off)"},
};

class tcp_provider final : public provider {
public:
  std::span<const param> params() const noexcept override { return tcp_params; }
  const char* name() const noexcept override { return "tcp"; }
  uint32_t version() const noexcept override { return FI_VERSION(1, 0); }
  size_t auth_key_max() const noexcept override { return weft::tcp::auth_key_max; }

  std::unique_ptr<prov_domain> open_domain(domain& d) override { return std::make_unique<tcp_domain>(d); }
  int passive_ep(fabric& fab, fi_info* info, fid_pep** pep, void* context) override {
    return passive_ep_open(fab, info, pep, context);
  }

  // node/service -> a sockaddr of the template's family (man fi_getinfo:
  // with FI_SOURCE, or without a node, they name the local address; a
  // service alone is the wildcard address, as getaddrinfo's AI_PASSIVE
  // says: a passive endpoint then listens on every interface). The source
  // address is always filled: without one given, the local address toward
  // the destination, else FI_TCP_IFACE's address, else loopback; port 0.
  int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const override {
    return guard([&]() -> int {
      const int family = info->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
      const bool source = (flags & FI_SOURCE) || !node;
      if (node || service) {
        addrinfo hints{};
        hints.ai_family = family;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags =
            AI_NUMERICSERV | (source ? AI_PASSIVE : 0) | ((flags & FI_NUMERICHOST) ? AI_NUMERICHOST : 0);
        addrinfo* res = nullptr;
        if (getaddrinfo(node, service ? service : "0", &hints, &res) || !res) return -FI_ENODATA;
        sock_addr a;
        int ret = sock_addr::from(res->ai_addr, res->ai_addrlen, a);
        freeaddrinfo(res);
        if (ret) return -FI_ENODATA;
        set_addr(info, source, a);
        if (!source && !info->src_addr) {
          sock_addr local;
          if (default_src(&a, family, local) == 0) set_addr(info, true, local);
        }
        return 0;
      }
      if (!info->src_addr) {
        sock_addr local;
        if (default_src(nullptr, family, local) == 0) set_addr(info, true, local);
      }
      return 0;
    });
  }

protected:
  info_list build_templates() const override {
    info_list list;
    for (uint32_t fmt : {uint32_t{FI_SOCKADDR_IN}, uint32_t{FI_SOCKADDR_IN6}})
      for (fi_ep_type type : {FI_EP_RDM, FI_EP_MSG}) list.emplace_back(tcp_template(type, fmt, version()));
    return list;
  }
};

}  // namespace
}  // namespace weft::tcp

namespace weft {
using tcp_provider = tcp::tcp_provider;
WEFT_REGISTER_PROVIDER(tcp_provider, 20);
}  // namespace weft
