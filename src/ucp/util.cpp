// SPDX-License-Identifier: BSD-3-Clause
// Small helpers of the UCP face: logging, clocks, status mapping, identity.
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "ucp_int.hpp"

namespace wucp {

int g_log_level = L_WARN;

void log_msg(int level, const char* fmt, ...) {
  static const char* names[] = {"FATAL", "ERROR", "WARN", "DIAG", "INFO", "DEBUG", "TRACE"};
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[weft-ucp %d] %5s %s\n", static_cast<int>(getpid()),
          names[level < 0   ? 0
                : level > 6 ? 6
                            : level],
          buf);
}

double now_s() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

ucs_status_t from_fi(int e) noexcept {
  if (e < 0) e = -e;
  switch (e) {
    case 0:
      return UCS_OK;
    case FI_EAGAIN:
      return UCS_ERR_NO_RESOURCE;
    case FI_ENOMEM:
      return UCS_ERR_NO_MEMORY;
    case FI_EINVAL:
      return UCS_ERR_INVALID_PARAM;
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
      return UCS_ERR_UNSUPPORTED;
    case FI_ETRUNC:
      return UCS_ERR_MESSAGE_TRUNCATED;
    case FI_ECANCELED:
      return UCS_ERR_CANCELED;
    case FI_ENOMSG:
      return UCS_ERR_NO_MESSAGE;
    case FI_ECONNREFUSED:
      return UCS_ERR_REJECTED;
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_ESHUTDOWN:
      return UCS_ERR_CONNECTION_RESET;
    case FI_ETIMEDOUT:
      return UCS_ERR_ENDPOINT_TIMEOUT;
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_EADDRNOTAVAIL:
      return UCS_ERR_UNREACHABLE;
    case FI_EACCES:
    case FI_EPERM:
      return UCS_ERR_INVALID_PARAM;
    case FI_EIO:
    case FI_EREMOTEIO:
      return UCS_ERR_CONNECTION_RESET;
    case FI_ENODATA:
    case FI_ENOENT:
      return UCS_ERR_NO_ELEM;
    default:
      return UCS_ERR_IO_ERROR;
  }
}

// Worker identities must differ between a process and its forked children,
// so no generator state is kept: every value comes from the kernel.
uint64_t random64() noexcept {
  uint64_t v = 0;
  while (!v) {
    if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v))
      v = static_cast<uint64_t>(now_s() * 1e9) ^ (static_cast<uint64_t>(getpid()) << 32);
  }
  return v;
}

namespace {
uint64_t fnv(uint64_t h, const void* p, size_t n) noexcept {
  auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
}  // namespace

// Two processes may use shared memory with each other when they run under one
// kernel boot and share the IPC and network namespaces (a process in another
// network namespace is treated as another host, which is what the tcp tests
// across namespaces rely on).
uint64_t host_identity() noexcept {
  uint64_t h = 14695981039346656037ull;
  char buf[128] = {};
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) h = fnv(h, buf, static_cast<size_t>(n));
  }
  gethostname(buf, sizeof buf - 1);
  h = fnv(h, buf, strlen(buf));
  for (const char* ns : {"/proc/self/ns/ipc", "/proc/self/ns/net"}) {
    struct stat st {};
    if (stat(ns, &st) == 0) h = fnv(h, &st.st_ino, sizeof st.st_ino);
  }
  return h ? h : 1;
}

}  // namespace wucp
