// SPDX-License-Identifier: BSD-3-Clause
// fi_getinfo, fi_dupinfo/freeinfo/allocinfo, fi_fabric, fi_domain, fi_version,
// fi_strerror, params and logging — through the public API.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>
#include <stdlib.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "fixture.hpp"
#include "plain_ep.hpp"

namespace {

struct info_list {
  fi_info* head = nullptr;
  ~info_list() { fi_freeinfo(head); }
  size_t count() const {
    size_t n = 0;
    for (fi_info* i = head; i; i = i->next) ++n;
    return n;
  }
  std::set<std::string> providers() const {
    std::set<std::string> s;
    for (fi_info* i = head; i; i = i->next) s.insert(i->fabric_attr->prov_name);
    return s;
  }
};

struct hints_ptr {
  fi_info* h = fi_allocinfo();
  ~hints_ptr() { fi_freeinfo(h); }
  fi_info* operator->() { return h; }
};

// tcp's checks skip until it offers endpoints.
using weft_test::offered;
#define NEEDS_TCP() \
  if (!offered("tcp")) GTEST_SKIP() << "tcp offers no fi_info until its endpoints exist"

TEST(Getinfo, NoHintsListsEveryProvider) {
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &l.head), 0);
  std::set<std::string> expected{"shm", "udp"};
  if (offered("tcp")) expected.insert("tcp");
  if (offered("lnx")) expected.insert("lnx");
  EXPECT_EQ(l.providers(), expected);
  for (fi_info* i = l.head; i; i = i->next) {
    ASSERT_NE(i->tx_attr, nullptr);
    ASSERT_NE(i->rx_attr, nullptr);
    ASSERT_NE(i->ep_attr, nullptr);
    ASSERT_NE(i->domain_attr, nullptr);
    ASSERT_NE(i->fabric_attr, nullptr);
    EXPECT_EQ(i->fabric_attr->api_version, FI_VERSION(1, 17));
    EXPECT_NE(i->caps & FI_MSG, 0u);
  }
}

TEST(Getinfo, BadArguments) {
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, nullptr), -FI_EINVAL);
  // Newer than the API weft implements (2.6; every 1.x is older).
  EXPECT_EQ(fi_getinfo(FI_VERSION(2, 7), nullptr, nullptr, 0, nullptr, &info), -FI_ENOSYS);
  EXPECT_EQ(fi_getinfo(FI_VERSION(3, 0), nullptr, nullptr, 0, nullptr, &info), -FI_ENOSYS);
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 1ULL << 50, nullptr, &info), -FI_EBADFLAGS);
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, FI_SOURCE, nullptr, &info), -FI_EINVAL);
  EXPECT_EQ(info, nullptr);
}

TEST(Getinfo, ProviderNameHint) {
  for (const char* prov : {"shm", "tcp"}) {
    if (!offered(prov)) continue;
    hints_ptr h;
    h->fabric_attr->prov_name = strdup(prov);
    info_list l;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
    EXPECT_EQ(l.providers(), (std::set<std::string>{prov}));
  }
  hints_ptr h;
  h->fabric_attr->prov_name = strdup("verbs");
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &info), -FI_ENODATA);
  hints_ptr layered;
  layered->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, layered.h, &info), -FI_ENODATA);
}

TEST(Getinfo, ProviderEnvironment) {
  setenv("FI_PROVIDER", "shm", 1);
  {
    info_list l;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &l.head), 0);
    EXPECT_EQ(l.providers(), (std::set<std::string>{"shm"}));
  }
  setenv("FI_PROVIDER", "^shm,tcp,udp", 1);
  {
    fi_info* info = nullptr;
    EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &info), -FI_ENODATA);
  }
  unsetenv("FI_PROVIDER");
}

TEST(Getinfo, ProviderEnvironmentWithTcp) {
  NEEDS_TCP();
  setenv("FI_PROVIDER", "tcp", 1);
  {
    info_list l;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &l.head), 0);
    EXPECT_EQ(l.providers(), (std::set<std::string>{"tcp"}));
  }
  setenv("FI_PROVIDER", "^tcp", 1);
  {
    info_list l;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &l.head), 0);
    EXPECT_EQ(l.providers(), (std::set<std::string>{"shm", "udp"}));
  }
  setenv("FI_PROVIDER", "^shm,tcp", 1);
  {
    info_list l;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &l.head), 0);
    EXPECT_EQ(l.providers(), (std::set<std::string>{"udp"}));
  }
  setenv("FI_PROVIDER", "shm,tcp", 1);
  {
    info_list l;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &l.head), 0);
    EXPECT_EQ(l.providers().size(), 2u);
  }
  unsetenv("FI_PROVIDER");
}

TEST(Getinfo, MsgEndpointsAndRemoteCommAreTcps) {
  NEEDS_TCP();
  hints_ptr h;
  h->ep_attr->type = FI_EP_MSG;
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
  EXPECT_EQ(l.providers(), (std::set<std::string>{"tcp"}));  // shm is RDM and DGRAM, udp DGRAM
  for (fi_info* i = l.head; i; i = i->next) EXPECT_EQ(i->ep_attr->type, FI_EP_MSG);
  // FI_REMOTE_COMM is tcp's, udp's and the linked provider's, not shm's; the
  // linked provider comes first (it reaches every peer the fastest way).
  hints_ptr rc;
  rc->caps = FI_TAGGED | FI_REMOTE_COMM;
  info_list lr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, rc.h, &lr.head), 0);
  std::set<std::string> want{"tcp", "udp"};
  if (offered("lnx")) want.insert("lnx");
  EXPECT_EQ(lr.providers(), want);
  if (offered("lnx")) {
    EXPECT_STREQ(lr.head->fabric_attr->prov_name, "lnx");
  }
}

// The IPv4 interfaces that are up, loopback last, as tcp lists them.
std::vector<std::pair<std::string, std::string>> up_interfaces() {
  std::vector<std::pair<std::string, std::string>> out, loop;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, ip, sizeof ip);
    bool seen = false;
    for (auto& o : out) seen |= o.first == i->ifa_name;
    for (auto& o : loop) seen |= o.first == i->ifa_name;
    if (!seen) ((i->ifa_flags & IFF_LOOPBACK) ? loop : out).emplace_back(i->ifa_name, ip);
  }
  freeifaddrs(ifs);
  out.insert(out.end(), loop.begin(), loop.end());
  return out;
}

// With no node and no FI_TCP_IFACE, tcp answers with what other hosts can
// reach: one RDM entry per interface that is up, named after it, its
// address the entry's source, loopback last (as libfabric's tcp). The linked
// provider offers the same interfaces less loopback (when there is another:
// its tcp part is for other hosts). FI_TCP_IFACE keeps one.
TEST(Getinfo, TcpOneEntryPerInterfaceLoopbackLast) {
  NEEDS_TCP();
  const auto ifs = up_interfaces();
  ASSERT_FALSE(ifs.empty());
  auto entries = [](const char* prov) {
    hints_ptr h;
    h->ep_attr->type = FI_EP_RDM;
    h->addr_format = FI_SOCKADDR_IN;
    h->fabric_attr->prov_name = strdup(prov);
    info_list l;
    std::vector<std::pair<std::string, std::string>> got;
    if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head) != 0) return got;
    for (fi_info* i = l.head; i; i = i->next) {
      char ip[INET_ADDRSTRLEN] = "?";
      if (i->src_addr && i->src_addrlen == sizeof(sockaddr_in))
        inet_ntop(AF_INET, &static_cast<sockaddr_in*>(i->src_addr)->sin_addr, ip, sizeof ip);
      got.emplace_back(i->domain_attr->name, ip);
    }
    return got;
  };
  EXPECT_EQ(entries("tcp"), ifs);
  if (offered("lnx")) {
    hints_ptr h;
    h->ep_attr->type = FI_EP_RDM;
    h->fabric_attr->prov_name = strdup("lnx");
    info_list l;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
    auto loopback = [](const std::pair<std::string, std::string>& f) { return f.second.rfind("127.", 0) == 0; };
    const bool other = !std::all_of(ifs.begin(), ifs.end(), loopback);
    std::vector<std::string> want, got;
    for (auto& f : ifs)
      if (!other || !loopback(f)) want.push_back("shm+tcp:" + f.first);
    for (fi_info* i = l.head; i; i = i->next) got.push_back(i->domain_attr->name);
    EXPECT_EQ(got, want);
  }
  setenv("FI_TCP_IFACE", ifs.back().first.c_str(), 1);
  EXPECT_EQ(entries("tcp"), (std::vector<std::pair<std::string, std::string>>{ifs.back()}));
  unsetenv("FI_TCP_IFACE");
}

TEST(Getinfo, EndpointTypeAndCaps) {
  // Datagram endpoints: udp's and shm's, messages only.
  hints_ptr dgram;
  dgram->ep_attr->type = FI_EP_DGRAM;
  info_list ld;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, dgram.h, &ld.head), 0);
  EXPECT_EQ(ld.providers(), (std::set<std::string>{"shm", "udp"}));
  for (fi_info* i = ld.head; i; i = i->next) {
    EXPECT_EQ(i->ep_attr->type, FI_EP_DGRAM);
    EXPECT_EQ(i->caps & (FI_RMA | FI_ATOMIC), 0u);
  }
  hints_ptr dgram_rma;
  dgram_rma->ep_attr->type = FI_EP_DGRAM;
  dgram_rma->caps = FI_MSG | FI_RMA;
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, dgram_rma.h, &info), -FI_ENODATA);

  // Asking for FI_TAGGED only: primary caps limited to it, secondary kept.
  hints_ptr t;
  t->caps = FI_TAGGED;
  t->fabric_attr->prov_name = strdup("shm");
  info_list lt;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, t.h, &lt.head), 0);
  EXPECT_EQ(lt.head->caps & (FI_MSG | FI_RMA | FI_ATOMIC), 0u);
  EXPECT_NE(lt.head->caps & FI_TAGGED, 0u);
  EXPECT_NE(lt.head->caps & FI_SOURCE, 0u);

  // Multicast is udp's.
  hints_ptr mc;
  mc->caps = FI_MULTICAST | FI_MSG;
  info_list lm;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, mc.h, &lm.head), 0);
  EXPECT_EQ(lm.providers(), (std::set<std::string>{"udp"}));
  // Collectives: the RDM endpoints of shm, tcp and lnx, never udp's or a
  // datagram endpoint.
  hints_ptr coll;
  coll->caps = FI_COLLECTIVE | FI_MSG;
  info_list lc;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, coll.h, &lc.head), 0);
  EXPECT_EQ(lc.providers(), (std::set<std::string>{"shm", "tcp", "lnx"}));
  for (fi_info* i = lc.head; i; i = i->next) {
    EXPECT_EQ(i->ep_attr->type, FI_EP_RDM);
    EXPECT_NE(i->caps & FI_COLLECTIVE, 0u);
  }
  coll->ep_attr->type = FI_EP_DGRAM;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, coll.h, &info), -FI_ENODATA);
}

// fi_endpoint(3) lists which capabilities apply to the transmit and to the
// receive attributes: tx_attr->caps and rx_attr->caps hold no others, and
// nothing the entry's caps lack, for every provider, with or without hints
// (fabtests' fi_getinfo_test checks the same). FI_MULTICAST is transmit-only.
TEST(Getinfo, AttrCapsAreTheManPagesOnes) {
  constexpr uint64_t man_tx = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND |
                              FI_HMEM | FI_TRIGGER | FI_FENCE | FI_MULTICAST | FI_RMA_PMEM | FI_NAMED_RX_CTX |
                              FI_COLLECTIVE;
  constexpr uint64_t man_rx = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE |
                              FI_RECV | FI_HMEM | FI_TRIGGER | FI_RMA_PMEM | FI_DIRECTED_RECV |
                              FI_VARIABLE_MSG | FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR |
                              FI_COLLECTIVE;
  const uint64_t many = FI_MSG | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE;
  const uint64_t asks[] = {
      0, FI_MSG, FI_TAGGED, FI_RMA, FI_ATOMIC, FI_MSG | FI_MULTICAST, FI_MSG | FI_COLLECTIVE, many};
  size_t seen = 0;
  for (const char* prov : weft_test::offered_providers())
    for (uint64_t caps : asks)
      for (fi_ep_type type : {FI_EP_UNSPEC, FI_EP_RDM, FI_EP_MSG, FI_EP_DGRAM}) {
        hints_ptr h;
        h->caps = caps;
        h->ep_attr->type = type;
        h->fabric_attr->prov_name = strdup(prov);
        info_list l;
        if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head)) continue;
        for (fi_info* i = l.head; i; i = i->next, ++seen) {
          SCOPED_TRACE(std::string(prov) + " type " + std::to_string(i->ep_attr->type) + " asked " +
                       fi_tostr(&caps, FI_TYPE_CAPS));
          EXPECT_EQ(i->tx_attr->caps & ~man_tx, 0u) << fi_tostr(&i->tx_attr->caps, FI_TYPE_CAPS);
          EXPECT_EQ(i->rx_attr->caps & ~man_rx, 0u) << fi_tostr(&i->rx_attr->caps, FI_TYPE_CAPS);
          EXPECT_EQ(i->tx_attr->caps & ~i->caps, 0u);
          EXPECT_EQ(i->rx_attr->caps & ~i->caps, 0u);
          if (caps & FI_MULTICAST) {
            EXPECT_NE(i->caps & FI_MULTICAST, 0u);
            EXPECT_NE(i->tx_attr->caps & FI_MULTICAST, 0u);
          }
        }
      }
  EXPECT_GT(seen, 0u);
  // A hint's receive caps that name transmit ones (an application copying
  // its caps into rx_attr) still find udp's multicast entry.
  hints_ptr h;
  h->caps = FI_MSG | FI_MULTICAST;
  h->rx_attr->caps = FI_MSG | FI_MULTICAST | FI_RECV;
  h->tx_attr->caps = FI_MSG | FI_MULTICAST | FI_SEND;
  h->fabric_attr->prov_name = strdup("udp");
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
  EXPECT_EQ(l.head->rx_attr->caps & FI_MULTICAST, 0u);
  EXPECT_NE(l.head->tx_attr->caps & FI_MULTICAST, 0u);
}

// A kind of operation asked for without a direction comes back with every
// direction the provider has, on the entry and on its transmit and receive
// attributes, as libfabric's providers answer; directions asked for are
// kept as asked. (fabtests' fi_rdm_rma_event binds its counter with
// info->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE): with none, fi_ep_bind
// had flags 0 and failed.)
TEST(Getinfo, OperationsAskedForWithoutDirectionHaveThemAll) {
  constexpr uint64_t rma_ways = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  size_t seen = 0;
  for (const char* prov : weft_test::offered_providers()) {
    hints_ptr h;
    h->caps = FI_MSG | FI_RMA | FI_RMA_EVENT;
    h->ep_attr->type = FI_EP_RDM;
    h->fabric_attr->prov_name = strdup(prov);
    info_list l;
    if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head)) continue;
    for (fi_info* i = l.head; i; i = i->next, ++seen) {
      SCOPED_TRACE(prov);
      EXPECT_EQ(i->caps & (rma_ways | FI_SEND | FI_RECV), rma_ways | FI_SEND | FI_RECV)
          << fi_tostr(&i->caps, FI_TYPE_CAPS);
      EXPECT_EQ(i->tx_attr->caps & (FI_READ | FI_WRITE | FI_SEND), FI_READ | FI_WRITE | FI_SEND);
      EXPECT_EQ(i->rx_attr->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RECV),
                FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RECV);
      EXPECT_EQ(i->caps & (FI_TAGGED | FI_ATOMIC), 0u);
    }
  }
  EXPECT_GT(seen, 0u);
  // Directions asked for are the ones granted.
  hints_ptr h;
  h->caps = FI_MSG | FI_SEND | FI_RMA | FI_READ;
  h->ep_attr->type = FI_EP_RDM;
  h->fabric_attr->prov_name = strdup("shm");
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
  EXPECT_EQ(l.head->caps & (rma_ways | FI_SEND | FI_RECV), FI_SEND | FI_READ);
}

// An RMA event counter binds to the endpoint with the remote directions
// fi_getinfo granted (fabtests' fi_rdm_rma_event).
TEST(Getinfo, RmaEventCounterBindsWithTheGrantedRemoteCaps) {
  hints_ptr h;
  h->caps = FI_MSG | FI_RMA | FI_RMA_EVENT;
  h->ep_attr->type = FI_EP_RDM;
  h->fabric_attr->prov_name = strdup("shm");
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_ep* ep = nullptr;
  fid_cntr* cntr = nullptr;
  ASSERT_EQ(fi_fabric(l.head->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, l.head, &domain, nullptr), 0);
  ASSERT_EQ(fi_endpoint(domain, l.head, &ep, nullptr), 0);
  fi_cntr_attr ca{};
  ca.events = FI_CNTR_EVENTS_COMP;
  ASSERT_EQ(fi_cntr_open(domain, &ca, &cntr, nullptr), 0);
  EXPECT_EQ(fi_ep_bind(ep, &cntr->fid, l.head->caps & (FI_REMOTE_READ | FI_REMOTE_WRITE)), 0);
  fi_close(&ep->fid);
  fi_close(&cntr->fid);
  fi_close(&domain->fid);
  fi_close(&fabric->fid);
}

TEST(Getinfo, AddressFormats) {
  if (offered("tcp")) {
    hints_ptr h;
    h->addr_format = FI_SOCKADDR_IN6;
    info_list l;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
    for (fi_info* i = l.head; i; i = i->next) EXPECT_EQ(i->addr_format, FI_SOCKADDR_IN6);
  }
  hints_ptr s;
  s->addr_format = FI_ADDR_STR;
  info_list ls;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, s.h, &ls.head), 0);
  std::set<std::string> str{"shm"};
  if (offered("lnx")) str.insert("lnx");
  EXPECT_EQ(ls.providers(), str);
  hints_ptr ib;
  ib->addr_format = FI_ADDR_IB_UD;
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, ib.h, &info), -FI_ENODATA);
}

// FI_SOCKADDR asks for any socket address: the answers name the concrete
// family (IPv4 unless an IPv6 node or address is given), and providers
// whose addresses are no sockets (shm's strings) are not among them.
TEST(Getinfo, AnySockaddrFormat) {
  NEEDS_TCP();
  hints_ptr h;
  h->addr_format = FI_SOCKADDR;
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
  EXPECT_TRUE(l.providers().count("tcp"));
  EXPECT_FALSE(l.providers().count("shm")) << "shm's addresses are no sockets";
  for (fi_info* i = l.head; i; i = i->next) {
    EXPECT_EQ(i->addr_format, FI_SOCKADDR_IN);
    ASSERT_NE(i->src_addr, nullptr);
    EXPECT_EQ(i->src_addrlen, sizeof(sockaddr_in));
  }
  info_list v6;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "::1", "4715", 0, h.h, &v6.head), 0);
  for (fi_info* i = v6.head; i; i = i->next) EXPECT_EQ(i->addr_format, FI_SOCKADDR_IN6);
  info_list v4;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "4716", 0, h.h, &v4.head), 0);
  for (fi_info* i = v4.head; i; i = i->next) {
    EXPECT_EQ(i->addr_format, FI_SOCKADDR_IN);
    ASSERT_EQ(i->dest_addrlen, sizeof(sockaddr_in));
    EXPECT_EQ(ntohs(static_cast<sockaddr_in*>(i->dest_addr)->sin_port), 4716);
  }
  // A source address given: its family.
  hints_ptr a;
  a->addr_format = FI_SOCKADDR;
  a->fabric_attr->prov_name = strdup("tcp");
  auto* sin6 = static_cast<sockaddr_in6*>(calloc(1, sizeof(sockaddr_in6)));
  sin6->sin6_family = AF_INET6;
  sin6->sin6_addr = in6addr_loopback;
  a->src_addr = sin6;
  a->src_addrlen = sizeof *sin6;
  info_list from6;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, a.h, &from6.head), 0);
  for (fi_info* i = from6.head; i; i = i->next) {
    EXPECT_EQ(i->addr_format, FI_SOCKADDR_IN6);
    EXPECT_EQ(i->src_addrlen, sizeof(sockaddr_in6));
  }
}

TEST(Getinfo, NodeServiceAndSourceTcp) {
  NEEDS_TCP();
  hints_ptr h;
  h->fabric_attr->prov_name = strdup("tcp");
  h->ep_attr->type = FI_EP_RDM;
  info_list dst;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "4711", 0, h.h, &dst.head), 0);
  ASSERT_NE(dst.head->dest_addr, nullptr);
  ASSERT_EQ(dst.head->dest_addrlen, sizeof(sockaddr_in));
  auto* sin = static_cast<sockaddr_in*>(dst.head->dest_addr);
  EXPECT_EQ(ntohs(sin->sin_port), 4711);
  EXPECT_EQ(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);

  info_list src;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "4712", FI_SOURCE, h.h, &src.head), 0);
  ASSERT_NE(src.head->src_addr, nullptr);
  EXPECT_EQ(ntohs(static_cast<sockaddr_in*>(src.head->src_addr)->sin_port), 4712);
  EXPECT_EQ(src.head->dest_addr, nullptr);

  info_list svc_only;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, "4713", 0, h.h, &svc_only.head), 0);
  ASSERT_NE(svc_only.head->src_addr, nullptr);

  info_list v6;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "::1", "4714", 0, h.h, &v6.head), 0);
  EXPECT_EQ(v6.head->addr_format, FI_SOCKADDR_IN6);

  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), "no-such-host.invalid", "1", FI_NUMERICHOST, h.h, &info),
            -FI_ENODATA);
}

TEST(Getinfo, NodeServiceAndSourceShm) {
  hints_ptr shm;
  shm->fabric_attr->prov_name = strdup("shm");
  info_list sl;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "localhost", "7", 0, shm.h, &sl.head), 0);
  EXPECT_STREQ(static_cast<char*>(sl.head->dest_addr), "fi_shm://localhost:7");
  EXPECT_EQ(sl.head->dest_addrlen, strlen("fi_shm://localhost:7") + 1);
}

// The domains of a list of answers, in order.
std::vector<std::string> domains_of(const fi_info* head) {
  std::vector<std::string> d;
  for (const fi_info* i = head; i; i = i->next) d.emplace_back(i->domain_attr->name);
  return d;
}

// A source address in the hints picks the entry of the interface that
// holds it, as FI_SOURCE with that node does: so an answer's domain and
// src_addr agree, the provider answers as it does without the source (one
// entry per address), and an answer given back as hints finds its entry
// again. fabtests' clients (fi_xxx -s 127.0.0.1 <server>) resolve their -s
// address with FI_SOURCE and pass it as hints->src_addr toward the server;
// fi_multi_ep then asks again with that answer as hints, src_addr cleared,
// and a node with no service. lnx refused the first (its loopback source
// is no interface it offers: "names nothing it can reach"); tcp answered it
// for every interface, the first (eth0) with 127.0.0.1 as source, which
// the second then could not find (-FI_ENODATA).
TEST(Getinfo, SourceAddressInHintsPicksItsEntry) {
  for (const char* prov : {"tcp", "lnx"}) {
    if (!offered(prov)) continue;
    SCOPED_TRACE(prov);
    hints_ptr h;
    h->fabric_attr->prov_name = strdup(prov);
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG | FI_RMA;
    info_list without;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "9411", 0, h.h, &without.head), 0);
    info_list src;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, FI_SOURCE, h.h, &src.head), 0);
    EXPECT_EQ(src.count(), 1u) << "one entry per address";
    h->addr_format = src.head->addr_format;
    h->src_addr = malloc(src.head->src_addrlen);
    memcpy(h->src_addr, src.head->src_addr, src.head->src_addrlen);
    h->src_addrlen = src.head->src_addrlen;
    info_list first;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "9411", 0, h.h, &first.head), 0);
    EXPECT_EQ(domains_of(first.head), domains_of(without.head));
    EXPECT_EQ(domains_of(first.head), domains_of(src.head));
    for (fi_info* i = first.head; i; i = i->next) {
      ASSERT_EQ(i->src_addrlen, src.head->src_addrlen);
      EXPECT_EQ(memcmp(i->src_addr, src.head->src_addr, i->src_addrlen), 0);
      ASSERT_NE(i->dest_addr, nullptr);
    }
    // fi_multi_ep's second call.
    fi_info* again_hints = fi_dupinfo(first.head);
    free(again_hints->src_addr);
    again_hints->src_addr = nullptr;
    again_hints->src_addrlen = 0;
    info_list again;
    EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, 0, again_hints, &again.head), 0);
    fi_freeinfo(again_hints);
    if (again.head) {
      EXPECT_STREQ(again.head->domain_attr->name, first.head->domain_attr->name);
    }
  }
}

// The linked provider takes a source address given as a socket address
// too (hints->src_addr a sockaddr_in of 127.0.0.1, any port, as tcp takes
// it): it answers as without it, with an lnx address naming it as its tcp
// part's, and an endpoint made from the answer has its tcp part there: a
// peer that knows only that tcp address reaches it, data intact.
TEST(Getinfo, LnxTakesALoopbackSocketAddressAsSource) {
  if (!offered("lnx")) GTEST_SKIP() << "no linked provider";
  hints_ptr h;
  h->fabric_attr->prov_name = strdup("lnx");
  h->ep_attr->type = FI_EP_RDM;
  h->caps = FI_MSG | FI_TAGGED;
  info_list without;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "9411", 0, h.h, &without.head), 0);
  auto* sin = static_cast<sockaddr_in*>(calloc(1, sizeof(sockaddr_in)));
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  h->src_addr = sin;
  h->src_addrlen = sizeof *sin;
  info_list with;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "9411", 0, h.h, &with.head), 0);
  EXPECT_EQ(domains_of(with.head), domains_of(without.head));
  EXPECT_EQ(with.head->addr_format, uint32_t{FI_ADDR_STR});
  const std::string src(static_cast<char*>(with.head->src_addr));
  EXPECT_EQ(src.rfind("fi_lnx://", 0), 0u) << src;
  EXPECT_NE(src.find(";127.0.0.1:0"), std::string::npos) << src;
  // No node or service: the hints' socket address is the source all the same.
  info_list plain;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &plain.head), 0);
  EXPECT_STREQ(static_cast<char*>(plain.head->src_addr), src.c_str());

  // Two endpoints: `a` from that answer, `b` a default one, which inserts
  // only a's tcp address (as a node and service would name it).
  plain::endpoint a, b;
  ASSERT_TRUE(a.open(fi_dupinfo(with.head)));
  ASSERT_TRUE(b.open(fi_dupinfo(without.head)));
  char name[FI_NAME_MAX] = {};
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&a.ep->fid, name, &len), 0);
  std::string tcp_part(name);
  tcp_part = tcp_part.substr(tcp_part.rfind(';') + 1);
  tcp_part = tcp_part.substr(0, tcp_part.find('#'));
  ASSERT_EQ(tcp_part.rfind("127.0.0.1:", 0), 0u) << name << ": its tcp part listens where the source said";
  const std::string only_tcp = "fi_lnx://;;" + tcp_part;
  fi_addr_t to_a = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(b.av, only_tcp.c_str(), 1, &to_a, 0, nullptr), 1);
  char out[64], in[64] = {};
  for (size_t i = 0; i < sizeof out; ++i) out[i] = static_cast<char>('a' + i % 26);
  ASSERT_EQ(fi_trecv(a.ep, in, sizeof in, nullptr, FI_ADDR_UNSPEC, 7, 0, in), 0);
  ASSERT_EQ(fi_tsend(b.ep, out, sizeof out, nullptr, to_a, 7, out), 0);
  bool got = false, sent = false;
  fi_cq_tagged_entry ce;
  for (int i = 0; i < 20000000 && !(got && sent); ++i) {
    if (fi_cq_read(a.cq, &ce, 1) == 1) got = true;
    if (fi_cq_read(b.cq, &ce, 1) == 1) sent = true;
  }
  ASSERT_TRUE(got && sent);
  EXPECT_EQ(memcmp(in, out, sizeof out), 0);
  EXPECT_TRUE(a.close());
  EXPECT_TRUE(b.close());
}

TEST(Getinfo, AttributeLimits) {
  hints_ptr h;
  h->fabric_attr->prov_name = strdup("shm");
  h->tx_attr->size = 1 << 30;
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &info), -FI_ENODATA);
  hints_ptr ok;
  ok->fabric_attr->prov_name = strdup("shm");
  ok->tx_attr->size = 64;
  ok->tx_attr->inject_size = 64;
  ok->domain_attr->threading = FI_THREAD_DOMAIN;
  ok->domain_attr->data_progress = FI_PROGRESS_AUTO;
  ok->domain_attr->av_type = FI_AV_MAP;
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, ok.h, &l.head), 0);
  EXPECT_EQ(l.head->tx_attr->size, 64u);
  EXPECT_EQ(l.head->tx_attr->inject_size, 64u);
  EXPECT_EQ(l.head->domain_attr->threading, FI_THREAD_DOMAIN);
  EXPECT_EQ(l.head->domain_attr->data_progress, FI_PROGRESS_AUTO);
  EXPECT_EQ(l.head->domain_attr->av_type, FI_AV_MAP);
  hints_ptr bad;
  bad->domain_attr->threading = static_cast<fi_threading>(99);
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, bad.h, &info), -FI_ENODATA);
  hints_ptr name;
  name->domain_attr->name = strdup("mlx5_0");
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, name.h, &info), -FI_ENODATA);
  hints_ptr order;
  order->fabric_attr->prov_name = strdup("shm");
  order->tx_attr->msg_order = FI_ORDER_STRICT;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, order.h, &info), -FI_ENODATA);
}

TEST(Getinfo, MrModeBits) {
  hints_ptr h;
  h->fabric_attr->prov_name = strdup("shm");
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h.h, &l.head), 0);
  EXPECT_EQ(l.head->domain_attr->mr_mode, FI_MR_VIRT_ADDR);  // what shm prefers of those
  hints_ptr none;
  none->fabric_attr->prov_name = strdup("shm");
  none->domain_attr->mr_mode = 0;
  info_list ln;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, none.h, &ln.head), 0);
  EXPECT_EQ(ln.head->domain_attr->mr_mode, 0);
  hints_ptr basic;
  basic->domain_attr->mr_mode = FI_MR_BASIC;
  info_list lb;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, basic.h, &lb.head), 0);
  EXPECT_EQ(lb.head->domain_attr->mr_mode, FI_MR_BASIC);  // echoed as asked (its bits apply at fi_domain)
}

// An application of API 1.4 sees the legacy mr_mode enumeration.
TEST(Getinfo, LegacyVersionMrMode) {
  hints_ptr h;
  h->domain_attr->mr_mode = FI_MR_BASIC;
  h->mode = FI_LOCAL_MR;
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 4), nullptr, nullptr, 0, h.h, &l.head), 0);
  for (fi_info* i = l.head; i; i = i->next) {
    EXPECT_EQ(i->domain_attr->mr_mode, FI_MR_BASIC);
    EXPECT_EQ(i->fabric_attr->api_version, FI_VERSION(1, 4));
  }
  hints_ptr s;
  s->domain_attr->mr_mode = FI_MR_SCALABLE;
  info_list ls;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 4), nullptr, nullptr, 0, s.h, &ls.head), 0);
  EXPECT_EQ(ls.head->domain_attr->mr_mode, FI_MR_SCALABLE);
  info_list lu;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 0), nullptr, nullptr, 0, nullptr, &lu.head), 0);
  EXPECT_TRUE(lu.head->domain_attr->mr_mode == FI_MR_SCALABLE ||
              lu.head->domain_attr->mr_mode == FI_MR_BASIC);
}

TEST(Getinfo, ProvAttrOnly) {
  info_list l;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "1", FI_PROV_ATTR_ONLY, nullptr, &l.head), 0);
  for (fi_info* i = l.head; i; i = i->next) EXPECT_EQ(i->dest_addr, nullptr);
}

TEST(Dupinfo, DeepCopyAndAlloc) {
  fi_info* a = fi_allocinfo();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(a->tx_attr, nullptr);
  ASSERT_NE(a->rx_attr, nullptr);
  ASSERT_NE(a->ep_attr, nullptr);
  ASSERT_NE(a->domain_attr, nullptr);
  ASSERT_NE(a->fabric_attr, nullptr);
  EXPECT_EQ(a->nic, nullptr);
  a->caps = FI_MSG;
  a->domain_attr->name = strdup("dom");
  a->fabric_attr->prov_name = strdup("shm");
  a->src_addr = strdup("fi_shm://x");
  a->src_addrlen = 11;
  a->ep_attr->auth_key = static_cast<uint8_t*>(malloc(4));
  memset(a->ep_attr->auth_key, 7, 4);
  a->ep_attr->auth_key_size = 4;
  fi_info* d = fi_dupinfo(a);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->domain_attr->name, a->domain_attr->name);
  EXPECT_STREQ(d->domain_attr->name, "dom");
  EXPECT_STREQ(d->fabric_attr->prov_name, "shm");
  EXPECT_NE(d->src_addr, a->src_addr);
  EXPECT_STREQ(static_cast<char*>(d->src_addr), "fi_shm://x");
  EXPECT_EQ(d->ep_attr->auth_key[3], 7);
  EXPECT_EQ(d->next, nullptr);
  fi_freeinfo(a);
  fi_freeinfo(d);
  fi_freeinfo(nullptr);  // no crash
}

TEST(Fabric, OpenDomainCloseOrder) {
  fi_info* info = nullptr;
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("shm");
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0);
  fi_freeinfo(hints);
  fid_fabric* fabric = nullptr;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
  EXPECT_EQ(fabric->fid.fclass, FI_CLASS_FABRIC);
  EXPECT_EQ(fabric->api_version, FI_VERSION(1, 17));
  fid_domain* domain = nullptr;
  ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  EXPECT_EQ(domain->fid.fclass, FI_CLASS_DOMAIN);
  EXPECT_EQ(fi_close(&fabric->fid), -FI_EBUSY);  // a domain is open
  fid_ep* ep = nullptr;
  int ret = fi_endpoint(domain, info, &ep, nullptr);
  EXPECT_TRUE(ret == -FI_ENOSYS || ret == 0);
  if (ret == 0) {
    EXPECT_EQ(fi_close(&ep->fid), 0);
  }
  EXPECT_EQ(fi_close(&domain->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  fi_freeinfo(info);
}

TEST(Fabric, BadArguments) {
  fid_fabric* fabric = nullptr;
  EXPECT_EQ(fi_fabric(nullptr, &fabric, nullptr), -FI_EINVAL);
  fi_fabric_attr attr{};
  EXPECT_EQ(fi_fabric(&attr, nullptr, nullptr), -FI_EINVAL);
  attr.prov_name = const_cast<char*>("verbs");
  EXPECT_EQ(fi_fabric(&attr, &fabric, nullptr), -FI_ENODATA);
  attr.prov_name = const_cast<char*>("tcp");
  attr.api_version = FI_VERSION(1, 17);
  ASSERT_EQ(fi_fabric(&attr, &fabric, nullptr), 0);
  fid_domain* domain = nullptr;
  EXPECT_EQ(fi_domain(fabric, nullptr, &domain, nullptr), -FI_EINVAL);
  fi_info* info = fi_allocinfo();
  info->fabric_attr->prov_name = strdup("shm");  // wrong provider for this fabric
  EXPECT_EQ(fi_domain(fabric, info, &domain, nullptr), -FI_EINVAL);
  free(info->fabric_attr->prov_name);
  info->fabric_attr->prov_name = strdup("tcp");
  info->domain_attr->name = strdup("nope");
  EXPECT_EQ(fi_domain(fabric, info, &domain, nullptr), -FI_ENODATA);
  EXPECT_EQ(fi_domain2(fabric, info, &domain, 1, nullptr), -FI_EBADFLAGS);
  fi_freeinfo(info);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
}

TEST(Core, VersionAndStrerror) {
  EXPECT_EQ(fi_version(), FI_VERSION(2, 6));  // the newest API weft implements
  EXPECT_STREQ(fi_strerror(FI_EAVAIL), "Error available");
  EXPECT_STREQ(fi_strerror(-FI_EAVAIL), "Error available");
  EXPECT_STREQ(fi_strerror(FI_EINVAL), strerror(EINVAL));
  EXPECT_STREQ(fi_strerror(FI_ENORX), "Receiver not ready, no receive buffers available");
  EXPECT_STREQ(fi_strerror(100000), "Unknown error");
  fid* f = nullptr;
  EXPECT_EQ(fi_open(FI_VERSION(1, 17), "mr_cache", nullptr, 0, 0, &f, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_open(FI_VERSION(1, 17), nullptr, nullptr, 0, 0, &f, nullptr), -FI_EINVAL);
}

TEST(Core, Params) {
  fi_param* params = nullptr;
  int count = 0;
  ASSERT_EQ(fi_getparams(&params, &count), 0);
  bool found = false;
  for (int i = 0; i < count; ++i)
    if (!strcmp(params[i].name, "FI_PROVIDER")) found = true;
  EXPECT_TRUE(found);
  fi_freeparams(params);
  EXPECT_EQ(fi_getparams(nullptr, &count), -FI_EINVAL);

  fi_provider prov{};
  prov.name = "testprov";
  ASSERT_EQ(fi_param_define(&prov, "knob", FI_PARAM_INT, "a knob %d", 1), 0);
  int v = 0;
  unsetenv("FI_TESTPROV_KNOB");
  EXPECT_EQ(fi_param_get_int(&prov, "knob", &v), -FI_ENODATA);
  setenv("FI_TESTPROV_KNOB", "42", 1);
  EXPECT_EQ(fi_param_get_int(&prov, "knob", &v), 0);
  EXPECT_EQ(v, 42);
  setenv("FI_TESTPROV_KNOB", "x", 1);
  EXPECT_EQ(fi_param_get_int(&prov, "knob", &v), -FI_EINVAL);
  EXPECT_EQ(fi_param_get_int(&prov, "undefined", &v), -FI_ENOENT);
  EXPECT_EQ(fi_param_get(&prov, "knob", nullptr), -FI_EINVAL);
  ASSERT_EQ(fi_param_define(&prov, "flag", FI_PARAM_BOOL, "a flag"), 0);
  setenv("FI_TESTPROV_FLAG", "yes", 1);
  int b = 0;
  EXPECT_EQ(fi_param_get_bool(&prov, "flag", &b), 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(fi_param_define(&prov, nullptr, FI_PARAM_INT, "x"), -FI_EINVAL);
}

TEST(Core, Logging) {
  fi_provider prov{};
  prov.name = "shm";
  // FI_LOG_LEVEL is read once; with no level set, nothing is enabled.
  EXPECT_EQ(fi_log_enabled(&prov, FI_LOG_DEBUG, FI_LOG_CORE),
            getenv("FI_LOG_LEVEL") ? fi_log_enabled(&prov, FI_LOG_DEBUG, FI_LOG_CORE) : 0);
  uint64_t showtime = 0;
  (void)fi_log_ready(&prov, FI_LOG_WARN, FI_LOG_CORE, &showtime);
  fi_log(&prov, FI_LOG_WARN, FI_LOG_CORE, __func__, __LINE__, "%s", "test message");  // no crash
  fi_log(nullptr, FI_LOG_WARN, FI_LOG_CORE, nullptr, 0, nullptr);
}

}  // namespace
