// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The object model every weft object follows.
//
// * Each object weft hands out is a C++ object whose FIRST member is the C
//   struct (fid_cq, fid_av, ...): the application's pointer and weft's object
//   are the same address, so `from_fid<T>(p)` is a cast.
// * Control-path code may throw weft::error; every ops-table entry and every
//   exported function runs through weft::guard(), which maps exceptions to
//   -FI_E* so no exception ever crosses the C boundary.
// * Parents count their users (weft::users): closing an object that others
//   still hold returns -FI_EBUSY.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>

namespace weft {

// An error on the control path. `code` is the positive FI_E* value.
class error : public std::exception {
public:
  explicit error(int code, const char* what = nullptr) noexcept
      : code_(code < 0 ? -code : code), what_(what ? what : "weft error") {}
  int code() const noexcept { return code_; }
  const char* what() const noexcept override { return what_; }

private:
  int code_;
  const char* what_;
};

[[noreturn, gnu::cold, gnu::noinline]] inline void fail(int code, const char* what = nullptr) {
  throw error(code, what);
}

// Runs f and maps any exception to a negative FI_E* code of f's return type.
template <class F>
auto guard(F&& f) noexcept -> decltype(f()) {
  using R = decltype(f());
  try {
    return f();
  } catch (const error& e) {
    return static_cast<R>(-e.code());
  } catch (const std::bad_alloc&) {
    return static_cast<R>(-FI_ENOMEM);
  } catch (...) {
    return static_cast<R>(-FI_EOTHER);
  }
}

// Number of objects that hold a reference to this one.
class users {
public:
  void add() noexcept { n_.fetch_add(1, std::memory_order_relaxed); }
  void drop() noexcept { n_.fetch_sub(1, std::memory_order_release); }
  bool busy() const noexcept { return n_.load(std::memory_order_acquire) != 0; }
  int count() const noexcept { return n_.load(std::memory_order_acquire); }

private:
  std::atomic<int> n_{0};
};

// The C struct is the first member of T, so the addresses coincide.
template <class T, class C>
inline T* from_fid(C* c) noexcept {
  return reinterpret_cast<T*>(c);
}

// Checks that `f` is non-null and of class `cls` (e.g. FI_CLASS_CQ).
inline bool is_class(const fid* f, size_t cls) noexcept {
  return f && f->fclass == cls;
}

// Flags helpers.
inline constexpr bool only(uint64_t flags, uint64_t allowed) noexcept {
  return (flags & ~allowed) == 0;
}

// Default entries for ops tables: not supported.
int fid_no_bind(fid*, fid*, uint64_t) noexcept;
int fid_no_control(fid*, int, void*) noexcept;
int fid_no_ops_open(fid*, const char*, uint64_t, void**, void*) noexcept;
int fid_no_tostr(const fid*, char*, size_t) noexcept;
int fid_no_ops_set(fid*, const char*, uint64_t, void*, void*) noexcept;

}  // namespace weft
