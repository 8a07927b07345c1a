// SPDX-License-Identifier: BSD-3-Clause
// self-loop: the software of one small message, without a second CPU.
//
// One endpoint (FI_THREAD_DOMAIN, a tagged CQ) sends 8-byte messages to
// itself: per message fi_trecv, fi_tinject to its own address, fi_cq_read
// until the entry comes. Nothing crosses between CPUs, so the time per
// message is what the library's code costs, and under callgrind the
// instructions of each call can be counted (docs/shm-protocol.md, "The
// instructions of a message"):
//
//   LD_LIBRARY_PATH=build/lib taskset -c 0 build/tests/bin/self-loop
//   LD_LIBRARY_PATH=build/lib valgrind --tool=callgrind build/tests/bin/self-loop 100000
//
//   usage: self-loop [ITERS] [PROVIDER] [empty|waited|source|plain] [SIZE]
//          (default 2000000 shm plain 8; SIZE up to 4096 bytes, fi_tinject
//          while it fits the provider's inject size, else fi_tsend)
//   "empty": only fi_cq_read on the empty CQ, ITERS times (the cost of a poll
//   that finds nothing).
//   "waited": one fi_cq_read of the empty CQ before each fi_tinject, so that
//   the read that takes the message follows an empty one, as a ping-pong's
//   does (progress takes such a message on its shortest path). Subtract an
//   "empty" run's counts to get the read that finds the message.
//   "source": the endpoint asks for FI_SOURCE and reads with fi_cq_readfrom
//   (each message's source checked): the cost of naming the sender.
// Linked to libfabric.so.1 by SONAME, like weft-perf: Debian's libfabric
// without LD_LIBRARY_PATH. Prints "ns_per_message <ns>" for two passes.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

[[noreturn]] void fail(const char* what, long ret) {
  std::fprintf(stderr, "self-loop: %s: %s (%ld)\n", what, fi_strerror(static_cast<int>(-ret)), ret);
  std::exit(1);
}

void check(const char* what, long ret) {
  if (ret) fail(what, ret);
}

}  // namespace

int main(int argc, char** argv) {
  long iters = argc > 1 ? std::atol(argv[1]) : 2000000;
  const char* prov = argc > 2 ? argv[2] : "shm";
  bool empty = argc > 3 && !std::strcmp(argv[3], "empty");
  bool waited = argc > 3 && !std::strcmp(argv[3], "waited");
  bool source = argc > 3 && !std::strcmp(argv[3], "source");
  bool plain = argc > 3 && !std::strcmp(argv[3], "plain");
  long size = argc > 4 ? std::atol(argv[4]) : 8;
  if (iters <= 0 || (argc > 3 && !empty && !waited && !source && !plain) || size < 1 || size > 4096) {
    std::fprintf(stderr, "usage: self-loop [ITERS] [PROVIDER] [empty|waited|source|plain] [SIZE]\n");
    return 2;
  }
  fi_info* hints = fi_allocinfo();
  hints->caps = FI_TAGGED | (source ? FI_SOURCE : 0);
  hints->ep_attr->type = FI_EP_RDM;
  hints->fabric_attr->prov_name = strdup(prov);
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->mode = ~0ULL;
  fi_info* info = nullptr;
  check("fi_getinfo", fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info));
  fi_freeinfo(hints);
  fid_fabric* fab;
  fid_domain* dom;
  fid_ep* ep;
  fid_cq* cq;
  fid_av* av;
  check("fi_fabric", fi_fabric(info->fabric_attr, &fab, nullptr));
  check("fi_domain", fi_domain(fab, info, &dom, nullptr));
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_TAGGED;
  check("fi_cq_open", fi_cq_open(dom, &ca, &cq, nullptr));
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  check("fi_av_open", fi_av_open(dom, &aa, &av, nullptr));
  check("fi_endpoint", fi_endpoint(dom, info, &ep, nullptr));
  check("fi_ep_bind cq", fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
  check("fi_ep_bind av", fi_ep_bind(ep, &av->fid, 0));
  check("fi_enable", fi_enable(ep));
  char addr[256];
  size_t alen = sizeof addr;
  check("fi_getname", fi_getname(&ep->fid, addr, &alen));
  fi_addr_t self;
  if (fi_av_insert(av, addr, 1, &self, 0, nullptr) != 1) fail("fi_av_insert", -FI_EINVAL);
  static char sbuf[4096], rbuf[4096];
  const size_t len = static_cast<size_t>(size);
  for (size_t i = 0; i < len; ++i) sbuf[i] = static_cast<char>('a' + i % 26);
  const bool inject = len <= info->tx_attr->inject_size;
  fi_cq_tagged_entry e;
  for (int pass = 0; pass < 2; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i) {
      if (empty) {
        ssize_t n = fi_cq_read(cq, &e, 1);
        if (n != -FI_EAGAIN) fail("fi_cq_read of an empty CQ", n);
        continue;
      }
      ssize_t r;
      while ((r = fi_trecv(ep, rbuf, len, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr)) == -FI_EAGAIN)
        fi_cq_read(cq, nullptr, 0);
      check("fi_trecv", r);
      if (waited) {
        ssize_t n = fi_cq_read(cq, &e, 1);
        if (n != -FI_EAGAIN) fail("fi_cq_read of an empty CQ", n);
      }
      while ((r = inject ? fi_tinject(ep, sbuf, len, self, 7) : fi_tsend(ep, sbuf, len, nullptr, self, 7, sbuf)) ==
             -FI_EAGAIN)
        fi_cq_read(cq, nullptr, 0);
      check(inject ? "fi_tinject" : "fi_tsend", r);
      ssize_t n;
      fi_addr_t from = FI_ADDR_NOTAVAIL;
      while ((n = source ? fi_cq_readfrom(cq, &e, 1, &from) : fi_cq_read(cq, &e, 1)) == -FI_EAGAIN) {
      }
      if (n != 1) fail("fi_cq_read", n);
      if (!inject && e.op_context == sbuf) {  // the send's entry first: then the receive's
        while ((n = source ? fi_cq_readfrom(cq, &e, 1, &from) : fi_cq_read(cq, &e, 1)) == -FI_EAGAIN) {
        }
        if (n != 1) fail("fi_cq_read", n);
      } else if (!inject) {  // the receive's first: then the send's
        fi_cq_tagged_entry s;
        while ((n = fi_cq_read(cq, &s, 1)) == -FI_EAGAIN) {
        }
        if (n != 1 || s.op_context != sbuf) fail("the send's completion", n);
      }
      if (source && from != self) fail("the message's source", -FI_EIO);
      if (std::memcmp(rbuf, sbuf, len) || e.len != len || e.tag != 7) fail("the message", -FI_EIO);
    }
    std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
    std::printf("ns_per_message %.1f\n", dt.count() / double(iters));
  }
  fi_close(&ep->fid);
  fi_close(&av->fid);
  fi_close(&cq->fid);
  fi_close(&dom->fid);
  fi_close(&fab->fid);
  fi_freeinfo(info);
  return 0;
}
