#include "core/params.hpp"

#include <rdma/providers/fi_prov.h>
#include <strings.h>

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/export.hpp"
#include "common/object.hpp"
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

std::optional<long long> param_int(const char* prov, const char* name) noexcept {
  const char* s = param_raw(prov, name);
  if (!s) return std::nullopt;
  char* end = nullptr;
  long long v = strtoll(s, &end, 0);
  if (end == s || *end) return std::nullopt;
  return v;
}

std::optional<bool> param_bool(const char* prov, const char* name) noexcept {
  const char* s = param_raw(prov, name);
  bool b;
  if (!s || !parse_bool(s, &b)) return std::nullopt;
  return b;
}

void params_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    param_define(nullptr, "provider", FI_PARAM_STRING,
                 "Only use the listed providers (comma separated); ^ excludes them (e.g. ^tcp)");
    param_define(nullptr, "log_level", FI_PARAM_STRING,
                 "Logging level: warn, trace, info, debug (default: no logging)");
    param_define(nullptr, "log_prov", FI_PARAM_STRING,
                 "Log only this provider (or ^name: all but this provider)");
    param_define(nullptr, "log_subsys", FI_PARAM_STRING,
                 "Log only these subsystems: core, fabric, domain, ep_ctrl, ep_data, av, cq, eq, mr, cntr");
    for (provider* prov : providers())
      for (const provider::param& p : prov->params()) param_define(prov->name(), p.name, p.type, p.help);
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
