// SPDX-License-Identifier: BSD-3-Clause
// libucs.so.0 beyond ucs_status_string: what UCX's own tools (ucx_info and
// ucx_perftest of UCX 1.13 and 1.18) and weft's libuct import from UCX's
// utility library: strings, socket addresses, CPU and timer, logging, the
// configuration printout, async contexts, system topology, and the data
// objects those programs copy into themselves at load time (copy
// relocations), laid out as UCX declares them.
//
// Data objects a program copies: the program's copy has the size its UCX
// headers gave, which differs between 1.13 and 1.18 (more memory types, a
// larger ucs_global_opts_t). Each object here has the smaller size (no
// "different size" warning from ld.so for either), and a constructor fills
// the program's copy to the size that program reserved (dladdr1 finds it).
#include <arpa/inet.h>
#include <dlfcn.h>
#include <link.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pthread.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <string>

#include <cpuid.h>
#include <x86intrin.h>

#include <ucs/async/async_fwd.h>
#include <ucs/config/global_opts.h>
#include <ucs/config/parser.h>
#include <ucs/config/types.h>
#include <ucs/datastruct/string_buffer.h>
#include <ucs/memory/memory_type.h>
#include <ucs/stats/libstats.h>
#include <ucs/sys/sock.h>
#include <ucs/sys/string.h>
#include <ucs/sys/topo/base/topo.h>
#include <ucs/type/init_once.h>
#include <ucs/type/status.h>

#define UCS_EXPORT extern "C" __attribute__((visibility("default")))
// Data objects: declared extern "C" first, then defined.
#define UCS_EXPORT_DATA __attribute__((visibility("default")))

// ------------------------------------------------------------ data objects
// ucs_global_opts: programs read log_component.log_level (ucs_log_is_enabled)
// inline; the rest of UCX's options mean nothing to weft and stay zero.
extern "C" {
extern ucs_ternary_auto_value_t ucs_arch_x86_enable_rdtsc;
}
UCS_EXPORT_DATA ucs_global_opts_t ucs_global_opts = {};
UCS_EXPORT_DATA ucs_list_link_t ucs_config_global_list = {&ucs_config_global_list, &ucs_config_global_list};
// Not in the installed headers (ucs/arch/x86_64/cpu.h): UCS_TRY until
// ucs_x86_init_tsc_freq decides whether the TSC is the clock.
UCS_EXPORT_DATA ucs_ternary_auto_value_t ucs_arch_x86_enable_rdtsc = UCS_TRY;

namespace {
// The memory types of UCX 1.13 (5) and 1.18 (9), each list ending with
// "unknown" (UCS_MEMORY_TYPE_UNKNOWN) and, for the names, a null.
const char* const names_1_13[] = {"host", "cuda", "cuda-managed", "rocm", "rocm-managed", "unknown", nullptr};
const char* const names_1_18[] = {"host",    "cuda",      "cuda-managed", "rocm",    "rocm-managed", "rdma",
                                  "ze-host", "ze-device", "ze-managed",   "unknown", nullptr};
const char* const descs_1_13[] = {"System memory",       "NVIDIA GPU memory",           "NVIDIA GPU managed/unified memory",
                                  "AMD/ROCm GPU memory", "AMD/ROCm GPU managed memory", "unknown"};
const char* const descs_1_18[] = {"System memory",
                                  "NVIDIA GPU memory",
                                  "NVIDIA GPU managed/unified memory",
                                  "AMD/ROCm GPU memory",
                                  "AMD/ROCm GPU managed memory",
                                  "RDMA device memory",
                                  "Intel/Ze USM host memory",
                                  "Intel/Ze GPU memory",
                                  "Intel/Ze GPU managed memory",
                                  "unknown"};
}  // namespace

UCS_EXPORT_DATA const char* ucs_memory_type_names[sizeof names_1_13 / sizeof(char*)] = {
    "host", "cuda", "cuda-managed", "rocm", "rocm-managed", "unknown", nullptr};
UCS_EXPORT_DATA const char* ucs_memory_type_descs[sizeof descs_1_13 / sizeof(char*)] = {
    "System memory",       "NVIDIA GPU memory",           "NVIDIA GPU managed/unified memory",
    "AMD/ROCm GPU memory", "AMD/ROCm GPU managed memory", "unknown"};

namespace {
// The size of the object that address a lives in, as its owner (the program
// after a copy relocation, else this library) declared it; 0 if unknown.
size_t object_size(const void* a) {
  Dl_info info;
  void* sym = nullptr;
  if (!dladdr1(a, &info, &sym, RTLD_DL_SYMENT) || !sym) return 0;
  return static_cast<const ElfW(Sym)*>(sym)->st_size;
}

// Fills a program's copy of a string table with the list of the UCX
// version whose size it has.
void fill_table(const char** dst, const char* const* v13, size_t n13, const char* const* v18, size_t n18) {
  size_t slots = object_size(dst) / sizeof(char*);
  const char* const* src = slots >= n18 ? v18 : v13;
  size_t n = slots >= n18 ? n18 : n13;
  for (size_t i = 0; i < n && i < slots; ++i) dst[i] = src[i];
}

ucs_log_level_t level_from_env() {
  const char* s = getenv("UCX_LOG_LEVEL");
  if (!s) return UCS_LOG_LEVEL_WARN;
  static const char* const levels[] = {"fatal", "error", "warn", "diag", "info", "debug", "trace"};
  for (int i = 0; i < 7; ++i)
    if (!strcasecmp(s, levels[i])) return static_cast<ucs_log_level_t>(i);
  return UCS_LOG_LEVEL_WARN;
}

[[gnu::constructor]] void init_data_objects() {
  fill_table(ucs_memory_type_names, names_1_13, sizeof names_1_13 / sizeof(char*), names_1_18,
             sizeof names_1_18 / sizeof(char*));
  fill_table(ucs_memory_type_descs, descs_1_13, sizeof descs_1_13 / sizeof(char*), descs_1_18,
             sizeof descs_1_18 / sizeof(char*));
  ucs_global_opts.log_component.log_level = level_from_env();
  strncpy(ucs_global_opts.log_component.name, "UCX", sizeof ucs_global_opts.log_component.name - 1);
  ucs_global_opts.log_print_enable = 1;
}

const char* const level_names[] = {"FATAL", "ERROR", "WARN", "DIAG", "INFO",
                                   "DEBUG", "TRACE", "REQ",  "DATA", "ASYNC",
                                   "FUNC",  "POLL",  "",     "PRINT"};
}  // namespace

// ------------------------------------------------------------------ logging
UCS_EXPORT void ucs_log_dispatch(const char* file, unsigned line, const char* function, ucs_log_level_t level,
                                 ucs_log_component_config_t* comp, const char* format, ...) {
  if (!format) return;
  if (comp && level > comp->log_level && level != UCS_LOG_LEVEL_PRINT) return;
  const char* base = file ? strrchr(file, '/') : nullptr;
  base = base ? base + 1 : (file ? file : "?");
  unsigned l = static_cast<unsigned>(level);
  char msg[1024];
  va_list ap;
  va_start(ap, format);
  vsnprintf(msg, sizeof msg, format, ap);
  va_end(ap);
  fprintf(stderr, "[%d] %s:%u %s%s%s %s\n", static_cast<int>(getpid()), base, line,
          l < sizeof level_names / sizeof *level_names ? level_names[l] : "LOG", function ? " " : "",
          function ? function : "", msg);
}

UCS_EXPORT void ucs_fatal_error_format(const char* file, unsigned line, const char* function, const char* format,
                                       ...) {
  char msg[1024] = "";
  if (format) {
    va_list ap;
    va_start(ap, format);
    vsnprintf(msg, sizeof msg, format, ap);
    va_end(ap);
  }
  fprintf(stderr, "[%d] %s:%u %s: Fatal: %s\n", static_cast<int>(getpid()), file ? file : "?", line,
          function ? function : "?", msg);
  abort();
}

// ------------------------------------------------------------------ strings
UCS_EXPORT void ucs_snprintf_zero(char* buf, size_t size, const char* fmt, ...) {
  if (!buf || !size) return;
  memset(buf, 0, size);
  if (!fmt) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
}

UCS_EXPORT void ucs_snprintf_safe(char* buf, size_t size, const char* fmt, ...) {
  if (!buf || !size) return;
  buf[0] = '\0';
  if (!fmt) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  buf[size - 1] = '\0';
}

UCS_EXPORT void ucs_strncpy_zero(char* dest, const char* src, size_t max) {
  if (!dest || !max) return;
  if (!src) src = "";
  strncpy(dest, src, max - 1);
  dest[max - 1] = '\0';
}

UCS_EXPORT char* ucs_strncpy_safe(char* dst, const char* src, size_t len) {
  if (!dst || !len) return dst;
  if (!src) src = "";
  size_t n = strnlen(src, len - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
  return dst;
}

// UCX's memory-units form: "inf", "auto", or the value in the largest unit
// that divides it exactly (1K = 1024).
UCS_EXPORT char* ucs_memunits_to_str(size_t value, char* buf, size_t max) {
  if (!buf || !max) return buf;
  if (value == UCS_MEMUNITS_INF) {
    ucs_strncpy_zero(buf, "inf", max);
  } else if (value == UCS_MEMUNITS_AUTO) {
    ucs_strncpy_zero(buf, "auto", max);
  } else {
    static const char suffixes[] = {'\0', 'K', 'M', 'G', 'T', 'P'};
    size_t i = 0;
    while (i + 1 < sizeof suffixes && value >= 1024 && value % 1024 == 0) {
      value /= 1024;
      ++i;
    }
    if (suffixes[i])
      snprintf(buf, max, "%zu%c", value, suffixes[i]);
    else
      snprintf(buf, max, "%zu", value);
  }
  return buf;
}

UCS_EXPORT const char* ucs_flags_str(char* str, size_t max, uint64_t flags, const char** str_table) {
  if (!str || !max) return str;
  str[0] = '\0';
  if (!str_table) return str;
  size_t len = 0;
  for (unsigned i = 0; str_table[i] && i < 64; ++i) {
    if (!(flags & (1ull << i))) continue;
    int n = snprintf(str + len, max - len, "%s,", str_table[i]);
    if (n < 0 || static_cast<size_t>(n) >= max - len) {
      len = max - 1;
      break;
    }
    len += static_cast<size_t>(n);
  }
  if (len > 0 && str[len - 1] == ',') str[len - 1] = '\0';
  str[max - 1] = '\0';
  return str;
}

// ucs_string_buffer_t is a ucs_array of char whose capacity field UCX 1.13
// and 1.18 write differently for a fixed (caller-supplied) buffer: 1.13 sets
// bit 0 of the capacity, 1.18 a flag in its top bit. A dynamic buffer has
// neither (this library only ever gives it an even capacity), so the two
// read the same.
namespace {
struct strb_raw {
  char* buffer;
  size_t length;
  size_t capacity;
};
static_assert(sizeof(strb_raw) == sizeof(ucs_string_buffer_t));
constexpr size_t fixed_1_18 = size_t(1) << 63;

bool strb_fixed(const strb_raw* s) {
  return (s->capacity & fixed_1_18) || (s->capacity & 1);
}
size_t strb_capacity(const strb_raw* s) {
  if (s->capacity & fixed_1_18) return s->capacity & ~fixed_1_18;
  return s->capacity & ~size_t(1);
}

// Room for `need` more characters and the terminator; false when a fixed
// buffer is full (the text is then truncated, as UCX does).
size_t strb_reserve(strb_raw* s, size_t need) {
  size_t cap = strb_capacity(s);
  if (s->length + need + 1 <= cap || strb_fixed(s)) return cap;
  size_t want = std::max<size_t>(cap * 2, s->length + need + 1);
  want = (want + 15) & ~size_t(15);
  char* nb = static_cast<char*>(realloc(s->buffer, want));
  if (!nb) return cap;
  s->buffer = nb;
  s->capacity = want;
  return want;
}
}  // namespace

UCS_EXPORT void ucs_string_buffer_appendf(ucs_string_buffer_t* strb, const char* fmt, ...) {
  auto* s = reinterpret_cast<strb_raw*>(strb);
  if (!s || !fmt) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t cap = strb_reserve(s, static_cast<size_t>(n));
  if (cap <= s->length + 1 || !s->buffer) return;
  va_start(ap, fmt);
  vsnprintf(s->buffer + s->length, cap - s->length, fmt, ap);
  va_end(ap);
  s->length += std::min(static_cast<size_t>(n), cap - s->length - 1);
}

UCS_EXPORT void ucs_string_buffer_rtrim(ucs_string_buffer_t* strb, const char* charset) {
  auto* s = reinterpret_cast<strb_raw*>(strb);
  if (!s || !s->buffer) return;
  while (s->length > 0) {
    char c = s->buffer[s->length - 1];
    bool trim = charset ? strchr(charset, c) != nullptr : isspace(static_cast<unsigned char>(c));
    if (!trim || !c) break;
    --s->length;
  }
  s->buffer[s->length] = '\0';
}

UCS_EXPORT void ucs_string_buffer_cleanup(ucs_string_buffer_t* strb) {
  auto* s = reinterpret_cast<strb_raw*>(strb);
  if (!s || strb_fixed(s)) return;
  free(s->buffer);
  s->buffer = nullptr;
  s->length = s->capacity = 0;
}

UCS_EXPORT const char* ucs_string_buffer_cstr(const ucs_string_buffer_t* strb) {
  auto* s = reinterpret_cast<const strb_raw*>(strb);
  if (!s || !s->buffer || strb_capacity(s) == 0) return "";
  return s->buffer;
}

// ------------------------------------------------------------------ memory
UCS_EXPORT void* ucs_malloc(size_t size, const char*) {
  return malloc(size);
}

UCS_EXPORT void ucs_free(void* ptr) {
  free(ptr);
}

UCS_EXPORT size_t ucs_get_page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// ------------------------------------------------------------------ system
UCS_EXPORT long ucs_sys_get_num_cpus() {
  return sysconf(_SC_NPROCESSORS_CONF);
}

UCS_EXPORT int ucs_sys_getaffinity(cpu_set_t* cpuset) {
  if (!cpuset) return -1;
  return sched_getaffinity(0, sizeof(cpu_set_t), cpuset);
}

UCS_EXPORT int ucs_sys_setaffinity(cpu_set_t* cpuset) {
  if (!cpuset) return -1;
  return sched_setaffinity(0, sizeof(cpu_set_t), cpuset);
}

UCS_EXPORT void ucs_close_fd(int* fd_p) {
  if (!fd_p || *fd_p < 0) return;
  close(*fd_p);
  *fd_p = -1;
}

// The file this library was loaded from (ucx_info -v prints it).
UCS_EXPORT const char* ucs_sys_get_lib_path() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&ucs_sys_get_lib_path), &info) || !info.dli_fname) return nullptr;
  return info.dli_fname;
}

UCS_EXPORT const char* ucs_sys_dmi_product_name() {
  static std::string name = [] {
    std::string s = "unknown";
    if (FILE* f = fopen("/sys/class/dmi/id/product_name", "r")) {
      char buf[256];
      if (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0]) s = buf;
      }
      fclose(f);
    }
    return s;
  }();
  return name.c_str();
}

UCS_EXPORT ucs_stats_node_t* ucs_stats_get_root(void) {
  return nullptr;  // weft keeps no UCX statistics (as a UCX built without them)
}

// Weft's libraries have no loadable modules: nothing to load, done once.
UCS_EXPORT void ucs_load_modules(const char* framework, const char*, ucs_init_once_t* init_once, unsigned) {
  if (!framework || !init_once) return;
  pthread_mutex_lock(&init_once->lock);
  init_once->initialized = 1;
  pthread_mutex_unlock(&init_once->lock);
}

UCS_EXPORT void ucs_empty_function() {}

UCS_EXPORT ucs_status_t ucs_empty_function_return_success() {
  return UCS_OK;
}

UCS_EXPORT int ucs_empty_function_do_assert() {
  ucs_fatal_error_format(__FILE__, __LINE__, __func__, "a function that must not be called was called");
  return 0;
}

// -------------------------------------------------------------- CPU, timer
namespace {
enum { vendor_unknown = 0, vendor_intel = 1, vendor_amd = 2 };

int cpu_vendor() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return vendor_unknown;
  char v[13];
  memcpy(v, &b, 4);
  memcpy(v + 4, &d, 4);
  memcpy(v + 8, &c, 4);
  v[12] = '\0';
  if (!strcmp(v, "GenuineIntel")) return vendor_intel;
  if (!strcmp(v, "AuthenticAMD")) return vendor_amd;
  return vendor_unknown;
}

double tsc_freq = 0;

double monotonic_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

// UCX reads the time with rdtsc when the TSC is invariant and its frequency
// known; otherwise in microseconds of gettimeofday (its generic clock).
// The frequency is measured against CLOCK_MONOTONIC_RAW over 20 ms.
UCS_EXPORT void ucs_x86_init_tsc_freq() {
  unsigned a, b, c, d;
  bool invariant = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
  if (!invariant) {
    ucs_arch_x86_enable_rdtsc = UCS_NO;
    return;
  }
  double t0 = monotonic_s();
  uint64_t c0 = __rdtsc();
  double t1;
  do t1 = monotonic_s();
  while (t1 - t0 < 0.02);
  uint64_t c1 = __rdtsc();
  tsc_freq = static_cast<double>(c1 - c0) / (t1 - t0);
  ucs_arch_x86_enable_rdtsc = tsc_freq > 0 ? UCS_YES : UCS_NO;
}

UCS_EXPORT double ucs_get_cpu_clocks_per_sec() {
  if (ucs_arch_x86_enable_rdtsc == UCS_TRY) ucs_x86_init_tsc_freq();
  return ucs_arch_x86_enable_rdtsc == UCS_YES ? tsc_freq : 1.0e6;
}

// ucs_cpu_model_t: weft does not classify CPU models (UCS_CPU_MODEL_UNKNOWN).
UCS_EXPORT int ucs_arch_get_cpu_model() {
  return 0;
}

UCS_EXPORT int ucs_arch_get_cpu_vendor() {
  return cpu_vendor();
}

UCS_EXPORT const char* ucs_cpu_vendor_name() {
  switch (cpu_vendor()) {
    case vendor_intel:
      return "Intel";
    case vendor_amd:
      return "AMD";
    default:
      return "unknown";
  }
}

UCS_EXPORT const char* ucs_cpu_model_name() {
  return "unknown";
}

// ucx_info -s: weft copies with the C library's memcpy, whatever the size.
UCS_EXPORT void ucs_arch_print_memcpy_limits(void*) {
  printf("# Memcpy: the C library's memcpy for every size (weft)\n");
}

// ---------------------------------------------------------------- topology
// Weft knows no system devices (PCI topology): every device is
// UCS_SYS_DEVICE_ID_UNKNOWN, at UCX's default distance (no latency, no
// bandwidth limit).
UCS_EXPORT unsigned ucs_topo_num_devices() {
  return 0;
}

UCS_EXPORT const char* ucs_topo_sys_device_get_name(ucs_sys_device_t) {
  return "<unknown>";
}

UCS_EXPORT ucs_status_t ucs_topo_get_distance(ucs_sys_device_t, ucs_sys_device_t, ucs_sys_dev_distance_t* distance) {
  if (!distance) return UCS_ERR_INVALID_PARAM;
  distance->latency = 0;
  distance->bandwidth = INFINITY;
  return UCS_OK;
}

UCS_EXPORT void ucs_topo_get_memory_distance(ucs_sys_device_t, ucs_sys_dev_distance_t* distance) {
  if (!distance) return;
  distance->latency = 0;
  distance->bandwidth = INFINITY;
}

// ------------------------------------------------------------------ sockets
namespace {
// The size and the port field of an IPv4 or IPv6 address; 0 and null for
// any other family.
size_t sockaddr_size(const sockaddr* a) {
  return a->sa_family == AF_INET ? sizeof(sockaddr_in) : a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : 0;
}
in_port_t* port_field(sockaddr* a) {
  if (a->sa_family == AF_INET) return &reinterpret_cast<sockaddr_in*>(a)->sin_port;
  if (a->sa_family == AF_INET6) return &reinterpret_cast<sockaddr_in6*>(a)->sin6_port;
  return nullptr;
}
}  // namespace

UCS_EXPORT ucs_status_t ucs_sockaddr_sizeof(const struct sockaddr* addr, size_t* size_p) {
  if (!addr || !size_p || !sockaddr_size(addr)) return UCS_ERR_INVALID_PARAM;
  *size_p = sockaddr_size(addr);
  return UCS_OK;
}

UCS_EXPORT ucs_status_t ucs_sockaddr_get_port(const struct sockaddr* addr, uint16_t* port_p) {
  const in_port_t* p = addr ? port_field(const_cast<sockaddr*>(addr)) : nullptr;
  if (!p || !port_p) return UCS_ERR_INVALID_PARAM;
  *port_p = ntohs(*p);
  return UCS_OK;
}

UCS_EXPORT ucs_status_t ucs_sockaddr_set_port(struct sockaddr* addr, uint16_t port) {
  in_port_t* p = addr ? port_field(addr) : nullptr;
  if (!p) return UCS_ERR_INVALID_PARAM;
  *p = htons(port);
  return UCS_OK;
}

UCS_EXPORT ucs_status_t ucs_sockaddr_set_inaddr_any(struct sockaddr* addr, sa_family_t af) {
  if (!addr) return UCS_ERR_INVALID_PARAM;
  switch (af) {
    case AF_INET:
      addr->sa_family = AF_INET;
      reinterpret_cast<sockaddr_in*>(addr)->sin_addr.s_addr = htonl(INADDR_ANY);
      return UCS_OK;
    case AF_INET6:
      addr->sa_family = AF_INET6;
      reinterpret_cast<sockaddr_in6*>(addr)->sin6_addr = in6addr_any;
      return UCS_OK;
    default:
      return UCS_ERR_INVALID_PARAM;
  }
}

UCS_EXPORT ucs_status_t ucs_sock_ipstr_to_sockaddr(const char* ip_str, struct sockaddr_storage* sa_storage) {
  if (!ip_str || !sa_storage) return UCS_ERR_INVALID_PARAM;
  memset(sa_storage, 0, sizeof *sa_storage);
  auto* in4 = reinterpret_cast<sockaddr_in*>(sa_storage);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(sa_storage);
  if (inet_pton(AF_INET, ip_str, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    return UCS_OK;
  }
  if (inet_pton(AF_INET6, ip_str, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    return UCS_OK;
  }
  return UCS_ERR_INVALID_ADDR;
}

UCS_EXPORT ucs_status_t ucs_sock_port_from_string(const char* port_str, uint16_t* port) {
  if (!port_str || !port || !*port_str) return UCS_ERR_INVALID_PARAM;
  char* end = nullptr;
  errno = 0;
  unsigned long v = strtoul(port_str, &end, 10);
  if (errno || *end || v > UINT16_MAX) return UCS_ERR_INVALID_PARAM;
  *port = static_cast<uint16_t>(v);
  return UCS_OK;
}

// "ADDRESS", "ADDRESS:PORT" or "[IPV6]:PORT"; default_port where none.
UCS_EXPORT ucs_status_t ucs_sock_ipportstr_to_sockaddr(const char* ip_port_str, uint16_t default_port,
                                                       struct sockaddr_storage* sa_storage) {
  if (!ip_port_str || !sa_storage) return UCS_ERR_INVALID_PARAM;
  std::string s = ip_port_str, ip = s, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos) return UCS_ERR_INVALID_ADDR;
    ip = s.substr(1, close - 1);
    if (close + 1 < s.size()) {
      if (s[close + 1] != ':') return UCS_ERR_INVALID_ADDR;
      port = s.substr(close + 2);
    }
  } else if (std::count(s.begin(), s.end(), ':') == 1) {
    ip = s.substr(0, s.find(':'));
    port = s.substr(s.find(':') + 1);
  }
  ucs_status_t st = ucs_sock_ipstr_to_sockaddr(ip.c_str(), sa_storage);
  if (st != UCS_OK) return st;
  uint16_t p = default_port;
  if (!port.empty() && (st = ucs_sock_port_from_string(port.c_str(), &p)) != UCS_OK) return st;
  return ucs_sockaddr_set_port(reinterpret_cast<sockaddr*>(sa_storage), p);
}

UCS_EXPORT const char* ucs_sockaddr_str(const struct sockaddr* sock_addr, char* str, size_t max_size) {
  if (!str || !max_size) return str;
  uint16_t port = 0;
  char ip[INET6_ADDRSTRLEN] = "";
  if (!sock_addr) {
    ucs_strncpy_zero(str, "<null>", max_size);
    return str;
  }
  const void* a = nullptr;
  if (sock_addr->sa_family == AF_INET)
    a = &reinterpret_cast<const sockaddr_in*>(sock_addr)->sin_addr;
  else if (sock_addr->sa_family == AF_INET6)
    a = &reinterpret_cast<const sockaddr_in6*>(sock_addr)->sin6_addr;
  if (!a || !inet_ntop(sock_addr->sa_family, a, ip, sizeof ip)) {
    ucs_strncpy_zero(str, "<invalid address family>", max_size);
    return str;
  }
  ucs_sockaddr_get_port(sock_addr, &port);
  snprintf(str, max_size, "%s:%u", ip, port);
  return str;
}

UCS_EXPORT ucs_status_t ucs_socket_setopt(int fd, int level, int optname, const void* optval, socklen_t optlen) {
  if (fd < 0 || (!optval && optlen)) return UCS_ERR_INVALID_PARAM;
  if (setsockopt(fd, level, optname, optval, optlen) < 0) return UCS_ERR_IO_ERROR;
  return UCS_OK;
}

// ------------------------------------------------------------- async context
// Weft's libuct registers no asynchronous events, so an async context has
// nothing to dispatch: one made here is an empty block, and one in the
// caller's memory (ucs_async_context_init) is left as the caller laid it out.
namespace {
struct async_block {
  uint64_t magic;
  unsigned char zero[1024];  // room for anything a header's inline code reads
};
constexpr uint64_t async_magic = 0x7765667461737963ull;  // "weftasyc"
}  // namespace

UCS_EXPORT ucs_status_t ucs_async_context_init(ucs_async_context_t* async, ucs_async_mode_t mode) {
  if (!async || mode > UCS_ASYNC_MODE_POLL) return UCS_ERR_INVALID_PARAM;
  return UCS_OK;
}

UCS_EXPORT void ucs_async_context_cleanup(ucs_async_context_t*) {}

UCS_EXPORT ucs_status_t ucs_async_context_create(ucs_async_mode_t mode, ucs_async_context_t** async_p) {
  if (!async_p || mode > UCS_ASYNC_MODE_POLL) return UCS_ERR_INVALID_PARAM;
  auto* b = static_cast<async_block*>(calloc(1, sizeof(async_block)));
  if (!b) return UCS_ERR_NO_MEMORY;
  b->magic = async_magic;
  *async_p = reinterpret_cast<ucs_async_context_t*>(b);
  return UCS_OK;
}

UCS_EXPORT void ucs_async_context_destroy(ucs_async_context_t* async) {
  auto* b = reinterpret_cast<async_block*>(async);
  if (!b || b->magic != async_magic) return;
  b->magic = 0;
  free(b);
}

// ------------------------------------------------------------ configuration
// UCX prints every table registered in the list; weft's settings are those
// of its UCP face, printed through the public UCP API (the program that
// asks, ucx_info -c, has libucp loaded).
UCS_EXPORT void ucs_config_parser_print_all_opts(FILE* stream, const char* prefix, ucs_config_print_flags_t flags,
                                                 ucs_list_link_t*) {
  if (!stream) return;
  using read_fn = ucs_status_t (*)(const char*, const char*, void**);
  using print_fn = void (*)(const void*, FILE*, const char*, ucs_config_print_flags_t);
  using release_fn = void (*)(void*);
  auto rd = reinterpret_cast<read_fn>(dlsym(RTLD_DEFAULT, "ucp_config_read"));
  auto pr = reinterpret_cast<print_fn>(dlsym(RTLD_DEFAULT, "ucp_config_print"));
  auto rl = reinterpret_cast<release_fn>(dlsym(RTLD_DEFAULT, "ucp_config_release"));
  if (!rd || !pr || !rl) {
    fprintf(stream, "# libucp is not loaded: no configuration to print\n");
    return;
  }
  (void)prefix;  // weft's variables are UCX_*; ucp_config_read adds the prefix
  void* cfg = nullptr;
  if (rd(nullptr, nullptr, &cfg) != UCS_OK || !cfg) return;
  pr(cfg, stream, (flags & UCS_CONFIG_PRINT_HEADER) ? "UCP configuration (weft)" : nullptr, flags);
  rl(cfg);
}
