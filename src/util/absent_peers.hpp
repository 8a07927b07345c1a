// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Sends to an address where no endpoint has ever appeared. By design they
// fail quietly and may be retried: shm returns -FI_EAGAIN (the peer may not
// have enabled its endpoint yet), tcp ends them in error entries (the
// connection was refused or never answered). When that lasts, the address
// is most likely wrong, and the application may retry forever. One warning
// in libfabric's log (FI_LOG_LEVEL=warn, provider `prov`, subsystem ep_data)
// says so:
//
//   A transport calls note() from the (cold) branch where a send found
//   nobody at an address. The first such failure at least `bound_ns` after
//   the first one for the same address logs one warning naming it; that
//   address is never warned about again on that endpoint.
//
// Provider-neutral: each endpoint of a transport (shm, tcp, and one linked
// over both) holds one. It costs nothing while warnings are not logged for
// the provider (one test of the log configuration), and one hash lookup per
// failed send when they are. Not thread-safe: call it under the endpoint's
// lock, as the send that failed holds it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/log.hpp"

namespace weft {

class absent_peers {
public:
  static constexpr uint64_t bound_ns = 1'000'000'000;  // 1 s of failed sends
  static constexpr size_t max_tracked = 4096;          // addresses remembered per endpoint

  // `addr()` returns the printable address (called only when warnings are
  // logged); `how` says how the sends failed, e.g. "each returned
  // -FI_EAGAIN"; `more`, when given, is called once, at the warning, with the
  // address and returns text to append (e.g. similar names that do exist).
  template <class AddrFn>
  void note(const char* prov, AddrFn&& addr, const char* how,
            std::string (*more)(std::string_view addr) = nullptr) noexcept {
    if (!log_enabled(FI_LOG_WARN, FI_LOG_EP_DATA, prov)) return;
    try {
      note_slow(prov, addr(), how, more);
    } catch (...) {
      // No memory for the address: no warning this time.
    }
  }

  // What note() decided for `addr` at time `now_ns`: true exactly once, at
  // the first call at least bound_ns after the first call for `addr` (the
  // rule alone, for tests).
  bool due(std::string_view addr, uint64_t now_ns);

private:
  [[gnu::cold, gnu::noinline]] void note_slow(const char* prov, const std::string& addr, const char* how,
                                              std::string (*more)(std::string_view)) noexcept;
  struct entry {
    uint64_t first_ns = 0;
    bool warned = false;
  };
  std::unordered_map<std::string, entry> seen_;
};

}  // namespace weft
