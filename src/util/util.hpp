// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Constructors of the generic objects every provider's domain hands out.
// Each validates its arguments, builds the object in a unique_ptr and returns
// it through the out-pointer only when whole; errors are negative FI_E* codes.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

namespace weft {

struct fabric;
struct domain;

// completion objects: src/util/{wait,poll,eq,cq,cntr}.cpp
int eq_open(fabric& fab, fi_eq_attr* attr, fid_eq** eq, void* context) noexcept;
int wait_open(fabric& fab, fi_wait_attr* attr, fid_wait** waitset) noexcept;
int trywait(fabric& fab, fid** fids, int count) noexcept;
int cq_open(domain& dom, fi_cq_attr* attr, fid_cq** cq, void* context) noexcept;
int cntr_open(domain& dom, fi_cntr_attr* attr, fid_cntr** cntr, void* context) noexcept;
int poll_open(domain& dom, fi_poll_attr* attr, fid_poll** pollset) noexcept;

// address vectors: src/util/av.cpp
int av_open(domain& dom, fi_av_attr* attr, fid_av** av, void* context) noexcept;

// memory registration: src/util/mr.cpp. The domain's fid_domain.mr table.
extern fi_ops_mr mr_ops;
// Creates / destroys the domain's registration map (dom.mrs).
void mr_map_create(domain& dom);
void mr_map_destroy(domain& dom) noexcept;

}  // namespace weft
