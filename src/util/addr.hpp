// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Address formats as the AV (and providers) see them: how long an address in a
// buffer is, how it prints, and how node/service names become addresses.
//
// Supported formats:
//   FI_SOCKADDR_IN   struct sockaddr_in  (16 bytes, sin_family AF_INET)
//   FI_SOCKADDR_IN6  struct sockaddr_in6 (28 bytes, sin6_family AF_INET6)
//   FI_SOCKADDR      either of the two, by family
//   FI_ADDR_STR      a NUL-terminated string "fi_<prov>://<name>" (e.g.
//                    "fi_shm://peer0"), at most `max` bytes with the NUL
//   anything else    `max` raw bytes, printed as "fi_addr_unspec://0x<hex>"
//
// Printable forms (fi_av_straddr, and the inverse parse()):
//   fi_sockaddr_in://127.0.0.1:5000      fi_sockaddr_in6://[::1]:5000
//   FI_ADDR_STR addresses print as themselves.
//
// Node/service names (fi_av_insertsvc, fi_av_insertsym):
//   IP formats: getaddrinfo(node, service) with AI_NUMERICSERV (service must
//     be a port number); node may be a host name or a numeric address; a node
//     that is itself a printable address ("fi_sockaddr_in://1.2.3.4:5") is
//     parsed when service is NULL.
//   FI_ADDR_STR: node "n" and service "s" name "fi_<prov>://n:s"; service NULL
//     names "fi_<prov>://n"; a node already starting with "fi_<prov>://" is
//     used as is (then service must be NULL).
//   insertsym ranges: an IPv4/IPv6 literal counts up as an integer
//     (10.1.1.255 + 1 = 10.1.2.0); any other node or service counts up its
//     numeric suffix, keeping zero padding ("host09" + 1 = "host10"). A name
//     without a numeric suffix cannot be counted beyond +0.
#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace weft::addr {

// Bytes an address of `format` may occupy; `domain_len` is the domain's
// addrlen (used for FI_ADDR_STR and raw formats). 0: unusable format.
size_t max_len(uint32_t format, size_t domain_len) noexcept;

// The FI_ADDR_STR prefix of a provider: "fi_<prov>://".
std::string str_prefix(std::string_view prov);

// Length in bytes of the address at `p` if it is a valid address of `format`
// no longer than `max` (FI_ADDR_STR: strlen + 1, and it must start with
// `prefix` when prefix is not empty); 0 when it is not. At most `max` bytes
// of `p` are read.
size_t valid_len(uint32_t format, const void* p, size_t max, std::string_view prefix) noexcept;

// Writes the printable form of the address at `p` (at most `max` bytes are
// read) into buf with snprintf semantics (NUL-terminated when len > 0, output
// truncated to len - 1 characters) and returns the size needed, NUL included.
size_t to_string(uint32_t format, const void* p, size_t max, char* buf, size_t len) noexcept;
std::string to_string(uint32_t format, const void* p, size_t max);

// Parses a printable address of `format` into raw bytes. 0 or -FI_EINVAL.
int parse(uint32_t format, std::string_view str, std::string& out);

// Resolves node/service into one address of `format` (raw bytes in `out`).
// `prefix` is the FI_ADDR_STR prefix; `max` bounds the result. Returns 0,
// -FI_EINVAL for malformed arguments, or -FI_EADDRNOTAVAIL / -FI_ENODATA when
// resolution fails.
int resolve(uint32_t format, std::string_view prefix, size_t max, const char* node, const char* service,
            std::string& out);

// `node` + k for insertsym (see above). 0 or -FI_EINVAL.
int node_add(const char* node, uint64_t k, std::string& out);
// `service` + k: the numeric suffix counts up. 0 or -FI_EINVAL.
int service_add(const char* service, uint64_t k, std::string& out);

}  // namespace weft::addr
