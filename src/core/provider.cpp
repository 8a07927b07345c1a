// SPDX-License-Identifier: BSD-3-Clause
// The provider registry and the template cache.
#include "core/provider.hpp"

#include <strings.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "core/params.hpp"

namespace weft {

namespace {
struct entry {
  provider* prov;
  int rank;
};
// Filled during static initialisation, read-only afterwards.
std::vector<entry>& registry() {
  static std::vector<entry> r;
  return r;
}
std::vector<provider*>& ordered() {
  static std::vector<provider*> list;
  return list;
}
const char* prefix = "";
const provider* only = nullptr;
}  // namespace

void register_provider(provider* p, int rank) {
  auto& r = registry();
  auto at = std::find_if(r.begin(), r.end(), [rank](const entry& e) { return e.rank > rank; });
  r.insert(at, entry{p, rank});
  auto& list = ordered();
  list.clear();
  for (const entry& e : r) list.push_back(e.prov);
}

const std::vector<provider*>& providers() {
  return ordered();
}

provider* find_provider(const char* name) {
  for (provider* p : providers())
    if (names_provider(name, p->name())) return p;
  return nullptr;
}

void set_name_prefix(const char* p) noexcept {
  prefix = p ? p : "";
}

const char* name_prefix() noexcept {
  return prefix;
}

bool names_provider(const char* prov_name, const char* own) noexcept {
  if (!prov_name || !own) return false;
  const size_t n = strlen(prefix);
  return !strncasecmp(prov_name, prefix, n) && !strcasecmp(prov_name + n, own);
}

void offer_only(const provider* p) noexcept {
  only = p;
}

bool offered(const provider* p) noexcept {
  return !only || only == p;
}

std::string providers_linking(const char* own) {
  std::string out;
  for (const provider* p : providers()) {
    if (!p->links() || !offered(p)) continue;
    std::string_view parts = p->links();
    bool part = false;
    for (size_t at = 0; at <= parts.size();) {
      const size_t plus = std::min(parts.find('+', at), parts.size());
      part |= parts.substr(at, plus - at) == own;
      at = plus + 1;
    }
    if (part) out += (out.empty() ? "" : ", ") + std::string(prefix) + p->name();
  }
  return out;
}

std::string provider_names() {
  std::string out;
  for (const provider* p : providers()) out += (out.empty() ? "" : ", ") + std::string(p->name());
  return out;
}

provider* provider_named(const char* own) noexcept {
  for (provider* p : providers())
    if (own && !strcmp(p->name(), own)) return p;
  return nullptr;
}

std::string provider::template_inputs() const {
  // What the templates depend on: the values of the provider's parameters,
  // and whatever else the provider names (template_key).
  std::string values;
  for (const param& p : params()) {
    const char* v = param_raw(name(), p.name);
    values += v ? v : "\x01";
    values += '\0';
  }
  values += template_key();
  return values;
}

std::string provider::nothing_offered() const {
  std::lock_guard lock(mutex_);
  return cache_ && cache_->empty() ? why_empty_ : std::string();
}

std::shared_ptr<const provider::info_list> provider::templates() {
  std::string values = template_inputs();
  std::lock_guard lock(mutex_);
  if (!cache_ || values != built_from_) {
    why_empty_.clear();
    cache_ = std::make_shared<const info_list>(build_templates());
    built_from_ = std::move(values);
  }
  return cache_;
}

}  // namespace weft
