// SPDX-License-Identifier: BSD-3-Clause
// Small helpers shared by the RSM face: clocks, random numbers, logging, and
// libfabric errors as RSMAPI codes.
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rsm.hpp"
#include "settings.hpp"

namespace weft::rsm {

bool log_on = [] {
  const char* v = getenv("WEFT_RSM_LOG");
  if (!v || !*v || !strcmp(v, "0")) return false;
  if (!strcmp(v, "1")) return true;
  report_setting("WEFT_RSM_LOG", v, "not a boolean");
  return false;
}();

void report_setting(const char* var, const char* value, const char* problem, const char* then) noexcept {
  try {
    static std::mutex m;
    static std::vector<std::string> said;  // once per variable and value
    const std::string key = std::string(var) + '=' + value;
    std::lock_guard lock(m);
    for (const std::string& k : said)
      if (k == key) return;
    said.push_back(key);
    const setting* row = find_setting(var);
    const std::string after = *then ? then : std::string("the default, ") + (row ? row->dflt : "?") + ", is used";
    log("%s: %s (accepted: %s); %s", key.c_str(), problem, row ? accepted(*row).c_str() : "?", after.c_str());
  } catch (...) {}
}

uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t now_ms() noexcept {
  return now_ns() / 1000000ull;
}

int deadline::remaining_ms() const noexcept {
  if (at_ms == UINT64_MAX) return -1;
  uint64_t n = now_ms();
  return n >= at_ms ? 0 : static_cast<int>(std::min<uint64_t>(at_ms - n, INT32_MAX));
}

uint64_t random64() noexcept {
  uint64_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
      // No entropy source: fall back to the clock mixed with the pid (keys
      // then are guessable, so say so).
      static std::atomic<uint64_t> ctr{0};
      v = now_ns() ^ (static_cast<uint64_t>(getpid()) << 32) ^ (ctr.fetch_add(1) * 0x9e3779b97f4a7c15ull);
      RSM_LOG("getrandom failed: keys and tokens are predictable");
    }
  }
  return v;
}

void log(const char* fmt, ...) noexcept {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  fprintf(stderr, "weft_rsm[%d]: %s\n", static_cast<int>(getpid()), line);
}

bool read_file(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return false;
    }
    if (n == 0) break;
    try {
      out->append(buf, static_cast<size_t>(n));
    } catch (...) {
      close(fd);
      throw;
    }
  }
  close(fd);
  return true;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> w;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) i++;
    size_t j = i;
    while (j < s.size() && !isspace(static_cast<unsigned char>(s[j]))) j++;
    if (j > i) w.emplace_back(s, i, j - i);
    i = j;
  }
  return w;
}

int from_fi(int e) noexcept {
  if (e < 0) e = -e;
  switch (e) {
    case 0:
      return RSM_SUCCESS;
    case FI_ENOMEM:
      return RSMERR_INSUFFICIENT_MEM;
    case FI_EACCES:
    case FI_EPERM:
      return RSMERR_PERM_DENIED;
    case FI_EINTR:
      return RSMERR_INTERRUPTED;
    case FI_ETIMEDOUT:
      return RSMERR_TIMEOUT;
    case FI_EIO:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ECONNREFUSED:
    case FI_ENOTCONN:
    case FI_ESHUTDOWN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ECANCELED:
      return RSMERR_CONN_ABORTED;
    default:
      return RSMERR_INSUFFICIENT_RESOURCES;
  }
}

int level_of(rsm_permission_t owner_bits) noexcept {
  switch (owner_bits & RSM_PERM_RDWR) {
    case RSM_PERM_READ:
      return 0;
    case RSM_PERM_WRITE:
      return 1;
    case RSM_PERM_RDWR:
      return 2;
    default:
      return -1;
  }
}

}  // namespace weft::rsm
