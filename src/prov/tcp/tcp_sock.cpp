// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: socket helpers (see tcp_sock.hpp).
#include "prov/tcp/tcp_sock.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <rdma/fi_errno.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace weft::tcp {

void scoped_fd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

uint16_t sock_addr::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void sock_addr::set_port(uint16_t port) noexcept {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
}

bool sock_addr::any() const noexcept {
  if (family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (family() == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
    return IN6_IS_ADDR_UNSPECIFIED(&a);
  }
  return false;
}

bool sock_addr::loopback() const noexcept {
  if (family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
  return false;
}

std::string sock_addr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "?";
}

int sock_addr::from(const void* p, size_t n, sock_addr& out) noexcept {
  if (!p || n < sizeof(sa_family_t)) return -FI_EINVAL;
  sa_family_t f;
  memcpy(&f, p, sizeof f);
  if ((f == AF_INET && n == sizeof(sockaddr_in)) || (f == AF_INET6 && n == sizeof(sockaddr_in6))) {
    out = sock_addr{};
    memcpy(&out.ss, p, n);
    out.len = static_cast<socklen_t>(n);
    return 0;
  }
  return -FI_EINVAL;
}

int sock_addr::parse(const char* host, uint16_t port, sock_addr& out) noexcept {
  if (!host) return -FI_EINVAL;
  sock_addr a;
  auto* in4 = reinterpret_cast<sockaddr_in*>(&a.ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
  if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    a.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    a.len = sizeof(sockaddr_in6);
  } else {
    return -FI_EINVAL;
  }
  out = a;
  return 0;
}

wire_addr to_wire(const sock_addr& a, uint64_t instance) noexcept {
  wire_addr w{};
  w.instance = instance;
  w.port = a.port();
  if (a.family() == AF_INET) {
    w.family = static_cast<uint8_t>(wire_family::ipv4);
    memcpy(w.addr, &reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    w.family = static_cast<uint8_t>(wire_family::ipv6);
    memcpy(w.addr, &reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr, 16);
  }
  return w;
}

int from_wire(const wire_addr& w, sock_addr& out) noexcept {
  sock_addr a;
  if (w.family == static_cast<uint8_t>(wire_family::ipv4)) {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&a.ss);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(w.port);
    memcpy(&in4->sin_addr, w.addr, 4);
    a.len = sizeof(sockaddr_in);
  } else if (w.family == static_cast<uint8_t>(wire_family::ipv6)) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(w.port);
    memcpy(&in6->sin6_addr, w.addr, 16);
    a.len = sizeof(sockaddr_in6);
  } else {
    return -FI_EINVAL;
  }
  out = a;
  return 0;
}

bool same_address(const wire_addr& a, const wire_addr& b) noexcept {
  return a.family == b.family && a.port == b.port && memcmp(a.addr, b.addr, sizeof a.addr) == 0;
}

int identity_cmp(const wire_addr& a, const wire_addr& b) noexcept {
  if (a.family != b.family) return a.family < b.family ? -1 : 1;
  if (int c = memcmp(a.addr, b.addr, sizeof a.addr)) return c < 0 ? -1 : 1;
  if (a.port != b.port) return a.port < b.port ? -1 : 1;
  if (a.instance != b.instance) return a.instance < b.instance ? -1 : 1;
  return 0;
}

int fi_errno(int e) noexcept {
  switch (e) {
    case EPERM:
    case EINTR:
    case EIO:
    case EBADF:
    case EAGAIN:
    case ENOMEM:
    case EACCES:
    case EFAULT:
    case EBUSY:
    case ENODEV:
    case EINVAL:
    case EMFILE:
    case ENOSPC:
    case ENOSYS:
    case ENODATA:
    case EOVERFLOW:
    case EMSGSIZE:
    case ENOPROTOOPT:
    case EOPNOTSUPP:
    case EADDRINUSE:
    case EADDRNOTAVAIL:
    case ENETDOWN:
    case ENETUNREACH:
    case ECONNABORTED:
    case ECONNRESET:
    case ENOBUFS:
    case EISCONN:
    case ENOTCONN:
    case ESHUTDOWN:
    case ETIMEDOUT:
    case ECONNREFUSED:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case EALREADY:
    case EINPROGRESS:
    case EREMOTEIO:
    case ECANCELED:
      return -e;
    case ENFILE:
      return -FI_EMFILE;
    case EPIPE:
      return -FI_ECONNRESET;
    default:
      return -FI_EIO;
  }
}

namespace {

int new_socket(int family, scoped_fd& out) noexcept {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd >= 0) {
      out.reset(fd);
      return 0;
    }
    if ((errno != EMFILE && errno != ENFILE) || attempt || raise_nofile_step()) return fi_errno(errno);
  }
  return -FI_EMFILE;
}

}  // namespace

int sock_bind(const sock_addr& addr, scoped_fd& out, sock_addr& bound) noexcept {
  if (addr.family() != AF_INET && addr.family() != AF_INET6) return -FI_EINVAL;
  scoped_fd fd;
  if (int rc = new_socket(addr.family(), fd)) return rc;
  const int one = 1;
  if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one)) return fi_errno(errno);
  if (addr.family() == AF_INET6 && setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one))
    return fi_errno(errno);
  if (::bind(fd.get(), addr.sa(), addr.len)) return fi_errno(errno);
  sock_addr b;
  if (int rc = sock_local(fd.get(), b)) return rc;
  bound = b;
  out = std::move(fd);
  return 0;
}

int sock_listen(const sock_addr& addr, int backlog, scoped_fd& out, sock_addr& bound,
                scoped_fd* reserved) noexcept {
  scoped_fd fd;
  sock_addr b;
  if (reserved && *reserved) {
    if (int rc = sock_local(reserved->get(), b)) return rc;
    fd = std::move(*reserved);
  } else if (int rc = sock_bind(addr, fd, b)) {
    return rc;
  }
  if (::listen(fd.get(), backlog > 0 ? backlog : SOMAXCONN)) return fi_errno(errno);
  bound = b;
  out = std::move(fd);
  return 0;
}

int sock_connect(const sock_addr& to, scoped_fd& out, const sock_addr* from, scoped_fd* reserved) noexcept {
  if (to.family() != AF_INET && to.family() != AF_INET6) return -FI_EINVAL;
  if (to.port() == 0 || to.any()) return -FI_EINVAL;
  if (from && from->family() != to.family()) return -FI_EINVAL;
  scoped_fd fd;
  if (reserved && *reserved) {
    sock_addr b;
    if (int rc = sock_local(reserved->get(), b)) return rc;
    if (b.family() != to.family()) return -FI_EINVAL;
    fd = std::move(*reserved);
  } else {
    if (int rc = new_socket(to.family(), fd)) return rc;
    if (from && ::bind(fd.get(), from->sa(), from->len)) return fi_errno(errno);
  }
  if (::connect(fd.get(), to.sa(), to.len) && errno != EINPROGRESS) return fi_errno(errno);
  out = std::move(fd);
  return 0;
}

int open_reserve(scoped_fd& out) noexcept {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fi_errno(errno);
  out.reset(fd);
  return 0;
}

int sock_accept(int listen_fd, scoped_fd& out, sock_addr* peer, scoped_fd* reserve, const void* farewell,
                size_t farewell_len) noexcept {
  for (int attempt = 0; attempt < 2; ++attempt) {
    sock_addr a;
    a.len = sizeof a.ss;
    const int fd = ::accept4(listen_fd, a.sa(), &a.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      out.reset(fd);
      if (peer) *peer = a;
      return 0;
    }
    const int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK) return -FI_EAGAIN;
    if (e == EINTR || e == ECONNABORTED) continue;
    if (e != EMFILE && e != ENFILE) return fi_errno(e);
    if (attempt == 0 && raise_nofile_step() == 0) continue;
    // Out of descriptors for good: refuse this peer rather than leave it
    // in the backlog, where an edge-triggered listener would never see it
    // again.
    if (reserve && *reserve) {
      reserve->reset();
      const int victim = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (victim >= 0) {
        if (farewell_len) (void)::send(victim, farewell, farewell_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(victim);
      }
      open_reserve(*reserve);
    }
    return -FI_EMFILE;
  }
  return -FI_EAGAIN;
}

int sock_error(int fd) noexcept {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)) return fi_errno(errno);
  return err ? fi_errno(err) : 0;
}

int sock_nodelay(int fd) noexcept {
  const int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) ? fi_errno(errno) : 0;
}

int sock_liveness(int fd, int user_timeout_ms, int keepalive_s) noexcept {
  int ret = 0;
  if (user_timeout_ms > 0) {
    // Data not acknowledged this long (a link down, a peer frozen) fails the
    // connection: its operations end in error entries.
    unsigned t = static_cast<unsigned>(user_timeout_ms);
    if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &t, sizeof t)) ret = fi_errno(errno);
  }
  if (keepalive_s > 0) {
    // An idle connection whose peer vanished is noticed too.
    int on = 1, idle = keepalive_s, intvl = keepalive_s > 3 ? keepalive_s / 3 : 1, cnt = 3;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt))
      ret = fi_errno(errno);
  }
  return ret;
}

int sock_bufsizes(int fd, int sndbuf, int rcvbuf) noexcept {
  if (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf)) return fi_errno(errno);
  if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf)) return fi_errno(errno);
  return 0;
}

namespace {
int sock_name(int fd, sock_addr& out, bool peer) noexcept {
  sock_addr a;
  a.len = sizeof a.ss;
  if ((peer ? getpeername : getsockname)(fd, a.sa(), &a.len)) return fi_errno(errno);
  out = a;
  return 0;
}
}  // namespace

int sock_local(int fd, sock_addr& out) noexcept {
  return sock_name(fd, out, false);
}

int sock_remote(int fd, sock_addr& out) noexcept {
  return sock_name(fd, out, true);
}

namespace {
std::mutex nofile_lock;
}

long raise_nofile(long want) noexcept {
  std::lock_guard<std::mutex> g(nofile_lock);
  rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r)) return fi_errno(errno);
  if (want <= 0 || r.rlim_cur == RLIM_INFINITY || static_cast<long>(r.rlim_cur) >= want)
    return static_cast<long>(r.rlim_cur);
  rlim_t next = r.rlim_cur * 2 > r.rlim_cur + 1024 ? r.rlim_cur * 2 : r.rlim_cur + 1024;
  if (next < static_cast<rlim_t>(want)) next = static_cast<rlim_t>(want);
  if (r.rlim_max != RLIM_INFINITY && next > r.rlim_max) next = r.rlim_max;
  if (next == r.rlim_cur) return static_cast<long>(r.rlim_cur);
  r.rlim_cur = next;
  if (setrlimit(RLIMIT_NOFILE, &r)) return fi_errno(errno);
  return static_cast<long>(next);
}

int raise_nofile_step() noexcept {
  rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r)) return fi_errno(errno);
  if (r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= r.rlim_max) return -FI_EMFILE;
  const long now = raise_nofile(static_cast<long>(r.rlim_cur) + 1);
  return now > static_cast<long>(r.rlim_cur) ? 0 : -FI_EMFILE;
}

}  // namespace weft::tcp
