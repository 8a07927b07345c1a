// ucp_config_*: the face's configuration, read from UCX_* environment
// variables. Honoured: UCX_TLS (which of weft's transports: shm / tcp),
// UCX_NET_DEVICES (which network interfaces tcp may use), UCX_LOG_LEVEL,
// UCX_KEEPALIVE_INTERVAL, UCX_WEFT_RX_SIZE. Every other UCX_* name is
// accepted by ucp_config_modify and printed, but changes nothing (docs/ucp.md).
#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "ucp_int.hpp"

namespace wucp {

namespace {
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ','))
    if (!t.empty()) out.push_back(t);
  return out;
}

const char* env(const std::string& prefix, const char* name) {
  std::string n = "UCX_" + prefix + name;
  if (const char* v = getenv(n.c_str())) return v;
  if (!prefix.empty()) return getenv((std::string("UCX_") + name).c_str());
  return nullptr;
}

// "1s", "500ms", "2.5", "inf"
double parse_time(const char* v, double dflt) {
  if (!v) return dflt;
  if (!strcasecmp(v, "inf") || !strcasecmp(v, "infinity")) return 1e12;
  char* end = nullptr;
  double d = strtod(v, &end);
  if (end == v) return dflt;
  std::string unit(end);
  if (unit == "ms")
    d *= 1e-3;
  else if (unit == "us")
    d *= 1e-6;
  else if (unit == "ns")
    d *= 1e-9;
  else if (unit == "m")
    d *= 60;
  return d > 0 ? d : dflt;
}

void set_value(config& c, const std::string& name, const std::string& value) {
  if (name == "TLS") {
    std::string v = value;
    c.tls_negate = !v.empty() && v[0] == '^';
    if (c.tls_negate) v.erase(0, 1);
    c.tls = split(v);
  } else if (name == "NET_DEVICES") {
    c.net_devices = split(value);
  } else if (name == "LOG_LEVEL") {
    c.log_level = value;
  } else if (name == "KEEPALIVE_INTERVAL") {
    c.keepalive_s = parse_time(value.c_str(), c.keepalive_s);
  } else if (name == "WEFT_RX_SIZE") {
    long v = strtol(value.c_str(), nullptr, 0);
    if (v >= 1024 && v <= (1 << 20)) c.rx_buf_size = static_cast<size_t>(v);
  }
}
}  // namespace

config read_config(const char* prefix) {
  config c;
  std::string p = prefix ? prefix : "";
  if (!p.empty() && p.back() != '_') p += '_';
  c.tls = {"all"};
  c.net_devices = {"all"};
  for (const char* n : {"TLS", "NET_DEVICES", "LOG_LEVEL", "KEEPALIVE_INTERVAL", "WEFT_RX_SIZE"})
    if (const char* v = env(p, n)) set_value(c, n, v);
  return c;
}

void apply_log_level(const std::string& s) {
  static const char* names[] = {"fatal", "error", "warn", "diag", "info", "debug", "trace"};
  for (int i = 0; i < 7; i++)
    if (!strcasecmp(s.c_str(), names[i])) g_log_level = i;
  if (!strncasecmp(s.c_str(), "trace", 5)) g_log_level = L_TRACE;
  if (!strcasecmp(s.c_str(), "warning")) g_log_level = L_WARN;
}

// UCX transport names are mapped onto weft's two transports: every shared
// memory name (sm, shm, posix, sysv, cma, knem, xpmem, self) selects shm, tcp
// selects tcp; "all" both. Names of hardware transports (rc, ud, dc, ib, ...)
// select nothing.
bool tl_enabled(const config& c, const char* kind) {
  static const char* shm_names[] = {"sm", "shm", "posix", "sysv", "cma", "knem", "xpmem", "self", "mm"};
  bool shm = !strcmp(kind, "shm");
  bool hit = false;
  for (auto& t : c.tls) {
    std::string n = t;
    if (!n.empty() && n.back() == '\\') n.pop_back();
    if (n == "all" || n == kind) hit = true;
    if (shm)
      for (auto* s : shm_names)
        if (n == s) hit = true;
  }
  if (c.tls.size() == 1 && c.tls[0] == "all") return !c.tls_negate;
  return c.tls_negate ? !hit : hit;
}

// Devices are "eth0" or UCX's "eth0:1" form; "all" allows every one.
bool device_enabled(const config& c, const char* dev) {
  for (auto& d : c.net_devices) {
    if (d == "all") return true;
    std::string n = d.substr(0, d.find(':'));
    if (n == dev) return true;
  }
  return false;
}

}  // namespace wucp

using namespace wucp;

UCP_EXPORT ucs_status_t ucp_config_read(const char* env_prefix, const char* filename,
                                        ucp_config_t** config_p) {
  if (!config_p) return UCS_ERR_INVALID_PARAM;
  (void)filename;  // UCX reads an optional ucx.conf; weft has none
  try {
    auto c = std::make_unique<ucp_config>();
    c->c = read_config(env_prefix);
    *config_p = c.release();
    return UCS_OK;
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
}

UCP_EXPORT void ucp_config_release(ucp_config_t* config) {
  delete config;
}

UCP_EXPORT ucs_status_t ucp_config_modify(ucp_config_t* config, const char* name, const char* value) {
  if (!config || !name || !value) return UCS_ERR_INVALID_PARAM;
  try {
    std::string n = name;
    if (n.rfind("UCX_", 0) == 0) n.erase(0, 4);
    set_value(config->c, n, value);
    config->c.modified.emplace_back(n, value);
    return UCS_OK;
  } catch (...) {
    return UCS_ERR_NO_MEMORY;
  }
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}
}  // namespace

UCP_EXPORT void ucp_config_print(const ucp_config_t* config, FILE* stream, const char* title,
                                 ucs_config_print_flags_t print_flags) {
  if (!config || !stream) return;
  const wucp::config& c = config->c;
  if ((print_flags & UCS_CONFIG_PRINT_HEADER) || title)
    fprintf(stream, "#\n# %s\n#\n", title ? title : "UCP configuration (weft)");
  if (print_flags & UCS_CONFIG_PRINT_DOC) {
    fprintf(stream, "# Transports: shm (sm, posix, sysv, cma, self, ...) and tcp; all by default\n");
  }
  fprintf(stream, "UCX_TLS=%s%s\n", c.tls_negate ? "^" : "", join(c.tls).c_str());
  fprintf(stream, "UCX_NET_DEVICES=%s\n", join(c.net_devices).c_str());
  fprintf(stream, "UCX_LOG_LEVEL=%s\n", c.log_level.c_str());
  fprintf(stream, "UCX_KEEPALIVE_INTERVAL=%gs\n", c.keepalive_s);
  fprintf(stream, "UCX_WEFT_RX_SIZE=%zu\n", c.rx_buf_size);
  for (auto& m : c.modified)
    if (m.first != "TLS" && m.first != "NET_DEVICES" && m.first != "LOG_LEVEL" &&
        m.first != "KEEPALIVE_INTERVAL" && m.first != "WEFT_RX_SIZE")
      fprintf(stream, "UCX_%s=%s\n", m.first.c_str(), m.second.c_str());
}
