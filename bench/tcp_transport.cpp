// SPDX-License-Identifier: BSD-3-Clause
// tcp-transport: weft's tcp transport layer (src/prov/tcp: conn, poller)
// alone, between two processes on loopback, beside the raw-socket floor
// (tcp-pingpong): what the framing, the handshake-established connection,
// the send queue and the busy-polling progress engine add to the kernel's
// share, before any endpoint, matcher or completion queue exists.
//
//   tcp-transport [--cpus A,B] [--iters N] [--rounds R]
//   xport_lat_8_us <median one-way µs>
//   xport_bw_65536_MBps / xport_bw_1048576_MBps <median MB/s>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "prov/tcp/tcp_conn.hpp"
#include "prov/tcp/tcp_progress.hpp"

namespace {

using namespace weft::tcp;

double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}

// A frame to send; `busy` while the connection still holds it.
struct frame_out : tx_entry {
  bool busy = false;
  std::vector<unsigned char> data;
  explicit frame_out(size_t n) : data(n, 'x') {}
};

struct owner final : conn_owner {
  conn* c = nullptr;
  bool connected = false, closed = false;
  uint64_t frames = 0, bytes = 0, answers_due = 0;
  std::vector<unsigned char> buf = std::vector<unsigned char>(1 << 20);
  iovec iov{buf.data(), buf.size()};

  void on_connreq(conn& x) noexcept override {
    c = &x;
    x.accept(nullptr, 0);
  }
  void on_connected(conn& x) noexcept override {
    c = &x;
    connected = true;
  }
  rx_target on_frame(conn&, const frame_hdr&, const rma_desc*) noexcept override {
    return {rx_action::deliver, &iov, 1};
  }
  void on_payload(conn&, const frame_hdr& h, uint64_t landed) noexcept override {
    ++frames;
    bytes += landed;
    if (h.id) ++answers_due;  // the sender wants an answer to this one
  }
  void on_sent(conn&, tx_entry& e, int) noexcept override { static_cast<frame_out&>(e).busy = false; }
  void on_closed(conn&, int) noexcept override { closed = true; }
};

// Sends one frame (answer: the peer replies to it); returns once it is
// written or queued.
void send(owner& o, frame_out& f, bool answer) {
  frame_hdr h{};
  h.op = static_cast<uint8_t>(op::msg);
  h.length = h.aux = f.data.size();
  h.id = answer;
  iovec v{f.data.data(), f.data.size()};
  f.prepare(h, nullptr, &v, 1);
  const int rc = o.c->send(f);
  if (rc < 0) {
    fprintf(stderr, "send failed\n");
    exit(1);
  }
  f.busy = rc == 0;
}

template <class P>
void spin(poller& p, P pred) {
  const double end = now_s() + 30;
  while (!pred()) {
    p.progress();
    if (now_s() > end) {
      fprintf(stderr, "tcp-transport: timed out\n");
      exit(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int cpu_a = 0, cpu_b = 1, rounds = 5;
  long iters = 20000;
  bool do_lat = true, do_bw = true;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--cpus") && i + 1 < argc)
      sscanf(argv[++i], "%d,%d", &cpu_a, &cpu_b);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      do_lat = !strcmp(argv[++i], "lat");
      do_bw = !do_lat;
    } else {
      fprintf(stderr, "usage: %s [--cpus A,B] [--iters N] [--rounds R] [--only lat|bw]\n", argv[0]);
      return 2;
    }
  }
  auto cfg = std::make_shared<conn_config>();
  cfg->limits.eager_max = 1 << 20;
  cfg->new_instance();
  poller p;
  owner o;
  listener* l = nullptr;
  sock_addr a;
  sock_addr::parse("127.0.0.1", 0, a);
  if (p.listen(o, cfg, a, 4, &l)) {
    fprintf(stderr, "listen failed\n");
    return 1;
  }
  const sock_addr to = l->addr();
  const pid_t pid = fork();
  const bool initiator = pid != 0;
  if (!initiator) {
    // The child is a fresh endpoint: its own poller and connection.
    poller cp;
    owner co;
    conn* c = nullptr;
    if (cp.connect(co, cfg, to, nullptr, 0, &c)) _exit(1);
    spin(cp, [&] { return co.connected; });
    pin(cpu_b);
    frame_out small(8);
    // Responder: answer the frames that ask for it (every ping, the last
    // frame of a stream) with 8 bytes.
    for (;;) {
      cp.progress();
      if (co.closed) _exit(0);
      if (co.answers_due) {
        --co.answers_due;
        spin(cp, [&] { return !small.busy; });
        send(co, small, false);
      }
    }
  }
  spin(p, [&] { return o.connected; });
  pin(cpu_a);
  frame_out small(8);
  struct result {
    const char* name;
    std::vector<double> v;
  };
  result lat{"xport_lat_8_us", {}}, bw64{"xport_bw_65536_MBps", {}}, bw1m{"xport_bw_1048576_MBps", {}};
  for (int r = 0; r < rounds; ++r) {
    // Ping-pong, after as many for warm-up (idle cores start slow).
    if (do_lat) {
      double t0 = 0;
      for (long i = 0; i < 2 * iters; ++i) {
        if (i == iters) t0 = now_s();
        const uint64_t want = o.frames + 1;
        spin(p, [&] { return !small.busy; });
        send(o, small, true);
        spin(p, [&] { return o.frames == want; });
      }
      lat.v.push_back((now_s() - t0) / double(iters) / 2 * 1e6);
    }
    if (!do_bw) continue;
    // Streams: `count` frames, then the responder's one answer.
    for (size_t size : {size_t{65536}, size_t{1} << 20}) {
      const long count = std::max<long>(64, (256L << 20) / long(size));
      std::vector<std::unique_ptr<frame_out>> win;
      for (int i = 0; i < 64; ++i) win.push_back(std::make_unique<frame_out>(size));
      auto stream = [&](long n) {  // n frames; the last asks for an answer
        const uint64_t want = o.frames + 1;
        for (long i = 0; i < n; ++i) {
          frame_out& f = *win[size_t(i) % win.size()];
          if (f.busy) spin(p, [&] { return !f.busy; });
          send(o, f, i == n - 1);
        }
        spin(p, [&] { return o.frames >= want; });
      };
      stream(count / 4 + 1);  // warm-up
      const double t1 = now_s();
      stream(count);
      (size == 65536 ? bw64 : bw1m).v.push_back(double(size) * double(count) / (now_s() - t1) / 1e6);
    }
  }
  for (result* x : {&lat, &bw64, &bw1m}) {
    if (x->v.empty()) continue;
    std::sort(x->v.begin(), x->v.end());
    printf("%s %.3f   # min %.3f max %.3f over %d rounds\n", x->name, x->v[x->v.size() / 2], x->v.front(),
           x->v.back(), rounds);
  }
  o.c->shutdown();
  spin(p, [&] { return o.closed; });
  int st = 0;
  waitpid(pid, &st, 0);
  return 0;
}
