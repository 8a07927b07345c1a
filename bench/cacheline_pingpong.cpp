// SPDX-License-Identifier: BSD-3-Clause
// cacheline-pingpong: the hardware floor under any shared-memory ping-pong.
// Two processes pinned to two CPUs bounce one counter through two cache
// lines of a shared page: each waits for the other's value, then writes its
// own. Half a round trip is the cost of moving one cache line from one core
// to the other, which every message of weft, libfabric's shm and UCX's sm
// pays at least once. The second figure adds one TSC read and one stored
// sample per round trip, the way weft-perf and ucx_perftest time their
// latency tests, so the harness's own share shows too; the third is the
// median of those samples, the figure to set beside the latency tests'
// medians on a shared machine (a mean counts every preemption). Where the
// TSC moves in steps (10 ns on some VMs, a round trip's median then moves
// by 5 ns one-way, 8 % of a fast floor), the fourth resolves below the
// step the way weft-perf's lat_us_batched does: the median of the means of
// batches of 1,000 consecutive round trips.
//
// With OFFSET, the two lines lie at that byte offset of two pages of their
// own instead of side by side at the start of one: where a line lies
// within its 1 KiB block of addresses changes what it costs to move between
// CPUs of this VM that share no cache (docs/shm-protocol.md, "Where a
// cell's lines lie"; bench/line_offsets.sh sweeps it).
//
//   cacheline-pingpong [CPU_A CPU_B [ROUND_TRIPS [OFFSET]]]    prints four lines:
//   floor_ns <one-way ns>
//   floor_sampled_ns <one-way ns>
//   floor_median_ns <one-way ns>
//   floor_batched_ns <one-way ns>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include "tool_util.h"

namespace {

struct alignas(64) line {
  std::atomic<long> v{0};
};

double now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}

bool pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return sched_setaffinity(0, sizeof s, &s) == 0;
}

inline unsigned long long tick() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
#endif
}

double ns_per_tick = 1;  // of the sampled pass (initiator)

// One run: returns one-way ns (initiator side); the responder returns 0.
double run(line* ping, line* pong, bool initiator, long n, bool sampled, std::vector<unsigned long long>& s) {
  double t0 = now_ns();
  const unsigned long long first = tick();
  unsigned long long prev = first;
  for (long i = 1; i <= n; ++i) {
    if (initiator) {
      ping->v.store(i, std::memory_order_release);
      if (sampled) {  // after the store, as weft-perf samples after its send
        unsigned long long t = tick();
        if (i > 1) s[size_t(i - 1) & (s.size() - 1)] = t - prev;  // round trip i - 1: store to store
        prev = t;
      }
      while (pong->v.load(std::memory_order_acquire) != i) {}
    } else {
      while (ping->v.load(std::memory_order_acquire) != i) {}
      pong->v.store(i, std::memory_order_release);
    }
  }
  if (!initiator) return 0;
  double ns = now_ns() - t0;
  unsigned long long ticks = tick() - first;
  if (sampled && ticks) ns_per_tick = ns / double(ticks);
  return ns / double(n) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  static const char usage[] =
      "usage: cacheline-pingpong [CPU_A CPU_B [ROUND_TRIPS [OFFSET]]]\n"
      "The hardware floor under any shared-memory ping-pong: two processes pinned to CPU_A and\n"
      "CPU_B (default 0 and 1) bounce a counter through two cache lines ROUND_TRIPS times\n"
      "(default 1000000). OFFSET (a multiple of 64 below 4096): the two lines lie at that offset of\n"
      "two pages instead of side by side at the start of one. Prints the one-way time in ns:\n"
      "  floor_ns <ns>            moving one cache line from one core to the other\n"
      "  floor_sampled_ns <ns>    the same with a clock read per round trip, as benchmarks time\n"
      "  floor_median_ns <ns>     the median round trip of that pass, halved (robust against preemption)\n"
      "  floor_batched_ns <ns>    the median of that pass's means of 1,000 round trips, halved (resolves\n"
      "                           below the clock's step, like weft-perf's lat_us_batched)\n";
  if (tool_help_asked(argc, argv)) tool_help(usage);
  long a = 0, b = 1, n = 1000000, offset = -1;
  if (argc == 2 || argc > 5)
    tool_usage_error("cacheline-pingpong", "give no arguments, CPU_A CPU_B, CPU_A CPU_B ROUND_TRIPS, or those and OFFSET");
  if (argc > 2 && (!tool_parse_long(argv[1], 0, CPU_SETSIZE - 1, &a) || !tool_parse_long(argv[2], 0, CPU_SETSIZE - 1, &b)))
    tool_usage_error("cacheline-pingpong", "CPU numbers expected, not '%s %s'", argv[1], argv[2]);
  if (argc > 3 && !tool_parse_long(argv[3], 1, 1L << 40, &n))
    tool_usage_error("cacheline-pingpong", "ROUND_TRIPS must be a positive number, not '%s'", argv[3]);
  if (argc > 4 && (!tool_parse_long(argv[4], 0, 4095, &offset) || offset % 64 != 0))
    tool_usage_error("cacheline-pingpong", "OFFSET must be a multiple of 64 below 4096, not '%s'", argv[4]);
  void* mem = mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    perror("cacheline-pingpong: mmap");
    return 1;
  }
  auto* lines = new (mem) line[4];  // ping, pong, and two for the barrier
  line* ping = &lines[0];
  line* pong = &lines[1];
  if (offset >= 0) {  // ping and pong at OFFSET of the second and third page
    ping = new (static_cast<char*>(mem) + 4096 + offset) line;
    pong = new (static_cast<char*>(mem) + 2 * 4096 + offset) line;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("cacheline-pingpong: fork");
    return 1;
  }
  bool initiator = child != 0;
  if (!pin(initiator ? a : b)) {
    perror("cacheline-pingpong: sched_setaffinity");
    if (!initiator) _exit(1);
  }
  std::vector<unsigned long long> samples(1 << 16);
  double floor_ns = 0, sampled_ns = 0;
  for (int pass = 0; pass < 2; ++pass) {
    double v = run(ping, pong, initiator, n, pass == 1, samples);
    // Barrier between the passes, on lines of its own (the last pong must
    // stay readable until the initiator has seen it): the responder says
    // it is done, the initiator zeroes ping and pong and answers.
    if (initiator) {
      while (lines[2].v.load(std::memory_order_acquire) != pass + 1) {}
      ping->v.store(0, std::memory_order_relaxed);
      pong->v.store(0, std::memory_order_relaxed);
      lines[3].v.store(pass + 1, std::memory_order_release);
      (pass == 0 ? floor_ns : sampled_ns) = v;
    } else {
      lines[2].v.store(pass + 1, std::memory_order_release);
      while (lines[3].v.load(std::memory_order_acquire) != pass + 1) {}
    }
  }
  if (!initiator) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  // The median of the sampled pass's round trips (the last 65,536 of them),
  // in TSC ticks, converted with the pass's own mean rate of ticks per ns.
  // (Slot i holds round trip i mod 65,536, timed from the store that starts
  // it to the next one; slot 0 is never written when n < 65,536, so the
  // samples are slots 1..min(n - 1, 65,535).)
  size_t kept = std::min(samples.size() - 1, size_t(n - 1));
  std::vector<unsigned long long> s(samples.begin() + 1, samples.begin() + 1 + kept);
  // Batch means first (s is still in round-trip order, but for one wrap).
  const size_t batch = s.size() >= 10000 ? 1000 : std::max<size_t>(1, s.size() / 10);
  std::vector<double> means;
  for (size_t i = 0; i + batch <= s.size(); i += batch) {
    double sum = 0;
    for (size_t k = i; k < i + batch; ++k) sum += double(s[k]);
    means.push_back(sum / double(batch));
  }
  double median_ns = 0, batched_ns = 0;
  if (!s.empty()) {
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    median_ns = double(s[s.size() / 2]) * ns_per_tick / 2;
  }
  if (!means.empty()) {
    std::nth_element(means.begin(), means.begin() + means.size() / 2, means.end());
    batched_ns = means[means.size() / 2] * ns_per_tick / 2;
  }
  printf("floor_ns %.1f\nfloor_sampled_ns %.1f\nfloor_median_ns %.1f\nfloor_batched_ns %.1f\n", floor_ns, sampled_ns,
         median_ns, batched_ns);
  return 0;
}
