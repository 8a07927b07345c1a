// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Monotonic clock readings for timeouts and pacing.
#include <time.h>

#include <cstdint>

namespace weft {

inline uint64_t now_us() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

inline uint64_t now_ms() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

}  // namespace weft
