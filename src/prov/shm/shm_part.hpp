// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/shm as a part of the linked provider's endpoints (util/ep_part.hpp).
#include <string>

#include "util/ep_part.hpp"

namespace weft::shm {

struct part_tag {};
using part = weft::part<part_tag>;
inline constexpr size_t part_inject_max = 4096;
// A part's name, without the "fi_shm://" prefix.
std::string part_name(endpoint& e);

}  // namespace weft::shm
