// What the RSM face found in the providers underneath it, kept as tests that
// pass once the provider behaves and skip, saying why, until then.
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <time.h>

#include "harness.hpp"

using namespace rsmt;

namespace {

struct shm_ep {
  fi_info* info = nullptr;
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  int cq_open = 0;
  void open(fi_wait_obj wait) {
    fi_info* h = fi_allocinfo();
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG;
    h->fabric_attr->prov_name = strdup("shm");
    REQ_EQ(fi_getinfo(FI_VERSION(1, 11), nullptr, nullptr, 0, h, &info), 0);
    fi_freeinfo(h);
    REQ_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
    REQ_EQ(fi_domain(fab, info, &dom, nullptr), 0);
    fi_av_attr aa{};
    REQ_EQ(fi_av_open(dom, &aa, &av, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    ca.wait_obj = wait;
    cq_open = fi_cq_open(dom, &ca, &cq, nullptr);
    if (cq_open) {
      ca.wait_obj = FI_WAIT_NONE;
      REQ_EQ(fi_cq_open(dom, &ca, &cq, nullptr), 0);
    }
    REQ_EQ(fi_endpoint(dom, info, &ep, nullptr), 0);
    REQ_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    REQ_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    REQ_EQ(fi_enable(ep), 0);
  }
  void close_all() {
    fi_close(&ep->fid);
    fi_close(&cq->fid);
    fi_close(&av->fid);
    fi_close(&dom->fid);
    fi_close(&fab->fid);
    fi_freeinfo(info);
  }
};

double seconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec / 1e9;
}

}  // namespace

// The receiver: a CQ with an FD wait object; after fi_trywait says it may
// block, it sleeps on the fd while another process sends.
RSM_CHILD(waitfd_receiver) {
  shm_ep r;
  r.open(FI_WAIT_FD);
  if (r.cq_open) skip("the shm provider offers no FD wait object on its CQs");
  uint8_t addr[256];
  size_t len = sizeof addr;
  REQ_EQ(fi_getname(&r.ep->fid, addr, &len), 0);
  memcpy(sh->text, addr, len);
  sh->u32[0] = static_cast<uint32_t>(len);
  char buf[64];
  fi_context2 ctx;
  REQ_EQ(fi_recv(r.ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  int fd = -1;
  REQ_EQ(fi_control(&r.cq->fid, FI_GETWAIT, &fd), 0);
  fid* f = &r.cq->fid;
  int tw = fi_trywait(r.fab, &f, 1);
  set_step(0, 1);  // the sender sends now
  pollfd pf{fd, POLLIN, 0};
  double t0 = seconds();
  int n = tw == 0 ? poll(&pf, 1, 3000) : 1;
  double waited = seconds() - t0;
  fi_cq_entry e;
  bool there = false;
  for (int i = 0; i < 100000 && !there; i++) there = fi_cq_read(r.cq, &e, 1) == 1;
  REQ(there);
  r.close_all();
  set_step(1, 1);
  if (n == 0)
    skip("weft shm defect: fi_trywait returned 0 on a CQ with FI_WAIT_FD, but its fd stayed unreadable for " +
         std::to_string(waited).substr(0, 4) +
         " s although a message from another process had arrived (shm never signals a peer's wait fd)");
  return 0;
}

RSM_CHILD(waitfd_sender) {
  shm_ep s;
  s.open(FI_WAIT_NONE);
  wait_step(0, 1);
  fi_addr_t fa;
  REQ_EQ(fi_av_insert(s.av, sh->text, 1, &fa, 0, nullptr), 1);
  usleep(200 * 1000);  // the receiver is asleep in poll by now
  fi_context2 ctx;
  ssize_t r;
  while ((r = fi_send(s.ep, "hello", 6, nullptr, fa, &ctx)) == -FI_EAGAIN) fi_cq_read(s.cq, nullptr, 0);
  REQ_EQ(r, 0);
  fi_cq_entry e;
  while (fi_cq_read(s.cq, &e, 1) == -FI_EAGAIN) {}
  wait_step(1, 1);
  s.close_all();
  return 0;
}

TEST(ProviderNotes, ShmWaitFdWakesOnRemoteSend) {
  new_shared();
  RUN_ACTORS(60, spawn("waitfd_receiver"), spawn("waitfd_sender"));
}
