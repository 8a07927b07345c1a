#pragma once
// Configuration parameters, read from the environment with libfabric's naming:
// FI_<NAME> for the core, FI_<PROV>_<NAME> for a provider (<PROV> is the name
// applications know it by: FI_WEFT_SHM_* for the weft_shm plugin, provider.hpp).
#include <rdma/fabric.h>

#include <cstddef>
#include <optional>
#include <string>

namespace weft {

// Declares a parameter (idempotent). prov == nullptr for core parameters.
void param_define(const char* prov, const char* name, fi_param_type type, const char* help);
std::string param_env_name(const char* prov, const char* name);
// The environment's value, or nullptr; never allocates.
const char* param_raw(const char* prov, const char* name) noexcept;
std::optional<std::string> param_str(const char* prov, const char* name);
std::optional<long long> param_int(const char* prov, const char* name) noexcept;
std::optional<bool> param_bool(const char* prov, const char* name) noexcept;

// Declares the core's and the registered providers' parameters (once).
void params_init();

}  // namespace weft
