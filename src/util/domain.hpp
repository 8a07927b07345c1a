// SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <memory>

#include "common/object.hpp"
#include "core/provider.hpp"
#include "util/fabric.hpp"

namespace weft {

struct mr_map;  // src/util/mr.hpp

struct domain {
  fid_domain fid_;  // first
  fabric* fab;
  provider* prov;
  fi_info* info;         // a private copy of the info the domain was opened with
  uint32_t api_version;  // fabric's api version (struct/behaviour versioning)
  uint64_t mr_mode;      // mr_mode bits in force (FI_MR_BASIC/SCALABLE mapped to bits)
  bool mr_legacy_basic;  // opened with FI_MR_BASIC: requested keys are honoured when free
  fi_threading threading;
  fi_progress data_progress;
  fi_progress control_progress;
  uint32_t addr_format;
  size_t addrlen;  // size of one address in this domain's AVs
  mr_map* mrs;     // registration map (owned)
  fid_eq* eq;      // bound by fi_domain_bind(FI_REG_MR) for async MR events
  users users_;    // avs, cqs, cntrs, mrs, eps, poll sets

  // The provider's part, made at open (endpoints, registration events).
  std::unique_ptr<prov_domain> pd;
  domain* parent = nullptr;  // a part of another provider's domain (domain_open_part)

  static domain* of(fid_domain* d) noexcept { return from_fid<domain>(d); }
};

// A domain of provider `prov` inside `parent`, for a provider made of other
// providers (the linked provider's shm and tcp parts): it shares the
// parent's registrations (one fi_mr_reg, one key on every part), threading,
// progress and mr_mode, and is never handed to the application. `info`
// names the part's own template (its domain name). Throws.
struct domain_part_deleter {
  void operator()(domain* d) const noexcept;
};
using domain_part = std::unique_ptr<domain, domain_part_deleter>;
domain_part domain_open_part(domain& parent, provider& prov, const fi_info* info);

}  // namespace weft
