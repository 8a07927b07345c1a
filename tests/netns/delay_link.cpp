// SPDX-License-Identifier: BSD-3-Clause
// delay_link: the link between the "hosts" of tests/netns/netns.sh when the
// kernel has no sch_netem. It runs in the switch namespace in place of the
// bridge: a hub that forwards every frame received on one port to every
// other port after a fixed delay, dropping a given share of them at random.
//
//   delay_link --delay-us N [--loss PERCENT] [--queue-bytes B] PORT...
//
// Frames are read and written with AF_PACKET sockets carrying a
// virtio_net_hdr (PACKET_VNET_HDR), so a frame the kernel hands over with
// its checksum still to compute or as one large TCP segment (veth offloads)
// goes out the same way and is finished by the kernel. The delay line is a
// FIFO of at most --queue-bytes (default 64 MiB); frames beyond it are
// dropped, as a full link queue would. Runs until SIGTERM or SIGINT; exits 1
// with a message when a port cannot be opened.
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

struct frame {
  uint64_t due_ns;
  size_t from;  // index of the port it came in on
  std::vector<uint8_t> bytes;  // virtio_net_hdr, then the Ethernet frame
};

int open_port(const char* name) {
  const unsigned idx = if_nametoindex(name);
  if (!idx) {
    fprintf(stderr, "delay_link: no interface %s\n", name);
    return -1;
  }
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) {
    perror("delay_link: socket(AF_PACKET)");
    return -1;
  }
  int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) ||
      setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one)) {
    perror("delay_link: setsockopt(SOL_PACKET)");
    close(fd);
    return -1;
  }
  sockaddr_ll a{};
  a.sll_family = AF_PACKET;
  a.sll_protocol = htons(ETH_P_ALL);
  a.sll_ifindex = static_cast<int>(idx);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)) {
    perror("delay_link: bind");
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t delay_us = 0;
  double loss = 0;
  size_t queue_max = 64u << 20;
  std::vector<std::string> names;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--delay-us" && i + 1 < argc) {
      delay_us = strtoull(argv[++i], nullptr, 10);
    } else if (a == "--loss" && i + 1 < argc) {
      loss = strtod(argv[++i], nullptr);
    } else if (a == "--queue-bytes" && i + 1 < argc) {
      queue_max = strtoull(argv[++i], nullptr, 10);
    } else if (!a.empty() && a[0] != '-') {
      names.push_back(a);
    } else {
      fprintf(stderr, "usage: delay_link --delay-us N [--loss PERCENT] [--queue-bytes B] PORT...\n");
      return 2;
    }
  }
  if (names.size() < 2 || loss < 0 || loss > 100 || delay_us > 10'000'000) {
    fprintf(stderr, "delay_link: two or more ports, a loss of 0..100 %% and a delay up to 10 s\n");
    return 2;
  }
  std::vector<pollfd> ports;
  for (const std::string& n : names) {
    int fd = open_port(n.c_str());
    if (fd < 0) return 1;
    ports.push_back({fd, POLLIN, 0});
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> pct(0, 100);
  std::deque<frame> line;
  size_t queued = 0;
  uint64_t dropped_full = 0;
  std::vector<uint8_t> buf(10 + 65536 + 64);
  while (!g_stop) {
    // Sleep until a port has a frame or the oldest frame is due.
    timespec wait{1, 0};
    if (!line.empty()) {
      const uint64_t t = now_ns();
      const uint64_t left = line.front().due_ns > t ? line.front().due_ns - t : 0;
      wait = {static_cast<time_t>(left / 1000000000ull), static_cast<long>(left % 1000000000ull)};
    }
    if (ppoll(ports.data(), ports.size(), &wait, nullptr) < 0 && errno != EINTR) {
      perror("delay_link: ppoll");
      return 1;
    }
    for (size_t i = 0; i < ports.size(); i++) {
      if (!(ports[i].revents & POLLIN)) continue;
      for (;;) {
        const ssize_t n = recv(ports[i].fd, buf.data(), buf.size(), 0);
        if (n <= 0) break;
        if (loss > 0 && pct(rng) < loss) continue;
        if (queued + size_t(n) > queue_max) {
          dropped_full++;
          continue;
        }
        line.push_back({now_ns() + delay_us * 1000, i, std::vector<uint8_t>(buf.begin(), buf.begin() + n)});
        queued += size_t(n);
      }
    }
    const uint64_t t = now_ns();
    while (!line.empty() && line.front().due_ns <= t) {
      const frame& f = line.front();
      for (size_t j = 0; j < ports.size(); j++)
        if (j != f.from) (void)send(ports[j].fd, f.bytes.data(), f.bytes.size(), MSG_DONTWAIT);
      queued -= f.bytes.size();
      line.pop_front();
    }
  }
  if (dropped_full) fprintf(stderr, "delay_link: %llu frames dropped on a full queue\n", (unsigned long long)dropped_full);
  return 0;
}
