// SPDX-License-Identifier: BSD-3-Clause
#include "core/log.hpp"

#include <rdma/providers/fi_prov.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common/export.hpp"
#include "core/params.hpp"
#include "core/provider.hpp"

namespace weft {
namespace {

// Read once, at the first question; a value the table (params.cpp) does not
// take is said on stderr (param_report) and the default used.
struct log_config {
  int level = -1;  // -1: logging off (libfabric's default prints nothing)
  bool level_given = std::getenv("FI_LOG_LEVEL") != nullptr;
  uint32_t subsys_mask = ~0u;
  std::string prov;  // empty: all providers
  bool prov_exclude = false;
  // FI_LOG_PROV names no provider (log_check_settings): every one is logged.
  mutable std::atomic<bool> prov_unknown{false};

  log_config() {
    if (int i = param_choice(nullptr, "log_level", "logging stays off"); i >= 0) level = i;
    if (const char* s = std::getenv("FI_LOG_PROV")) {
      if (*s == '^') {
        prov_exclude = true;
        ++s;
      }
      prov = s;
    }
    if (const char* s = std::getenv("FI_LOG_SUBSYS"); s && *s) read_subsys(s);
  }

  // Names separated by anything else than letters and '_' ("core,cq").
  void read_subsys(const char* s) {
    const param_spec* p = param_find(nullptr, "log_subsys");
    uint32_t mask = 0;
    std::string unknown;
    for (const char* c = s; *c;) {
      const char* e = c;
      while (*e && (isalpha(static_cast<unsigned char>(*e)) || *e == '_')) ++e;
      if (e > c) {
        const int i = p ? param_choice_index(*p, std::string_view(c, static_cast<size_t>(e - c))) : -1;
        if (i >= 0) mask |= 1u << i;
        if (i < 0) unknown += (unknown.empty() ? "'" : ", '") + std::string(c, e) + "'";
      }
      c = *e ? e + 1 : e;
    }
    if (mask) subsys_mask = mask;
    if (!unknown.empty() && p)
      param_report(nullptr, "log_subsys", s, "no subsystem is named " + unknown, param_accepted(*p),
                   mask ? "the others are logged" : "every subsystem is logged (the default)");
  }
};

const log_config& config() {
  static const log_config c;
  return c;
}

const char* const level_names[] = {"warn", "trace", "info", "debug"};
const char* const subsys_names[] = {"core", "fabric", "domain", "ep_ctrl", "ep_data",
                                    "av",   "cq",     "eq",     "mr",      "cntr"};

}  // namespace

bool log_enabled(fi_log_level level, fi_log_subsys subsys, const char* prov) noexcept {
  const log_config& c = config();
  if (c.level < 0 || static_cast<int>(level) > c.level) return false;
  if (static_cast<unsigned>(subsys) < FI_LOG_SUBSYS_MAX && !(c.subsys_mask & (1u << subsys))) return false;
  if (!c.prov.empty() && prov && !c.prov_unknown.load(std::memory_order_relaxed)) {
    // A provider by the name applications know it by ("weft_shm" in a plugin).
    bool match = strcmp(prov, "core") ? names_provider(c.prov.c_str(), prov) : c.prov == prov;
    if (match == c.prov_exclude) return false;
  }
  return true;
}

bool log_level_given() noexcept {
  return config().level_given;
}

void log_write(fi_log_level level, fi_log_subsys subsys, const char* prov, const char* func, int line,
               const char* fmt, ...) noexcept {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  timeval tv;
  gettimeofday(&tv, nullptr);
  const char* lvl = static_cast<unsigned>(level) < 4 ? level_names[level] : "?";
  const char* sub = static_cast<unsigned>(subsys) < FI_LOG_SUBSYS_MAX ? subsys_names[subsys] : "?";
  static std::mutex m;
  std::lock_guard lock(m);
  fprintf(stderr, "libfabric:%d:%ld.%06ld::%s:%s:%s():%d<%s> %s\n", getpid(), static_cast<long>(tv.tv_sec),
          static_cast<long>(tv.tv_usec), prov ? prov : "core", sub, func ? func : "", line, lvl, msg);
}

void log_check_settings() noexcept {
  const log_config& c = config();
  // In a plugin, FI_LOG_PROV may name one of the host's providers.
  if (c.prov.empty() || *name_prefix() || c.prov == "core" || find_provider(c.prov.c_str())) return;
  try {
    param_report(nullptr, "log_prov", std::getenv("FI_LOG_PROV"), "no provider is named '" + c.prov + "'",
                 "core, " + provider_names() + "; ^ first excludes it",
                 "every provider is logged (the default)");
  } catch (...) {}
  c.prov_unknown.store(true, std::memory_order_relaxed);
}

}  // namespace weft

// --- the exported ABI ---------------------------------------------------------

WEFT_EXPORT int fi_log_enabled(const fi_provider* prov, fi_log_level level, fi_log_subsys subsys) {
  return weft::log_enabled(level, subsys, prov ? prov->name : "core");
}

WEFT_EXPORT int fi_log_ready(const fi_provider* prov, fi_log_level level, fi_log_subsys subsys,
                             uint64_t* showtime) {
  // Rate limiting as libfabric's FI_LOG_SPARSE: at most one message per second per call site.
  if (!weft::log_enabled(level, subsys, prov ? prov->name : "core")) return 0;
  if (!showtime) return 1;
  timeval tv;
  gettimeofday(&tv, nullptr);
  uint64_t now = static_cast<uint64_t>(tv.tv_sec) * 1000 + static_cast<uint64_t>(tv.tv_usec) / 1000;
  if (now < *showtime) return 0;
  *showtime = now + 1000;
  return 1;
}

WEFT_EXPORT void fi_log(const fi_provider* prov, fi_log_level level, fi_log_subsys subsys, const char* func,
                        int line, const char* fmt, ...) {
  if (!fmt) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t n = strlen(msg);
  if (n && msg[n - 1] == '\n') msg[n - 1] = 0;
  weft::log_write(level, subsys, prov && prov->name ? prov->name : "core", func, line, "%s", msg);
}
