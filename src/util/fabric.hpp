// SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <string>

#include "common/object.hpp"
#include "core/provider.hpp"

namespace weft {

struct fabric {
  fid_fabric fid_;  // first: the application's fid_fabric* is this object
  provider* prov;
  std::string name;
  uint32_t api_version;
  users users_;  // domains, eqs, wait sets, passive endpoints

  static fabric* of(fid_fabric* f) noexcept { return from_fid<fabric>(f); }
};

int fabric_open(fi_fabric_attr* attr, fid_fabric** out, void* context, uint32_t api_version);

}  // namespace weft
