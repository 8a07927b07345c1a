// SPDX-License-Identifier: BSD-3-Clause
// The collective algorithms: for each operation, how many steps, which
// transfers each step makes, and the local work after a step. An algorithm
// is a pure function of (rank, size, root, sizes, step): the engine
// (util/coll.cpp) issues a step's transfers, waits for all of them, calls
// alg_after, and moves to the next step. docs/design.md ("Collectives")
// says which algorithm runs when.
//
// Reductions always combine the lower rank's data as the left operand
// (`a` of reduce_apply), so every member computes the very same sequence of
// operations and ends with identical bits, floating point included.
#include <cstring>

#include "util/atomic_ops.hpp"
#include "util/coll_int.hpp"

namespace weft {

namespace {

uint32_t ceil_log2(uint32_t n) noexcept {
  uint32_t k = 0;
  while ((uint64_t{1} << k) < n) ++k;
  return k;
}
uint32_t floor_pow2(uint32_t n) noexcept {
  uint32_t p = 1;
  while (uint64_t{p} * 2 <= n) p *= 2;
  return p;
}
uint32_t lsb(uint32_t v) noexcept {
  return v & (~v + 1);
}
uint32_t mod(int64_t v, uint32_t n) noexcept {
  int64_t m = v % int64_t(n);
  return uint32_t(m < 0 ? m + n : m);
}
// Elements [lo, hi) of chunk c when `count` elements are cut into n chunks.
size_t chunk_lo(size_t count, uint32_t n, uint32_t c) noexcept {
  return size_t((unsigned __int128)count * c / n);
}

// The rank of a tree position relative to the root, and back.
uint32_t vrank(const coll_op& o) noexcept {
  return mod(int64_t(o.g->rank) - o.root, o.g->size);
}
uint32_t from_v(const coll_op& o, uint32_t v) noexcept {
  return (v + o.root) % o.g->size;
}

void reduce(const coll_op& o, uint8_t* out, const uint8_t* a, const uint8_t* b, size_t count) noexcept {
  reduce_apply(o.op, o.dt, out, a, b, count);
}

// ---------------------------------------------------------------- recursive doubling (allreduce, small)
// Ranks below 2*rem fold pairwise first (the even one hands its data to the
// odd one and waits), pof2 ranks exchange in log2(pof2) steps, and the odd
// ones hand the result back.
struct rd_shape {
  uint32_t pof2, rem, levels, first;  // first: index of the first exchange step
};
rd_shape rd_of(uint32_t n) noexcept {
  rd_shape s;
  s.pof2 = floor_pow2(n);
  s.rem = n - s.pof2;
  s.levels = ceil_log2(s.pof2);
  s.first = s.rem ? 1 : 0;
  return s;
}
uint32_t rd_steps(uint32_t n) noexcept {
  rd_shape s = rd_of(n);
  return s.levels + (s.rem ? 2 : 0);
}
// The partner at exchange level k, or -1 when r sits the exchanges out.
int64_t rd_partner(uint32_t r, const rd_shape& s, uint32_t k) noexcept {
  if (r < 2 * s.rem && r % 2 == 0) return -1;
  uint32_t newr = r < 2 * s.rem ? r / 2 : r - s.rem;
  uint32_t pn = newr ^ (1u << k);
  return pn < s.rem ? int64_t(pn) * 2 + 1 : int64_t(pn) + s.rem;
}
size_t rd_plan(const coll_op& o, uint32_t step, uint8_t* acc, uint8_t* in, size_t bytes, xfer* x) noexcept {
  const uint32_t r = o.g->rank;
  rd_shape s = rd_of(o.g->size);
  if (s.rem && step == 0) {  // fold
    if (r >= 2 * s.rem) return 0;
    if (r % 2 == 0) {
      x[0] = {true, r + 1, acc, bytes, 0};
    } else {
      x[0] = {false, r - 1, in, bytes, 0};
    }
    return 1;
  }
  if (s.rem && step == s.first + s.levels) {  // unfold
    if (r >= 2 * s.rem) return 0;
    if (r % 2 == 1)
      x[0] = {true, r - 1, acc, bytes, 1 + s.levels};
    else
      x[0] = {false, r + 1, acc, bytes, 1 + s.levels};
    return 1;
  }
  const uint32_t k = step - s.first;
  int64_t p = rd_partner(r, s, k);
  if (p < 0) return 0;
  x[0] = {false, uint32_t(p), in, bytes, 1 + k};
  x[1] = {true, uint32_t(p), acc, bytes, 1 + k};
  return 2;
}
void rd_after(const coll_op& o, uint32_t step, uint8_t* acc, const uint8_t* in, size_t count) noexcept {
  const uint32_t r = o.g->rank;
  rd_shape s = rd_of(o.g->size);
  if (s.rem && step == 0) {
    if (r < 2 * s.rem && r % 2 == 1) reduce(o, acc, in, acc, count);  // r - 1 is the left operand
    return;
  }
  if (s.rem && step == s.first + s.levels) return;
  int64_t p = rd_partner(r, s, step - s.first);
  if (p < 0) return;
  if (p < int64_t(r))
    reduce(o, acc, in, acc, count);
  else
    reduce(o, acc, acc, in, count);
}

// ---------------------------------------------------------------- Bruck's allgather (small)
// After step k a member holds the blocks of ranks r .. r + 2^(k+1) - 1: it
// sends the blocks it has to r - 2^k and gets as many from r + 2^k.
size_t bruck_plan(const coll_op& o, uint32_t step, uint8_t* work, size_t cb, xfer* x) noexcept {
  const uint32_t n = o.g->size, r = o.g->rank, d = 1u << step;
  const size_t nb = std::min<uint32_t>(d, n - d);
  x[0] = {false, (r + d) % n, work + d * cb, nb * cb, step};
  x[1] = {true, mod(int64_t(r) - d, n), work, nb * cb, step};
  return 2;
}
// work[j] holds rank (r + j)'s block.
void bruck_finish(const coll_op& o, const uint8_t* work, uint8_t* out, size_t cb) noexcept {
  const uint32_t n = o.g->size, r = o.g->rank;
  for (uint32_t j = 0; j < n; ++j) memcpy(out + size_t((r + j) % n) * cb, work + size_t(j) * cb, cb);
}

}  // namespace

// ------------------------------------------------------------------ coll_op
uint8_t* coll_op::tmp(size_t bytes) {
  if (bytes > scratch_cap || !scratch) {
    scratch.reset(new uint8_t[bytes ? bytes : 1]);
    scratch_cap = bytes;
  }
  return scratch.get();
}

void coll_op::recycle() noexcept {
  hdr.kind = ctx_kind::op;
  g = nullptr;
  context = nullptr;
  flags = 0;
  src = nullptr;
  res = nullptr;
  acc = nullptr;
  count = esize = 0;
  root = 0;
  step = nsteps = issued = sends = recvs = 0;
  expect = 0;
  wait_since_ms = probed_ms = failed_ms = 0;
  err = 0;
  failing = cancelled = reported = false;
  sends_done.store(0, std::memory_order_relaxed);
  recvs_done.store(0, std::memory_order_relaxed);
  recv_bytes.store(0, std::memory_order_relaxed);
  xfer_err.store(0, std::memory_order_relaxed);
  // Buffers of a large operation are not kept for small ones forever.
  if (scratch_cap > (size_t{16} << 20)) {
    scratch.reset();
    scratch_cap = 0;
  }
}

// ------------------------------------------------------------------ start
void alg_start(coll_op& o) {
  const uint32_t n = o.g->size, r = o.g->rank;
  const size_t cb = o.count * o.esize;  // bytes of the whole vector, or of one slice
  o.step = 0;
  switch (o.kind) {
    case coll_kind::barrier:
      o.alg = coll_alg::dissemination;
      o.nsteps = ceil_log2(n);
      return;
    case coll_kind::allreduce:
      if (o.src != o.res && cb) memmove(o.res, o.src, cb);
      o.acc = o.res;
      if (n > 1 && cb >= ring_min_bytes && o.count >= n) {
        o.alg = coll_alg::ring_allreduce;
        o.nsteps = 2 * (n - 1);
        o.tmp((chunk_lo(o.count, n, 1) + 1) * o.esize);
      } else {
        o.alg = coll_alg::rd_allreduce;
        o.nsteps = rd_steps(n);
        o.tmp(cb);
      }
      return;
    case coll_kind::reduce: {
      o.alg = coll_alg::bin_reduce;
      o.nsteps = ceil_log2(n);
      const uint32_t v = vrank(o);
      if (v % 2 == 1) {  // a leaf: sends its input as it is
        o.acc = const_cast<uint8_t*>(o.src);
        return;
      }
      uint8_t* t = o.tmp(2 * cb);
      o.acc = r == o.root ? o.res : t + cb;
      if (cb && o.acc != o.src) memmove(o.acc, o.src, cb);
      return;
    }
    case coll_kind::reduce_scatter: {
      const size_t total = cb * n;
      uint8_t* work = o.tmp(total + std::max(cb, total));
      if (total) memcpy(work, o.src, total);
      o.acc = work;
      if (n > 1 && total >= ring_min_bytes) {
        o.alg = coll_alg::ring_reduce_scatter;
        o.nsteps = n - 1;
      } else {
        o.alg = coll_alg::rd_reduce_scatter;
        o.nsteps = rd_steps(n);
      }
      return;
    }
    case coll_kind::allgather:
    case coll_kind::join: {
      const size_t total = cb * n;
      if (n > 1 && total >= ring_min_bytes && o.kind != coll_kind::join) {
        o.alg = coll_alg::ring_allgather;
        o.nsteps = n - 1;
        if (cb && o.res + size_t(r) * cb != o.src) memmove(o.res + size_t(r) * cb, o.src, cb);
      } else {
        o.alg = coll_alg::bruck_allgather;
        o.nsteps = ceil_log2(n);
        o.acc = o.tmp(total);
        if (cb) memcpy(o.acc, o.src, cb);
      }
      return;
    }
    case coll_kind::broadcast:
      o.acc = o.res;
      if (n > 2 && cb >= chain_min_bytes) {
        o.alg = coll_alg::chain_bcast;
        o.nsteps = uint32_t((cb + chain_segment - 1) / chain_segment) + 1;
      } else {
        o.alg = coll_alg::bin_bcast;
        o.nsteps = n > 1 ? 2 : 0;
      }
      return;
    case coll_kind::scatter: {
      o.alg = coll_alg::bin_scatter;
      o.nsteps = n > 1 ? 2 : 0;
      const uint32_t v = vrank(o);
      if (v == 0) {
        if (o.root == 0) {
          o.acc = const_cast<uint8_t*>(o.src);
        } else {  // blocks in tree order: block j is rank (j + root)'s
          o.acc = o.tmp(cb * n);
          for (uint32_t j = 0; j < n; ++j) memcpy(o.acc + size_t(j) * cb, o.src + size_t((j + o.root) % n) * cb, cb);
        }
      } else {
        const uint32_t nb = std::min(lsb(v), n - v);
        o.acc = nb == 1 ? o.res : o.tmp(size_t(nb) * cb);
      }
      return;
    }
    case coll_kind::gather: {
      o.alg = coll_alg::bin_gather;
      o.nsteps = n > 1 ? 2 : 0;
      const uint32_t v = vrank(o);
      const uint32_t sub = v == 0 ? n : std::min(lsb(v), n - v);
      if (sub == 1 && v != 0) {
        o.acc = const_cast<uint8_t*>(o.src);
        return;
      }
      o.acc = (v == 0 && o.root == 0) ? o.res : o.tmp(size_t(sub) * cb);
      if (cb && o.acc != o.src) memmove(o.acc, o.src, cb);
      return;
    }
    case coll_kind::alltoall:
      o.alg = coll_alg::pairwise_alltoall;
      o.nsteps = (n - 1 + 31) / 32;
      if (cb) memmove(o.res + size_t(r) * cb, o.src + size_t(r) * cb, cb);
      return;
  }
}

// ------------------------------------------------------------------ plan
size_t alg_plan(coll_op& o, uint32_t step, xfer* x) noexcept {
  const uint32_t n = o.g->size, r = o.g->rank;
  const size_t cb = o.count * o.esize;
  // A zero-byte transfer still needs a buffer address some transports check.
  uint8_t* dummy = reinterpret_cast<uint8_t*>(&o.hdr);
  switch (o.alg) {
    case coll_alg::dissemination: {
      const uint32_t d = 1u << step;
      x[0] = {false, mod(int64_t(r) - d, n), dummy, 0, step};
      x[1] = {true, (r + d) % n, dummy, 0, step};
      return 2;
    }
    case coll_alg::rd_allreduce:
      return rd_plan(o, step, o.acc, o.scratch.get(), cb, x);
    case coll_alg::rd_reduce_scatter:
      return rd_plan(o, step, o.acc, o.acc + cb * n, cb * n, x);
    case coll_alg::ring_allreduce: {
      const uint32_t right = (r + 1) % n, left = mod(int64_t(r) - 1, n);
      uint32_t sc, rc;
      bool rs = step < n - 1;
      if (rs) {
        sc = mod(int64_t(r) - step, n);
        rc = mod(int64_t(r) - step - 1, n);
      } else {
        const uint32_t t = step - (n - 1);
        sc = mod(int64_t(r) + 1 - t, n);
        rc = mod(int64_t(r) - t, n);
      }
      const size_t slo = chunk_lo(o.count, n, sc), shi = chunk_lo(o.count, n, sc + 1);
      const size_t rlo = chunk_lo(o.count, n, rc), rhi = chunk_lo(o.count, n, rc + 1);
      x[0] = {false, left, rs ? o.scratch.get() : o.acc + rlo * o.esize, (rhi - rlo) * o.esize, step};
      x[1] = {true, right, o.acc + slo * o.esize, (shi - slo) * o.esize, step};
      return 2;
    }
    case coll_alg::ring_reduce_scatter: {
      const uint32_t sc = mod(int64_t(r) - step - 1, n);
      x[0] = {false, mod(int64_t(r) - 1, n), o.acc + cb * n, cb, step};
      x[1] = {true, (r + 1) % n, o.acc + size_t(sc) * cb, cb, step};
      return 2;
    }
    case coll_alg::bin_reduce: {
      const uint32_t v = vrank(o), mask = 1u << step;
      if (v & (mask - 1)) return 0;  // sent already
      if (v & mask) {
        x[0] = {true, from_v(o, v - mask), o.acc, cb, step};
        return 1;
      }
      if (v + mask < n) {
        x[0] = {false, from_v(o, v + mask), o.scratch.get(), cb, step};
        return 1;
      }
      return 0;
    }
    case coll_alg::bruck_allgather:
      return bruck_plan(o, step, o.acc, cb, x);
    case coll_alg::ring_allgather: {
      const uint32_t sc = mod(int64_t(r) - step, n), rc = mod(int64_t(r) - step - 1, n);
      x[0] = {false, mod(int64_t(r) - 1, n), o.res + size_t(rc) * cb, cb, step};
      x[1] = {true, (r + 1) % n, o.res + size_t(sc) * cb, cb, step};
      return 2;
    }
    case coll_alg::bin_bcast: {
      const uint32_t v = vrank(o);
      const uint32_t top = v == 0 ? (1u << ceil_log2(n)) : lsb(v);
      if (step == 0) {
        if (v == 0) return 0;
        x[0] = {false, from_v(o, v - lsb(v)), o.res, cb, 0};
        return 1;
      }
      size_t k = 0;
      for (uint32_t m = top >> 1; m > 0; m >>= 1)
        if (v + m < n) x[k++] = {true, from_v(o, v + m), o.res, cb, 0};
      return k;
    }
    case coll_alg::chain_bcast: {
      const uint32_t v = vrank(o);
      const uint32_t segs = o.nsteps - 1;
      auto seg = [&](uint32_t i, bool send, uint32_t peer) {
        const size_t lo = size_t(i) * chain_segment;
        return xfer{send, peer, o.res + lo, std::min(chain_segment, cb - lo), i};
      };
      size_t k = 0;
      if (v == 0) {
        if (step < segs) x[k++] = seg(step, true, from_v(o, 1));
        return k;
      }
      if (step < segs) x[k++] = seg(step, false, from_v(o, v - 1));
      if (step >= 1 && v + 1 < n) x[k++] = seg(step - 1, true, from_v(o, v + 1));
      return k;
    }
    case coll_alg::bin_scatter: {
      const uint32_t v = vrank(o);
      if (step == 0) {
        if (v == 0) return 0;
        const uint32_t nb = std::min(lsb(v), n - v);
        x[0] = {false, from_v(o, v - lsb(v)), o.acc, size_t(nb) * cb, 0};
        return 1;
      }
      const uint32_t top = v == 0 ? (1u << ceil_log2(n)) : lsb(v);
      size_t k = 0;
      for (uint32_t m = top >> 1; m > 0; m >>= 1)
        if (v + m < n) {
          const uint32_t nb = std::min(m, n - v - m);
          x[k++] = {true, from_v(o, v + m), o.acc + size_t(m) * cb, size_t(nb) * cb, 0};
        }
      return k;
    }
    case coll_alg::bin_gather: {
      const uint32_t v = vrank(o);
      const uint32_t top = v == 0 ? (1u << ceil_log2(n)) : lsb(v);
      if (step == 0) {
        size_t k = 0;
        for (uint32_t m = 1; m < top; m <<= 1)
          if (v + m < n) {
            const uint32_t nb = std::min(m, n - v - m);
            x[k++] = {false, from_v(o, v + m), o.acc + size_t(m) * cb, size_t(nb) * cb, 0};
          }
        return k;
      }
      if (v == 0) return 0;
      const uint32_t sub = std::min(lsb(v), n - v);
      x[0] = {true, from_v(o, v - lsb(v)), o.acc, size_t(sub) * cb, 0};
      return 1;
    }
    case coll_alg::pairwise_alltoall: {
      size_t k = 0;
      const uint32_t lo = 1 + step * 32, hi = std::min<uint32_t>(lo + 32, n);
      for (uint32_t off = lo; off < hi; ++off) {
        const uint32_t to = (r + off) % n, from = mod(int64_t(r) - off, n);
        x[k++] = {false, from, o.res + size_t(from) * cb, cb, off};
        x[k++] = {true, to, const_cast<uint8_t*>(o.src) + size_t(to) * cb, cb, off};
      }
      return k;
    }
  }
  return 0;
}

// ------------------------------------------------------------------ after a step
void alg_after(coll_op& o, uint32_t step) noexcept {
  const uint32_t n = o.g->size, r = o.g->rank;
  const size_t cb = o.count * o.esize;
  switch (o.alg) {
    case coll_alg::rd_allreduce:
      rd_after(o, step, o.acc, o.scratch.get(), o.count);
      break;
    case coll_alg::rd_reduce_scatter:
      rd_after(o, step, o.acc, o.acc + cb * n, o.count * n);
      break;
    case coll_alg::ring_allreduce:
      if (step < n - 1) {
        const uint32_t rc = mod(int64_t(r) - step - 1, n);
        const size_t lo = chunk_lo(o.count, n, rc), hi = chunk_lo(o.count, n, rc + 1);
        uint8_t* c = o.acc + lo * o.esize;
        reduce(o, c, o.scratch.get(), c, hi - lo);
      }
      break;
    case coll_alg::ring_reduce_scatter: {
      const uint32_t rc = mod(int64_t(r) - step - 2, n);
      uint8_t* c = o.acc + size_t(rc) * cb;
      reduce(o, c, o.acc + cb * n, c, o.count);
      break;
    }
    case coll_alg::bin_reduce: {
      const uint32_t v = vrank(o), mask = 1u << step;
      if (!(v & (mask - 1)) && !(v & mask) && v + mask < n) reduce(o, o.acc, o.acc, o.scratch.get(), o.count);
      break;
    }
    default:
      break;
  }
}

// ------------------------------------------------------------------ the end
void alg_finish(coll_op& o) noexcept {
  const uint32_t n = o.g->size, r = o.g->rank;
  const size_t cb = o.count * o.esize;
  switch (o.alg) {
    case coll_alg::rd_reduce_scatter:
    case coll_alg::ring_reduce_scatter:
      if (cb) memcpy(o.res, o.acc + size_t(r) * cb, cb);
      break;
    case coll_alg::bruck_allgather:
      if (cb) bruck_finish(o, o.acc, o.res, cb);
      break;
    case coll_alg::bin_scatter:
      if (vrank(o) == 0 || o.acc != o.res) {
        if (cb) memcpy(o.res, o.acc, cb);
      }
      break;
    case coll_alg::bin_gather:
      if (vrank(o) == 0 && o.acc != o.res)
        for (uint32_t j = 0; j < n; ++j) memcpy(o.res + size_t((j + o.root) % n) * cb, o.acc + size_t(j) * cb, cb);
      break;
    default:
      break;
  }
}

}  // namespace weft
