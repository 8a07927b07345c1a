// SPDX-License-Identifier: BSD-3-Clause
#include "core/params.hpp"

#include <rdma/providers/fi_prov.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

#include "common/export.hpp"
#include "common/object.hpp"
#include "core/log.hpp"
#include "core/provider.hpp"

namespace weft {
namespace {

struct param {
  std::string prov;  // empty for the core
  std::string name;  // as declared (lower case by convention)
  fi_param_type type;
  std::string help;
};

std::mutex params_mutex;
std::vector<param>& table() {
  static std::vector<param> t;
  return t;
}

const param* find(const char* prov, const char* name) {
  for (const param& p : table())
    if (p.name == name && p.prov == (prov ? prov : "")) return &p;
  return nullptr;
}

// The core's rows of the table (the providers' are their params()).
constexpr param_spec core_params[] = {
    {.name = "provider",
     .type = FI_PARAM_STRING,
     .help = "Only use the listed providers (comma separated); ^ excludes them (e.g. ^tcp)",
     .dflt = "every provider",
     .accepts = "provider names, comma separated; ^ first excludes them"},
    {.name = "log_level",
     .type = FI_PARAM_STRING,
     .help = "Logging level",
     .dflt = "off",
     .choices = "warn|trace|info|debug"},
    {.name = "log_prov",
     .type = FI_PARAM_STRING,
     .help = "Log only this provider (or ^name: all but this provider)",
     .dflt = "every provider",
     .accepts = "core or a provider name; ^ first excludes it"},
    {.name = "log_subsys",
     .type = FI_PARAM_STRING,
     .help = "Log only these subsystems",
     .dflt = "every subsystem",
     .choices = "core|fabric|domain|ep_ctrl|ep_data|av|cq|eq|mr|cntr",
     .accepts = "core, fabric, domain, ep_ctrl, ep_data, av, cq, eq, mr, cntr, comma separated"},
};

bool parse_bool(const char* s, bool* out) {
  if (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcasecmp(s, "on")) {
    *out = true;
    return true;
  }
  if (!strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcasecmp(s, "off")) {
    *out = false;
    return true;
  }
  return false;
}

}  // namespace

std::string param_env_name(const char* prov, const char* name) {
  std::string env = "FI_";
  if (prov && *prov) {
    for (const char* c : {name_prefix(), prov})
      for (; *c; ++c) env += static_cast<char>(toupper(static_cast<unsigned char>(*c)));
    env += '_';
  }
  for (const char* c = name; *c; ++c) env += static_cast<char>(toupper(static_cast<unsigned char>(*c)));
  return env;
}

void param_define(const char* prov, const char* name, fi_param_type type, const char* help) {
  std::lock_guard lock(params_mutex);
  if (find(prov, name)) return;
  table().push_back(param{prov ? prov : "", name, type, help ? help : ""});
}

const char* param_raw(const char* prov, const char* name) noexcept {
  // FI_<PROV>_<NAME> in a buffer of our own: no allocation, so parameters
  // may be read where running out of memory must not throw.
  char env[192];
  size_t n = 0;
  auto put = [&](const char* s) {
    for (; s && *s && n + 1 < sizeof env; ++s) env[n++] = static_cast<char>(toupper(static_cast<unsigned char>(*s)));
  };
  put("FI_");
  if (prov && *prov) {
    put(name_prefix());
    put(prov);
    put("_");
  }
  put(name);
  env[n] = 0;
  return getenv(env);
}

std::optional<std::string> param_str(const char* prov, const char* name) {
  const char* v = param_raw(prov, name);
  if (!v) return std::nullopt;
  return std::string(v);
}

namespace {

bool ranged(const param_spec& p) {
  return (p.type == FI_PARAM_INT || p.type == FI_PARAM_SIZE_T) && p.min < p.max;
}

// A value the row does not take: reported, and the default used (or what
// `then` says follows).
[[gnu::cold]] void report_bad(const char* prov, const char* name, const char* value, const param_spec* p,
                              const char* problem, const char* then = nullptr) noexcept {
  try {
    if (!p) {
      param_report(prov, name, value, problem, "see fi_info -e", "it is ignored");
      return;
    }
    param_report(prov, name, value, problem, param_accepted(*p),
                 then ? std::string(then) : "the default, " + param_default(*p) + ", is used");
  } catch (...) {}
}

}  // namespace

std::optional<long long> param_int(const char* prov, const char* name) noexcept {
  const char* s = param_raw(prov, name);
  if (!s || !*s) return std::nullopt;
  const param_spec* p = param_find(prov, name);
  char* end = nullptr;
  errno = 0;
  const long long v = strtoll(s, &end, 0);
  const bool number = end != s && !*end && errno != ERANGE;
  if (number && (!p || !ranged(*p) || (v >= p->min && v <= p->max))) return v;
  report_bad(prov, name, s, p, number ? "out of range" : "not an integer");
  return std::nullopt;
}

std::optional<bool> param_bool(const char* prov, const char* name) noexcept {
  const char* s = param_raw(prov, name);
  if (!s || !*s) return std::nullopt;
  bool b;
  if (parse_bool(s, &b)) return b;
  report_bad(prov, name, s, param_find(prov, name), "not a boolean");
  return std::nullopt;
}

long long param_int_or_default(const char* prov, const char* name) noexcept {
  const param_spec* p = param_find(prov, name);
  return param_int(prov, name).value_or(p ? p->def : 0);
}

bool param_bool_or_default(const char* prov, const char* name) noexcept {
  const param_spec* p = param_find(prov, name);
  return param_bool(prov, name).value_or(p && p->def);
}

int param_choice_index(const param_spec& p, std::string_view value) noexcept {
  std::string_view all = p.choices ? p.choices : "";
  for (int i = 0; !all.empty(); ++i) {
    const size_t bar = std::min(all.find('|'), all.size());
    const std::string_view c = all.substr(0, bar);
    if (c.size() == value.size() && !strncasecmp(c.data(), value.data(), c.size())) return i;
    all.remove_prefix(std::min(bar + 1, all.size()));
  }
  return -1;
}

int param_choice(const char* prov, const char* name, const char* then) noexcept {
  const char* s = param_raw(prov, name);
  if (!s || !*s) return param_unset;
  const param_spec* p = param_find(prov, name);
  if (!p || !p->choices) return param_unset;
  if (int i = param_choice_index(*p, s); i >= 0) return i;
  report_bad(prov, name, s, p, "not a known value", then);
  return param_bad;
}

std::span<const param_spec> param_core_rows() noexcept {
  return core_params;
}

const param_spec* param_find(const char* prov, const char* name) noexcept {
  if (!name) return nullptr;
  std::span<const param_spec> rows = core_params;
  if (prov) {
    const provider* p = provider_named(prov);
    if (!p) return nullptr;
    rows = p->params();
  }
  for (const param_spec& p : rows)
    if (!strcmp(p.name, name)) return &p;
  return nullptr;
}

std::string param_default(const param_spec& p) {
  switch (p.type) {
    case FI_PARAM_BOOL:
      return p.def ? "1" : "0";
    case FI_PARAM_INT:
    case FI_PARAM_SIZE_T:
      return std::to_string(p.def);
    default:
      return p.dflt ? p.dflt : "none";
  }
}

std::string param_accepted(const param_spec& p) {
  if (p.accepts) return p.accepts;
  if (p.type == FI_PARAM_BOOL) return "a boolean: 1, 0, yes, no, true, false, on, off";
  if (ranged(p))
    return p.max == LLONG_MAX ? "at least " + std::to_string(p.min)
                              : std::to_string(p.min) + " to " + std::to_string(p.max);
  if (p.choices) {
    std::string s = "one of ";
    for (const char* c = p.choices; *c; ++c) s += *c == '|' ? std::string(", ") : std::string(1, *c);
    return s;
  }
  return p.type == FI_PARAM_STRING ? "a string" : "an integer";
}

std::string param_help(const param_spec& p) {
  return std::string(p.help ? p.help : "") + " (default " + param_default(p) + "; " + param_accepted(p) + ")";
}

void param_report(const char* prov, const char* name, const char* value, const std::string& problem,
                  const std::string& accepted, const std::string& then) noexcept {
  try {
    const std::string var = param_env_name(prov, name);
    const std::string key = var + '=' + (value ? value : "");
    static std::mutex m;
    static std::vector<std::string> said;  // once per variable and value
    {
      std::lock_guard lock(m);
      for (const std::string& k : said)
        if (k == key) return;
      said.push_back(key);
    }
    const std::string who = prov ? std::string(name_prefix()) + prov : "core";
    log_write(FI_LOG_WARN, FI_LOG_CORE, who.c_str(), "settings", __LINE__, "%s: %s (accepted: %s); %s",
              key.c_str(), problem.c_str(), accepted.c_str(), then.c_str());
  } catch (...) {}
}

void param_report(const char* prov, const char* name, const char* value, const std::string& problem,
                  const std::string& then) noexcept {
  try {
    const param_spec* p = param_find(prov, name);
    param_report(prov, name, value, problem, p ? param_accepted(*p) : std::string("?"), then);
  } catch (...) {}
}

void params_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const param_spec& p : core_params) param_define(nullptr, p.name, p.type, param_help(p).c_str());
    for (provider* prov : providers())
      for (const param_spec& p : prov->params())
        param_define(prov->name(), p.name, p.type, param_help(p).c_str());
  });
}

}  // namespace weft

// --- the exported ABI ---------------------------------------------------------

WEFT_EXPORT int fi_param_define(const fi_provider* provider, const char* param_name, fi_param_type type,
                                const char* help_string_fmt, ...) {
  if (!param_name || !*param_name || static_cast<unsigned>(type) > FI_PARAM_SIZE_T) return -FI_EINVAL;
  char help[512] = "";
  if (help_string_fmt) {
    va_list ap;
    va_start(ap, help_string_fmt);
    vsnprintf(help, sizeof help, help_string_fmt, ap);
    va_end(ap);
  }
  return weft::guard([&] {
    weft::param_define(provider ? provider->name : nullptr, param_name, type, help);
    return 0;
  });
}

WEFT_EXPORT int fi_param_get(fi_provider* provider, const char* param_name, void* value) {
  if (!param_name || !value) return -FI_EINVAL;
  return weft::guard([&]() -> int {
    weft::params_init();
    const char* prov = provider ? provider->name : nullptr;
    fi_param_type type;
    {
      std::lock_guard lock(weft::params_mutex);
      const weft::param* p = weft::find(prov, param_name);
      if (!p) return -FI_ENOENT;
      type = p->type;
    }
    const char* s = weft::param_raw(prov, param_name);
    if (!s) return -FI_ENODATA;
    switch (type) {
      case FI_PARAM_STRING:
        *static_cast<char**>(value) = const_cast<char*>(s);
        return 0;
      case FI_PARAM_INT: {
        char* end;
        long v = strtol(s, &end, 0);
        if (end == s || *end) return -FI_EINVAL;
        *static_cast<int*>(value) = static_cast<int>(v);
        return 0;
      }
      case FI_PARAM_BOOL: {
        bool b;
        if (!weft::parse_bool(s, &b)) return -FI_EINVAL;
        *static_cast<int*>(value) = b;
        return 0;
      }
      case FI_PARAM_SIZE_T: {
        char* end;
        unsigned long long v = strtoull(s, &end, 0);
        if (end == s || *end) return -FI_EINVAL;
        *static_cast<size_t*>(value) = static_cast<size_t>(v);
        return 0;
      }
    }
    return -FI_EINVAL;
  });
}

WEFT_EXPORT int fi_getparams(fi_param** params, int* count) {
  if (!params || !count) return -FI_EINVAL;
  weft::params_init();
  std::lock_guard lock(weft::params_mutex);
  const auto& t = weft::table();
  auto* out = static_cast<fi_param*>(calloc(t.size() + 1, sizeof(fi_param)));
  if (!out) return -FI_ENOMEM;
  size_t i = 0;
  for (const auto& p : t) {
    std::string env = weft::param_env_name(p.prov.c_str(), p.name.c_str());
    out[i].name = strdup(env.c_str());
    out[i].type = p.type;
    out[i].help_string = strdup(p.help.c_str());
    const char* v = getenv(env.c_str());
    out[i].value = v ? strdup(v) : nullptr;
    ++i;
  }
  *params = out;
  *count = static_cast<int>(t.size());
  return 0;
}

WEFT_EXPORT void fi_freeparams(fi_param* params) {
  if (!params) return;
  for (fi_param* p = params; p->name; ++p) {
    free(const_cast<char*>(p->name));
    free(const_cast<char*>(p->help_string));
    free(const_cast<char*>(p->value));
  }
  free(params);
}
