// SPDX-License-Identifier: BSD-3-Clause
#include "core/prov_template.hpp"

#include <climits>
#include <cstring>
#include <new>
#include <string>

#include "core/provider.hpp"

namespace weft {

fi_info* make_template(const template_spec& spec) {
  const std::string name = std::string(name_prefix()) + spec.name;  // as applications know it
  info_ptr info(info_alloc());
  fi_info* i = info.get();
  if (!i) throw std::bad_alloc();
  i->caps = spec.caps;
  i->addr_format = spec.addr_format;
  i->tx_attr->caps = spec.caps & tx_cap_mask;
  i->tx_attr->msg_order = FI_ORDER_SAS;
  i->tx_attr->comp_order = FI_ORDER_NONE;
  i->tx_attr->inject_size = spec.inject_size;
  i->tx_attr->size = 1024;
  i->tx_attr->iov_limit = 4;
  i->tx_attr->rma_iov_limit = 4;
  i->rx_attr->caps = spec.caps & rx_cap_mask;
  i->rx_attr->msg_order = FI_ORDER_SAS;
  i->rx_attr->comp_order = FI_ORDER_NONE;
  i->rx_attr->size = 1024;
  i->rx_attr->iov_limit = 4;
  i->ep_attr->type = spec.type;
  i->ep_attr->protocol = spec.protocol;
  i->ep_attr->protocol_version = 1;
  i->ep_attr->max_msg_size = SIZE_MAX;
  i->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
  i->ep_attr->tx_ctx_cnt = 1;
  i->ep_attr->rx_ctx_cnt = 1;
  fi_domain_attr* d = i->domain_attr;
  d->name = dup_cstr(name.c_str());
  d->threading = FI_THREAD_SAFE;
  d->control_progress = FI_PROGRESS_AUTO;
  d->data_progress = FI_PROGRESS_MANUAL;
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = FI_AV_UNSPEC;
  d->mr_mode = FI_MR_VIRT_ADDR;
  d->mr_key_size = 8;
  d->cq_data_size = 8;
  d->cq_cnt = 1024;
  d->ep_cnt = spec.ep_cnt;
  d->tx_ctx_cnt = 1024;
  d->rx_ctx_cnt = 1024;
  d->max_ep_tx_ctx = spec.max_ep_ctx;
  d->max_ep_rx_ctx = spec.max_ep_ctx;
  d->max_ep_stx_ctx = spec.max_ep_ctx;
  d->max_ep_srx_ctx = spec.max_ep_ctx;
  d->cntr_cnt = 1024;
  d->mr_iov_limit = 4;
  d->max_err_data = 64;
  d->mr_cnt = 65536;
  i->fabric_attr->name = dup_cstr(name.c_str());
  i->fabric_attr->prov_name = dup_cstr(name.c_str());
  i->fabric_attr->prov_version = spec.prov_version;
  i->fabric_attr->api_version = FI_VERSION(1, 17);
  return info.release();
}

}  // namespace weft
