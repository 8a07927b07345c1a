// SPDX-License-Identifier: BSD-3-Clause
// The atomic kernels (util/atomic_ops.hpp) against a reference model written
// from man fi_atomic(3): every (form, op, datatype), edge values, counts > 1,
// unaligned buffers, invalid arguments, and threads racing on one target.
#include "util/atomic_ops.hpp"

#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using weft::atomic_apply;
using weft::atomic_form;
using weft::atomic_valid;
using weft::datatype_size;

constexpr atomic_form all_forms[] = {atomic_form::base, atomic_form::fetch, atomic_form::compare};

const char* form_name(atomic_form f) {
  return f == atomic_form::base ? "base" : f == atomic_form::fetch ? "fetch" : "compare";
}

// ---------------------------------------------------------------- type facts

template <class T>
inline constexpr bool is_int_v =
    std::is_integral_v<T> || std::is_same_v<T, __int128> || std::is_same_v<T, unsigned __int128>;
template <class T>
inline constexpr bool is_cplx_v = false;
template <class F>
inline constexpr bool is_cplx_v<std::complex<F>> = true;

enum class kind { integer, real, complex };
template <class T>
constexpr kind kind_of() {
  return is_int_v<T> ? kind::integer : is_cplx_v<T> ? kind::complex : kind::real;
}

template <size_t N>
struct uint_n;
template <>
struct uint_n<1> {
  using type = uint8_t;
};
template <>
struct uint_n<2> {
  using type = uint16_t;
};
template <>
struct uint_n<4> {
  using type = uint32_t;
};
template <>
struct uint_n<8> {
  using type = uint64_t;
};
template <>
struct uint_n<16> {
  using type = unsigned __int128;
};

// Calls f(T{}, dt) for every point-to-point datatype, with the C type the
// man page describes.
template <class F>
void for_each_datatype(F&& f) {
  f(int8_t{}, FI_INT8);
  f(uint8_t{}, FI_UINT8);
  f(int16_t{}, FI_INT16);
  f(uint16_t{}, FI_UINT16);
  f(int32_t{}, FI_INT32);
  f(uint32_t{}, FI_UINT32);
  f(int64_t{}, FI_INT64);
  f(uint64_t{}, FI_UINT64);
  f(float{}, FI_FLOAT);
  f(double{}, FI_DOUBLE);
  f(std::complex<float>{}, FI_FLOAT_COMPLEX);
  f(std::complex<double>{}, FI_DOUBLE_COMPLEX);
  f(static_cast<long double>(0), FI_LONG_DOUBLE);
  f(std::complex<long double>{}, FI_LONG_DOUBLE_COMPLEX);
  f(static_cast<__int128>(0), FI_INT128);
  f(static_cast<unsigned __int128>(0), FI_UINT128);
}

// ---------------------------------------------------------------- the model

// Which ops each call family accepts (man fi_atomic, "Base/Fetch/Compare-
// Atomic Functions"), and which datatypes each op is defined on.
bool expected_valid(atomic_form form, fi_op op, kind k) {
  const std::vector<fi_op> base = {FI_MIN, FI_MAX,  FI_SUM,  FI_PROD, FI_LOR,         FI_LAND,
                                   FI_BOR, FI_BAND, FI_LXOR, FI_BXOR, FI_ATOMIC_WRITE};
  std::vector<fi_op> ops = base;
  if (form == atomic_form::fetch) ops.push_back(FI_ATOMIC_READ);
  if (form == atomic_form::compare)
    ops = {FI_CSWAP, FI_CSWAP_NE, FI_CSWAP_LE, FI_CSWAP_LT, FI_CSWAP_GE, FI_CSWAP_GT, FI_MSWAP};
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) return false;
  switch (op) {
    case FI_MIN:
    case FI_MAX:
    case FI_CSWAP_LE:
    case FI_CSWAP_LT:
    case FI_CSWAP_GE:
    case FI_CSWAP_GT:
      return k != kind::complex;
    case FI_BOR:
    case FI_BAND:
    case FI_BXOR:
    case FI_MSWAP:
      return k == kind::integer;
    default:
      return true;
  }
}

// Integer model: compute modulo 2^128, then truncate (C++20 conversions are modular).
template <class T>
unsigned __int128 wide(T v) {
  return static_cast<unsigned __int128>(v);
}

// The new target value after one element of `op`.
template <class T>
T model(fi_op op, const T& t, const T& b, const T& c) {
  const auto truth = [](const T& v) { return !(v == T{}); };
  const auto logical = [](bool v) { return v ? T(1) : T(0); };
  switch (op) {
    case FI_SUM:
      if constexpr (is_int_v<T>)
        return static_cast<T>(wide(t) + wide(b));
      else
        return t + b;
    case FI_PROD:
      if constexpr (is_int_v<T>)
        return static_cast<T>(wide(t) * wide(b));
      else
        return t * b;
    case FI_LOR:
      return logical(truth(t) || truth(b));
    case FI_LAND:
      return logical(truth(t) && truth(b));
    case FI_LXOR:
      return logical((truth(t) && !truth(b)) || (!truth(t) && truth(b)));
    case FI_ATOMIC_READ:
      return t;
    case FI_ATOMIC_WRITE:
      return b;
    case FI_CSWAP:
      return c == t ? b : t;
    case FI_CSWAP_NE:
      return c != t ? b : t;
    default:
      break;
  }
  if constexpr (!is_cplx_v<T>) {
    switch (op) {
      case FI_MIN:
        return b < t ? b : t;
      case FI_MAX:
        return b > t ? b : t;
      case FI_CSWAP_LE:
        return c <= t ? b : t;
      case FI_CSWAP_LT:
        return c < t ? b : t;
      case FI_CSWAP_GE:
        return c >= t ? b : t;
      case FI_CSWAP_GT:
        return c > t ? b : t;
      default:
        break;
    }
  }
  if constexpr (is_int_v<T>) {
    switch (op) {
      case FI_BOR:
        return static_cast<T>(wide(t) | wide(b));
      case FI_BAND:
        return static_cast<T>(wide(t) & wide(b));
      case FI_BXOR:
        return static_cast<T>(wide(t) ^ wide(b));
      case FI_MSWAP:
        return static_cast<T>((wide(b) & wide(c)) | (wide(t) & ~wide(c)));
      default:
        break;
    }
  }
  ADD_FAILURE() << "model asked for unsupported op " << op;
  return t;
}

// Edge values: zero, negatives, extremes, a bit pattern.
template <class T>
std::vector<T> samples() {
  if constexpr (is_int_v<T>) {
    using U = typename uint_n<sizeof(T)>::type;
    const U all = static_cast<U>(~U(0));
    const bool is_signed = T(-1) < T(0);
    const T max = is_signed ? static_cast<T>(static_cast<U>(all >> 1)) : static_cast<T>(all);
    const T min =
        is_signed ? static_cast<T>(static_cast<U>(static_cast<U>(all >> 1) + 1)) : static_cast<T>(all - 1);
    const T pattern = static_cast<T>(static_cast<U>(all / 0xff * 0x5a));
    return {T(0), T(1), T(7), static_cast<T>(-1), max, min, pattern};
  } else if constexpr (is_cplx_v<T>) {
    using F = typename T::value_type;
    const F max = std::numeric_limits<F>::max();
    return {T(0, 0), T(F(1.5), F(-2)), T(0, 3), T(-1, 0), T(F(2.5), F(2.5)), T(F(-0.0), 0), T(max, 1)};
  } else {
    const T max = std::numeric_limits<T>::max();
    return {T(0), T(-0.0), T(1.5), T(-2.25), T(3), max, -max};
  }
}

template <class F>
bool same_fp(F a, F b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// Value equality (long double padding bytes are not compared), NaN == NaN.
template <class T>
bool same(const T& a, const T& b) {
  if constexpr (is_cplx_v<T>)
    return same_fp(a.real(), b.real()) && same_fp(a.imag(), b.imag());
  else if constexpr (std::is_floating_point_v<T>)
    return same_fp(a, b);
  else
    return a == b;
}

template <class T>
T load(const unsigned char* p, size_t i) {
  T v{};
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store(unsigned char* p, size_t i, const T& v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

// Runs every op in every form on every combination of sample values (as one
// array, so count > 1), at byte offset `skew` into each buffer.
template <class T>
void check_matrix(fi_datatype dt, size_t skew) {
  const std::vector<T> vals = samples<T>();
  const size_t s = vals.size();
  const size_t n = s * s * s;  // (target, buf, compare) triples
  const size_t bytes = n * sizeof(T) + skew;
  std::vector<unsigned char> tgt(bytes), buf(bytes), cmp(bytes), res(bytes);
  unsigned char* t = tgt.data() + skew;
  unsigned char* b = buf.data() + skew;
  unsigned char* c = cmp.data() + skew;
  unsigned char* r = res.data() + skew;

  for (atomic_form form : all_forms) {
    for (int o = 0; o < FI_ATOMIC_OP_LAST; ++o) {
      const auto op = static_cast<fi_op>(o);
      SCOPED_TRACE(testing::Message()
                   << "form " << form_name(form) << " op " << o << " dt " << dt << " skew " << skew);
      for (size_t i = 0; i < n; ++i) {
        store(t, i, vals[i % s]);
        store(b, i, vals[i / s % s]);
        store(c, i, vals[i / s / s]);
      }
      std::memset(r, 0xcd, n * sizeof(T));
      const std::vector<unsigned char> before(tgt);
      // Base form: result is optional; give it on odd skews to check it is filled.
      void* result = form == atomic_form::base && skew == 0 ? nullptr : r;
      const void* operand = op == FI_ATOMIC_READ ? nullptr : b;  // READ ignores buf

      const bool valid = expected_valid(form, op, kind_of<T>());
      EXPECT_EQ(atomic_valid(form, op, dt), valid);
      const int rc = atomic_apply(form, op, dt, t, operand, c, result, n);
      if (!valid) {
        EXPECT_EQ(rc, -FI_EOPNOTSUPP);
        EXPECT_TRUE(tgt == before) << "invalid op touched the target";
        EXPECT_TRUE(std::all_of(r, r + n * sizeof(T), [](unsigned char x) { return x == 0xcd; }))
            << "invalid op touched the result";
        continue;
      }
      ASSERT_EQ(rc, 0);
      for (size_t i = 0; i < n; ++i) {
        const T t0 = load<T>(before.data() + skew, i);
        const T want = model<T>(op, t0, load<T>(b, i), load<T>(c, i));
        if (!same(load<T>(t, i), want)) {
          ADD_FAILURE() << "target mismatch at element " << i;
          break;
        }
        if (result && !same(load<T>(r, i), t0)) {
          ADD_FAILURE() << "result is not the original target at element " << i;
          break;
        }
      }
    }
  }
}

// ---------------------------------------------------------------- matrix tests

TEST(AtomicOps, MatrixAligned) {
  for_each_datatype([](auto tag, fi_datatype dt) { check_matrix<decltype(tag)>(dt, 0); });
}

TEST(AtomicOps, MatrixUnaligned) {
  for_each_datatype([](auto tag, fi_datatype dt) { check_matrix<decltype(tag)>(dt, 1); });
}

TEST(AtomicOps, DatatypeSize) {
  for_each_datatype([](auto tag, fi_datatype dt) { EXPECT_EQ(datatype_size(dt), sizeof(tag)) << dt; });
  EXPECT_EQ(datatype_size(FI_INT8), 1u);
  EXPECT_EQ(datatype_size(FI_FLOAT_COMPLEX), 8u);
  EXPECT_EQ(datatype_size(FI_DOUBLE_COMPLEX), 16u);
  EXPECT_EQ(datatype_size(FI_LONG_DOUBLE_COMPLEX), 2 * sizeof(long double));
  EXPECT_EQ(datatype_size(FI_UINT128), 16u);
  EXPECT_EQ(datatype_size(FI_VOID), 0u);
  EXPECT_EQ(datatype_size(static_cast<fi_datatype>(FI_UINT128 + 1)), 0u);
  EXPECT_EQ(datatype_size(static_cast<fi_datatype>(-1)), 0u);
}

// Spot checks spelled out by hand, independent of the model above.
TEST(AtomicOps, HandPicked) {
  // CSWAP_LT swaps when compare < target.
  int32_t t = 10, b = 99, c = 5, r = 0;
  ASSERT_EQ(atomic_apply(atomic_form::compare, FI_CSWAP_LT, FI_INT32, &t, &b, &c, &r, 1), 0);
  EXPECT_EQ(t, 99);
  EXPECT_EQ(r, 10);
  t = 10, c = 15;
  ASSERT_EQ(atomic_apply(atomic_form::compare, FI_CSWAP_LT, FI_INT32, &t, &b, &c, &r, 1), 0);
  EXPECT_EQ(t, 10);
  // CSWAP_GE swaps when compare >= target.
  t = 10, c = 10;
  ASSERT_EQ(atomic_apply(atomic_form::compare, FI_CSWAP_GE, FI_INT32, &t, &b, &c, &r, 1), 0);
  EXPECT_EQ(t, 99);
  // Signed wrap, MSWAP, logical ops yield 0/1.
  int8_t i8 = 127, one = 1;
  ASSERT_EQ(atomic_apply(atomic_form::base, FI_SUM, FI_INT8, &i8, &one, nullptr, nullptr, 1), 0);
  EXPECT_EQ(i8, -128);
  uint16_t u16 = 0xff00, m = 0x0ff0, bits = 0xabcd, r16 = 0;
  ASSERT_EQ(atomic_apply(atomic_form::compare, FI_MSWAP, FI_UINT16, &u16, &bits, &m, &r16, 1), 0);
  EXPECT_EQ(u16, 0xfbc0);
  EXPECT_EQ(r16, 0xff00);
  uint16_t big = 0xffff;
  u16 = 0xffff;
  ASSERT_EQ(atomic_apply(atomic_form::base, FI_PROD, FI_UINT16, &u16, &big, nullptr, nullptr, 1), 0);
  EXPECT_EQ(u16, 1);  // 0xffff^2 mod 2^16, no int overflow on the way
  double d = -3.5, two = 2.0;
  ASSERT_EQ(atomic_apply(atomic_form::base, FI_LXOR, FI_DOUBLE, &d, &two, nullptr, nullptr, 1), 0);
  EXPECT_EQ(d, 0.0);
  std::complex<double> z(0, 1), w(0, 0), zr;
  ASSERT_EQ(atomic_apply(atomic_form::fetch, FI_LOR, FI_DOUBLE_COMPLEX, &z, &w, nullptr, &zr, 1), 0);
  EXPECT_EQ(z, std::complex<double>(1, 0));
  EXPECT_EQ(zr, std::complex<double>(0, 1));
  long double ld = 2.5L, ld3 = 3.0L, ldr = 0;
  ASSERT_EQ(atomic_apply(atomic_form::fetch, FI_MAX, FI_LONG_DOUBLE, &ld, &ld3, nullptr, &ldr, 1), 0);
  EXPECT_EQ(ld, 3.0L);
  EXPECT_EQ(ldr, 2.5L);
  // FI_ATOMIC_READ leaves the target alone.
  uint64_t u64 = 42, got = 0;
  ASSERT_EQ(atomic_apply(atomic_form::fetch, FI_ATOMIC_READ, FI_UINT64, &u64, nullptr, nullptr, &got, 1), 0);
  EXPECT_EQ(u64, 42u);
  EXPECT_EQ(got, 42u);
}

TEST(AtomicOps, InvalidArguments) {
  uint64_t t = 7, b = 1, c = 7, r = 0;
  const auto untouched = [&] { return t == 7 && r == 0; };
  // Unknown form / op / datatype.
  const auto bad_form = static_cast<atomic_form>(3);
  EXPECT_FALSE(atomic_valid(bad_form, FI_SUM, FI_UINT64));
  EXPECT_EQ(atomic_apply(bad_form, FI_SUM, FI_UINT64, &t, &b, &c, &r, 1), -FI_EINVAL);
  for (int op : {int(FI_ATOMIC_OP_LAST), int(FI_NOOP), -1}) {
    EXPECT_FALSE(atomic_valid(atomic_form::fetch, static_cast<fi_op>(op), FI_UINT64)) << op;
    EXPECT_EQ(atomic_apply(atomic_form::fetch, static_cast<fi_op>(op), FI_UINT64, &t, &b, &c, &r, 1),
              -FI_EINVAL)
        << op;
  }
  for (int dt : {int(FI_UINT128) + 1, int(FI_VOID), -1}) {
    EXPECT_FALSE(atomic_valid(atomic_form::fetch, FI_SUM, static_cast<fi_datatype>(dt))) << dt;
    EXPECT_EQ(atomic_apply(atomic_form::fetch, FI_SUM, static_cast<fi_datatype>(dt), &t, &b, &c, &r, 1),
              -FI_EINVAL)
        << dt;
  }
  EXPECT_TRUE(untouched());
  // Known but unsupported.
  EXPECT_EQ(atomic_apply(atomic_form::base, FI_ATOMIC_READ, FI_UINT64, &t, &b, &c, &r, 1), -FI_EOPNOTSUPP);
  EXPECT_EQ(atomic_apply(atomic_form::base, FI_CSWAP, FI_UINT64, &t, &b, &c, &r, 1), -FI_EOPNOTSUPP);
  EXPECT_EQ(atomic_apply(atomic_form::compare, FI_SUM, FI_UINT64, &t, &b, &c, &r, 1), -FI_EOPNOTSUPP);
  EXPECT_EQ(atomic_apply(atomic_form::base, FI_BOR, FI_DOUBLE, &t, &b, &c, &r, 1), -FI_EOPNOTSUPP);
  EXPECT_TRUE(untouched());
  // Missing buffers.
  EXPECT_EQ(atomic_apply(atomic_form::base, FI_SUM, FI_UINT64, nullptr, &b, nullptr, nullptr, 1), -FI_EINVAL);
  EXPECT_EQ(atomic_apply(atomic_form::base, FI_SUM, FI_UINT64, &t, nullptr, nullptr, nullptr, 1), -FI_EINVAL);
  EXPECT_EQ(atomic_apply(atomic_form::fetch, FI_SUM, FI_UINT64, &t, &b, nullptr, nullptr, 1), -FI_EINVAL);
  EXPECT_EQ(atomic_apply(atomic_form::fetch, FI_ATOMIC_READ, FI_UINT64, &t, nullptr, nullptr, nullptr, 1),
            -FI_EINVAL);
  EXPECT_EQ(atomic_apply(atomic_form::compare, FI_CSWAP, FI_UINT64, &t, &b, nullptr, &r, 1), -FI_EINVAL);
  EXPECT_EQ(atomic_apply(atomic_form::compare, FI_CSWAP, FI_UINT64, &t, &b, &c, nullptr, 1), -FI_EINVAL);
  EXPECT_TRUE(untouched());
  // count == 0 is a no-op.
  EXPECT_EQ(atomic_apply(atomic_form::compare, FI_CSWAP, FI_UINT64, &t, &b, &c, &r, 0), 0);
  EXPECT_TRUE(untouched());
}

// ---------------------------------------------------------------- threads

constexpr int n_threads = 4;
constexpr int n_iters = 10000;

template <class F>
void race(F&& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n_threads; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

// FI_SUM of `one` from every thread; the total must be exact.
template <class T>
void sum_race(fi_datatype dt, void* target, T one) {
  race([&](int) {
    for (int i = 0; i < n_iters; ++i)
      ASSERT_EQ(atomic_apply(atomic_form::base, FI_SUM, dt, target, &one, nullptr, nullptr, 1), 0);
  });
}

TEST(AtomicOps, ThreadedSumUint64) {
  uint64_t counter = 0;
  sum_race<uint64_t>(FI_UINT64, &counter, 1);
  EXPECT_EQ(counter, uint64_t{n_threads} * n_iters);
}

TEST(AtomicOps, ThreadedFetchSumSeesEachValueOnce) {
  uint32_t counter = 0;
  std::vector<std::vector<uint32_t>> seen(n_threads);
  race([&](int id) {
    const uint32_t one = 1;
    for (int i = 0; i < n_iters; ++i) {
      uint32_t old = 0;
      ASSERT_EQ(atomic_apply(atomic_form::fetch, FI_SUM, FI_UINT32, &counter, &one, nullptr, &old, 1), 0);
      seen[id].push_back(old);
    }
  });
  std::vector<uint32_t> all;
  for (auto& v : seen) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), size_t{n_threads} * n_iters);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
  EXPECT_EQ(counter, uint32_t{n_threads} * n_iters);
}

// Increment by read + compare-and-swap, retrying on a lost race.
template <class T>
void cswap_increment_race(fi_datatype dt, void* target) {
  race([&](int) {
    for (int done = 0; done < n_iters;) {
      T old{}, got{};
      ASSERT_EQ(atomic_apply(atomic_form::fetch, FI_ATOMIC_READ, dt, target, nullptr, nullptr, &old, 1), 0);
      const T next = old + T(1);
      ASSERT_EQ(atomic_apply(atomic_form::compare, FI_CSWAP, dt, target, &next, &old, &got, 1), 0);
      if (got == old) ++done;
    }
  });
}

TEST(AtomicOps, ThreadedCswapIncrement) {
  uint64_t u = 0;
  cswap_increment_race<uint64_t>(FI_UINT64, &u);
  EXPECT_EQ(u, uint64_t{n_threads} * n_iters);
  double d = 0;  // generic CAS loop (compare by value)
  cswap_increment_race<double>(FI_DOUBLE, &d);
  EXPECT_EQ(d, double{n_threads} * n_iters);
  __int128 w = 0;  // locked path
  cswap_increment_race<__int128>(FI_INT128, &w);
  EXPECT_TRUE(w == __int128{n_threads} * n_iters);
}

TEST(AtomicOps, ThreadedSumLockedAndLoopPaths) {
  // Unaligned uint64: the striped-lock path.
  alignas(8) unsigned char raw[16] = {};
  sum_race<uint64_t>(FI_UINT64, raw + 1, 1);
  uint64_t u = 0;
  std::memcpy(&u, raw + 1, sizeof u);
  EXPECT_EQ(u, uint64_t{n_threads} * n_iters);

  std::complex<long double> z{};
  sum_race(FI_LONG_DOUBLE_COMPLEX, &z, std::complex<long double>(1, -1));
  EXPECT_EQ(z, std::complex<long double>(n_threads * n_iters, -n_threads * n_iters));

  float f = 0;  // CAS loop on the bits of a float
  sum_race<float>(FI_FLOAT, &f, 1.0f);
  EXPECT_EQ(f, float(n_threads * n_iters));
}

TEST(AtomicOps, ThreadedCountAboveOne) {
  constexpr size_t n = 8;
  uint16_t arr[n] = {};
  std::complex<double> carr[n] = {};
  race([&](int) {
    uint16_t ones[n];
    std::complex<double> cones[n];
    std::fill(ones, ones + n, uint16_t{1});
    std::fill(cones, cones + n, std::complex<double>(0, 1));
    for (int i = 0; i < n_iters / 4; ++i) {
      ASSERT_EQ(atomic_apply(atomic_form::base, FI_SUM, FI_UINT16, arr, ones, nullptr, nullptr, n), 0);
      ASSERT_EQ(atomic_apply(atomic_form::base, FI_SUM, FI_DOUBLE_COMPLEX, carr, cones, nullptr, nullptr, n),
                0);
    }
  });
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(arr[i], n_threads * (n_iters / 4));
    EXPECT_EQ(carr[i], std::complex<double>(0, n_threads * (n_iters / 4)));
  }
}

}  // namespace
