// SPDX-License-Identifier: BSD-3-Clause
// Prints weft's three tables of settings, one variable a line:
//   VARIABLE <tab> KIND <tab> DEFAULT <tab> ACCEPTED
// the libfabric core's and providers' (core/params.hpp, as weft's own
// libfabric.so.1 names them and, FI_WEFT_<PROV>_*, as the plugins do), the
// UCP face's (src/ucp/settings.hpp) and the RSM face's (src/rsm/settings.hpp).
// tests/install/variables.sh checks the man pages against it.
#include <cstdio>
#include <string>

#include "core/params.hpp"
#include "core/provider.hpp"
#include "rsm/settings.hpp"
#include "ucp/settings.hpp"

namespace {

const char* kind(fi_param_type t) {
  switch (t) {
    case FI_PARAM_BOOL:
      return "bool";
    case FI_PARAM_INT:
      return "int";
    case FI_PARAM_SIZE_T:
      return "size_t";
    default:
      return "string";
  }
}

void row(const std::string& var, const char* k, const std::string& dflt, const std::string& accepted) {
  printf("%s\t%s\t%s\t%s\n", var.c_str(), k, dflt.c_str(), accepted.c_str());
}

}  // namespace

int main() {
  for (const weft::param_spec& p : weft::param_core_rows())
    row(weft::param_env_name(nullptr, p.name), kind(p.type), weft::param_default(p), weft::param_accepted(p));
  for (const char* prefix : {"", "weft_"}) {
    weft::set_name_prefix(prefix);
    for (const weft::provider* prov : weft::providers())
      for (const weft::param_spec& p : prov->params())
        row(weft::param_env_name(prov->name(), p.name), kind(p.type), weft::param_default(p),
            weft::param_accepted(p));
  }
  weft::set_name_prefix("");
  for (const wucp::setting& s : wucp::settings)
    row(std::string("UCX_") + s.name, s.kind, s.dflt, wucp::accepted(s));
  for (const weft::rsm::setting& s : weft::rsm::settings) row(s.name, s.kind, s.dflt, weft::rsm::accepted(s));
  return 0;
}
