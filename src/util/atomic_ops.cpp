// SPDX-License-Identifier: BSD-3-Clause
// Atomic-operation kernels: one template, kernel<Op, T>, instantiated for
// every valid (op, datatype) pair into a constexpr table, so atomic_apply is a
// bounds check, a table load and one indirect call. See atomic_ops.hpp for
// the validity matrix and the atomicity promise.
#include "util/atomic_ops.hpp"

#include <rdma/fi_errno.h>

#include <array>
#include <atomic>
#include <bit>
#include <complex>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <utility>

namespace weft {
namespace {

// ---------------------------------------------------------------- datatypes

template <fi_datatype D>
struct dt_type;
template <>
struct dt_type<FI_INT8> {
  using type = int8_t;
};
template <>
struct dt_type<FI_UINT8> {
  using type = uint8_t;
};
template <>
struct dt_type<FI_INT16> {
  using type = int16_t;
};
template <>
struct dt_type<FI_UINT16> {
  using type = uint16_t;
};
template <>
struct dt_type<FI_INT32> {
  using type = int32_t;
};
template <>
struct dt_type<FI_UINT32> {
  using type = uint32_t;
};
template <>
struct dt_type<FI_INT64> {
  using type = int64_t;
};
template <>
struct dt_type<FI_UINT64> {
  using type = uint64_t;
};
template <>
struct dt_type<FI_FLOAT> {
  using type = float;
};
template <>
struct dt_type<FI_DOUBLE> {
  using type = double;
};
template <>
struct dt_type<FI_FLOAT_COMPLEX> {
  using type = std::complex<float>;
};
template <>
struct dt_type<FI_DOUBLE_COMPLEX> {
  using type = std::complex<double>;
};
template <>
struct dt_type<FI_LONG_DOUBLE> {
  using type = long double;
};
template <>
struct dt_type<FI_LONG_DOUBLE_COMPLEX> {
  using type = std::complex<long double>;
};
template <>
struct dt_type<FI_INT128> {
  using type = __int128;
};
template <>
struct dt_type<FI_UINT128> {
  using type = unsigned __int128;
};

constexpr size_t n_datatypes = FI_UINT128 + 1;  // FI_INT8..FI_UINT128 are dense
constexpr size_t n_ops = FI_ATOMIC_OP_LAST;     // FI_MIN..FI_MSWAP are dense

// std::is_integral excludes __int128 in strict ISO mode: say it ourselves.
template <class T>
inline constexpr bool is_int_v =
    std::is_integral_v<T> || std::is_same_v<T, __int128> || std::is_same_v<T, unsigned __int128>;
template <class T>
inline constexpr bool is_complex_v = false;
template <class F>
inline constexpr bool is_complex_v<std::complex<F>> = true;

// Unsigned type that integer arithmetic on T is done in: wraps without UB,
// and never promotes to (signed) int, so uint16 * uint16 cannot overflow.
template <size_t N>
struct arith_uint_of {
  using type = unsigned;
};
template <>
struct arith_uint_of<8> {
  using type = uint64_t;
};
template <>
struct arith_uint_of<16> {
  using type = unsigned __int128;
};
template <class T>
using arith_uint = typename arith_uint_of<sizeof(T)>::type;

// Exact-size unsigned type a lock-free element is accessed as.
template <size_t N>
struct bits_of {
  using type = void;
};
template <>
struct bits_of<1> {
  using type = uint8_t;
};
template <>
struct bits_of<2> {
  using type = uint16_t;
};
template <>
struct bits_of<4> {
  using type = uint32_t;
};
template <>
struct bits_of<8> {
  using type = uint64_t;
};
template <class T>
using bits_t = typename bits_of<sizeof(T)>::type;

template <class T>
constexpr bool lock_free_capable() {
  if constexpr (std::is_void_v<bits_t<T>>) {
    return false;
  } else {
    return std::atomic_ref<bits_t<T>>::is_always_lock_free;
  }
}

// ---------------------------------------------------------------- validity

template <class T>
constexpr bool op_supported(fi_op op) {
  switch (op) {
    case FI_MIN:
    case FI_MAX:
    case FI_CSWAP_LE:
    case FI_CSWAP_LT:
    case FI_CSWAP_GE:
    case FI_CSWAP_GT:
      return !is_complex_v<T>;  // ordered types only
    case FI_SUM:
    case FI_PROD:
    case FI_LOR:
    case FI_LAND:
    case FI_LXOR:
    case FI_ATOMIC_READ:
    case FI_ATOMIC_WRITE:
    case FI_CSWAP:
    case FI_CSWAP_NE:
      return true;
    case FI_BOR:
    case FI_BAND:
    case FI_BXOR:
    case FI_MSWAP:
      return is_int_v<T>;  // bit operations
    default:
      return false;
  }
}

constexpr bool form_allows(atomic_form form, fi_op op) {
  switch (form) {
    case atomic_form::base:
      return op <= FI_BXOR || op == FI_ATOMIC_WRITE;
    case atomic_form::fetch:
      return op <= FI_ATOMIC_WRITE;
    case atomic_form::compare:
      return op >= FI_CSWAP && op <= FI_MSWAP;
  }
  return false;
}

constexpr bool known_form(atomic_form form) {
  return form == atomic_form::base || form == atomic_form::fetch || form == atomic_form::compare;
}

constexpr bool uses_buf(fi_op op) {
  return op != FI_ATOMIC_READ;
}
constexpr bool uses_compare(fi_op op) {
  return op >= FI_CSWAP && op <= FI_MSWAP;
}

// ---------------------------------------------------------------- element math

template <class T>
T wrap_add(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = arith_uint<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <class T>
T wrap_mul(T a, T b) {
  if constexpr (is_int_v<T>) {
    using U = arith_uint<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <class T>
bool truth(const T& v) {
  return v != T{};
}
template <class T>
T from_bool(bool v) {
  return v ? T(1) : T(0);
}

// Computes the new target value of one element from its current value `t`,
// operand `b` and compare operand `c`. Returns false when the target is left
// as it is (reads, failed compares, MIN/MAX that do not improve).
template <fi_op Op, class T>
bool compute(const T& t, const T& b, const T& c, T& out) noexcept {
  using U = arith_uint<T>;
  bool write = true;
  if constexpr (Op == FI_MIN) {
    write = b < t;
    out = b;
  } else if constexpr (Op == FI_MAX) {
    write = b > t;
    out = b;
  } else if constexpr (Op == FI_SUM) {
    out = wrap_add(t, b);
  } else if constexpr (Op == FI_PROD) {
    out = wrap_mul(t, b);
  } else if constexpr (Op == FI_LOR) {
    out = from_bool<T>(truth(t) || truth(b));
  } else if constexpr (Op == FI_LAND) {
    out = from_bool<T>(truth(t) && truth(b));
  } else if constexpr (Op == FI_LXOR) {
    out = from_bool<T>(truth(t) != truth(b));
  } else if constexpr (Op == FI_BOR) {
    out = static_cast<T>(static_cast<U>(t) | static_cast<U>(b));
  } else if constexpr (Op == FI_BAND) {
    out = static_cast<T>(static_cast<U>(t) & static_cast<U>(b));
  } else if constexpr (Op == FI_BXOR) {
    out = static_cast<T>(static_cast<U>(t) ^ static_cast<U>(b));
  } else if constexpr (Op == FI_ATOMIC_READ) {
    write = false;
  } else if constexpr (Op == FI_ATOMIC_WRITE) {
    out = b;
  } else if constexpr (Op == FI_MSWAP) {
    out = static_cast<T>((static_cast<U>(b) & static_cast<U>(c)) | (static_cast<U>(t) & ~static_cast<U>(c)));
  } else {
    // The CSWAP family: man fi_atomic, "if (compare[i] OP addr[i]) addr[i] = buf[i]".
    if constexpr (Op == FI_CSWAP)
      write = c == t;
    else if constexpr (Op == FI_CSWAP_NE)
      write = c != t;
    else if constexpr (Op == FI_CSWAP_LE)
      write = c <= t;
    else if constexpr (Op == FI_CSWAP_LT)
      write = c < t;
    else if constexpr (Op == FI_CSWAP_GE)
      write = c >= t;
    else if constexpr (Op == FI_CSWAP_GT)
      write = c > t;
    else
      static_assert(Op == FI_CSWAP_GT, "unhandled fi_op");
    out = b;
  }
  return write;
}

// ---------------------------------------------------------------- atomicity

// Lock-free path: aligned 1/2/4/8-byte elements, accessed as bits_t<T>.
// Returns the original value.
template <fi_op Op, class T>
T apply_lock_free(void* p, const T& b, const T& c) noexcept {
  using S = bits_t<T>;
  constexpr auto acq_rel = std::memory_order_acq_rel;
  constexpr auto acquire = std::memory_order_acquire;
  std::atomic_ref<S> ref(*static_cast<S*>(p));

  // Direct instructions where the bit pattern is the whole story.
  if constexpr (Op == FI_ATOMIC_READ) {
    return std::bit_cast<T>(ref.load(acquire));
  } else if constexpr (Op == FI_ATOMIC_WRITE) {
    return std::bit_cast<T>(ref.exchange(std::bit_cast<S>(b), acq_rel));
  } else if constexpr (is_int_v<T> && Op == FI_SUM) {
    return std::bit_cast<T>(ref.fetch_add(std::bit_cast<S>(b), acq_rel));  // two's complement
  } else if constexpr (is_int_v<T> && Op == FI_BOR) {
    return std::bit_cast<T>(ref.fetch_or(std::bit_cast<S>(b), acq_rel));
  } else if constexpr (is_int_v<T> && Op == FI_BAND) {
    return std::bit_cast<T>(ref.fetch_and(std::bit_cast<S>(b), acq_rel));
  } else if constexpr (is_int_v<T> && Op == FI_BXOR) {
    return std::bit_cast<T>(ref.fetch_xor(std::bit_cast<S>(b), acq_rel));
  } else if constexpr (is_int_v<T> && Op == FI_CSWAP) {
    S expected = std::bit_cast<S>(c);  // integer equality is bit equality
    ref.compare_exchange_strong(expected, std::bit_cast<S>(b), acq_rel, acquire);
    return std::bit_cast<T>(expected);
  } else {
    // Floating-point compares are by value (-0.0 == 0.0), so CAS on the bits
    // we computed from, not on the operand.
    S old = ref.load(acquire);
    T out{};
    while (compute<Op>(std::bit_cast<T>(old), b, c, out) &&
           !ref.compare_exchange_weak(old, std::bit_cast<S>(out), acq_rel, acquire)) {}
    return std::bit_cast<T>(old);
  }
}

// Locked path: wide types and unaligned elements. A striped table of
// spinlocks keyed by element address; the critical section is a few loads
// and stores, so spinning beats sleeping.
struct alignas(64) stripe {
  std::atomic<bool> busy{false};

  void lock() noexcept {
    for (unsigned spins = 0; busy.exchange(true, std::memory_order_acquire);) {
      while (busy.load(std::memory_order_relaxed)) {
        if (++spins % 64 == 0) std::this_thread::yield();
      }
    }
  }
  void unlock() noexcept { busy.store(false, std::memory_order_release); }
};

constexpr size_t n_stripes = 64;
stripe stripes[n_stripes];

stripe& stripe_for(const void* p) noexcept {
  // 16-byte granules: neighbouring wide elements land on different stripes.
  return stripes[(reinterpret_cast<uintptr_t>(p) >> 4) % n_stripes];
}

template <fi_op Op, class T>
T apply_locked(void* p, const T& b, const T& c) noexcept {
  stripe& s = stripe_for(p);
  s.lock();
  T t{};
  std::memcpy(&t, p, sizeof(T));
  T out{};
  if (compute<Op>(t, b, c, out)) std::memcpy(p, &out, sizeof(T));
  s.unlock();
  return t;
}

// ---------------------------------------------------------------- kernels

template <fi_op Op, class T, bool Locked>
void run(unsigned char* target, const unsigned char* buf, const unsigned char* cmp, unsigned char* result,
         size_t count) noexcept {
  constexpr size_t sz = sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    // Operands are copied out: the caller's buffers need no alignment.
    T b{}, c{};
    if constexpr (uses_buf(Op)) std::memcpy(&b, buf + i * sz, sz);
    if constexpr (uses_compare(Op)) std::memcpy(&c, cmp + i * sz, sz);
    T orig{};
    if constexpr (Locked)
      orig = apply_locked<Op, T>(target + i * sz, b, c);
    else
      orig = apply_lock_free<Op, T>(target + i * sz, b, c);
    if (result) std::memcpy(result + i * sz, &orig, sz);
  }
}

using kernel_fn = void (*)(void*, const void*, const void*, void*, size_t) noexcept;

template <fi_op Op, class T>
void kernel(void* target, const void* buf, const void* cmp, void* result, size_t count) noexcept {
  auto* t = static_cast<unsigned char*>(target);
  auto* b = static_cast<const unsigned char*>(buf);
  auto* c = static_cast<const unsigned char*>(cmp);
  auto* r = static_cast<unsigned char*>(result);
  if constexpr (lock_free_capable<T>()) {
    // sizeof(T) is a multiple of the alignment: one check covers every element.
    constexpr size_t align = std::atomic_ref<bits_t<T>>::required_alignment;
    if (reinterpret_cast<uintptr_t>(target) % align == 0) [[likely]] {
      run<Op, T, false>(t, b, c, r, count);
      return;
    }
  }
  run<Op, T, true>(t, b, c, r, count);
}

template <size_t D, size_t O>
constexpr kernel_fn pick() {
  using T = typename dt_type<static_cast<fi_datatype>(D)>::type;
  constexpr auto op = static_cast<fi_op>(O);
  if constexpr (op_supported<T>(op))
    return &kernel<op, T>;
  else
    return nullptr;
}

template <size_t D, size_t... O>
constexpr std::array<kernel_fn, n_ops> make_row(std::index_sequence<O...>) {
  return {pick<D, O>()...};
}

template <size_t... D>
constexpr auto make_table(std::index_sequence<D...>) {
  return std::array<std::array<kernel_fn, n_ops>, n_datatypes>{
      make_row<D>(std::make_index_sequence<n_ops>{})...};
}

template <size_t... D>
constexpr auto make_sizes(std::index_sequence<D...>) {
  return std::array<size_t, n_datatypes>{sizeof(typename dt_type<static_cast<fi_datatype>(D)>::type)...};
}

// kernels[dt][op]: null where the datatype does not support the op.
constexpr auto kernels = make_table(std::make_index_sequence<n_datatypes>{});
constexpr auto sizes = make_sizes(std::make_index_sequence<n_datatypes>{});

static_assert(sizeof(std::complex<double>) == 16 && sizeof(unsigned __int128) == 16);
static_assert(lock_free_capable<uint64_t>() && lock_free_capable<std::complex<float>>());

// Null for unknown values; form is checked separately.
kernel_fn lookup(fi_op op, fi_datatype dt) noexcept {
  const auto o = static_cast<size_t>(op);
  const auto d = static_cast<size_t>(dt);
  if (o >= n_ops || d >= n_datatypes) return nullptr;
  return kernels[d][o];
}

// ---------------------------------------------------------------- reductions (collectives)

// out = a op b, element by element, with compute()'s math (its "target" is
// a, its operand b). Loads and stores go through memcpy: no alignment is
// assumed, and the compiler turns them into plain (vector) moves.
template <fi_op Op, class T>
void reduce_kernel(void* out, const void* a, const void* b, size_t count) noexcept {
  auto* o = static_cast<unsigned char*>(out);
  auto* pa = static_cast<const unsigned char*>(a);
  auto* pb = static_cast<const unsigned char*>(b);
  constexpr size_t sz = sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    T x, y, r;
    std::memcpy(&x, pa + i * sz, sz);
    std::memcpy(&y, pb + i * sz, sz);
    if (!compute<Op, T>(x, y, y, r)) r = x;
    std::memcpy(o + i * sz, &r, sz);
  }
}

using reduce_fn = void (*)(void*, const void*, const void*, size_t) noexcept;
constexpr size_t n_reduce_ops = FI_BXOR + 1;  // FI_MIN .. FI_BXOR

template <size_t D, size_t O>
constexpr reduce_fn pick_reduce() {
  using T = typename dt_type<static_cast<fi_datatype>(D)>::type;
  constexpr auto op = static_cast<fi_op>(O);
  if constexpr (op_supported<T>(op))
    return &reduce_kernel<op, T>;
  else
    return nullptr;
}
template <size_t D, size_t... O>
constexpr std::array<reduce_fn, n_reduce_ops> make_reduce_row(std::index_sequence<O...>) {
  return {pick_reduce<D, O>()...};
}
template <size_t... D>
constexpr auto make_reduce_table(std::index_sequence<D...>) {
  return std::array<std::array<reduce_fn, n_reduce_ops>, n_datatypes>{
      make_reduce_row<D>(std::make_index_sequence<n_reduce_ops>{})...};
}
constexpr auto reducers = make_reduce_table(std::make_index_sequence<n_datatypes>{});

reduce_fn reduce_lookup(fi_op op, fi_datatype dt) noexcept {
  const auto o = static_cast<size_t>(op);
  const auto d = static_cast<size_t>(dt);
  if (o >= n_reduce_ops || d >= n_datatypes) return nullptr;
  return reducers[d][o];
}

}  // namespace

bool atomic_valid(atomic_form form, fi_op op, fi_datatype dt) noexcept {
  return known_form(form) && lookup(op, dt) && form_allows(form, op);
}

size_t datatype_size(fi_datatype dt) noexcept {
  const auto d = static_cast<size_t>(dt);
  return d < n_datatypes ? sizes[d] : 0;
}

int atomic_apply(atomic_form form, fi_op op, fi_datatype dt, void* target, const void* buf,
                 const void* compare, void* result, size_t count) noexcept {
  if (!known_form(form) || static_cast<size_t>(op) >= n_ops || static_cast<size_t>(dt) >= n_datatypes)
      [[unlikely]]
    return -FI_EINVAL;
  const kernel_fn fn = kernels[static_cast<size_t>(dt)][static_cast<size_t>(op)];
  if (!fn || !form_allows(form, op)) [[unlikely]]
    return -FI_EOPNOTSUPP;
  if (count == 0) return 0;
  if (!target || (uses_buf(op) && !buf) || (form == atomic_form::compare && !compare) ||
      (form != atomic_form::base && !result)) [[unlikely]]
    return -FI_EINVAL;
  fn(target, buf, compare, result, count);
  return 0;
}

bool reduce_valid(fi_op op, fi_datatype dt) noexcept {
  return reduce_lookup(op, dt) != nullptr;
}

int reduce_apply(fi_op op, fi_datatype dt, void* out, const void* a, const void* b, size_t count) noexcept {
  const reduce_fn fn = reduce_lookup(op, dt);
  if (!fn) [[unlikely]]
    return -FI_EOPNOTSUPP;
  if (count) fn(out, a, b, count);
  return 0;
}

}  // namespace weft
