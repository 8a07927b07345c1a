// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Helpers for providers to describe what they offer as fi_info templates.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "core/info.hpp"

namespace weft {

// Capability classes (man fi_getinfo): primary caps must be requested to be
// granted; secondary caps may be returned whether asked for or not.
inline constexpr uint64_t primary_caps = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST |
                                         FI_NAMED_RX_CTX | FI_DIRECTED_RECV | FI_READ | FI_WRITE | FI_RECV |
                                         FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_HMEM |
                                         FI_COLLECTIVE | FI_VARIABLE_MSG | FI_AV_USER_ID;
inline constexpr uint64_t secondary_caps = FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SHARED_AV |
                                           FI_TRIGGER | FI_FENCE | FI_LOCAL_COMM | FI_REMOTE_COMM |
                                           FI_SOURCE_ERR | FI_RMA_PMEM;
// The capabilities fi_endpoint(3) lists for the transmit and the receive
// attributes (FI_XPU aside: weft has none). tx_attr->caps and rx_attr->caps
// hold nothing else; FI_MULTICAST is a transmit capability only.
inline constexpr uint64_t tx_cap_mask = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_READ | FI_WRITE |
                                        FI_SEND | FI_HMEM | FI_TRIGGER | FI_FENCE | FI_MULTICAST |
                                        FI_RMA_PMEM | FI_NAMED_RX_CTX | FI_COLLECTIVE;
inline constexpr uint64_t rx_cap_mask = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_RECV | FI_REMOTE_READ |
                                        FI_REMOTE_WRITE | FI_MULTI_RECV | FI_RMA_EVENT | FI_SOURCE |
                                        FI_DIRECTED_RECV | FI_HMEM | FI_TRIGGER | FI_SOURCE_ERR |
                                        FI_RMA_PMEM | FI_VARIABLE_MSG | FI_COLLECTIVE;

// mr_mode bits a weft provider can run with or without: the application's
// hints choose (see getinfo.cpp).
inline constexpr uint64_t mr_mode_optional =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
inline constexpr uint64_t mr_basic_map = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

// What differs between weft's providers' fi_info templates; everything else
// (queue sizes, iov limits, key and CQ data sizes, progress, threading, the
// preferred mr_mode FI_MR_VIRT_ADDR) is common. Throws std::bad_alloc.
struct template_spec {
  const char* name;  // provider, fabric and domain name (the provider's own: make_template prefixes it)
  uint32_t prov_version;
  uint64_t caps;
  uint32_t addr_format;
  fi_ep_type type;
  uint32_t protocol;
  size_t inject_size;
  size_t ep_cnt;
  size_t max_ep_ctx;  // max_ep_{tx,rx,stx,srx}_ctx
};
fi_info* make_template(const template_spec& spec);

}  // namespace weft
