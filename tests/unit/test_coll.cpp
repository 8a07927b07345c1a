// SPDX-License-Identifier: BSD-3-Clause
// Collectives (man fi_collective, fi_av_set) across processes in every mode
// of every provider: AV sets, fi_join_collective, every operation for every
// (op, datatype) fi_query_collective advertises, results checked against a
// sequential reference; two groups at once; the collective tag space kept
// apart from the application's receives; bad arguments; a member that dies
// in the middle of an operation.
#include <gtest/gtest.h>
#include <rdma/fi_collective.h>
#include <sched.h>
#include <signal.h>

#include <complex>
#include <cstring>
#include <vector>

#include "fixture.hpp"
#include "spawn.hpp"

namespace {

using weft_test::mp_options;
using weft_test::mp_peer;
using weft_test::mp_run;
using coll = weft_test::mp_test;

mp_options coll_options() {
  mp_options o;
  o.caps = FI_MSG | FI_TAGGED | FI_COLLECTIVE;
  o.eq = true;
  o.timeout_s = 60;
  return o;
}

uint64_t ms_now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000 + uint64_t(t.tv_nsec) / 1000000;
}

struct group {
  fid_av_set* set = nullptr;
  fid_mc* mc = nullptr;
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  int rank = -1;  // ours in the group
  std::vector<int> ranks;
};

// Waits for the EQ's join event of `mc` (driving progress). 0, or the
// join's error (positive).
int wait_join(mp_peer& p, fid_mc* mc, int timeout_ms = 10000) {
  const uint64_t end = ms_now() + uint64_t(timeout_ms);
  while (ms_now() < end) {
    uint32_t ev = 0;
    fi_eq_entry entry{};
    ssize_t n = fi_eq_read(p.eq, &ev, &entry, sizeof entry, 0);
    if (n == -FI_EAVAIL) {
      fi_eq_err_entry ee{};
      fi_eq_readerr(p.eq, &ee, 0);
      return ee.err ? ee.err : FI_EIO;
    }
    if (n > 0) {
      EXPECT_EQ(ev, uint32_t(FI_JOIN_COMPLETE));
      EXPECT_EQ(entry.fid, &mc->fid);
      return 0;
    }
    fi_cq_tagged_entry ce;
    (void)fi_cq_read(p.cq, &ce, 0);  // progress only
  }
  return FI_ETIMEDOUT;
}

// Makes the AV set of `ranks` (endpoint ranks of the job) and joins it.
void join(mp_peer& p, const std::vector<int>& ranks, group& g, int timeout_ms = 10000) {
  fi_av_set_attr attr{};
  attr.count = ranks.size();
  attr.start_addr = FI_ADDR_NOTAVAIL;
  attr.end_addr = FI_ADDR_NOTAVAIL;
  attr.stride = 1;
  ASSERT_EQ(fi_av_set(p.av, &attr, &g.set, nullptr), 0);
  for (int r : ranks) ASSERT_EQ(fi_av_set_insert(g.set, p.addr[size_t(r)]), 0);
  fi_addr_t set_addr;
  ASSERT_EQ(fi_av_set_addr(g.set, &set_addr), 0);
  ASSERT_EQ(fi_join_collective(p.ep, set_addr, g.set, 0, &g.mc, &g), 0);
  ASSERT_EQ(wait_join(p, g.mc, timeout_ms), 0);
  g.addr = fi_mc_addr(g.mc);
  g.ranks = ranks;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == p.rank) g.rank = int(i);
}

void leave(group& g) {
  if (g.mc) {
    EXPECT_EQ(fi_close(&g.mc->fid), 0);
  }
  if (g.set) {
    EXPECT_EQ(fi_close(&g.set->fid), 0);
  }
  g.mc = nullptr;
  g.set = nullptr;
}

// The completion of one collective: 0, or its error (positive). Yields
// between polls: groups of up to 8 processes share this machine's cores,
// and a member spinning while the one it waits for is off a core only
// delays both.
int wait_coll(mp_peer& p, void* ctx, int timeout_ms = 10000) {
  const uint64_t end = ms_now() + uint64_t(timeout_ms);
  for (;;) {
    fi_cq_tagged_entry ce{};
    const ssize_t n = fi_cq_read(p.cq, &ce, 1);
    if (n == 1) {
      EXPECT_EQ(ce.op_context, ctx);
      EXPECT_EQ(ce.flags, uint64_t(FI_COLLECTIVE));
      return 0;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      EXPECT_EQ(fi_cq_readerr(p.cq, &ee, 0), 1);
      EXPECT_EQ(ee.op_context, ctx);
      EXPECT_TRUE(ee.flags & FI_COLLECTIVE);
      return ee.err ? ee.err : FI_EIO;
    }
    if (n != -FI_EAGAIN) return int(-n);
    if (ms_now() > end) return FI_ETIMEDOUT;
    sched_yield();
  }
}

// ------------------------------------------------------------------ the reference
template <class T>
inline constexpr bool is_int = std::is_integral_v<T> || std::is_same_v<T, __int128> ||
                               std::is_same_v<T, unsigned __int128>;
template <class T>
inline constexpr bool is_cplx = false;
template <class F>
inline constexpr bool is_cplx<std::complex<F>> = true;

template <class F>
auto with_type(fi_datatype dt, F&& f) {
  switch (dt) {
    case FI_INT8: return f(int8_t{});
    case FI_UINT8: return f(uint8_t{});
    case FI_INT16: return f(int16_t{});
    case FI_UINT16: return f(uint16_t{});
    case FI_INT32: return f(int32_t{});
    case FI_UINT32: return f(uint32_t{});
    case FI_INT64: return f(int64_t{});
    case FI_UINT64: return f(uint64_t{});
    case FI_FLOAT: return f(float{});
    case FI_DOUBLE: return f(double{});
    case FI_FLOAT_COMPLEX: return f(std::complex<float>{});
    case FI_DOUBLE_COMPLEX: return f(std::complex<double>{});
    case FI_LONG_DOUBLE: return f((long double){});
    case FI_LONG_DOUBLE_COMPLEX: return f(std::complex<long double>{});
    case FI_INT128: return f(__int128{});
    default: return f((unsigned __int128){});
  }
}
const fi_datatype all_types[] = {FI_INT8,  FI_UINT8,  FI_INT16,         FI_UINT16,         FI_INT32,
                                 FI_UINT32, FI_INT64, FI_UINT64,        FI_FLOAT,          FI_DOUBLE,
                                 FI_FLOAT_COMPLEX,    FI_DOUBLE_COMPLEX, FI_LONG_DOUBLE, FI_LONG_DOUBLE_COMPLEX,
                                 FI_INT128, FI_UINT128};
const fi_op all_ops[] = {FI_MIN, FI_MAX, FI_SUM, FI_PROD, FI_LOR, FI_LAND, FI_BOR, FI_BAND, FI_LXOR, FI_BXOR};

// Element i of member `rank`'s input: values whose every reduction is exact
// in any order (small integers; products of 1, -1, 2 or of 1, -1, i, 1+i),
// zeros among them for the logical operations, high bits for the bitwise.
template <class T>
T gen(fi_op op, int rank, size_t i, unsigned seed) {
  const uint64_t h = (uint64_t(rank) + 1) * 0x9E3779B97F4A7C15ULL ^ (i + seed) * 0xBF58476D1CE4E5B9ULL;
  const uint64_t mix = h ^ (h >> 29);
  if constexpr (is_cplx<T>) {
    using F = typename T::value_type;
    if (op == FI_PROD) {
      const T choices[] = {T(1, 0), T(-1, 0), T(0, 1), T(1, 1)};
      return choices[mix % 4];
    }
    if (op >= FI_LOR && mix % 3 == 0) return T{};
    return T(F(int(mix % 23) - 11), F(int((mix >> 8) % 17) - 8));
  } else if constexpr (is_int<T>) {
    if (op == FI_PROD) return T(1 + mix % 3);
    if (op == FI_BOR || op == FI_BAND || op == FI_BXOR) {
      unsigned __int128 v = (unsigned __int128)mix << 64 | (mix * 0x94D049BB133111EBULL);
      if (op == FI_BAND) v |= (unsigned __int128)(h * 7);  // mostly ones: something survives
      return T(v);
    }
    if ((op == FI_LOR || op == FI_LAND || op == FI_LXOR) && mix % 3 == 0) return T(0);
    return T(int(mix % 201) - 100);
  } else {
    if (op == FI_PROD) {
      const T choices[] = {T(1), T(-1), T(2), T(0.5)};
      return choices[mix % 4];
    }
    if (op >= FI_LOR && mix % 3 == 0) return T(0);
    return T(int(mix % 201) - 100);
  }
}

template <class T>
T ref_op(fi_op op, T a, T b) {
  auto truth = [](const T& v) { return v != T{}; };
  if constexpr (is_int<T>) {
    using U = std::conditional_t<(sizeof(T) > 8), unsigned __int128, uint64_t>;
    switch (op) {
      case FI_MIN: return b < a ? b : a;
      case FI_MAX: return b > a ? b : a;
      case FI_SUM: return T(U(a) + U(b));
      case FI_PROD: return T(U(a) * U(b));
      case FI_BOR: return T(U(a) | U(b));
      case FI_BAND: return T(U(a) & U(b));
      case FI_BXOR: return T(U(a) ^ U(b));
      default: break;
    }
  } else if constexpr (!is_cplx<T>) {
    if (op == FI_MIN) return b < a ? b : a;
    if (op == FI_MAX) return b > a ? b : a;
  }
  switch (op) {
    case FI_SUM: return a + b;
    case FI_PROD: return a * b;
    case FI_LOR: return T(truth(a) || truth(b) ? 1 : 0);
    case FI_LAND: return T(truth(a) && truth(b) ? 1 : 0);
    case FI_LXOR: return T(truth(a) != truth(b) ? 1 : 0);
    default: ADD_FAILURE() << "no reference for op " << op; return a;
  }
}

// Byte buffers of typed elements.
template <class T>
void put(std::vector<unsigned char>& v, size_t i, T x) {
  memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
}
template <class T>
T get(const std::vector<unsigned char>& v, size_t i) {
  T x;
  memcpy(&x, v.data() + i * sizeof(T), sizeof(T));
  return x;
}
template <class T>
std::vector<unsigned char> input(fi_op op, int rank, size_t count, unsigned seed) {
  std::vector<unsigned char> v(count * sizeof(T));
  for (size_t i = 0; i < count; ++i) put<T>(v, i, gen<T>(op, rank, i, seed));
  return v;
}
// Compared by value: long double's padding bytes mean nothing.
template <class T>
size_t first_diff(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want) {
  const size_t n = want.size() / sizeof(T);
  if (got.size() != want.size()) return 0;
  for (size_t i = 0; i < n; ++i)
    if (!(get<T>(got, i) == get<T>(want, i))) return i;
  return SIZE_MAX;
}

std::string what(const char* name, fi_datatype dt, fi_op op, size_t count, int root = -1) {
  std::string s = std::string(name) + " dt " + std::to_string(dt) + " op " + std::to_string(op) + " count " +
                  std::to_string(count);
  if (root >= 0) s += " root " + std::to_string(root);
  return s;
}

// The reduction of every member's input, in rank order.
template <class T>
std::vector<unsigned char> reduced(fi_op op, int n, size_t count, unsigned seed) {
  std::vector<unsigned char> acc = input<T>(op, 0, count, seed);
  for (int r = 1; r < n; ++r) {
    auto in = input<T>(op, r, count, seed);
    for (size_t i = 0; i < count; ++i) put<T>(acc, i, ref_op<T>(op, get<T>(acc, i), get<T>(in, i)));
  }
  return acc;
}

// ------------------------------------------------------------------ one operation, checked
struct checker {
  mp_peer& p;
  group& g;
  unsigned seed = 1;
  int n() const { return int(g.ranks.size()); }

  template <class T>
  void allreduce(fi_datatype dt, fi_op op, size_t count) {
    auto in = input<T>(op, g.rank, count, seed);
    std::vector<unsigned char> out(count * sizeof(T), 0xee);
    ASSERT_EQ(fi_allreduce(p.ep, in.data(), count, nullptr, out.data(), nullptr, g.addr, dt, op, 0, this), 0)
        << what("allreduce", dt, op, count);
    ASSERT_EQ(wait_coll(p, this), 0) << what("allreduce", dt, op, count);
    const size_t d = first_diff<T>(out, reduced<T>(op, n(), count, seed));
    EXPECT_EQ(d, SIZE_MAX) << what("allreduce", dt, op, count) << " differs at element " << d;
    ++seed;
  }

  template <class T>
  void reduce(fi_datatype dt, fi_op op, size_t count, int root) {
    auto in = input<T>(op, g.rank, count, seed);
    std::vector<unsigned char> out(count * sizeof(T), 0xee);
    ASSERT_EQ(fi_reduce(p.ep, in.data(), count, nullptr, g.rank == root ? out.data() : nullptr, nullptr, g.addr,
                        p.addr[size_t(g.ranks[size_t(root)])], dt, op, 0, this),
              0)
        << what("reduce", dt, op, count, root);
    ASSERT_EQ(wait_coll(p, this), 0) << what("reduce", dt, op, count, root);
    if (g.rank == root) {
      const size_t d = first_diff<T>(out, reduced<T>(op, n(), count, seed));
      EXPECT_EQ(d, SIZE_MAX) << what("reduce", dt, op, count, root) << " differs at element " << d;
    }
    ++seed;
  }

  // count: elements of each member's share of the result.
  template <class T>
  void reduce_scatter(fi_datatype dt, fi_op op, size_t count) {
    auto in = input<T>(op, g.rank, count * size_t(n()), seed);
    std::vector<unsigned char> out(count * sizeof(T), 0xee);
    ASSERT_EQ(fi_reduce_scatter(p.ep, in.data(), count, nullptr, out.data(), nullptr, g.addr, dt, op, 0, this), 0)
        << what("reduce_scatter", dt, op, count);
    ASSERT_EQ(wait_coll(p, this), 0) << what("reduce_scatter", dt, op, count);
    auto all = reduced<T>(op, n(), count * size_t(n()), seed);
    std::vector<unsigned char> want(all.begin() + long(size_t(g.rank) * count * sizeof(T)),
                                    all.begin() + long(size_t(g.rank + 1) * count * sizeof(T)));
    const size_t d = first_diff<T>(out, want);
    EXPECT_EQ(d, SIZE_MAX) << what("reduce_scatter", dt, op, count) << " differs at element " << d;
    ++seed;
  }

  template <class T>
  void broadcast(fi_datatype dt, size_t count, int root) {
    auto want = input<T>(FI_SUM, root, count, seed);
    std::vector<unsigned char> buf = g.rank == root ? want : std::vector<unsigned char>(want.size(), 0xee);
    ASSERT_EQ(fi_broadcast(p.ep, buf.data(), count, nullptr, g.addr, p.addr[size_t(g.ranks[size_t(root)])], dt, 0,
                           this),
              0)
        << what("broadcast", dt, FI_NOOP, count, root);
    ASSERT_EQ(wait_coll(p, this), 0) << what("broadcast", dt, FI_NOOP, count, root);
    EXPECT_EQ(first_diff<T>(buf, want), SIZE_MAX) << what("broadcast", dt, FI_NOOP, count, root);
    ++seed;
  }

  // The blocks of every member, in rank order.
  template <class T>
  std::vector<unsigned char> blocks(size_t count) {
    std::vector<unsigned char> all;
    for (int r = 0; r < n(); ++r) {
      auto b = input<T>(FI_SUM, r, count, seed);
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  }

  template <class T>
  void allgather(fi_datatype dt, size_t count) {
    auto in = input<T>(FI_SUM, g.rank, count, seed);
    std::vector<unsigned char> out(count * size_t(n()) * sizeof(T), 0xee);
    ASSERT_EQ(fi_allgather(p.ep, in.data(), count, nullptr, out.data(), nullptr, g.addr, dt, 0, this), 0)
        << what("allgather", dt, FI_NOOP, count);
    ASSERT_EQ(wait_coll(p, this), 0) << what("allgather", dt, FI_NOOP, count);
    EXPECT_EQ(first_diff<T>(out, blocks<T>(count)), SIZE_MAX) << what("allgather", dt, FI_NOOP, count);
    ++seed;
  }

  template <class T>
  void gather(fi_datatype dt, size_t count, int root) {
    auto in = input<T>(FI_SUM, g.rank, count, seed);
    std::vector<unsigned char> out(count * size_t(n()) * sizeof(T), 0xee);
    ASSERT_EQ(fi_gather(p.ep, in.data(), count, nullptr, g.rank == root ? out.data() : nullptr, nullptr, g.addr,
                        p.addr[size_t(g.ranks[size_t(root)])], dt, 0, this),
              0)
        << what("gather", dt, FI_NOOP, count, root);
    ASSERT_EQ(wait_coll(p, this), 0) << what("gather", dt, FI_NOOP, count, root);
    if (g.rank == root) {
      EXPECT_EQ(first_diff<T>(out, blocks<T>(count)), SIZE_MAX) << what("gather", dt, FI_NOOP, count, root);
    }
    ++seed;
  }

  template <class T>
  void scatter(fi_datatype dt, size_t count, int root) {
    auto all = blocks<T>(count);
    std::vector<unsigned char> out(count * sizeof(T), 0xee);
    ASSERT_EQ(fi_scatter(p.ep, g.rank == root ? all.data() : nullptr, count, nullptr, out.data(), nullptr, g.addr,
                         p.addr[size_t(g.ranks[size_t(root)])], dt, 0, this),
              0)
        << what("scatter", dt, FI_NOOP, count, root);
    ASSERT_EQ(wait_coll(p, this), 0) << what("scatter", dt, FI_NOOP, count, root);
    std::vector<unsigned char> want(all.begin() + long(size_t(g.rank) * count * sizeof(T)),
                                    all.begin() + long(size_t(g.rank + 1) * count * sizeof(T)));
    EXPECT_EQ(first_diff<T>(out, want), SIZE_MAX) << what("scatter", dt, FI_NOOP, count, root);
    ++seed;
  }

  // Member r sends block j of its input to member j: what r's block j is.
  template <class T>
  std::vector<unsigned char> a2a_block(int from, int to, size_t count) {
    auto in = input<T>(FI_SUM, from, count * size_t(n()), seed);
    return std::vector<unsigned char>(in.begin() + long(size_t(to) * count * sizeof(T)),
                                      in.begin() + long(size_t(to + 1) * count * sizeof(T)));
  }

  template <class T>
  void alltoall(fi_datatype dt, size_t count) {
    auto in = input<T>(FI_SUM, g.rank, count * size_t(n()), seed);
    std::vector<unsigned char> out(in.size(), 0xee);
    ASSERT_EQ(fi_alltoall(p.ep, in.data(), count, nullptr, out.data(), nullptr, g.addr, dt, 0, this), 0)
        << what("alltoall", dt, FI_NOOP, count);
    ASSERT_EQ(wait_coll(p, this), 0) << what("alltoall", dt, FI_NOOP, count);
    std::vector<unsigned char> want;
    for (int r = 0; r < n(); ++r) {
      auto b = a2a_block<T>(r, g.rank, count);
      want.insert(want.end(), b.begin(), b.end());
    }
    EXPECT_EQ(first_diff<T>(out, want), SIZE_MAX) << what("alltoall", dt, FI_NOOP, count);
    ++seed;
  }

  void barrier() {
    ASSERT_EQ(fi_barrier(p.ep, g.addr, this), 0);
    ASSERT_EQ(wait_coll(p, this), 0);
  }
};

bool advertised(fid_domain* d, fi_collective_op c, fi_datatype dt, fi_op op) {
  fi_collective_attr a{};
  a.datatype = dt;
  a.op = op;
  return fi_query_collective(d, c, &a, 0) == 0;
}

// Every operation, every advertised (op, datatype), small counts (a
// non-power-of-two among them) and the sizes where the large-message
// algorithms take over.
void every_operation(mp_peer& p, group& g) {
  checker c{p, g};
  const int n = int(g.ranks.size());
  c.barrier();
  size_t reductions = 0;
  for (fi_datatype dt : all_types) {
    with_type(dt, [&](auto t) {
      using T = decltype(t);
      for (fi_op op : all_ops) {
        if (advertised(p.domain, FI_ALLREDUCE, dt, op)) {
          ++reductions;
          c.allreduce<T>(dt, op, 5);
        }
        if (advertised(p.domain, FI_REDUCE_SCATTER, dt, op)) c.reduce_scatter<T>(dt, op, 3);
        if (advertised(p.domain, FI_REDUCE, dt, op)) c.reduce<T>(dt, op, 4, int(c.seed) % n);
      }
      if (advertised(p.domain, FI_BROADCAST, dt, FI_NOOP)) c.broadcast<T>(dt, 7, int(c.seed) % n);
      if (advertised(p.domain, FI_ALLGATHER, dt, FI_NOOP)) c.allgather<T>(dt, 3);
      if (advertised(p.domain, FI_GATHER, dt, FI_NOOP)) c.gather<T>(dt, 2, int(c.seed) % n);
      if (advertised(p.domain, FI_SCATTER, dt, FI_NOOP)) c.scatter<T>(dt, 2, int(c.seed) % n);
      if (advertised(p.domain, FI_ALLTOALL, dt, FI_NOOP)) c.alltoall<T>(dt, 2);
    });
    if (::testing::Test::HasFailure()) return;
  }
  // Every (op, datatype) of the atomic kernels: 10 ops on 12 integer types
  // of which 3 are bitwise-only... at least the arithmetic ones on all 16.
  EXPECT_GE(reductions, 16u * 4);
  // Zero elements, and sizes past the algorithms' thresholds.
  c.allreduce<uint64_t>(FI_UINT64, FI_SUM, 0);
  c.allreduce<uint64_t>(FI_UINT64, FI_SUM, 128 * 1024 + 3);  // ring
  c.allreduce<double>(FI_DOUBLE, FI_MAX, 20000);
  c.reduce_scatter<uint32_t>(FI_UINT32, FI_SUM, 40000 / size_t(n) + 1);
  c.allgather<uint64_t>(FI_UINT64, 30000 / size_t(n) + 1);
  c.broadcast<uint8_t>(FI_UINT8, 600 * 1024 + 5, n - 1);  // chain, segments
  c.reduce<int32_t>(FI_INT32, FI_SUM, 70000, 0);
  c.alltoall<uint64_t>(FI_UINT64, 3000);
  c.gather<uint16_t>(FI_UINT16, 20000, n / 2);
  c.scatter<uint16_t>(FI_UINT16, 20000, n - 1);
  c.barrier();
}

void all_in_one_group(mp_peer& p) {
  std::vector<int> ranks(size_t(p.size));
  for (int i = 0; i < p.size; ++i) ranks[size_t(i)] = i;
  group g;
  join(p, ranks, g);
  if (::testing::Test::HasFatalFailure()) return;
  every_operation(p, g);
  leave(g);
}

TEST_P(coll, EveryOperationTwoMembers) {
  mp_run(2, all_in_one_group, coll_options());
}
TEST_P(coll, EveryOperationThreeMembers) {
  mp_run(3, all_in_one_group, coll_options());
}
TEST_P(coll, EveryOperationFourMembers) {
  mp_run(4, all_in_one_group, coll_options());
}
TEST_P(coll, EveryOperationEightMembers) {
  mp_run(8, all_in_one_group, coll_options());
}

// Two groups (ranks in a different order in each, one a subset) with
// operations of both in flight at once, and an application's tagged
// traffic beside them: each result is its own group's.
TEST_P(coll, TwoGroupsAtOnceBesideTaggedTraffic) {
  mp_run(4, [](mp_peer& p) {
    // A wildcard receive posted before the groups exist: it must take the
    // application's message, never one of the collectives'.
    uint64_t app = 0;
    fi_context app_ctx;
    if (p.rank == 0) {
      ASSERT_EQ(fi_trecv(p.ep, &app, sizeof app, nullptr, FI_ADDR_UNSPEC, 0, ~0ULL, &app_ctx), 0);
    }
    group all, odd;
    join(p, {3, 2, 1, 0}, all);
    if (p.rank % 2) join(p, {1, 3}, odd);
    if (::testing::Test::HasFatalFailure()) return;
    for (int round = 0; round < 20; ++round) {
      uint64_t a_in = uint64_t(p.rank + 1) * 1000 + uint64_t(round), a_out = 0;
      uint64_t o_in = uint64_t(p.rank) << 8 | uint64_t(round), o_out = 0;
      char ca, co;
      ASSERT_EQ(fi_allreduce(p.ep, &a_in, 1, nullptr, &a_out, nullptr, all.addr, FI_UINT64, FI_SUM, 0, &ca), 0);
      if (p.rank % 2) {
        ASSERT_EQ(fi_allreduce(p.ep, &o_in, 1, nullptr, &o_out, nullptr, odd.addr, FI_UINT64, FI_BOR, 0, &co), 0);
      }
      int want = p.rank % 2 ? 2 : 1;
      bool got_a = false, got_o = false;
      while (want--) {
        fi_cq_tagged_entry ce{};
        ASSERT_EQ(p.wait_cq(&ce), 1);
        ASSERT_EQ(ce.flags, uint64_t(FI_COLLECTIVE));
        if (ce.op_context == &ca) got_a = true;
        if (ce.op_context == &co) got_o = true;
      }
      EXPECT_TRUE(got_a);
      EXPECT_EQ(a_out, uint64_t(10000 + 4 * round));
      if (p.rank % 2) {
        EXPECT_TRUE(got_o);
        EXPECT_EQ(o_out, (uint64_t(1) << 8 | uint64_t(3) << 8 | uint64_t(round)));
      }
    }
    if (p.rank == 0) {
      EXPECT_EQ(app, 0u) << "the application's receive took nothing of the collectives'";
      p.barrier();
      fi_cq_tagged_entry ce{};
      ASSERT_EQ(p.wait_cq(&ce), 1);
      EXPECT_EQ(ce.op_context, &app_ctx);
      EXPECT_EQ(app, 0xabcdu);
    } else {
      p.barrier();
      if (p.rank == 3) {
        uint64_t v = 0xabcd;
        ASSERT_EQ(fi_tsend(p.ep, &v, sizeof v, nullptr, p.addr[0], 77, nullptr), 0);
        fi_cq_tagged_entry ce{};
        ASSERT_EQ(p.wait_cq(&ce), 1);
      }
    }
    p.barrier();
    leave(odd);
    leave(all);
  }, coll_options());
}

// Bad input: clear errors, nothing written, no crash.
TEST_P(coll, BadArgumentsAreRefused) {
  mp_run(2, [](mp_peer& p) {
    fi_collective_attr a{};
    a.datatype = FI_UINT64;
    a.op = FI_SUM;
    EXPECT_EQ(fi_query_collective(p.domain, FI_ALLREDUCE, &a, 0), 0);
    EXPECT_GE(a.max_members, 8u);
    EXPECT_EQ(a.datatype_attr.size, 8u);
    a.op = FI_CSWAP;
    EXPECT_EQ(fi_query_collective(p.domain, FI_ALLREDUCE, &a, 0), -FI_EOPNOTSUPP);
    a.op = FI_BOR;
    a.datatype = FI_DOUBLE;
    EXPECT_EQ(fi_query_collective(p.domain, FI_ALLREDUCE, &a, 0), -FI_EOPNOTSUPP);
    EXPECT_EQ(fi_query_collective(p.domain, FI_ALLREDUCE, nullptr, 0), -FI_EINVAL);
    EXPECT_EQ(fi_query_collective(p.domain, fi_collective_op(99), &a, 0), -FI_EINVAL);
    a = {};
    a.datatype = FI_VOID;
    a.op = FI_NOOP;
    EXPECT_EQ(fi_query_collective(p.domain, FI_BARRIER, &a, 0), 0);

    // Before any join: no collective address is valid.
    uint64_t x = 1, y = 0;
    EXPECT_EQ(fi_barrier(p.ep, 0, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_allreduce(p.ep, &x, 1, nullptr, &y, nullptr, 12345, FI_UINT64, FI_SUM, 0, nullptr), -FI_EINVAL);

    // AV sets.
    fi_av_set_attr sa{};
    sa.start_addr = FI_ADDR_NOTAVAIL;
    sa.end_addr = FI_ADDR_NOTAVAIL;
    sa.stride = 1;
    fid_av_set* set = nullptr;
    EXPECT_EQ(fi_av_set(p.av, nullptr, &set, nullptr), -FI_EINVAL);
    ASSERT_EQ(fi_av_set(p.av, &sa, &set, nullptr), 0);
    EXPECT_EQ(fi_av_set_insert(set, 999999), -FI_EINVAL) << "not an AV entry";
    ASSERT_EQ(fi_av_set_insert(set, p.addr[0]), 0);
    EXPECT_EQ(fi_av_set_insert(set, p.addr[0]), -FI_EINVAL) << "a member already";
    EXPECT_EQ(fi_av_set_remove(set, p.addr[1]), -FI_EINVAL) << "not a member";
    fi_addr_t set_addr;
    ASSERT_EQ(fi_av_set_addr(set, &set_addr), 0);
    fid_mc* mc = nullptr;
    if (p.rank == 1) {  // a set without us
      EXPECT_EQ(fi_join_collective(p.ep, set_addr, set, 0, &mc, nullptr), -FI_EINVAL);
    }
    EXPECT_EQ(fi_join_collective(p.ep, set_addr, nullptr, 0, &mc, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_join_collective(p.ep, set_addr + 1, set, 0, &mc, nullptr), -FI_EINVAL) << "a stranger's address";

    // Set algebra: {0} u {1} = {0, 1}; n {1} = {1}; {0,1} - {1} = {0}.
    fid_av_set* other = nullptr;
    ASSERT_EQ(fi_av_set(p.av, &sa, &other, nullptr), 0);
    ASSERT_EQ(fi_av_set_insert(other, p.addr[1]), 0);
    ASSERT_EQ(fi_av_set_union(set, other), 0);
    EXPECT_EQ(fi_av_set_insert(set, p.addr[1]), -FI_EINVAL) << "the union holds it";
    ASSERT_EQ(fi_av_set_diff(set, other), 0);
    EXPECT_EQ(fi_av_set_remove(set, p.addr[1]), -FI_EINVAL) << "the difference dropped it";
    ASSERT_EQ(fi_av_set_insert(set, p.addr[1]), 0);
    ASSERT_EQ(fi_av_set_intersect(set, other), 0);
    EXPECT_EQ(fi_av_set_remove(set, p.addr[0]), -FI_EINVAL) << "the intersection dropped it";
    ASSERT_EQ(fi_av_set_insert(set, p.addr[0]), 0);  // {1, 0}
    EXPECT_EQ(fi_close(&other->fid), 0);

    // A joined group of both.
    ASSERT_EQ(fi_join_collective(p.ep, set_addr, set, 0, &mc, nullptr), 0);
    ASSERT_EQ(wait_join(p, mc), 0);
    const fi_addr_t ga = fi_mc_addr(mc);
    EXPECT_EQ(fi_allreduce(p.ep, &x, 1, nullptr, &y, nullptr, ga + 1, FI_UINT64, FI_SUM, 0, nullptr), -FI_EINVAL)
        << "not a joined collective";
    EXPECT_EQ(fi_allreduce(p.ep, &x, 1, nullptr, &y, nullptr, ga, FI_UINT64, FI_CSWAP, 0, nullptr),
              -FI_EOPNOTSUPP);
    EXPECT_EQ(fi_allreduce(p.ep, &x, 1, nullptr, &y, nullptr, ga, FI_DOUBLE, FI_BXOR, 0, nullptr),
              -FI_EOPNOTSUPP);
    EXPECT_EQ(fi_allreduce(p.ep, &x, 1, nullptr, &y, nullptr, ga, fi_datatype(77), FI_SUM, 0, nullptr),
              -FI_EINVAL);
    EXPECT_EQ(fi_allreduce(p.ep, &x, SIZE_MAX / 4, nullptr, &y, nullptr, ga, FI_UINT64, FI_SUM, 0, nullptr),
              -FI_EMSGSIZE)
        << "a count whose bytes overflow";
    EXPECT_EQ(fi_allgather(p.ep, &x, SIZE_MAX / 16, nullptr, &y, nullptr, ga, FI_UINT64, 0, nullptr), -FI_EMSGSIZE);
    EXPECT_EQ(fi_allreduce(p.ep, nullptr, 1, nullptr, &y, nullptr, ga, FI_UINT64, FI_SUM, 0, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_broadcast(p.ep, &x, 1, nullptr, ga, 999999, FI_UINT64, 0, nullptr), -FI_EINVAL) << "root not a member";
    EXPECT_EQ(fi_barrier2(p.ep, ga, FI_MORE, nullptr), -FI_EBADFLAGS);
    EXPECT_EQ(y, 0u) << "nothing written";
    // The group still works, and the set order made rank 1 the group's first.
    x = uint64_t(p.rank) + 5;
    ASSERT_EQ(fi_allgather(p.ep, &x, 1, nullptr, &a, nullptr, ga, FI_UINT64, 0, &x), 0);
    ASSERT_EQ(wait_coll(p, &x), 0);
    uint64_t both[2];
    memcpy(both, &a, sizeof both);
    EXPECT_EQ(both[0], 6u);
    EXPECT_EQ(both[1], 5u);
    EXPECT_EQ(fi_close(&mc->fid), 0);
    EXPECT_EQ(fi_allreduce(p.ep, &x, 1, nullptr, &y, nullptr, ga, FI_UINT64, FI_SUM, 0, nullptr), -FI_EINVAL)
        << "closed";
    EXPECT_EQ(fi_close(&set->fid), 0);
    p.barrier();
  }, coll_options());
}

// A member killed in the middle of an allreduce: every survivor's operation
// ends in an error entry within the dead-peer bound, never a hang, and the
// group refuses to go on.
TEST_P(coll, MemberKilledMidOperation) {
  mp_run(4, [](mp_peer& p) {
    group g;
    join(p, {0, 1, 2, 3}, g);
    if (::testing::Test::HasFatalFailure()) return;
    checker c{p, g};
    c.allreduce<uint64_t>(FI_UINT64, FI_SUM, 4);
    p.barrier();
    if (p.rank == 2) {
      // Dies having posted its part of a large allreduce (some of it
      // sent), and never finishes it.
      std::vector<uint64_t> in(200000, 1), out(200000);
      ASSERT_EQ(fi_allreduce(p.ep, in.data(), in.size(), nullptr, out.data(), nullptr, g.addr, FI_UINT64, FI_SUM,
                             0, &c),
                0);
      fi_cq_tagged_entry ce;
      for (int i = 0; i < 50; ++i) (void)fi_cq_read(p.cq, &ce, 1);
      // Gone as a killed process goes (no close, no goodbye: the kernel
      // closes its sockets and its shm peers see its pid gone); _exit
      // rather than SIGKILL only so that mp_run counts the exit as planned.
      _exit(0);
    }
    std::vector<uint64_t> in(200000, 1), out(200000);
    const uint64_t t0 = ms_now();
    ASSERT_EQ(fi_allreduce(p.ep, in.data(), in.size(), nullptr, out.data(), nullptr, g.addr, FI_UINT64, FI_SUM, 0,
                           &c),
              0);
    const int err = wait_coll(p, &c, 15000);
    EXPECT_NE(err, 0) << "the operation cannot succeed without rank 2";
    EXPECT_NE(err, FI_ETIMEDOUT) << "an error entry, not a hang";
    EXPECT_LT(ms_now() - t0, 12000u) << "within the dead-peer bound";
    // Later operations of the broken group fail too, at once or in an entry.
    uint64_t x = 1, y = 0;
    const ssize_t r = fi_allreduce(p.ep, &x, 1, nullptr, &y, nullptr, g.addr, FI_UINT64, FI_SUM, 0, &x);
    if (r == 0) {
      EXPECT_NE(wait_coll(p, &x, 5000), 0);
    }
    leave(g);
  }, coll_options());
}

// fi_endpoint(3) gives -FI_EBUSY for a scalable endpoint's open contexts
// only: an endpoint closes before the groups it joined, and the objects it
// was bound to close after it. (fabtests' fi_multinode_coll, after a failed
// test, closes its endpoint with the group open: the close was -FI_EBUSY,
// and so was every close behind it.) Each group is then freed by its own
// fi_close.
TEST_P(coll, EndpointClosesBeforeItsGroup) {
  mp_run(3, [](mp_peer& p) {
    group g;
    join(p, {0, 1, 2}, g);
    if (::testing::Test::HasFatalFailure()) return;
    checker c{p, g};
    c.allreduce<uint64_t>(FI_UINT64, FI_SUM, 7);
    p.barrier();
    EXPECT_EQ(fi_close(&p.ep->fid), 0);
    p.ep = nullptr;
    leave(g);  // the group, then its set: the AV and the rest close after
  }, coll_options());
}

// A member that runs no progress for longer than a TCP connect takes (an
// application blocked in an out-of-band barrier, as fabtests' multinode
// harness is between tests, or a process of a loaded machine off its CPU)
// is slow, not gone: the others' connections to it wait for its handshake,
// and the join and an allreduce complete everywhere. (The tcp connector
// gave up after 10 s: the join failed with FI_ETIMEDOUT at the others and
// FI_ECONNREFUSED at the late member, which Debian's tcp passes.) The path
// between members is tcp: modes over shm have no handshake to wait for.
TEST_P(coll, MemberLateToItsFirstJoin) {
  const std::string mode = GetParam().name;
  if (mode.rfind("tcp", 0) != 0 && mode != "lnx_hosts")
    GTEST_SKIP() << "no connection handshake on this path";
  mp_options o = coll_options();
  o.timeout_s = 90;
  mp_run(3, [](mp_peer& p) {
    if (p.rank == 2) sleep(11);  // no progress at all, past the TCP connect's bound
    group g;
    join(p, {0, 1, 2}, g, 40000);
    if (::testing::Test::HasFatalFailure()) return;
    checker c{p, g};
    c.allreduce<uint64_t>(FI_UINT64, FI_SUM, 5);
    p.barrier();
    leave(g);
  }, o);
}

// fi_getinfo with FI_COLLECTIVE answers with an RDM endpoint whose
// fi_query_collective says yes to a barrier.
TEST(coll_info, GetinfoWithCollectiveAnswers) {
  for (const auto& m : weft_test::mp_modes()) {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_COLLECTIVE | FI_TAGGED;
    hints->fabric_attr->prov_name = strdup(m.prov);
    hints->ep_attr->type = FI_EP_RDM;
    fi_info* info = nullptr;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0) << m.prov;
    for (fi_info* i = info; i; i = i->next) EXPECT_TRUE(i->caps & FI_COLLECTIVE) << m.prov;
    fi_freeinfo(info);
    fi_freeinfo(hints);
  }
}

WEFT_MP_SUITE(coll);

}  // namespace
