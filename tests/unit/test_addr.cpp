// SPDX-License-Identifier: BSD-3-Clause
// White-box tests of the address-format helpers (src/util/addr.hpp).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <cstring>
#include <string>

#include "util/addr.hpp"

namespace {

using namespace weft;

std::string sin4(const char* ip, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(port);
  inet_pton(AF_INET, ip, &s.sin_addr);
  return std::string(reinterpret_cast<const char*>(&s), sizeof s);
}

std::string sin6(const char* ip, uint16_t port) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &s.sin6_addr);
  return std::string(reinterpret_cast<const char*>(&s), sizeof s);
}

TEST(Addr, MaxLen) {
  EXPECT_EQ(addr::max_len(FI_SOCKADDR_IN, 0), sizeof(sockaddr_in));
  EXPECT_EQ(addr::max_len(FI_SOCKADDR_IN6, 0), sizeof(sockaddr_in6));
  EXPECT_EQ(addr::max_len(FI_SOCKADDR, 0), sizeof(sockaddr_in6));
  EXPECT_EQ(addr::max_len(FI_ADDR_STR, 64), 64u);
  EXPECT_EQ(addr::max_len(FI_FORMAT_UNSPEC, 0), 0u);
  EXPECT_EQ(addr::str_prefix("shm"), "fi_shm://");
}

TEST(Addr, ValidLen) {
  std::string a = sin4("1.2.3.4", 5);
  EXPECT_EQ(addr::valid_len(FI_SOCKADDR_IN, a.data(), a.size(), ""), 16u);
  EXPECT_EQ(addr::valid_len(FI_SOCKADDR_IN6, a.data(), 28, ""), 0u);
  EXPECT_EQ(addr::valid_len(FI_SOCKADDR, a.data(), 28, ""), 16u);
  std::string b = sin6("::1", 5);
  EXPECT_EQ(addr::valid_len(FI_SOCKADDR_IN6, b.data(), b.size(), ""), 28u);
  EXPECT_EQ(addr::valid_len(FI_SOCKADDR_IN, b.data(), 16, ""), 0u);
  EXPECT_EQ(addr::valid_len(FI_SOCKADDR_IN, nullptr, 16, ""), 0u);
  const char s[] = "fi_shm://x";
  EXPECT_EQ(addr::valid_len(FI_ADDR_STR, s, 64, "fi_shm://"), sizeof s);
  EXPECT_EQ(addr::valid_len(FI_ADDR_STR, s, 5, "fi_shm://"), 0u);             // no NUL within max
  EXPECT_EQ(addr::valid_len(FI_ADDR_STR, "fi_shm://", 64, "fi_shm://"), 0u);  // empty name
  EXPECT_EQ(addr::valid_len(FI_ADDR_STR, "fi_tcp://x", 64, "fi_shm://"), 0u);
  EXPECT_EQ(addr::valid_len(FI_ADDR_STR, "", 64, ""), 0u);
}

TEST(Addr, ToString) {
  std::string a = sin4("127.0.0.1", 5000);
  EXPECT_EQ(addr::to_string(FI_SOCKADDR_IN, a.data(), a.size()), "fi_sockaddr_in://127.0.0.1:5000");
  std::string b = sin6("fe80::1", 7);
  EXPECT_EQ(addr::to_string(FI_SOCKADDR_IN6, b.data(), b.size()), "fi_sockaddr_in6://[fe80::1]:7");
  EXPECT_EQ(addr::to_string(FI_SOCKADDR, b.data(), b.size()), "fi_sockaddr_in6://[fe80::1]:7");
  EXPECT_EQ(addr::to_string(FI_ADDR_STR, "fi_shm://abc", 64), "fi_shm://abc");
  const unsigned char raw[3] = {0x01, 0xab, 0xff};
  EXPECT_EQ(addr::to_string(FI_FORMAT_UNSPEC, raw, 3), "fi_addr_unspec://0x01abff");
  // snprintf semantics.
  char buf[10];
  EXPECT_EQ(addr::to_string(FI_SOCKADDR_IN, a.data(), a.size(), buf, sizeof buf), 32u);
  EXPECT_STREQ(buf, "fi_sockad");
  EXPECT_EQ(addr::to_string(FI_FORMAT_UNSPEC, raw, 3, buf, sizeof buf), 26u);
  EXPECT_STREQ(buf, "fi_addr_u");
  buf[0] = 'z';
  EXPECT_EQ(addr::to_string(FI_ADDR_STR, "fi_shm://abc", 64, buf, 0), 13u);
  EXPECT_EQ(buf[0], 'z');
}

TEST(Addr, ParseRoundTrips) {
  std::string out;
  ASSERT_EQ(addr::parse(FI_SOCKADDR_IN, "fi_sockaddr_in://10.0.0.1:80", out), 0);
  EXPECT_EQ(out, sin4("10.0.0.1", 80));
  ASSERT_EQ(addr::parse(FI_SOCKADDR_IN6, "fi_sockaddr_in6://[::1]:65535", out), 0);
  EXPECT_EQ(out, sin6("::1", 65535));
  ASSERT_EQ(addr::parse(FI_SOCKADDR, "fi_sockaddr_in://10.0.0.1:80", out), 0);
  EXPECT_EQ(addr::parse(FI_SOCKADDR_IN, "fi_sockaddr_in6://[::1]:1", out), -FI_EINVAL);
  EXPECT_EQ(addr::parse(FI_SOCKADDR_IN, "fi_sockaddr_in://10.0.0.1:65536", out), -FI_EINVAL);
  EXPECT_EQ(addr::parse(FI_SOCKADDR_IN, "fi_sockaddr_in://10.0.0.1", out), -FI_EINVAL);
  EXPECT_EQ(addr::parse(FI_SOCKADDR_IN, "fi_sockaddr_in://host:1", out), -FI_EINVAL);
  EXPECT_EQ(addr::parse(FI_SOCKADDR_IN6, "fi_sockaddr_in6://::1:1", out), -FI_EINVAL);
}

TEST(Addr, Resolve) {
  std::string out;
  ASSERT_EQ(addr::resolve(FI_SOCKADDR_IN, "", 16, "127.0.0.1", "5000", out), 0);
  EXPECT_EQ(out, sin4("127.0.0.1", 5000));
  ASSERT_EQ(addr::resolve(FI_SOCKADDR_IN6, "", 28, "::1", "9", out), 0);
  EXPECT_EQ(out, sin6("::1", 9));
  ASSERT_EQ(addr::resolve(FI_SOCKADDR_IN, "", 16, "fi_sockaddr_in://1.2.3.4:5", nullptr, out), 0);
  EXPECT_EQ(out, sin4("1.2.3.4", 5));
  EXPECT_EQ(addr::resolve(FI_SOCKADDR_IN, "", 16, nullptr, nullptr, out), -FI_EINVAL);
  EXPECT_EQ(addr::resolve(FI_SOCKADDR_IN, "", 16, "127.0.0.1", "http", out), -FI_EINVAL);
  EXPECT_EQ(addr::resolve(FI_SOCKADDR_IN, "", 16, "no.such.host.invalid", "1", out) < 0, true);

  ASSERT_EQ(addr::resolve(FI_ADDR_STR, "fi_shm://", 64, "n", "2", out), 0);
  EXPECT_EQ(out, std::string("fi_shm://n:2\0", 13));
  ASSERT_EQ(addr::resolve(FI_ADDR_STR, "fi_shm://", 64, "n", nullptr, out), 0);
  EXPECT_EQ(out, std::string("fi_shm://n\0", 11));
  ASSERT_EQ(addr::resolve(FI_ADDR_STR, "fi_shm://", 64, "fi_shm://q", nullptr, out), 0);
  EXPECT_EQ(out, std::string("fi_shm://q\0", 11));
  EXPECT_EQ(addr::resolve(FI_ADDR_STR, "fi_shm://", 64, "fi_shm://q", "1", out), -FI_EINVAL);
  EXPECT_EQ(addr::resolve(FI_ADDR_STR, "fi_shm://", 64, nullptr, "1", out), -FI_EINVAL);
  EXPECT_EQ(addr::resolve(FI_ADDR_STR, "fi_shm://", 12, "name", "1234", out), -FI_EINVAL);  // too long
}

TEST(Addr, NodeAndServiceRanges) {
  std::string out;
  ASSERT_EQ(addr::node_add("10.1.1.1", 1, out), 0);
  EXPECT_EQ(out, "10.1.1.2");
  ASSERT_EQ(addr::node_add("10.1.1.255", 1, out), 0);
  EXPECT_EQ(out, "10.1.2.0");
  EXPECT_EQ(addr::node_add("255.255.255.255", 1, out), -FI_EINVAL);
  ASSERT_EQ(addr::node_add("fe80::ff", 1, out), 0);
  EXPECT_EQ(out, "fe80::100");
  ASSERT_EQ(addr::node_add("host10", 1, out), 0);
  EXPECT_EQ(out, "host11");
  ASSERT_EQ(addr::node_add("host09", 1, out), 0);
  EXPECT_EQ(out, "host10");
  ASSERT_EQ(addr::node_add("host99", 1, out), 0);
  EXPECT_EQ(out, "host100");
  ASSERT_EQ(addr::node_add("host", 0, out), 0);
  EXPECT_EQ(out, "host");
  EXPECT_EQ(addr::node_add("host", 1, out), -FI_EINVAL);
  EXPECT_EQ(addr::node_add(nullptr, 0, out), -FI_EINVAL);
  ASSERT_EQ(addr::service_add("5000", 3, out), 0);
  EXPECT_EQ(out, "5003");
  EXPECT_EQ(addr::service_add("http", 1, out), -FI_EINVAL);
  EXPECT_EQ(addr::service_add("99999999999999999999", 1, out), -FI_EINVAL);
}

}  // namespace
