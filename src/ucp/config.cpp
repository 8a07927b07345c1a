// SPDX-License-Identifier: BSD-3-Clause
// ucp_config_*: the face's configuration, read from UCX_* environment
// variables. Honoured: the rows of settings.hpp (UCX_TLS, UCX_NET_DEVICES,
// UCX_LOG_LEVEL, UCX_KEEPALIVE_INTERVAL, UCX_WEFT_RX_SIZE), each checked here
// as it is read: a value not taken is said once (report_once) and the default
// kept. Every other UCX_* name is accepted by ucp_config_modify and printed,
// but changes nothing (docs/ucp.md).
#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "settings.hpp"
#include "ucp_int.hpp"

namespace wucp {

void report_once(const std::string& var, const std::string& value, const std::string& text) {
  static std::mutex m;
  static std::vector<std::string> said;  // once per variable and value
  const std::string key = var + '=' + value;
  {
    std::lock_guard lock(m);
    for (const std::string& k : said)
      if (k == key) return;
    said.push_back(key);
  }
  WUCP_LOG(L_WARN, "%s: %s", key.c_str(), text.c_str());
}

namespace {
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ','))
    if (!t.empty()) out.push_back(t);
  return out;
}

// The variable that holds `name` (UCX_<prefix>NAME before UCX_NAME), and its value.
const char* env(const std::string& prefix, const char* name, std::string& var) {
  var = "UCX_" + prefix + name;
  if (const char* v = getenv(var.c_str())) return v;
  var = std::string("UCX_") + name;
  if (!prefix.empty()) return getenv(var.c_str());
  return nullptr;
}

// "1s", "500ms", "2.5", "inf"; false when it is not a positive time.
bool parse_time(const char* v, double& out) {
  if (!strcasecmp(v, "inf") || !strcasecmp(v, "infinity")) {
    out = 1e12;
    return true;
  }
  char* end = nullptr;
  double d = strtod(v, &end);
  if (end == v) return false;
  static const std::pair<const char*, double> units[] = {{"", 1},      {"s", 1},     {"ms", 1e-3},
                                                         {"us", 1e-6}, {"ns", 1e-9}, {"m", 60}};
  for (const auto& [unit, scale] : units)
    if (!strcmp(end, unit) && d * scale > 0) {
      out = d * scale;
      return true;
    }
  return false;
}

bool log_level_known(const std::string& v) {
  for (const char* n : log_level_names)
    if (!strcasecmp(v.c_str(), n)) return true;
  return !strncasecmp(v.c_str(), "trace", 5) || !strcasecmp(v.c_str(), "warning");
}

// What a UCX_TLS name selects: "all", "shm" (every shared-memory name of
// shm_tl_names), "tcp", or nullptr (nothing weft has). UCX's exact-match
// mark ("tcp\") is dropped.
const char* tl_selects(std::string n) {
  if (!n.empty() && n.back() == '\\') n.pop_back();
  if (n == "all") return "all";
  if (n == "tcp") return "tcp";
  for (const char* s : shm_tl_names)
    if (n == s) return "shm";
  return nullptr;
}

// UCX's words: "transport 'foo' is not available, please use one or more of: ...".
void check_tls(const std::string& var, const std::string& value, const std::vector<std::string>& tls) {
  std::string bad;
  size_t n = 0;
  for (const std::string& t : tls)
    if (!tl_selects(t)) bad += (n++ ? ",'" : "'") + t + "'";
  if (!n) return;
  const setting* row = find_setting("TLS");
  std::string avail = row->accepts;
  avail.resize(avail.find(", comma"));
  report_once(var, value,
              std::string(n > 1 ? "transports " : "transport ") + bad + (n > 1 ? " are" : " is") +
                  " not available, please use one or more of: " + avail);
}

// Sets one row from its text; false (said, and nothing changed) when the
// value is not one the row accepts. `var` is the variable that held it.
bool set_value(config& c, const std::string& var, const std::string& name, const std::string& value) {
  const setting* row = find_setting(name);
  auto bad = [&](const char* problem) {
    report_once(var, value,
                std::string(problem) + " (accepted: " + accepted(*row) + "); the default, " + row->dflt +
                    ", is used");
    return false;
  };
  if (name == "TLS") {
    std::string v = value;
    c.tls_negate = !v.empty() && v[0] == '^';
    if (c.tls_negate) v.erase(0, 1);
    c.tls = split(v);
    check_tls(var, value, c.tls);
  } else if (name == "NET_DEVICES") {
    c.net_devices = split(value);  // checked against the interfaces at ucp_init
  } else if (name == "LOG_LEVEL") {
    if (!log_level_known(value)) return bad("not a log level");
    c.log_level = value;
  } else if (name == "KEEPALIVE_INTERVAL") {
    if (!parse_time(value.c_str(), c.keepalive_s)) return bad("not a time");
  } else if (name == "WEFT_RX_SIZE") {
    char* end = nullptr;
    const long long v = strtoll(value.c_str(), &end, 0);
    if (end == value.c_str() || *end) return bad("not an integer");
    if (v < row->min || v > row->max) return bad("out of range");
    c.rx_buf_size = static_cast<size_t>(v);
  }
  return true;
}
}  // namespace

config read_config(const char* prefix) {
  config c;
  std::string p = prefix ? prefix : "";
  if (!p.empty() && p.back() != '_') p += '_';
  std::string var;
  for (const setting& row : settings) {
    set_value(c, row.name, row.name, row.dflt);
    if (const char* v = env(p, row.name, var)) set_value(c, var, row.name, v);
  }
  return c;
}

void apply_log_level(const std::string& s) {
  for (int i = 0; i < 7; i++)
    if (!strcasecmp(s.c_str(), log_level_names[i])) g_log_level = i;
  if (!strncasecmp(s.c_str(), "trace", 5)) g_log_level = L_TRACE;
  if (!strcasecmp(s.c_str(), "warning")) g_log_level = L_WARN;
}

// UCX transport names are mapped onto weft's two transports (tl_selects):
// every shared memory name selects shm, tcp selects tcp; "all" both. Other
// names (rc, ud, ...) select nothing (check_tls said so).
bool tl_enabled(const config& c, const char* kind) {
  bool hit = false;
  for (auto& t : c.tls) {
    const char* k = tl_selects(t);
    hit |= k && (!strcmp(k, "all") || !strcmp(k, kind));
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
    if (find_setting(n) && !set_value(config->c, "UCX_" + n, n, value)) return UCS_ERR_INVALID_PARAM;
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
  char keepalive[32];
  snprintf(keepalive, sizeof keepalive, "%gs", c.keepalive_s);
  for (const wucp::setting& row : wucp::settings) {
    const std::string n = row.name;
    const std::string v = n == "TLS"                  ? (c.tls_negate ? "^" : "") + join(c.tls)
                          : n == "NET_DEVICES"        ? join(c.net_devices)
                          : n == "LOG_LEVEL"          ? c.log_level
                          : n == "KEEPALIVE_INTERVAL" ? std::string(keepalive)
                                                      : std::to_string(c.rx_buf_size);
    if (print_flags & UCS_CONFIG_PRINT_DOC)
      fprintf(stream, "#\n# %s\n#\n# default: %s\n# accepted: %s\n#\n", row.doc, row.dflt,
              wucp::accepted(row).c_str());
    fprintf(stream, "UCX_%s=%s\n", row.name, v.c_str());
  }
  for (auto& m : c.modified)
    if (!wucp::find_setting(m.first)) fprintf(stream, "UCX_%s=%s\n", m.first.c_str(), m.second.c_str());
}
