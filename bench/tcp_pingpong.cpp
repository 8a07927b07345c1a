// SPDX-License-Identifier: BSD-3-Clause
// tcp-pingpong: the floor under any TCP transport on this host. Two
// processes (optionally pinned) talk over one loopback TCP connection with
// TCP_NODELAY, with nothing but the system calls: no header, no matching,
// no completion queue. Whatever weft's tcp provider, libfabric's tcp or
// UCX's tcp measure, the kernel's share is this.
//
//   latency    8-byte ping-pong, one-way time = round trip / 2
//   bandwidth  a stream of messages of 64 KiB and 1 MiB, the receiver
//              answers one byte at the end; bytes / time at the sender
//
// Each in three variants: "block" (blocking recv/send: the caller sleeps in
// the kernel), "poll" (non-blocking recv spinning on EAGAIN) and "epoll"
// (spinning on epoll_wait(0), then one recv: the readiness check takes no
// socket lock, while a recv on an empty socket takes the lock the sender's
// delivery needs too). Prints one line per figure:
//
//   tcp-pingpong [--cpus A,B] [--iters N] [--rounds R] [--ipv6]
//   tcp_lat_8_block_us <median of R rounds>   ... spread in the comment
//   tcp_bw_1048576_poll_MBps <median>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tool_util.h"

namespace {

double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

bool pin(int cpu) {
  if (cpu < 0) return true;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return sched_setaffinity(0, sizeof s, &s) == 0;
}

[[noreturn]] void die(const char* what) {
  perror(what);
  exit(1);
}

int epfd = -1;  // epoll variant: spin on epoll_wait(0), read when it says so

// Exactly n bytes; `poll` spins on EAGAIN instead of sleeping.
void recv_all(int fd, void* p, size_t n, bool poll) {
  auto* b = static_cast<char*>(p);
  while (n) {
    if (epfd >= 0) {
      epoll_event ev;
      while (epoll_wait(epfd, &ev, 1, 0) == 0) {}
    }
    const ssize_t r = recv(fd, b, n, poll ? MSG_DONTWAIT : 0);
    if (r > 0) {
      b += r;
      n -= size_t(r);
    } else if (r == 0) {
      fprintf(stderr, "peer closed\n");
      exit(1);
    } else if (errno != EAGAIN && errno != EINTR) {
      die("recv");
    }
  }
}

void send_all(int fd, const void* p, size_t n, bool poll) {
  auto* b = static_cast<const char*>(p);
  while (n) {
    const ssize_t r = send(fd, b, n, MSG_NOSIGNAL | (poll ? MSG_DONTWAIT : 0));
    if (r > 0) {
      b += r;
      n -= size_t(r);
    } else if (r < 0 && errno != EAGAIN && errno != EINTR) {
      die("send");
    }
  }
}

void nodelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct opts {
  int cpu_a = 0, cpu_b = 1;
  long iters = 20000;
  int rounds = 5;
  bool ipv6 = false;
};

// One test between the two sides of `fd`: returns the initiator's figure.
double lat(int fd, bool initiator, bool poll, long iters) {
  char b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto run = [&](long n) {
    for (long i = 0; i < n; ++i) {
      if (initiator) {
        send_all(fd, b, 8, poll);
        recv_all(fd, b, 8, poll);
      } else {
        recv_all(fd, b, 8, poll);
        send_all(fd, b, 8, poll);
      }
    }
  };
  // Warm-up as long as the measurement: an idle machine's cores start slow
  // (frequency, idle states), and the first program of a round paid for it.
  run(iters);
  const double t0 = now_s();
  run(iters);
  return (now_s() - t0) / double(iters) / 2 * 1e6;  // one-way microseconds
}

double bw(int fd, bool initiator, bool poll, size_t size, long count) {
  std::vector<char> buf(size, 'x');
  char ack = 0;
  // Warm-up: a quarter of the stream and an answer.
  for (long i = 0; i < count / 4 + 8; ++i)
    initiator ? send_all(fd, buf.data(), size, poll) : recv_all(fd, buf.data(), size, poll);
  initiator ? recv_all(fd, &ack, 1, poll) : send_all(fd, &ack, 1, poll);
  const double t0 = now_s();
  for (long i = 0; i < count; ++i)
    initiator ? send_all(fd, buf.data(), size, poll) : recv_all(fd, buf.data(), size, poll);
  initiator ? recv_all(fd, &ack, 1, poll) : send_all(fd, &ack, 1, poll);
  return double(size) * double(count) / (now_s() - t0) / 1e6;  // MB/s
}

// How a side waits for data: sleeping in recv, spinning on recv, or
// spinning on epoll_wait(0) and reading once it reports the socket.
enum mode { block, poll, epoll };

struct test {
  std::string name;
  bool is_lat;
  mode how;
  size_t size;
};

}  // namespace

int main(int argc, char** argv) {
  static const char usage[] =
      "usage: tcp-pingpong [--cpus A,B] [--iters N] [--rounds R] [--ipv6]\n"
      "The floor under any TCP transport on this host: two processes on one loopback TCP\n"
      "connection with nothing but the system calls. Prints one line per figure, the median\n"
      "of R rounds (spread in the comment): tcp_lat_8_<variant>_us (one-way latency of 8 B)\n"
      "and tcp_bw_<size>_<variant>_MBps, for the variants block, poll and epoll.\n"
      "  --cpus A,B   pin the two processes to CPUs A and B\n"
      "  --iters N    ping-pongs per latency round\n"
      "  --rounds R   rounds (the median is printed)\n"
      "  --ipv6       over ::1 instead of 127.0.0.1\n"
      "  -h, --help   this text\n";
  if (tool_help_asked(argc, argv)) tool_help(usage);
  opts o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    long v;
    if (!strcmp(a, "--ipv6")) {
      o.ipv6 = true;
      continue;
    }
    if (strcmp(a, "--cpus") && strcmp(a, "--iters") && strcmp(a, "--rounds"))
      tool_usage_error("tcp-pingpong", "unknown option %s", a);
    if (i + 1 >= argc) tool_usage_error("tcp-pingpong", "option %s needs an argument", a);
    const char* val = argv[++i];
    if (!strcmp(a, "--cpus")) {
      if (sscanf(val, "%d,%d", &o.cpu_a, &o.cpu_b) != 2)
        tool_usage_error("tcp-pingpong", "--cpus takes two CPU numbers, e.g. 0,1 (not '%s')", val);
    } else if (!tool_parse_long(val, 1, 1L << 40, &v)) {
      tool_usage_error("tcp-pingpong", "%s takes a positive number, not '%s'", a, val);
    } else if (!strcmp(a, "--iters")) {
      o.iters = v;
    } else {
      o.rounds = static_cast<int>(std::min(v, 1000000L));
    }
  }

  // Listen on an ephemeral loopback port, then fork the responder.
  const int fam = o.ipv6 ? AF_INET6 : AF_INET;
  const int l = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0) die("socket");
  sockaddr_storage ss{};
  socklen_t len;
  if (o.ipv6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  }
  if (bind(l, reinterpret_cast<sockaddr*>(&ss), len) || listen(l, 1)) die("bind/listen");
  if (getsockname(l, reinterpret_cast<sockaddr*>(&ss), &len)) die("getsockname");

  std::vector<test> tests = {{"tcp_lat_8_block_us", true, block, 8},
                             {"tcp_lat_8_poll_us", true, poll, 8},
                             {"tcp_lat_8_epoll_us", true, epoll, 8},
                             {"tcp_bw_65536_block_MBps", false, block, 65536},
                             {"tcp_bw_65536_poll_MBps", false, poll, 65536},
                             {"tcp_bw_65536_epoll_MBps", false, epoll, 65536},
                             {"tcp_bw_1048576_block_MBps", false, block, 1 << 20},
                             {"tcp_bw_1048576_poll_MBps", false, poll, 1 << 20},
                             {"tcp_bw_1048576_epoll_MBps", false, epoll, 1 << 20}};

  const pid_t pid = fork();
  if (pid < 0) die("fork");
  const bool initiator = pid != 0;
  int fd;
  if (initiator) {
    fd = accept(l, nullptr, nullptr);
  } else {
    fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&ss), len)) die("connect");
  }
  if (fd < 0) die("accept/socket");
  close(l);
  nodelay(fd);
  if (!pin(initiator ? o.cpu_a : o.cpu_b))
    fprintf(stderr, "# could not pin to the CPUs asked (%d,%d)\n", o.cpu_a, o.cpu_b);

  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: it reports the socket while data waits
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) die("epoll");
  for (const test& t : tests) {
    std::vector<double> v;
    epfd = t.how == epoll ? ep : -1;
    const bool spin = t.how != block;
    for (int r = 0; r < o.rounds; ++r) {
      const double x = t.is_lat
                           ? lat(fd, initiator, spin, o.iters)
                           : bw(fd, initiator, spin, t.size, std::max<long>(64, (256L << 20) / long(t.size)));
      v.push_back(x);
    }
    if (initiator) {
      std::sort(v.begin(), v.end());
      printf("%s %.3f   # min %.3f max %.3f over %d rounds\n", t.name.c_str(), v[v.size() / 2], v.front(),
             v.back(), o.rounds);
      fflush(stdout);
    }
  }
  close(fd);
  if (initiator) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  return 0;
}
