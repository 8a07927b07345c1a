// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Logging with libfabric's conventions: FI_LOG_LEVEL (warn|trace|info|debug),
// FI_LOG_PROV (a provider name, or ^name to exclude one), FI_LOG_SUBSYS.
#include <rdma/providers/fi_log.h>

namespace weft {

bool log_enabled(fi_log_level level, fi_log_subsys subsys, const char* prov) noexcept;
// Whether FI_LOG_LEVEL is set at all (to anything): the few lines weft
// shows by default (util/peer_note.hpp) follow the usual rules once it is.
bool log_level_given() noexcept;
// FI_LOG_PROV checked against the providers (from fi_getinfo, once they
// are all registered): one no provider has is said, and every one logged.
void log_check_settings() noexcept;
[[gnu::format(printf, 6, 7)]] void log_write(fi_log_level level, fi_log_subsys subsys, const char* prov,
                                             const char* func, int line, const char* fmt, ...) noexcept;

}  // namespace weft

#define WEFT_LOG(level, subsys, prov, ...)                                     \
  do {                                                                         \
    if (::weft::log_enabled(level, subsys, prov)) [[unlikely]]                 \
      ::weft::log_write(level, subsys, prov, __func__, __LINE__, __VA_ARGS__); \
  } while (0)
#define WEFT_WARN(subsys, ...) WEFT_LOG(FI_LOG_WARN, subsys, "core", __VA_ARGS__)
#define WEFT_INFO(subsys, ...) WEFT_LOG(FI_LOG_INFO, subsys, "core", __VA_ARGS__)
#define WEFT_DEBUG(subsys, ...) WEFT_LOG(FI_LOG_DEBUG, subsys, "core", __VA_ARGS__)
