// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The UCP face's table of settings: every UCX_<NAME> it reads (config.cpp,
// also as UCX_<prefix>_<NAME> for ucp_config_read's prefix), its kind, its
// default and what it accepts. config.cpp checks each value against its row
// when it is read, ucp_config_print(UCS_CONFIG_PRINT_DOC) prints the rows,
// and tests/install/variables.sh checks the man pages against them. Header
// only, with no dependency: the listing program includes it.
#include <cstddef>
#include <string>
#include <string_view>

namespace wucp {

struct setting {
  const char* name;     // after UCX_
  const char* kind;     // list, choice, time or size
  const char* dflt;     // as ucp_config_print writes it
  const char* accepts;  // in words (a size: nullptr, its range says it)
  long long min, max;   // size: the range
  const char* doc;
};

// UCX's names of shared-memory transports: each selects weft's shm.
inline constexpr const char* shm_tl_names[] = {"sm",   "shm",   "posix", "sysv", "cma",
                                               "knem", "xpmem", "self",  "mm"};
inline constexpr const char* log_level_names[] = {"fatal", "error", "warn", "diag", "info", "debug", "trace"};

inline constexpr setting settings[] = {
    {"TLS", "list", "all",
     "all, cma, knem, mm, posix, self, shm, sm, sysv, tcp, xpmem, comma separated; ^ first negates", 0, 0,
     "Transports: shm (sm, posix, sysv, cma, knem, xpmem, self, mm) and tcp"},
    {"NET_DEVICES", "list", "all",
     "all, or network interfaces that are up with an IPv4 address (eth0 or eth0:1)", 0, 0,
     "Network interfaces tcp may use"},
    {"LOG_LEVEL", "choice", "warn", "fatal, error, warn, diag, info, debug, trace", 0, 0,
     "Messages on standard error at this level and above"},
    {"KEEPALIVE_INTERVAL", "time", "1s", "a time: <number>[s|ms|us|ns|m], or inf", 0, 0,
     "How often endpoints with peer error handling check their peer"},
    {"WEFT_RX_SIZE", "size", "8192", nullptr, 1024, 1 << 20,
     "Frame buffers in bytes: active messages and stream pieces up to this size travel in one frame"},
};

// What a row accepts, in words: a size's range ("1024 to 1048576").
inline std::string accepted(const setting& s) {
  return s.accepts ? s.accepts : std::to_string(s.min) + " to " + std::to_string(s.max);
}

inline const setting* find_setting(std::string_view name) noexcept {
  for (const setting& s : settings)
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace wucp
