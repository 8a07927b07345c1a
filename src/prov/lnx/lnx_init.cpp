// SPDX-License-Identifier: BSD-3-Clause
// prov/lnx: registration, parameters, attributes and addresses.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/info.hpp"
#include "core/params.hpp"
#include "core/prov_template.hpp"
#include "core/provider.hpp"
#include "prov/lnx/lnx.hpp"

namespace weft::lnx {

namespace {
constexpr char prefix[] = "fi_lnx://";
constexpr char fill = '#';  // pads an address to its one length
constexpr size_t prefix_len = sizeof prefix - 1;

uint64_t fnv(uint64_t h, const void* p, size_t n) noexcept {
  auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

uint64_t compute_host_id() noexcept {
  uint64_t h = 14695981039346656037ull;
  char buf[128] = {};
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) h = fnv(h, buf, static_cast<size_t>(n));
  }
  memset(buf, 0, sizeof buf);
  gethostname(buf, sizeof buf - 1);
  h = fnv(h, buf, strlen(buf));
  // Shared memory between two processes needs the same IPC namespace, the
  // shm part's names live in the network namespace (abstract sockets), and
  // cross-memory attach names processes by pid.
  for (const char* ns : {"/proc/self/ns/ipc", "/proc/self/ns/net", "/proc/self/ns/pid"}) {
    struct stat st {};
    if (stat(ns, &st) == 0) h = fnv(h, &st.st_ino, sizeof st.st_ino);
  }
  h &= (uint64_t{1} << 48) - 1;
  return h ? h : 1;
}

bool parse_tcp(std::string_view s, tcp::sock_addr& out) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string host(s.substr(0, colon));
  std::string port(s.substr(colon + 1));
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const unsigned long p = strtoul(port.c_str(), nullptr, 10);
  if (p > 65535) return false;
  in_addr a4;
  if (inet_pton(AF_INET, host.c_str(), &a4) != 1) {  // a host name (fi_av_insertsvc)
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) || !res) return false;
    a4 = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  char num[INET_ADDRSTRLEN];
  if (!inet_ntop(AF_INET, &a4, num, sizeof num)) return false;
  return tcp::sock_addr::parse(num, static_cast<uint16_t>(p), out) == 0;
}

}  // namespace

// Not cached: a process may enter another namespace (a test's "host").
uint64_t host_id() noexcept {
  return compute_host_id();
}

bool parse(const void* p, size_t len, address& out) {
  if (!p || !len) return false;
  const char* c = static_cast<const char*>(p);
  const size_t n = strnlen(c, std::min(len, addr_max));
  if (n == std::min(len, addr_max)) return false;  // no NUL within bounds
  std::string_view s(c, n);
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix_len);
  while (!s.empty() && s.back() == fill) s.remove_suffix(1);
  out = address{};
  const size_t semi = s.find(';');
  if (semi == std::string_view::npos) return parse_tcp(s, out.tcp);  // "ip:port" alone
  const size_t semi2 = s.find(';', semi + 1);
  if (semi2 == std::string_view::npos) return false;
  const std::string_view host = s.substr(0, semi), shm = s.substr(semi + 1, semi2 - semi - 1),
                         tcp = s.substr(semi2 + 1);
  if (!host.empty()) {
    if (host.size() != 12 || host.find_first_not_of("0123456789abcdef") != std::string_view::npos)
      return false;
    out.host = strtoull(std::string(host).c_str(), nullptr, 16);
    if (!out.host) return false;
  }
  if (shm.find_first_of(";/ ") != std::string_view::npos) return false;
  out.shm = shm;
  if (!tcp.empty() && !parse_tcp(tcp, out.tcp)) return false;
  return !out.shm.empty() || out.tcp.family();
}

std::string format(const address& a, bool fill_up) {
  char host[24] = "";
  if (a.host) snprintf(host, sizeof host, "%012llx", static_cast<unsigned long long>(a.host));
  std::string s = std::string(prefix) + host + ';' + a.shm + ';';
  if (a.tcp.family()) s += a.tcp.str();
  if (s.size() + 1 > addr_max) return {};
  if (fill_up) s.append(addr_max - 1 - s.size(), fill);  // one length for every name (see lnx.hpp)
  return s;
}

namespace {

// One entry per tcp interface, loopback only when there is no other: the
// tcp part is for peers on other hosts (those on this one go over shm),
// and a program that spreads its processes over the entries (Open MPI's
// mtl ofi gives local rank k the k-th) must not put one where no other
// host can reach it.
std::vector<tcp::iface> offered_interfaces() {
  std::vector<tcp::iface> ifs = tcp::interfaces(AF_INET);
  auto loopback = [](const tcp::iface& f) {
    return ntohl(reinterpret_cast<const sockaddr_in*>(&f.addr.ss)->sin_addr.s_addr) >> 24 == IN_LOOPBACKNET;
  };
  if (!std::all_of(ifs.begin(), ifs.end(), loopback)) std::erase_if(ifs, loopback);
  return ifs;
}

constexpr provider::param lnx_params[] = {
    {.name = "prov_links",
     .type = FI_PARAM_STRING,
     .help = "The providers the linked provider joins (the one link set offered)",
     .dflt = links,
     .choices = links},
};

// What both parts offer, as one template per tcp interface.
fi_info* linked_template(const fi_info& s, const fi_info& t, uint32_t version) {
  const uint64_t comm = FI_LOCAL_COMM | FI_REMOTE_COMM;
  const uint64_t caps = (s.caps & t.caps) | comm;
  info_ptr i(make_template({prov_name, version, caps, FI_ADDR_STR, FI_EP_RDM, FI_PROTO_UNSPEC,
                            std::min(s.tx_attr->inject_size, t.tx_attr->inject_size), 1024, 1}));
  i->tx_attr->caps = (s.tx_attr->caps & t.tx_attr->caps);
  i->rx_attr->caps = (s.rx_attr->caps & t.rx_attr->caps);
  i->tx_attr->msg_order = s.tx_attr->msg_order & t.tx_attr->msg_order;
  i->rx_attr->msg_order = s.rx_attr->msg_order & t.rx_attr->msg_order;
  i->tx_attr->size = std::min(s.tx_attr->size, t.tx_attr->size);
  i->rx_attr->size = std::min(s.rx_attr->size, t.rx_attr->size);
  i->tx_attr->iov_limit = std::min(s.tx_attr->iov_limit, t.tx_attr->iov_limit);
  i->tx_attr->rma_iov_limit = std::min(s.tx_attr->rma_iov_limit, t.tx_attr->rma_iov_limit);
  i->rx_attr->iov_limit = std::min(s.rx_attr->iov_limit, t.rx_attr->iov_limit);
  i->ep_attr->max_msg_size = std::min(s.ep_attr->max_msg_size, t.ep_attr->max_msg_size);
  fi_domain_attr* d = i->domain_attr;
  d->mr_key_size = std::min(s.domain_attr->mr_key_size, t.domain_attr->mr_key_size);
  d->cq_data_size = std::min(s.domain_attr->cq_data_size, t.domain_attr->cq_data_size);
  d->mr_iov_limit = std::min(s.domain_attr->mr_iov_limit, t.domain_attr->mr_iov_limit);
  d->ep_cnt = std::min(s.domain_attr->ep_cnt, t.domain_attr->ep_cnt);
  // Shared contexts as both parts have them; no scalable endpoints (tcp has none).
  d->max_ep_stx_ctx = std::min(s.domain_attr->max_ep_stx_ctx, t.domain_attr->max_ep_stx_ctx);
  d->max_ep_srx_ctx = std::min(s.domain_attr->max_ep_srx_ctx, t.domain_attr->max_ep_srx_ctx);
  free(d->name);
  d->name = dup_cstr((std::string(links) + ':' + t.domain_attr->name).c_str());
  // The address: this host, no shm name yet (each endpoint gets its own),
  // and the tcp template's interface address.
  address a;
  a.host = host_id();
  if (tcp::sock_addr::from(t.src_addr, t.src_addrlen, a.tcp)) return nullptr;
  const std::string str = format(a);
  if (str.empty()) return nullptr;
  i->src_addr = dup_cstr(str.c_str());
  i->src_addrlen = str.size() + 1;
  return i.release();
}

// Replaces an address slot with `s` (a copy): false when s is empty.
bool set_addr(void*& slot, size_t& len, const std::string& s) {
  if (s.empty()) return false;
  char* copy = dup_cstr(s.c_str());
  free(slot);
  slot = copy;
  len = s.size() + 1;
  return true;
}

// An address the hints gave as an IPv4 socket address becomes the lnx
// address naming it as the tcp part's (a source: on this host). 0, or
// -FI_EINVAL for an address that is neither.
int take_sockaddr(void*& slot, size_t& len, bool source) {
  address a;
  if (!slot || parse(slot, len, a)) return 0;
  if (tcp::sock_addr::from(slot, len, a.tcp) || a.tcp.family() != AF_INET) return -FI_EINVAL;
  if (source) a.host = host_id();
  return set_addr(slot, len, format(a)) ? 0 : -FI_EINVAL;
}

class lnx_provider final : public provider {
public:
  const char* name() const noexcept override { return prov_name; }
  uint32_t version() const noexcept override { return FI_VERSION(1, 0); }
  std::span<const param> params() const noexcept override { return lnx_params; }
  const char* links() const noexcept override { return lnx::links; }

  std::unique_ptr<prov_domain> open_domain(domain& dom) override { return std::make_unique<lnx_domain>(dom); }

  // node/service -> lnx addresses. A destination node and service name a
  // tcp address (its host and shm name are learnt when the peer's own
  // address is inserted); a source keeps this host and takes the address
  // and port given. A node that is already an lnx address is taken as it
  // is. The hints' addresses may be socket addresses too (IPv4, as tcp
  // takes them): they name the tcp part's. As tcp's, each entry stands for
  // one interface, its domain's (shm+tcp:<interface>): a local address (a
  // source node, or the hints' src_addr) picks the entry of the offered
  // interface that holds it, else the first entry (so loopback, offered
  // only when there is no other interface, answers as the first entry); a
  // destination the entry of the interface the kernel routes toward it
  // from, else the first.
  int resolve(fi_info* info, const char* node, const char* service, uint64_t flags) const override {
    return guard([&]() -> int {
      const bool source = (flags & FI_SOURCE) || !node;
      if (!(flags & FI_SOURCE))  // with it the hints' src_addr is ignored (fi_getinfo(3))
        if (int ret = take_sockaddr(info->src_addr, info->src_addrlen, true)) return ret;
      if (int ret = take_sockaddr(info->dest_addr, info->dest_addrlen, false)) return ret;
      const std::vector<tcp::iface> ifs = offered_interfaces();
      const tcp::iface* entry = nullptr;  // this entry's interface
      const char* dn = info->domain_attr->name;
      const size_t ll = strlen(lnx::links);
      for (const tcp::iface& f : ifs)
        if (dn && !strncmp(dn, lnx::links, ll) && dn[ll] == ':' && f.name == dn + ll + 1) entry = &f;
      // Whether the entry answers for local address `local`.
      auto answers = [&](const tcp::sock_addr& local) {
        const tcp::iface* by = nullptr;
        for (const tcp::iface& f : ifs)
          if (!by && tcp::same_host(f.addr, local)) by = &f;
        if (!by && !ifs.empty()) by = &ifs.front();
        return by == entry;
      };
      // A source from the hints (ignored with FI_SOURCE), unless it is the
      // entry's own (the template's: its interface, port 0).
      address mine;
      const bool src_given = !(flags & FI_SOURCE) && parse(info->src_addr, info->src_addrlen, mine) &&
                             mine.tcp.family() &&
                             !(entry && tcp::same_host(mine.tcp, entry->addr) && mine.tcp.port() == 0);
      if (entry && src_given && !answers(mine.tcp)) return -FI_ENODATA;
      if (!node && !service) return 0;
      address a;
      if (node && !strncmp(node, prefix, prefix_len)) {
        if (service || !parse(node, strlen(node) + 1, a)) return -FI_EINVAL;
      } else {
        addrinfo hints{};
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags =
            AI_NUMERICSERV | (source ? AI_PASSIVE : 0) | ((flags & FI_NUMERICHOST) ? AI_NUMERICHOST : 0);
        addrinfo* res = nullptr;
        if (getaddrinfo(node, service ? service : "0", &hints, &res) || !res) return -FI_ENODATA;
        int ret = tcp::sock_addr::from(res->ai_addr, res->ai_addrlen, a.tcp);
        freeaddrinfo(res);
        if (ret) return -FI_ENODATA;
      }
      if (entry && a.tcp.family() && !src_given) {
        tcp::sock_addr local = a.tcp;
        if (!source && tcp::default_src(&a.tcp, AF_INET, local)) local = tcp::sock_addr{};
        if (!answers(local)) return -FI_ENODATA;
      }
      if (source) {
        if (!a.host) a.host = host_id();
        return set_addr(info->src_addr, info->src_addrlen, format(a)) ? 0 : -FI_EINVAL;
      }
      return set_addr(info->dest_addr, info->dest_addrlen, format(a)) ? 0 : -FI_EINVAL;
    });
  }

protected:
  info_list build_templates() const override {
    info_list list;
    if (param_choice(prov_name, "prov_links", "the linked provider offers nothing") == param_bad) {
      offers_nothing(param_env_name(prov_name, "prov_links") + " names another link set than " + lnx::links);
      return list;
    }
    provider* shm = provider_named("shm");
    provider* tcp = provider_named("tcp");
    if (!shm || !tcp) return list;
    auto st = shm->templates();
    auto tt = tcp->templates();
    for (const provider* part : {shm, tcp})
      if (std::string why = part->nothing_offered(); !why.empty())
        offers_nothing("its part " + std::string(part->name()) + " offers nothing: " + why);
    const fi_info* s = nullptr;
    for (const info_ptr& i : *st)
      if (i->ep_attr->type == FI_EP_RDM && i->addr_format == FI_ADDR_STR) s = i.get();
    if (!s) return list;
    const std::vector<tcp::iface> ifs = offered_interfaces();
    for (const info_ptr& t : *tt) {
      if (t->ep_attr->type != FI_EP_RDM || t->addr_format != FI_SOCKADDR_IN || !t->src_addr) continue;
      for (const tcp::iface& f : ifs)
        if (f.name == t->domain_attr->name)
          if (fi_info* i = linked_template(*s, *t, version())) list.emplace_back(i);
    }
    return list;
  }
  // The parts' templates (tcp's follow the interfaces).
  std::string template_key() const override {
    std::string key = std::to_string(host_id()) + ';';
    for (const char* p : {"shm", "tcp"})
      if (provider* prov = provider_named(p)) key += prov->template_inputs() + '\x02';
    return key;
  }
};

}  // namespace
}  // namespace weft::lnx

namespace weft {
using lnx_provider = lnx::lnx_provider;
WEFT_REGISTER_PROVIDER(lnx_provider, 5);
}  // namespace weft
