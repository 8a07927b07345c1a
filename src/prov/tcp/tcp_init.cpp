// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: registration, attributes and addresses.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "core/params.hpp"
#include "core/prov_template.hpp"
#include "core/provider.hpp"
#include "prov/tcp/tcp.hpp"

namespace weft::tcp {

std::vector<iface> interfaces(int family) {
  std::vector<iface> out, loop;
  const char* only = param_raw("tcp", "iface");
  if (only && !*only) only = nullptr;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != family || !(i->ifa_flags & IFF_UP)) continue;
      if (only && strcmp(i->ifa_name, only)) continue;
      if (family == AF_INET6 &&
          IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr))
        continue;
      iface f;
      f.name = i->ifa_name;
      if (sock_addr::from(i->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6), f.addr))
        continue;
      f.addr.set_port(0);
      bool dup = false;  // one entry per interface: its first address
      for (const iface& o : out) dup |= o.name == f.name;
      for (const iface& o : loop) dup |= o.name == f.name;
      if (dup) continue;
      ((i->ifa_flags & IFF_LOOPBACK) ? loop : out).push_back(std::move(f));
    }
    freeifaddrs(ifs);
  }
  out.insert(out.end(), loop.begin(), loop.end());
  if (out.empty() && !only) {  // no interface listed: loopback still works
    iface f;
    f.name = "lo";
    sock_addr::parse(family == AF_INET ? "127.0.0.1" : "::1", 0, f.addr);
    out.push_back(std::move(f));
  }
  return out;
}

bool same_host(const sock_addr& a, const sock_addr& b) noexcept {
  if (a.family() != b.family()) return false;
  if (a.family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b.ss)->sin_addr.s_addr;
  if (a.family() == AF_INET6)
    return !memcmp(&reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr,
                   &reinterpret_cast<const sockaddr_in6*>(&b.ss)->sin6_addr, sizeof(in6_addr));
  return false;
}

bool entry_answers(const sock_addr& mine, const sock_addr& a, bool source) {
  if (source) {
    const std::vector<iface> ifs = interfaces(a.family());
    for (const iface& f : ifs)
      if (same_host(f.addr, a)) return same_host(mine, a);
    return !ifs.empty() && same_host(mine, ifs.front().addr);
  }
  sock_addr route;
  return default_src(&a, a.family(), route) != 0 || same_host(route, mine);
}

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
  // Else the address other hosts can reach: the interface FI_TCP_IFACE
  // names, else the first interface that is up, loopback last (as
  // libfabric's tcp orders them).
  try {
    std::vector<iface> ifs = interfaces(family);
    if (!ifs.empty()) {
      out = ifs.front().addr;
      return 0;
    }
  } catch (...) {
    return -FI_ENOMEM;
  }
  return -FI_ENODATA;
}

void apply_params(conn_config& cfg) {
  cfg.user_timeout_ms = static_cast<int>(param_int_or_default("tcp", "user_timeout_ms"));
  cfg.keepalive_s = static_cast<int>(param_int_or_default("tcp", "keepalive_s"));
}

namespace {

// One template per interface and endpoint type: the domain is named after
// the interface and its src_addr is the interface's address (port 0).
fi_info* tcp_template(fi_ep_type type, uint32_t addr_format, uint32_t prov_version, const iface& f) {
  uint64_t caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_RECV |
                  FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_RMA_EVENT | FI_LOCAL_COMM |
                  FI_REMOTE_COMM | FI_FENCE;
  if (type == FI_EP_RDM) caps |= FI_SOURCE | FI_DIRECTED_RECV | FI_COLLECTIVE;
  info_ptr i(make_template({"tcp", prov_version, caps, addr_format, type,
                            type == FI_EP_MSG ? uint32_t{FI_PROTO_SOCK_TCP} : uint32_t{FI_PROTO_XNET},
                            inject_max, 1024, 1}));
  // Shared contexts come from the endpoint core; scalable endpoints are shm's only.
  i->domain_attr->max_ep_stx_ctx = 16;
  i->domain_attr->max_ep_srx_ctx = 16;
  free(i->domain_attr->name);
  i->domain_attr->name = dup_cstr(f.name.c_str());
  i->src_addr = malloc(f.addr.len);
  if (!i->src_addr) throw std::bad_alloc();
  memcpy(i->src_addr, &f.addr.ss, f.addr.len);
  i->src_addrlen = f.addr.len;
  return i.release();
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
    {.name = "iface",
     .type = FI_PARAM_STRING,
     .help =
         "The one interface fi_getinfo offers and whose address an endpoint takes when no address is given",
     .dflt = "every interface that is up, loopback last",
     .accepts = "an interface that is up with an address"},
    {.name = "user_timeout_ms",
     .type = FI_PARAM_INT,
     .help = "Data a peer has not acknowledged for this long fails its connection and its operations (0: the "
             "kernel's)",
     .def = 10000,
     .min = 0,
     .max = INT_MAX},
    {.name = "keepalive_s",
     .type = FI_PARAM_INT,
     .help = "Idle seconds before a connection's peer is probed (0: off)",
     .def = 10,
     .min = 0,
     .max = 32767},  // the kernel's largest TCP_KEEPIDLE
};

// FI_TCP_IFACE naming no interface that is up with an address leaves tcp
// nothing to offer, and the providers made of it: said once, with the
// interfaces there are.
[[gnu::cold]] std::string iface_unusable(const char* only) {
  std::string up;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) ||
          !(i->ifa_flags & IFF_UP))
        continue;
      const std::string n = std::string("'") + i->ifa_name + "'";
      if (up.find(n) == std::string::npos) up += (up.empty() ? "" : ", ") + n;
    }
    freeifaddrs(ifs);
  }
  const std::string linking = providers_linking("tcp");
  param_report("tcp", "iface", only, std::string("no interface '") + only + "' is up with an address",
               up.empty() ? "none is up" : up,
               std::string("provider ") + name_prefix() + "tcp offers nothing" +
                   (linking.empty() ? "" : ", nor " + linking + ", made of it"));
  return param_env_name("tcp", "iface") + '=' + only + " names no interface that is up with an address";
}

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
  // says: a passive endpoint then listens on every interface). Templates
  // come one per interface, each with that interface's address as src_addr,
  // and each address is offered once (the other entries answer
  // -FI_ENODATA): a local address is the entry of the interface that holds
  // it (the wildcard: the first interface's); a destination the entry of
  // the interface the kernel routes toward it from, unless the hints gave a
  // source address (ignored with FI_SOURCE), which then picks the entry as
  // a local address does. So an answer's src_addr and domain agree, and the
  // answer given back as hints (fi_dupinfo) finds its entry again.
  int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const override {
    return guard([&]() -> int {
      const int family = info->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
      const bool source = (flags & FI_SOURCE) || !node;
      const iface* mine = nullptr;
      const std::vector<iface> ifs = interfaces(family);
      for (const iface& f : ifs)
        if (info->domain_attr->name && f.name == info->domain_attr->name) mine = &f;
      // A source address from the hints, unless it is this entry's own (the
      // template's: its interface, port 0).
      sock_addr given;
      const bool src_given = !(flags & FI_SOURCE) && info->src_addr &&
                             sock_addr::from(info->src_addr, info->src_addrlen, given) == 0 &&
                             !(mine && same_host(given, mine->addr) && given.port() == 0);
      if (src_given && mine && !entry_answers(mine->addr, given, true)) return -FI_ENODATA;
      if (!node && !service) return 0;  // the template's (or the hints') address
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
      if (mine && !src_given && !entry_answers(mine->addr, a, source)) return -FI_ENODATA;
      set_addr(info, source, a);
      if (!source && !src_given) {
        sock_addr local;
        if (default_src(&a, family, local) == 0) set_addr(info, true, local);
      }
      return 0;
    });
  }

  // The templates depend on the interfaces too.
  std::string template_key() const override {
    std::string key;
    for (int family : {AF_INET, AF_INET6})
      for (const iface& f : interfaces(family)) key += f.name + '=' + f.addr.str() + ';';
    return key;
  }

protected:
  info_list build_templates() const override {
    info_list list;
    for (uint32_t fmt : {uint32_t{FI_SOCKADDR_IN}, uint32_t{FI_SOCKADDR_IN6}}) {
      const std::vector<iface> ifs = interfaces(fmt == FI_SOCKADDR_IN ? AF_INET : AF_INET6);
      for (fi_ep_type type : {FI_EP_RDM, FI_EP_MSG})
        for (const iface& f : ifs) list.emplace_back(tcp_template(type, fmt, version(), f));
    }
    if (const char* only = param_raw("tcp", "iface"); list.empty() && only && *only)
      offers_nothing(iface_unusable(only));
    return list;
  }
};

}  // namespace
}  // namespace weft::tcp

namespace weft {
using tcp_provider = tcp::tcp_provider;
WEFT_REGISTER_PROVIDER(tcp_provider, 20);
}  // namespace weft
