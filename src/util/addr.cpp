// SPDX-License-Identifier: BSD-3-Clause
// Address-format helpers: see addr.hpp for the formats and naming rules.
#include "util/addr.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>
#include <memory>

namespace weft::addr {

namespace {

constexpr std::string_view in_scheme = "fi_sockaddr_in://";
constexpr std::string_view in6_scheme = "fi_sockaddr_in6://";
constexpr std::string_view raw_scheme = "fi_addr_unspec://0x";

bool is_ip(uint32_t format) noexcept {
  return format == FI_SOCKADDR || format == FI_SOCKADDR_IN || format == FI_SOCKADDR_IN6;
}

// Family of the socket address at p (which may be unaligned); max bytes readable.
int family_of(const void* p, size_t max) noexcept {
  sa_family_t fam = AF_UNSPEC;
  if (max < sizeof(fam)) return AF_UNSPEC;
  std::memcpy(&fam, static_cast<const char*>(p) + offsetof(sockaddr, sa_family), sizeof(fam));
  return fam;
}

// Length of the IP address at p for `format`, 0 if invalid.
size_t ip_len(uint32_t format, const void* p, size_t max) noexcept {
  int fam = family_of(p, max);
  size_t len = 0;
  if (fam == AF_INET && format != FI_SOCKADDR_IN6) len = sizeof(sockaddr_in);
  if (fam == AF_INET6 && format != FI_SOCKADDR_IN) len = sizeof(sockaddr_in6);
  return len <= max ? len : 0;
}

bool parse_port(std::string_view s, uint16_t& port) noexcept {
  if (s.empty() || s.size() > 5) return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + unsigned(c - '0');
  }
  if (v > 65535) return false;
  port = uint16_t(v);
  return true;
}

// Copies `s` into buf with snprintf semantics; returns s.size() + 1.
size_t put(std::string_view s, char* buf, size_t len) noexcept {
  if (buf && len > 0) {
    size_t n = s.size() < len - 1 ? s.size() : len - 1;
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
  }
  return s.size() + 1;
}

// Splits a digit suffix off `s`: returns the position where it starts.
size_t suffix_pos(std::string_view s) noexcept {
  size_t i = s.size();
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
  return i;
}

int suffix_add(const char* s, uint64_t k, std::string& out) {
  if (!s) return -FI_EINVAL;
  std::string_view str(s);
  size_t pos = suffix_pos(str);
  if (k == 0) {
    out.assign(str);
    return 0;
  }
  std::string_view digits = str.substr(pos);
  if (digits.empty() || digits.size() > 19) return -FI_EINVAL;
  uint64_t v = 0;
  for (char c : digits) v = v * 10 + uint64_t(c - '0');
  if (k > UINT64_MAX - v) return -FI_EINVAL;
  v += k;
  char num[32];
  int n = std::snprintf(num, sizeof num, "%0*llu", int(digits.size()), static_cast<unsigned long long>(v));
  out.assign(str.substr(0, pos));
  out.append(num, size_t(n));
  return 0;
}

int gai_to_fi(int rc) noexcept {
  switch (rc) {
    case EAI_MEMORY:
      return -FI_ENOMEM;
    case EAI_AGAIN:
      return -FI_EAGAIN;
    case EAI_NONAME:
    case EAI_NODATA:
    case EAI_ADDRFAMILY:
    case EAI_SERVICE:
      return -FI_EADDRNOTAVAIL;
    default:
      return -FI_ENODATA;
  }
}

}  // namespace

size_t max_len(uint32_t format, size_t domain_len) noexcept {
  switch (format) {
    case FI_SOCKADDR_IN:
      return sizeof(sockaddr_in);
    case FI_SOCKADDR_IN6:
      return sizeof(sockaddr_in6);
    case FI_SOCKADDR:
      return sizeof(sockaddr_in6);
    case FI_ADDR_STR:
      return domain_len ? domain_len : 64;
    default:
      return domain_len;
  }
}

std::string str_prefix(std::string_view prov) {
  std::string s = "fi_";
  s.append(prov);
  s.append("://");
  return s;
}

size_t valid_len(uint32_t format, const void* p, size_t max, std::string_view prefix) noexcept {
  if (!p || max == 0) return 0;
  if (is_ip(format)) return ip_len(format, p, max);
  if (format == FI_ADDR_STR) {
    const char* s = static_cast<const char*>(p);
    size_t n = strnlen(s, max);
    if (n == 0 || n == max) return 0;
    if (!prefix.empty() && (n <= prefix.size() || std::string_view(s, prefix.size()) != prefix)) return 0;
    return n + 1;
  }
  return max;
}

size_t to_string(uint32_t format, const void* p, size_t max, char* buf, size_t len) noexcept {
  if (!p) return put("(null)", buf, len);
  if (format == FI_ADDR_STR)
    return put(std::string_view(static_cast<const char*>(p), strnlen(static_cast<const char*>(p), max)), buf,
               len);
  char tmp[128];
  if (is_ip(format) && ip_len(format, p, max)) {
    char host[INET6_ADDRSTRLEN] = "";
    int n;
    if (family_of(p, max) == AF_INET) {
      sockaddr_in sin;
      std::memcpy(&sin, p, sizeof sin);
      inet_ntop(AF_INET, &sin.sin_addr, host, sizeof host);
      n = std::snprintf(tmp, sizeof tmp, "%.*s%s:%u", int(in_scheme.size()), in_scheme.data(), host,
                        unsigned(ntohs(sin.sin_port)));
    } else {
      sockaddr_in6 sin6;
      std::memcpy(&sin6, p, sizeof sin6);
      inet_ntop(AF_INET6, &sin6.sin6_addr, host, sizeof host);
      n = std::snprintf(tmp, sizeof tmp, "%.*s[%s]:%u", int(in6_scheme.size()), in6_scheme.data(), host,
                        unsigned(ntohs(sin6.sin6_port)));
    }
    return put(std::string_view(tmp, size_t(n)), buf, len);
  }
  // Raw bytes (or a socket address of a family we do not know) as hex.
  if (is_ip(format) && max > sizeof(sockaddr_in6)) max = sizeof(sockaddr_in6);
  size_t need = raw_scheme.size() + 2 * max + 1;
  if (buf && len > 0) {
    static constexpr char hex[] = "0123456789abcdef";
    size_t o = 0;
    auto emit = [&](char c) {
      if (o + 1 < len) buf[o++] = c;
    };
    for (char c : raw_scheme) emit(c);
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < max; ++i) {
      emit(hex[b[i] >> 4]);
      emit(hex[b[i] & 15]);
    }
    buf[o] = '\0';
  }
  return need;
}

std::string to_string(uint32_t format, const void* p, size_t max) {
  std::string s(to_string(format, p, max, nullptr, 0), '\0');
  to_string(format, p, max, s.data(), s.size());
  s.pop_back();  // the NUL
  return s;
}

int parse(uint32_t format, std::string_view str, std::string& out) {
  if (format == FI_ADDR_STR) {
    out.assign(str);
    out.push_back('\0');
    return 0;
  }
  if (!is_ip(format)) return -FI_EINVAL;
  if (str.starts_with(in_scheme) && format != FI_SOCKADDR_IN6) {
    std::string_view rest = str.substr(in_scheme.size());
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return -FI_EINVAL;
    std::string host(rest.substr(0, colon));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    uint16_t port;
    if (!parse_port(rest.substr(colon + 1), port) || inet_pton(AF_INET, host.c_str(), &sin.sin_addr) != 1)
      return -FI_EINVAL;
    sin.sin_port = htons(port);
    out.assign(reinterpret_cast<const char*>(&sin), sizeof sin);
    return 0;
  }
  if (str.starts_with(in6_scheme) && format != FI_SOCKADDR_IN) {
    std::string_view rest = str.substr(in6_scheme.size());
    size_t close = rest.rfind("]:");
    if (rest.empty() || rest[0] != '[' || close == std::string_view::npos) return -FI_EINVAL;
    std::string host(rest.substr(1, close - 1));
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    uint16_t port;
    if (!parse_port(rest.substr(close + 2), port) || inet_pton(AF_INET6, host.c_str(), &sin6.sin6_addr) != 1)
      return -FI_EINVAL;
    sin6.sin6_port = htons(port);
    out.assign(reinterpret_cast<const char*>(&sin6), sizeof sin6);
    return 0;
  }
  return -FI_EINVAL;
}

int resolve(uint32_t format, std::string_view prefix, size_t max, const char* node, const char* service,
            std::string& out) {
  if (!node && !service) return -FI_EINVAL;
  if (format == FI_ADDR_STR) {
    if (!node) return -FI_EINVAL;
    std::string s;
    if (!prefix.empty() && std::string_view(node).starts_with(prefix)) {
      if (service) return -FI_EINVAL;  // man fi_av: a formatted node takes no service
      s = node;
    } else {
      s.assign(prefix);
      s.append(node);
      if (service) {
        s.push_back(':');
        s.append(service);
      }
    }
    if (s.size() + 1 > max || s.size() == prefix.size()) return -FI_EINVAL;
    out = std::move(s);
    out.push_back('\0');
    return 0;
  }
  if (!is_ip(format)) return -FI_ENOSYS;
  if (node && !service && std::string_view(node).starts_with("fi_")) return parse(format, node, out);
  uint16_t port;
  if (service && !parse_port(service, port)) return -FI_EINVAL;
  addrinfo hints{};
  hints.ai_family = format == FI_SOCKADDR_IN ? AF_INET : format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_UNSPEC;
  hints.ai_flags = AI_NUMERICSERV | (format == FI_SOCKADDR_IN6 ? AI_V4MAPPED : 0);
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(node, service, &hints, &res);
  if (rc != 0) return gai_to_fi(rc);
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> hold(res, &freeaddrinfo);
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    size_t len = ip_len(format, ai->ai_addr, ai->ai_addrlen);
    if (len && len <= max) {
      out.assign(reinterpret_cast<const char*>(ai->ai_addr), len);
      return 0;
    }
  }
  return -FI_EADDRNOTAVAIL;
}

int node_add(const char* node, uint64_t k, std::string& out) {
  if (!node) return -FI_EINVAL;
  char text[INET6_ADDRSTRLEN];
  in_addr a4;
  if (inet_pton(AF_INET, node, &a4) == 1) {
    uint64_t v = ntohl(a4.s_addr);
    if (k > UINT32_MAX - v) return -FI_EINVAL;
    a4.s_addr = htonl(uint32_t(v + k));
    inet_ntop(AF_INET, &a4, text, sizeof text);
    out = text;
    return 0;
  }
  in6_addr a6;
  if (inet_pton(AF_INET6, node, &a6) == 1) {
    // 128-bit big-endian add, byte by byte from the end.
    uint64_t carry = k;
    for (int i = 15; i >= 0 && carry; --i) {
      uint64_t s = uint64_t(a6.s6_addr[i]) + (carry & 0xff);
      a6.s6_addr[i] = uint8_t(s);
      carry = (carry >> 8) + (s >> 8);
    }
    if (carry) return -FI_EINVAL;
    inet_ntop(AF_INET6, &a6, text, sizeof text);
    out = text;
    return 0;
  }
  return suffix_add(node, k, out);
}

int service_add(const char* service, uint64_t k, std::string& out) {
  return suffix_add(service, k, out);
}

}  // namespace weft::addr
