// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Configuration parameters, read from the environment with libfabric's naming:
// FI_<NAME> for the core, FI_<PROV>_<NAME> for a provider (<PROV> is the name
// applications know it by: FI_WEFT_SHM_* for the weft_shm plugin, provider.hpp).
//
// The table of settings is the core's (params.cpp) and each provider's
// params(): a row gives a setting's kind, default and what it accepts. The
// readers below check a value against its row where it is read (at open or
// getinfo time, never on the data path); a value they do not take is named on
// stderr once (param_report), whatever FI_LOG_LEVEL says. fi_info -e prints
// each row's help with its default and range (param_help).
#include <rdma/fabric.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace weft {

// One row of the table. Numbers and booleans have their default in `def`
// (a boolean's is 0 or 1); a string's default is `dflt`, in words, and what
// it accepts is either `choices` (the values, '|' between) or, for a value
// its reader checks against the system (an interface, a provider), `accepts`
// in words.
struct param_spec {
  const char* name;  // lower case; the variable is FI_<NAME> or FI_<PROV>_<NAME>
  fi_param_type type;
  const char* help;
  long long def = 0;
  long long min = 0, max = 0;  // FI_PARAM_INT, FI_PARAM_SIZE_T: the range accepted
  const char* dflt = nullptr;
  const char* choices = nullptr;
  const char* accepts = nullptr;
};

// The core's rows (a provider's are its params()).
std::span<const param_spec> param_core_rows() noexcept;
// The row of a core (prov == nullptr) or provider parameter; nullptr if none.
const param_spec* param_find(const char* prov, const char* name) noexcept;
// The row's default and accepted values in words ("4096", "0 to 4096"), and
// its help completed with them (fi_info -e).
std::string param_default(const param_spec& p);
std::string param_accepted(const param_spec& p);
std::string param_help(const param_spec& p);

// Declares a parameter (idempotent). prov == nullptr for core parameters.
void param_define(const char* prov, const char* name, fi_param_type type, const char* help);
std::string param_env_name(const char* prov, const char* name);
// The environment's value, or nullptr; never allocates.
const char* param_raw(const char* prov, const char* name) noexcept;
std::optional<std::string> param_str(const char* prov, const char* name);
// A number or boolean, checked against its row: nullopt when unset, and when
// the value does not parse or is out of range (reported: the default is used).
std::optional<long long> param_int(const char* prov, const char* name) noexcept;
std::optional<bool> param_bool(const char* prov, const char* name) noexcept;
// The same, or the row's default.
long long param_int_or_default(const char* prov, const char* name) noexcept;
bool param_bool_or_default(const char* prov, const char* name) noexcept;
// A string with choices: the index of its value among them, param_unset, or
// param_bad (reported, with `then`: what follows; default: "the default, X,
// is used").
inline constexpr int param_unset = -1;
inline constexpr int param_bad = -2;
int param_choice(const char* prov, const char* name, const char* then = nullptr) noexcept;
// The index of `value` among the row's choices (case-insensitive), or -1.
int param_choice_index(const param_spec& p, std::string_view value) noexcept;

// Says once per variable and value, on stderr at any log level, that a
// setting was not taken: "VAR=value: <problem> (accepted: <accepted>);
// <then>". prov is the provider's own name (nullptr: the core).
[[gnu::cold]] void param_report(const char* prov, const char* name, const char* value,
                                const std::string& problem, const std::string& accepted,
                                const std::string& then) noexcept;
// The same, with what the setting's row accepts.
[[gnu::cold]] void param_report(const char* prov, const char* name, const char* value,
                                const std::string& problem, const std::string& then) noexcept;

// Declares the core's and the registered providers' parameters (once).
void params_init();

}  // namespace weft
