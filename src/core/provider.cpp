// The provider registry and the template cache.
#include "core/provider.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
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
  if (!name) return nullptr;
  for (provider* p : providers())
    if (!strcmp(p->name(), name)) return p;
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

std::shared_ptr<const provider::info_list> provider::templates() {
  std::string values = template_inputs();
  std::lock_guard lock(mutex_);
  if (!cache_ || values != built_from_) {
    cache_ = std::make_shared<const info_list>(build_templates());
    built_from_ = std::move(values);
  }
  return cache_;
}

}  // namespace weft
