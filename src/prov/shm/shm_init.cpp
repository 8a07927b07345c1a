// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: registration, parameters, attributes and addresses.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <string>

#include "core/params.hpp"
#include "core/prov_template.hpp"
#include "core/provider.hpp"
#include "prov/shm/shm.hpp"

namespace weft::shm {
namespace {

constexpr size_t shm_addrlen = 64;  // FI_ADDR_STR slot size in AVs

constexpr provider::param shm_params[] = {
    {.name = "disable_cma",
     .type = FI_PARAM_BOOL,
     .help = "Never use cross-memory attach; move large data through shared bounce buffers",
     .def = 0},
    {.name = "split_copy",
     .type = FI_PARAM_BOOL,
     .help = "Copy large messages with both processes at once",
     .def = 1},
    {.name = "map_mr",
     .type = FI_PARAM_BOOL,
     .help =
         "RMA into registrations backed by a shrink-sealed memfd with memcpy through a mapping of it instead "
         "of cross-memory attach",
     .def = 1},
    {.name = "inject_size",
     .type = FI_PARAM_SIZE_T,
     .help = "Largest message fi_inject accepts",
     .def = inject_max,
     .min = 0,
     .max = inject_max},
};

// Does `node` name this host: a local interface address, the host's name,
// or a name that resolves to a local address?
bool names_this_host(const char* node) {
  if (!strcmp(node, "localhost")) return true;
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host) == 0 && !strcasecmp(node, host)) return true;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* res = nullptr;
  bool local = false;
  if (getaddrinfo(node, nullptr, &hints, &res) == 0) {
    for (addrinfo* a = res; a && !local; a = a->ai_next) {
      if (a->ai_family == AF_INET &&
          reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
        local = true;
      if (a->ai_family == AF_INET6 &&
          IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr))
        local = true;
      for (ifaddrs* i = ifs; i && !local; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != a->ai_family) continue;
        if (a->ai_family == AF_INET)
          local = !memcmp(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr,
                          &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, sizeof(in_addr));
        else if (a->ai_family == AF_INET6)
          local = !memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                          &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, sizeof(in6_addr));
      }
    }
    freeaddrinfo(res);
  }
  freeifaddrs(ifs);
  return local;
}

class shm_provider final : public provider {
public:
  const char* name() const noexcept override { return "shm"; }
  uint32_t version() const noexcept override { return FI_VERSION(1, 0); }
  std::span<const param> params() const noexcept override { return shm_params; }

  std::unique_ptr<prov_domain> open_domain(domain& dom) override { return std::make_unique<shm_domain>(dom); }

  // shm addresses are names, "fi_shm://<name>": a node that already has the
  // prefix is taken as it is; otherwise [node]:service, or the node alone,
  // becomes the name. A node must name this host. Without node and service
  // the source address is the default one, "fi_shm://<pid>". A name without
  // a service part is like port 0: each endpoint opened from it adds a
  // suffix of its own (endpoint_name).
  int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const override {
    std::string name;
    if (node && !strncmp(node, shm_prefix, shm_prefix_len)) {
      name = node;
    } else {
      if (node && !names_this_host(node)) return -FI_ENODATA;
      name = shm_prefix;
      if (node)
        name += node;
      else if (!service)
        name += std::to_string(getpid());
      if (service) {  // "node:service", or ":service" alone
        name += ':';
        name += service;
      }
    }
    if (name.size() + 1 > shm_addrlen || shm_name_of(name.c_str(), name.size() + 1).empty())
      return -FI_EINVAL;
    const bool source = (flags & FI_SOURCE) || !node;
    void*& addr = source ? info->src_addr : info->dest_addr;
    size_t& addrlen = source ? info->src_addrlen : info->dest_addrlen;
    if (!source && !info->src_addr) {
      if (int ret = resolve(info, nullptr, nullptr, 0)) return ret;  // and our own default
    }
    char* copy = strdup(name.c_str());
    if (!copy) return -FI_ENOMEM;
    free(addr);
    addr = copy;
    addrlen = name.size() + 1;
    return 0;
  }

protected:
  info_list build_templates() const override {
    const auto inject = static_cast<size_t>(param_int_or_default("shm", "inject_size"));
    info_list list;
    list.emplace_back(
        make_template({"shm", version(),
                       FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_RECV |
                           FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_RMA_EVENT | FI_SOURCE |
                           FI_DIRECTED_RECV | FI_LOCAL_COMM | FI_FENCE | FI_COLLECTIVE,
                       FI_ADDR_STR, FI_EP_RDM, FI_PROTO_SHM, inject, 256, 16}));
    // Datagram endpoints: messages of one cell, no RMA or atomics, one
    // context each.
    fi_info* d = make_template({"shm", version(),
                                FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTI_RECV | FI_SOURCE |
                                    FI_DIRECTED_RECV | FI_LOCAL_COMM,
                                FI_ADDR_STR, FI_EP_DGRAM, FI_PROTO_SHM, inject, 256, 1});
    list.emplace_back(d);
    d->ep_attr->max_msg_size = dgram_max;
    d->tx_attr->rma_iov_limit = 0;
    d->domain_attr->max_ep_stx_ctx = 0;
    d->domain_attr->max_ep_srx_ctx = 0;
    return list;
  }
};

}  // namespace
}  // namespace weft::shm

namespace weft {
using shm_provider = shm::shm_provider;
WEFT_REGISTER_PROVIDER(shm_provider, 10);
}  // namespace weft
