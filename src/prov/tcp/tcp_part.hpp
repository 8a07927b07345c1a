// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp as a part of the linked provider's endpoints (util/ep_part.hpp).
#include "util/ep_part.hpp"

namespace weft::tcp {

struct part_tag {};
using part = weft::part<part_tag>;
inline constexpr size_t part_inject_max = 4096;
// The address peers reach a part at (after fi_enable), as a sockaddr: 0,
// or -FI_ETOOSMALL with *len the size needed.
int part_name(endpoint& e, void* addr, size_t* len) noexcept;

}  // namespace weft::tcp
