// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp: sockets. Thin, checked wrappers over the system calls every
// connection needs: addresses (IPv4 and IPv6), listening on an ephemeral
// port, non-blocking connect, accept that never leaves a peer hanging when
// descriptors run out, socket options, and the descriptor limit.
// Errors are negative FI_E* codes (libfabric's equal errno values).
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "prov/tcp/tcp_proto.hpp"

namespace weft::tcp {

// An owned file descriptor.
class scoped_fd {
public:
  scoped_fd() = default;
  explicit scoped_fd(int fd) noexcept : fd_(fd) {}
  ~scoped_fd() { reset(); }
  scoped_fd(scoped_fd&& o) noexcept : fd_(o.release()) {}
  scoped_fd& operator=(scoped_fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  scoped_fd(const scoped_fd&) = delete;
  scoped_fd& operator=(const scoped_fd&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1) noexcept;

private:
  int fd_ = -1;
};

// An IPv4 or IPv6 socket address.
struct sock_addr {
  sockaddr_storage ss{};
  socklen_t len = 0;

  int family() const noexcept { return ss.ss_family; }
  const sockaddr* sa() const noexcept { return reinterpret_cast<const sockaddr*>(&ss); }
  sockaddr* sa() noexcept { return reinterpret_cast<sockaddr*>(&ss); }
  uint16_t port() const noexcept;
  void set_port(uint16_t port) noexcept;
  bool any() const noexcept;       // the wildcard address (0.0.0.0 or ::)
  bool loopback() const noexcept;  // 127.0.0.0/8 or ::1
  std::string str() const;    // "1.2.3.4:5" or "[::1]:5"

  // From a sockaddr_in (16 bytes) or sockaddr_in6 (28 bytes) in [p, p + n):
  // 0 or -FI_EINVAL (other family, wrong length, null).
  static int from(const void* p, size_t n, sock_addr& out) noexcept;
  // Numeric host and port ("127.0.0.1", "::1"): 0 or -FI_EINVAL.
  static int parse(const char* host, uint16_t port, sock_addr& out) noexcept;
};

// tcp_init.cpp: the interfaces fi_getinfo offers for `family`: up, with an
// address of it (IPv6 link-local ones left out), FI_TCP_IFACE's alone when
// it is set, loopback last; their first address each, port 0. Throws
// std::bad_alloc.
struct iface {
  std::string name;
  sock_addr addr;
};
std::vector<iface> interfaces(int family);
// A local address: toward `toward` when given (where the kernel routes
// from), else the first of interfaces(family). Port 0.
int default_src(const sock_addr* toward, int family, sock_addr& out) noexcept;
// The same host address (ports ignored).
bool same_host(const sock_addr& a, const sock_addr& b) noexcept;
// fi_getinfo offers an entry per interface (its address the entry's
// src_addr): does the entry of the interface at `mine` answer for `a`? A
// local address (`source`): when the interface holds it, or, when none
// does (the wildcard), for the first interface. A destination: when the
// kernel routes toward it from that interface. Throws std::bad_alloc.
bool entry_answers(const sock_addr& mine, const sock_addr& a, bool source);

// Address + instance <-> the wire's identity.
wire_addr to_wire(const sock_addr& a, uint64_t instance) noexcept;
// 0 or -FI_EINVAL (family none).
int from_wire(const wire_addr& w, sock_addr& out) noexcept;
// A total order on identities: family, address bytes, port, instance.
int identity_cmp(const wire_addr& a, const wire_addr& b) noexcept;
// The same endpoint address (instance ignored).
bool same_address(const wire_addr& a, const wire_addr& b) noexcept;

// errno -> -FI_E* (identity for the values libfabric defines, -FI_EIO else).
int fi_errno(int e) noexcept;

// A socket bound to `addr` (port 0: the kernel chooses one), neither
// listening nor connected: an address reserved (fi_setname on a passive
// endpoint) until it listens or connects. `bound` receives the address
// actually bound. Non-blocking, close-on-exec, SO_REUSEADDR, IPV6_V6ONLY
// for IPv6.
int sock_bind(const sock_addr& addr, scoped_fd& out, sock_addr& bound) noexcept;

// A listening socket on `addr`, bound as sock_bind does; or, when `reserved`
// holds a socket from sock_bind, that socket (taken) listening where it is
// bound.
int sock_listen(const sock_addr& addr, int backlog, scoped_fd& out, sock_addr& bound,
                scoped_fd* reserved = nullptr) noexcept;

// Starts a non-blocking connect: 0 (a socket whose connect is under way or
// done) or an error. Whether it succeeded shows at the first write (EAGAIN
// while the SYN is out, the connect error once it failed) or in
// sock_error().
// `from`, when given, is bound first (the connection's source address);
// `reserved`, when it holds a socket from sock_bind, is the socket (taken),
// connecting from where it is bound.
int sock_connect(const sock_addr& to, scoped_fd& out, const sock_addr* from = nullptr,
                 scoped_fd* reserved = nullptr) noexcept;

// Accepts one connection, non-blocking and close-on-exec: 0, -FI_EAGAIN
// (none waiting), or an error. On EMFILE/ENFILE it raises the descriptor
// limit and retries once; if that fails and `reserve` holds a spare
// descriptor, it is closed, the waiting connection accepted, told
// `farewell` (one non-blocking write of `farewell_len` bytes, when given)
// and closed at once (so the peer sees its connection end instead of
// hanging in the backlog) and the spare reopened; the result is then
// -FI_EMFILE.
int sock_accept(int listen_fd, scoped_fd& out, sock_addr* peer, scoped_fd* reserve,
                const void* farewell = nullptr, size_t farewell_len = 0) noexcept;

// A spare descriptor for sock_accept (/dev/null).
int open_reserve(scoped_fd& out) noexcept;

int sock_error(int fd) noexcept;  // SO_ERROR as -FI_E*, 0 if none
int sock_nodelay(int fd) noexcept;
int sock_bufsizes(int fd, int sndbuf, int rcvbuf) noexcept;
// TCP_USER_TIMEOUT (ms) and keepalive (s) on a connection; 0 leaves one off.
int sock_liveness(int fd, int user_timeout_ms, int keepalive_s) noexcept;  // 0 leaves one as it is
int sock_local(int fd, sock_addr& out) noexcept;
int sock_remote(int fd, sock_addr& out) noexcept;

// Raises the soft RLIMIT_NOFILE towards the hard one so that at least
// `want` descriptors fit (doubling, at least +1024, at most the hard
// limit). Returns the soft limit now in force, or a negative FI_E* code.
long raise_nofile(long want) noexcept;
// The soft limit raised one step (used on EMFILE): 0 if raised, -FI_EMFILE
// if it already is the hard limit.
int raise_nofile_step() noexcept;

}  // namespace weft::tcp
