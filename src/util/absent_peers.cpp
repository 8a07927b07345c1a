// SPDX-License-Identifier: BSD-3-Clause
#include "util/absent_peers.hpp"

#include "common/clock.hpp"

namespace weft {

bool absent_peers::due(std::string_view addr, uint64_t now_ns) {
  auto it = seen_.find(std::string(addr));
  if (it == seen_.end()) {
    if (seen_.size() < max_tracked) seen_.emplace(std::string(addr), entry{now_ns, false});
    return false;
  }
  entry& e = it->second;
  if (e.warned || now_ns - e.first_ns < bound_ns) return false;
  e.warned = true;
  return true;
}

void absent_peers::note_slow(const char* prov, const std::string& addr, const char* how,
                             std::string (*more)(std::string_view)) noexcept {
  try {
    if (!due(addr, now_us() * 1000)) return;
    std::string extra = more ? more(addr) : std::string{};
    log_write(FI_LOG_WARN, FI_LOG_EP_DATA, prov, __func__, __LINE__,
              "%s: no endpoint at %s after %.0f s of sends to it (%s): is the address right?%s%s", prov,
              addr.c_str(), static_cast<double>(bound_ns) / 1e9, how, extra.empty() ? "" : " ", extra.c_str());
  } catch (...) {
    // No memory: no warning this time.
  }
}

}  // namespace weft
