// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A plain libfabric RDM endpoint for tests that talk to the RSM face from
// outside it (a hostile importer, an exporter that never answers, provider
// checks). Every failure ends the actor (REQ).
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <vector>

#include "harness.hpp"

namespace rsmt {

struct raw_ep {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  std::vector<uint8_t> addr;  // fi_getname
  bool virt_addr = false;
  int cq_wait_result = 0;  // fi_cq_open's answer to the wait object asked for (then opened without one)

  // prov "shm" or "tcp"; node binds tcp to an address (FI_SOURCE).
  void open(const char* prov, const char* node, uint64_t caps, fi_wait_obj wait = FI_WAIT_NONE,
            fi_cq_format format = FI_CQ_FORMAT_MSG) {
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = caps;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
    hints->fabric_attr->prov_name = strdup(prov);
    REQ_EQ(fi_getinfo(FI_VERSION(1, 11), node, nullptr, node ? FI_SOURCE : 0, hints, &info), 0);
    fi_freeinfo(hints);
    virt_addr = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
    REQ_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    REQ_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    fi_av_attr aa{};
    REQ_EQ(fi_av_open(domain, &aa, &av, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = format;
    ca.wait_obj = wait;
    cq_wait_result = fi_cq_open(domain, &ca, &cq, nullptr);
    if (cq_wait_result) {
      ca.wait_obj = FI_WAIT_NONE;
      REQ_EQ(fi_cq_open(domain, &ca, &cq, nullptr), 0);
    }
    REQ_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
    REQ_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    REQ_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    REQ_EQ(fi_enable(ep), 0);
    uint8_t a[512];
    size_t len = sizeof a;
    REQ_EQ(fi_getname(&ep->fid, a, &len), 0);
    addr.assign(a, a + len);
  }

  void close_all() {
    fi_close(&ep->fid);
    fi_close(&cq->fid);
    fi_close(&av->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
  }
};

}  // namespace rsmt
