// SPDX-License-Identifier: BSD-3-Clause
// shm-queue-pingpong: weft's shm receive queue alone (src/prov/shm:
// queue_claim, queue_commit, queue_peek, queue_release_n on two real endpoint
// regions), between two processes, beside the cache-line floor measured the
// same way in the same run. Each message is what fi_tinject of 8 bytes puts
// in a cell (inject_small: the header line with the bytes inline) and what
// progress reads of it; no endpoint, matcher or CQ exists. It tells how much
// of a small message's latency the queue protocol costs over one cache line,
// and so how much is left to the layers above it.
//
//   shm-queue-pingpong [--stride BYTES] [CPU_A CPU_B [ROUNDS [RING_LINES...]]]
//                                                        (default 0 1 5)
//   floor_ns <median one-way ns>   a counter bounced through two lines
//   queue_ns <median one-way ns>   an 8-byte message through the queues
//   queue_over_floor <ratio>       the medians of the rounds' ratios
//   ring_<N>_ns <median one-way ns>  for each RING_LINES N (a power of two
//                                  up to 4096): the least a ring can do, N
//                                  lines per direction in rotation, a message
//                                  = its 8 bytes and a sequence stored in one
//                                  line, no claim, no head (the reader polls
//                                  the line the next message will use);
//                                  --stride puts the ring's lines BYTES
//                                  apart (default 64: back to back; 4160
//                                  is the distance between weft's cells)
//   api_ring_ns <median one-way ns>   the least an fi_*-shaped ping-pong
//                                  costs over a ring of short_lap + 1 lines
//                                  4,160 B apart (weft's exchange footprint,
//                                  one producer: a plain tail store): the
//                                  read and the inject are calls through a
//                                  table, as fi_cq_read / fi_tinject are; the
//                                  read matches the first posted receive
//                                  (tag, length), copies the 8 bytes, writes
//                                  a tagged CQ entry and moves the receive
//                                  to a spare list; the next receive is
//                                  posted off the critical path, as
//                                  weft-perf does
//   api_queue_ns <median one-way ns>  the same over weft's queue instead
//                                  (the claim's CAS, limit, pid and sequence,
//                                  the header, the commit and its `sleeping`
//                                  load, short laps): what a provider with
//                                  weft's queue and nothing else above it
//                                  could reach (docs/shm-protocol.md, "An
//                                  API-shaped path over the queue")
//   api_queue_pfw_ns <median one-way ns>  the same, the cell to claim asked
//                                  for (prefetchw) before the claim's CAS
// Each round runs all arms, 300 batches of 2,000 round trips each; a figure is
// the median of its batches' means (preemption spoils a batch, not the median).
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "prov/shm/shm.hpp"
#include "tool_util.h"

namespace {

using namespace weft::shm;

constexpr long batches = 300, per_batch = 2000, warmup = 5000;

double now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
}

bool pin(long cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(int(cpu), &s);
  return sched_setaffinity(0, sizeof s, &s) == 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct alignas(64) line {
  std::atomic<long> v{0};
};

struct alignas(64) ring_line {
  uint64_t data;
  std::atomic<uint64_t> seq;
};

// The two processes step through the same loop; the initiator times batches.
template <class Send, class Recv>
double run(bool initiator, Send send, Recv recv) {
  std::vector<double> t;
  double t0 = 0;
  for (long i = 0; i < warmup + batches * per_batch; ++i) {
    if (initiator) {
      send(i);
      recv(i);
      if (i == warmup - 1) t0 = now_ns();
      if (i >= warmup && (i - warmup + 1) % per_batch == 0) {
        double t1 = now_ns();
        t.push_back((t1 - t0) / per_batch / 2);
        t0 = t1;
      }
    } else {
      recv(i);
      send(i);
    }
  }
  return median(t);
}

// One 8-byte tagged inject into region `to`, as inject_small fills it in
// an exchange (every send answers a message: short laps, no prefetch of the
// next cell; docs/shm-protocol.md, "Short laps").
void fill_inline(cell* c, uint64_t tag, const void* buf, size_t len) {
  c->h.src = 0;
  c->h.opcode = op::msg;
  c->h.tag = tag;
  c->h.data = 0;
  c->h.size = len;
  copy_small(c->h.inl, buf, len);
  c->h.flags = static_cast<uint16_t>(flag_tagged | flag_inline);
}

void queue_send(region_view to, long i) {
  cell* c;
  while (!(c = queue_claim(to, true))) {
  }
  uint64_t v = uint64_t(i);
  fill_inline(c, 7, &v, 8);
  queue_commit(to, c, false);
}

// Waits for message i in our region; hands the cell back on the next call,
// as progress does.
void queue_recv(region_view me, uint32_t& unreleased, long i) {
  if (unreleased) {
    queue_release_n(me, unreleased);
    unreleased = 0;
  }
  cell* c;
  while (!(c = queue_peek(me))) {
  }
  uint64_t v;
  copy_small(&v, c->h.inl, 8);
  if (v != uint64_t(i) || c->h.tag != 7) {
    fprintf(stderr, "shm-queue-pingpong: message %ld arrived as %llu\n", i, (unsigned long long)v);
    _exit(1);
  }
  unreleased = queue_step(me, c);  // to the next lap after a cell that ended its lap, as take_cells
}

// ------------------------------------------------------------------ API-shaped arms
// The least work an fi_*-shaped exchange asks of a provider, over either
// transport: a posted-receive list, a tagged CQ entry, calls through a table.
struct lean_recv {
  lean_recv* next;
  uint64_t tag, ignore;
  void* buf;
  size_t len;
  void* context;
};

struct lean_entry {  // fi_cq_tagged_entry's fields
  void* op_context;
  uint64_t flags, len;
  void* buf;
  uint64_t data, tag;
};

struct lean_ep;
struct lean_ops {
  long (*read)(lean_ep*, lean_entry*);
  long (*inject)(lean_ep*, const void*, size_t, uint64_t);
  long (*post)(lean_ep*, void*, size_t, uint64_t, void*);
};

struct lean_ep {
  const lean_ops* ops;
  lean_recv* posted = nullptr;  // first posted receive
  lean_recv* last = nullptr;
  lean_recv* spare = nullptr;
  // transport: the minimal ring's two directions, or weft's two regions
  char* in = nullptr;
  char* out = nullptr;
  long stride = 0;
  uint64_t head = 0, tail = 0;
  region_view mine{}, theirs{};
  uint32_t unreleased = 0;
  bool prefetch_claim = false;  // api_queue_pfw: prefetchw the cell to claim before the claim's CAS
  lean_recv pool[4];
};

constexpr uint64_t lean_ring_lines = short_lap + 1;

struct alignas(64) lean_line {
  uint64_t tag;
  uint32_t size, flags;
  unsigned char inl[16];
  std::atomic<uint64_t> seq;
};

inline lean_line& lean_at(char* ring, long stride, uint64_t k) {
  return *reinterpret_cast<lean_line*>(ring + (k % lean_ring_lines) * uint64_t(stride));
}

// A matched message's completion: copy, entry, receive to the spare list.
// 1 when the first posted receive took it, -5 otherwise (never here).
inline long lean_complete(lean_ep* e, lean_entry* out, uint64_t tag, uint32_t size, const unsigned char* inl) {
  lean_recv* r = e->posted;
  if (!r || ((r->tag ^ tag) & ~r->ignore) || r->len < size) return -5;
  copy_small(r->buf, inl, size);
  out->op_context = r->context;
  out->flags = FI_RECV | FI_TAGGED;
  out->len = size;
  out->buf = nullptr;
  out->data = 0;
  out->tag = tag;
  e->posted = r->next;
  if (!e->posted) e->last = nullptr;
  r->next = e->spare;
  e->spare = r;
  return 1;
}

[[gnu::noinline]] long lean_post(lean_ep* e, void* buf, size_t len, uint64_t tag, void* context) {
  lean_recv* r = e->spare;
  if (!r) return -11;
  e->spare = r->next;
  *r = lean_recv{nullptr, tag, 0, buf, len, context};
  if (e->last)
    e->last->next = r;
  else
    e->posted = r;
  e->last = r;
  return 0;
}

[[gnu::noinline]] long ring_read(lean_ep* e, lean_entry* out) {
  lean_line& l = lean_at(e->in, e->stride, e->head);
  if (l.seq.load(std::memory_order_acquire) != e->head + 1) return -11;
  long n = lean_complete(e, out, l.tag, l.size, l.inl);
  if (n == 1) e->head++;
  return n;
}

[[gnu::noinline]] long ring_inject(lean_ep* e, const void* buf, size_t len, uint64_t tag) {
  if (len > inline_max) return -22;
  lean_line& l = lean_at(e->out, e->stride, e->tail);
  l.tag = tag;
  l.size = uint32_t(len);
  l.flags = flag_tagged | flag_inline;
  copy_small(l.inl, buf, len);
  l.seq.store(e->tail + 1, std::memory_order_release);
  e->tail++;
  return 0;
}

[[gnu::noinline]] long queue_read(lean_ep* e, lean_entry* out) {
  if (e->unreleased) {
    queue_release_n(e->mine, e->unreleased);
    e->unreleased = 0;
  }
  cell* c = queue_peek(e->mine);
  if (!c) return -11;
  if (c->h.opcode != op::msg || !(c->h.flags & flag_inline) || c->h.size > inline_max) return -5;
  long n = lean_complete(e, out, c->h.tag, c->h.size, c->h.inl);
  if (n == 1) e->unreleased = queue_step(e->mine, c);
  return n;
}

[[gnu::noinline]] long queue_inject(lean_ep* e, const void* buf, size_t len, uint64_t tag) {
  if (len > inline_max) return -22;
  if (e->prefetch_claim && has_prefetchw)  // the cell the claim will take, asked for before its CAS
    prefetchw_cell(e->theirs, e->theirs.ctl()->tail.load(std::memory_order_relaxed));
  cell* c = queue_claim(e->theirs, true);  // an exchange: short laps
  if (!c) return -11;
  fill_inline(c, tag, buf, len);
  queue_commit(e->theirs, c, false);  // an answer: no prefetch of the next cell
  return 0;
}

constexpr lean_ops ring_ops{ring_read, ring_inject, lean_post};
constexpr lean_ops queue_ops{queue_read, queue_inject, lean_post};

// One arm's rounds: weft-perf's lean ping-pong loop over `e` (the initiator
// posts the next receive while the reply crosses, the responder right after
// its reply; two receives on one buffer with alternating contexts).
double run_api(bool initiator, lean_ep& e) {
  const lean_ops* volatile table = e.ops;  // called through a table, not inlined
  const lean_ops* ops = table;
  for (auto& r : e.pool) {
    r.next = e.spare;
    e.spare = &r;
  }
  uint64_t rx = 0, tx = 0;
  void* ctx[2] = {&ctx[0], &ctx[1]};
  lean_entry ent;
  ops->post(&e, &rx, 8, 1, ctx[0]);
  if (!initiator) ops->post(&e, &rx, 8, 1, ctx[1]);
  const long n = warmup + batches * per_batch;
  long k = 0;
  auto wait = [&] {
    long got;
    while ((got = ops->read(&e, &ent)) == -11) {
    }
    if (got != 1 || rx != uint64_t(k) || ent.tag != 1) {
      fprintf(stderr, "shm-queue-pingpong: API arm: message %ld arrived as %llu (%ld)\n", k, (unsigned long long)rx, got);
      _exit(1);
    }
  };
  return run(
      initiator,
      [&](long i) {
        k = i;
        tx = uint64_t(i);
        if (ops->inject(&e, &tx, 8, 1)) _exit(1);
        if (initiator && i + 1 < n) ops->post(&e, &rx, 8, 1, ctx[(i + 1) & 1]);
        if (!initiator && i + 2 < n) ops->post(&e, &rx, 8, 1, ctx[i & 1]);
      },
      [&](long i) {
        k = i;
        wait();
      });
}

}  // namespace

int main(int argc, char** argv) {
  static const char usage[] =
      "usage: shm-queue-pingpong [--stride BYTES] [CPU_A CPU_B [ROUNDS [RING_LINES...]]]\n"
      "weft's shm receive queue alone between two processes pinned to CPU_A and CPU_B\n"
      "(default 0 and 1), beside a cache line bounced the same way, ROUNDS rounds (default 5).\n"
      "Prints the medians in one-way ns (floor_ns, queue_ns) and queue_over_floor, then an\n"
      "fi_*-shaped exchange (calls through a table, a posted receive matched, a tagged CQ entry)\n"
      "over a minimal ring (api_ring_ns), over weft's queue (api_queue_ns) and over the queue\n"
      "with the cell to claim asked for before the claim's CAS (api_queue_pfw_ns); for each\n"
      "RING_LINES N (a power of two up to 4096) also ring_<N>_ns: a minimal ring of N lines\n"
      "per direction (data and sequence stored in one line, no claim, no head), the lines\n"
      "--stride BYTES apart (a multiple of 64 up to 8192; default 64, 4160 as weft's cells).\n";
  if (tool_help_asked(argc, argv)) tool_help(usage);
  long a = 0, b = 1, rounds = 5, stride = 64;
  if (argc > 2 && !strcmp(argv[1], "--stride")) {
    if (!tool_parse_long(argv[2], 64, 8192, &stride) || stride % 64)
      tool_usage_error("shm-queue-pingpong", "--stride takes a multiple of 64 from 64 to 8192, not '%s'", argv[2]);
    argv += 2;
    argc -= 2;
  }
  if (argc == 2) tool_usage_error("shm-queue-pingpong", "give no arguments, CPU_A CPU_B, or CPU_A CPU_B ROUNDS [RING_LINES...]");
  if (argc > 2 && (!tool_parse_long(argv[1], 0, CPU_SETSIZE - 1, &a) || !tool_parse_long(argv[2], 0, CPU_SETSIZE - 1, &b)))
    tool_usage_error("shm-queue-pingpong", "CPU numbers expected, not '%s %s'", argv[1], argv[2]);
  if (argc > 3 && !tool_parse_long(argv[3], 1, 1000, &rounds))
    tool_usage_error("shm-queue-pingpong", "ROUNDS must be 1 to 1000, not '%s'", argv[3]);
  std::vector<long> rings;
  for (int i = 4; i < argc; ++i) {
    long n = 0;
    if (!tool_parse_long(argv[i], 1, 4096, &n) || (n & (n - 1)))
      tool_usage_error("shm-queue-pingpong", "RING_LINES must be a power of two from 1 to 4096, not '%s'", argv[i]);
    rings.push_back(n);
  }

  // Two endpoint regions, created before the fork: both processes map both.
  std::string tag = std::to_string(getpid());
  mapping ra, rb;
  try {
    region_create(ra, "qpp_a_" + tag);
    region_create(rb, "qpp_b_" + tag);
  } catch (...) {
    fprintf(stderr, "shm-queue-pingpong: cannot create the regions\n");
    return 1;
  }
  region_init(ra.base(), "qpp_a_" + tag, -1, false);
  region_init(rb.base(), "qpp_b_" + tag, -1, false);
  // The floor's two lines, then two rings of up to 4096 lines each.
  const size_t ring_bytes = 4096 * size_t(stride);
  void* mem = mmap(nullptr, 4096 + 2 * ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    perror("shm-queue-pingpong: mmap");
    return 1;
  }
  line* ping = new (mem) line;
  line* pong = new (static_cast<char*>(mem) + 64) line;
  auto* ring_a = reinterpret_cast<ring_line*>(static_cast<char*>(mem) + 4096);
  auto* ring_b = reinterpret_cast<ring_line*>(static_cast<char*>(mem) + 4096 + ring_bytes);
  // The API arm's rings: short_lap + 1 lines 4,160 B apart per direction.
  const size_t api_bytes = lean_ring_lines * 4160;
  void* api_mem = mmap(nullptr, 2 * api_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (api_mem == MAP_FAILED) {
    perror("shm-queue-pingpong: mmap");
    return 1;
  }
  char* api_a = static_cast<char*>(api_mem);
  char* api_b = api_a + api_bytes;

  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("shm-queue-pingpong: fork");
    return 1;
  }
  const bool initiator = pid != 0;
  if (!pin(initiator ? a : b)) {
    fprintf(stderr, "shm-queue-pingpong: cannot pin to CPU %ld\n", initiator ? a : b);
    if (initiator) waitpid(pid, nullptr, 0);
    return 1;
  }
  region_view mine{initiator ? ra.base() : rb.base()}, theirs{initiator ? rb.base() : ra.base()};
  uint32_t unreleased = 0;
  std::vector<double> floor_ns, queue_ns, ratio, api_ring_ns, api_queue_ns, api_queue_pfw_ns;
  uint64_t api_base = 0;  // the API ring's sequences keep growing across rounds
  std::vector<std::vector<double>> ring_ns(rings.size());
  uint64_t ring_base = 0;  // sequences keep growing across rounds and rings
  for (long r = 0; r < rounds; ++r) {
    // The floor: as cacheline-pingpong, counters offset per round.
    const long base = r * (warmup + batches * per_batch);
    double f = run(
        initiator, [&](long i) { (initiator ? ping : pong)->v.store(base + i + 1, std::memory_order_release); },
        [&](long i) {
          while ((initiator ? pong : ping)->v.load(std::memory_order_acquire) != base + i + 1) {
          }
        });
    double q = run(
        initiator, [&](long i) { queue_send(theirs, i); }, [&](long i) { queue_recv(mine, unreleased, i); });
    {
      lean_ep e;
      e.ops = &ring_ops;
      e.in = initiator ? api_a : api_b;
      e.out = initiator ? api_b : api_a;
      e.stride = 4160;
      e.head = e.tail = api_base;
      api_ring_ns.push_back(run_api(initiator, e));
      api_base += uint64_t(warmup + batches * per_batch);
    }
    for (bool pfw : {false, true}) {
      lean_ep e;
      e.ops = &queue_ops;
      e.mine = mine;
      e.theirs = theirs;
      e.unreleased = unreleased;  // what the arm before took last
      e.prefetch_claim = pfw;
      (pfw ? api_queue_pfw_ns : api_queue_ns).push_back(run_api(initiator, e));
      unreleased = e.unreleased;
    }
    auto at = [stride](ring_line* ring, uint64_t k) -> ring_line& {
      return *reinterpret_cast<ring_line*>(reinterpret_cast<char*>(ring) + k * uint64_t(stride));
    };
    for (size_t k = 0; k < rings.size(); ++k) {
      const uint64_t mask = uint64_t(rings[k]) - 1, base = ring_base;
      ring_line* out = initiator ? ring_b : ring_a;
      ring_line* in = initiator ? ring_a : ring_b;
      double v = run(
          initiator,
          [&](long i) {
            ring_line& l = at(out, (base + uint64_t(i)) & mask);
            l.data = uint64_t(i);
            l.seq.store(base + uint64_t(i) + 1, std::memory_order_release);
          },
          [&](long i) {
            ring_line& l = at(in, (base + uint64_t(i)) & mask);
            while (l.seq.load(std::memory_order_acquire) != base + uint64_t(i) + 1) {
            }
            if (l.data != uint64_t(i)) _exit(1);
          });
      ring_base += uint64_t(warmup + batches * per_batch);
      if (initiator) ring_ns[k].push_back(v);
    }
    if (initiator) {
      floor_ns.push_back(f);
      queue_ns.push_back(q);
      ratio.push_back(q / f);
    }
  }
  if (!initiator) _exit(0);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
  printf("floor_ns %.1f\nqueue_ns %.1f\nqueue_over_floor %.2f\n", median(floor_ns), median(queue_ns), median(ratio));
  printf("api_ring_ns %.1f\napi_queue_ns %.1f\napi_queue_pfw_ns %.1f\n", median(api_ring_ns), median(api_queue_ns),
         median(api_queue_pfw_ns));
  for (size_t k = 0; k < rings.size(); ++k) printf("ring_%ld_ns %.1f\n", rings[k], median(ring_ns[k]));
  return 0;
}
