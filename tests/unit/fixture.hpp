// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A fixture that opens fabric + domain through the public API, once per
// provider (the way UCX instantiates each test per transport).
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace weft_test {

// The suites run over weft's own libfabric.so.1 (weft_unit_tests) and again
// over weft's plugins in Debian's libfabric (weft_plugin_tests, built with
// WEFT_TEST_PROV_PREFIX="weft_"), where a provider is known as weft_<name>
// and reads FI_WEFT_<NAME>_* variables.
#ifndef WEFT_TEST_PROV_PREFIX
#define WEFT_TEST_PROV_PREFIX ""
#endif
// The name the program knows the provider `own` by.
inline const char* prov_name(const char* own) {
  static std::map<std::string, std::string> names;
  auto [it, added] = names.try_emplace(own, std::string(WEFT_TEST_PROV_PREFIX) + own);
  return it->second.c_str();
}
// A provider's variable as the program reads it: "FI_SHM_X=1" -> "FI_WEFT_SHM_X=1".
inline std::string prov_var(const char* var) {
  std::string prefix = WEFT_TEST_PROV_PREFIX;
  for (char& c : prefix) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  std::string v = var;
  return v.rfind("FI_", 0) == 0 ? "FI_" + prefix + v.substr(3) : v;
}

// A TCP port nobody on 127.0.0.1 uses right now (the kernel's choice), for
// tests that name an address in full and must not collide with others.
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

// The provider's first fi_info of `type` (FI_EP_UNSPEC: its first, RDM for
// shm and tcp, DGRAM for udp).
inline fi_info* get_info(const char* prov, fi_ep_type type = FI_EP_UNSPEC,
                         uint32_t version = FI_VERSION(1, 17)) {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup(prov);
  hints->ep_attr->type = type;
  fi_info* info = nullptr;
  int ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  return ret == 0 ? info : nullptr;
}

class domain_test : public ::testing::TestWithParam<const char*> {
protected:
  void SetUp() override {
    info = get_info(GetParam());
    ASSERT_NE(info, nullptr) << "fi_getinfo for " << GetParam();
    adjust(info);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  }
  void TearDown() override {
    if (domain) {
      EXPECT_EQ(fi_close(&domain->fid), 0);
    }
    if (fabric) {
      EXPECT_EQ(fi_close(&fabric->fid), 0);
    }
    if (info) fi_freeinfo(info);
  }
  // A suite's changes to the provider's fi_info before the fabric and
  // domain open (a threading level, say).
  virtual void adjust(fi_info*) {}
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
};

// Whether a provider offers anything (tcp offers nothing until its
// endpoints exist).
inline bool offered(const char* prov) {
  fi_info* h = fi_allocinfo();
  h->fabric_attr->prov_name = strdup(prov);
  fi_info* info = nullptr;
  int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info);
  fi_freeinfo(h);
  fi_freeinfo(info);
  return ret == 0;
}

// Every weft provider fi_getinfo offers, in its order (a provider that offers
// nothing yet, such as tcp before its endpoints exist, has no tests to run).
inline std::vector<const char*> offered_providers() {
  static std::vector<std::string> names;
  static std::vector<const char*> out;
  if (names.empty()) {
    fi_info* all = nullptr;
    if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &all) == 0)
      for (fi_info* i = all; i; i = i->next)
        if (std::find(names.begin(), names.end(), i->fabric_attr->prov_name) == names.end() &&
            !strncmp(i->fabric_attr->prov_name, WEFT_TEST_PROV_PREFIX, strlen(WEFT_TEST_PROV_PREFIX)))
          names.emplace_back(i->fabric_attr->prov_name);
    fi_freeinfo(all);
    for (const std::string& n : names) out.push_back(n.c_str());
  }
  return out;
}

// Instantiate a domain_test-derived suite for every provider.
#define WEFT_ALL_PROVIDERS(suite)                                                            \
  INSTANTIATE_TEST_SUITE_P(prov, suite, ::testing::ValuesIn(weft_test::offered_providers()), \
                           [](const auto& p) { return std::string(p.param); })

}  // namespace weft_test
