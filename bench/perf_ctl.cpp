// SPDX-License-Identifier: BSD-3-Clause
#include "perf_ctl.hpp"
#include <cstdio>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <ctime>

namespace weft_perf {

namespace {
char g_last_failure[512];
}

void fail(const std::string& msg) {
  snprintf(g_last_failure, sizeof g_last_failure, "%s", msg.c_str());
  throw perf_error(msg);
}

const char* last_failure() {
  return g_last_failure;
}

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

#if defined(__x86_64__)
double g_sec_per_tick = 0;

double sample_s_slow() {
  if (g_sec_per_tick == 0) {
    g_sec_per_tick = -1;
    FILE* f = std::fopen("/proc/cpuinfo", "r");
    bool constant = false;
    if (f) {
      char line[4096];
      while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, "flags", 5) == 0) {
          constant = std::strstr(line, " constant_tsc") && std::strstr(line, " nonstop_tsc");
          break;
        }
      std::fclose(f);
    }
    if (constant) {
      double t0 = now_s();
      unsigned long long c0 = __builtin_ia32_rdtsc();
      while (now_s() - t0 < 0.02) {}
      double t1 = now_s();
      unsigned long long c1 = __builtin_ia32_rdtsc();
      if (c1 > c0) g_sec_per_tick = (t1 - t0) / double(c1 - c0);
    }
  }
  if (g_sec_per_tick > 0) return double(__builtin_ia32_rdtsc()) * g_sec_per_tick;
  return now_s();
}
#else
double sample_s_slow() {
  return now_s();
}
#endif

static std::string errno_str(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

ctl_channel::ctl_channel(int fd, double timeout_s) : fd_(fd), timeout_s_(timeout_s) {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

ctl_channel::~ctl_channel() {
  if (fd_ >= 0) close(fd_);
}

void ctl_channel::send(ctl_type t, uint64_t a, uint64_t b, uint64_t c, const void* payload, uint32_t len) {
  ctl_msg m;
  m.type = uint32_t(t);
  m.len = len;
  m.a = a;
  m.b = b;
  m.c = c;
  std::vector<uint8_t> buf(sizeof m + len);
  std::memcpy(buf.data(), &m, sizeof m);
  if (len) std::memcpy(buf.data() + sizeof m, payload, len);
  size_t off = 0;
  double deadline = now_s() + timeout_s_;
  while (off < buf.size()) {
    ssize_t n = ::send(fd_, buf.data() + off, buf.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (now_s() > deadline) fail("control connection: send timed out (peer stuck?)");
      pollfd p{fd_, POLLOUT, 0};
      poll(&p, 1, 50);
      continue;
    }
    fail("control connection to peer lost (" + std::string(std::strerror(errno)) + "): peer died?");
  }
}

void ctl_channel::read_exact(void* p, size_t n) {
  auto* c = static_cast<uint8_t*>(p);
  size_t off = 0;
  double deadline = now_s() + timeout_s_;
  while (off < n) {
    double left = deadline - now_s();
    if (left <= 0)
      fail("control connection: no answer from peer within " + std::to_string(int(timeout_s_)) + " s");
    pollfd pfd{fd_, POLLIN, 0};
    int r = poll(&pfd, 1, int(left * 1000) + 1);
    if (r < 0 && errno != EINTR) fail(errno_str("poll"));
    if (r <= 0) continue;
    ssize_t got = ::recv(fd_, c + off, n - off, 0);
    if (got == 0) fail("peer closed the control connection (peer died?)");
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      fail("control connection to peer lost (" + std::string(std::strerror(errno)) + "): peer died?");
    }
    off += size_t(got);
  }
}

ctl_msg ctl_channel::recv(std::vector<uint8_t>* payload) {
  if (held_) {
    held_ = false;
    if (payload) *payload = std::move(held_body_);
    return held_msg_;
  }
  ctl_msg m;
  read_exact(&m, sizeof m);
  if (m.len > (1u << 20)) fail("control connection: malformed message from peer");
  std::vector<uint8_t> body(m.len);
  if (m.len) read_exact(body.data(), m.len);
  if (m.type == uint32_t(ctl_type::error)) fail("peer: " + std::string(body.begin(), body.end()));
  if (payload) *payload = std::move(body);
  return m;
}

ctl_msg ctl_channel::expect(ctl_type t, std::vector<uint8_t>* payload) {
  ctl_msg m = recv(payload);
  if (m.type != uint32_t(t))
    fail("control protocol error: expected message " + std::to_string(uint32_t(t)) + ", got " +
         std::to_string(m.type));
  return m;
}

bool ctl_channel::readable() const {
  pollfd p{fd_, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

void ctl_channel::hold_next() {
  std::vector<uint8_t> body;
  if (held_) {
    ctl_msg first = held_msg_;
    held_ = false;
    ctl_msg second = recv(&body);  // throws on EOF or an error message
    fail("control protocol error: the peer sent messages " + std::to_string(first.type) + " and " +
         std::to_string(second.type) + " during a transfer");
  }
  held_msg_ = recv(&body);
  held_body_ = std::move(body);
  held_ = true;
}

void ctl_channel::send_error(const std::string& msg) noexcept {
  try {
    if (fd_ >= 0) send(ctl_type::error, 0, 0, 0, msg.data(), uint32_t(msg.size()));
  } catch (...) {}
}

int ctl_listen(const char* addr, uint16_t port, uint16_t* bound) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(errno_str("socket"));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) fail(std::string("bad bind address ") + addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    fail(errno_str(("bind " + std::string(addr) + ":" + std::to_string(port)).c_str()));
  }
  if (listen(fd, 4) < 0) fail(errno_str("listen"));
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  if (bound) *bound = ntohs(sa.sin_port);
  return fd;
}

int ctl_accept(int lfd, double timeout_s, bool (*alive)(void*), void* arg) {
  double deadline = now_s() + timeout_s;
  for (;;) {
    pollfd p{lfd, POLLIN, 0};
    int r = poll(&p, 1, 100);
    if (r > 0) {
      int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) return fd;
      if (errno != EINTR && errno != EAGAIN) fail(errno_str("accept"));
    }
    if (alive && !alive(arg)) fail("peer process exited before connecting");
    if (now_s() > deadline) fail("no peer connected within " + std::to_string(int(timeout_s)) + " s");
  }
}

int ctl_connect(const std::string& host, uint16_t port, double timeout_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string svc = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), svc.c_str(), &hints, &res);
  if (rc != 0) fail("cannot resolve " + host + ": " + gai_strerror(rc));
  double deadline = now_s() + timeout_s;
  std::string last = "timed out";
  for (;;) {
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        freeaddrinfo(res);
        return fd;
      }
      last = std::strerror(errno);
      close(fd);
    }
    if (now_s() > deadline) {
      freeaddrinfo(res);
      fail("cannot connect to " + host + ":" + svc + ": " + last);
    }
    usleep(50 * 1000);
  }
}

}  // namespace weft_perf
