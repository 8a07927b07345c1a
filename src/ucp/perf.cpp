// SPDX-License-Identifier: BSD-3-Clause
// Latency and bandwidth of a transport, measured once per context on first
// use by ucp_ep_evaluate_perf: two endpoints of the transport's domain in this
// process, 8-byte tagged ping-pong and 1 MiB tagged sends. The estimate for a
// message of n bytes is latency + n / bandwidth.
#include <cstdlib>
#include <vector>

#include "ucp_int.hpp"

namespace wucp {

namespace {

struct probe_ep {
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  int done = 0;
  ~probe_ep() {
    if (ep) fi_close(&ep->fid);
    if (cq) fi_close(&cq->fid);
    if (av) fi_close(&av->fid);
  }
};

bool open_probe(domain_tp* d, probe_ep& p) {
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = 256;
  return !fi_av_open(d->domain, &av_attr, &p.av, nullptr) &&
         !fi_cq_open(d->domain, &cq_attr, &p.cq, nullptr) &&
         !fi_endpoint(d->domain, d->info, &p.ep, nullptr) && !fi_ep_bind(p.ep, &p.av->fid, 0) &&
         !fi_ep_bind(p.ep, &p.cq->fid, FI_TRANSMIT | FI_RECV) && !fi_enable(p.ep);
}

// Waits for one completion on `on`, progressing both sides (a completion of
// the other side is counted for it), at most 1 s.
bool wait_one(probe_ep& a, probe_ep& b, probe_ep& on) {
  double t0 = now_s();
  while (now_s() - t0 < 1.0) {
    for (probe_ep* p : {&a, &b}) {
      fi_cq_tagged_entry e;
      ssize_t n = fi_cq_read(p->cq, &e, 1);
      if (n == -FI_EAVAIL) return false;
      if (n == 1) p->done++;
    }
    if (on.done) {
      on.done--;
      return true;
    }
  }
  return false;
}

void defaults(domain_tp* d) {
  d->lat_s = d->kind == TP_SHM ? 0.5e-6 : 25e-6;
  d->bw_Bps = d->kind == TP_SHM ? 10e9 : 1e9;
}

}  // namespace

void measure_transport(domain_tp* d) noexcept {
  static std::mutex m;
  std::lock_guard l(m);
  if (d->lat_s != 1e-6 || d->bw_Bps != 1e9) return;  // measured already
  defaults(d);
  try {
    probe_ep a, b;
    if (!open_probe(d, a) || !open_probe(d, b)) return;
    char na[256], nb[256];
    size_t la = sizeof na, lb = sizeof nb;
    if (fi_getname(&a.ep->fid, na, &la) || fi_getname(&b.ep->fid, nb, &lb)) return;
    if (fi_av_insert(a.av, nb, 1, &a.peer, 0, nullptr) != 1 ||
        fi_av_insert(b.av, na, 1, &b.peer, 0, nullptr) != 1)
      return;
    uint64_t sbuf = 0, rbuf = 0;
    fi_context2 ctx[2];
    constexpr int iters = 200;
    double t0 = 0;
    for (int i = 0; i < iters + 20; i++) {
      if (i == 20) t0 = now_s();  // after warm-up
      if (fi_trecv(b.ep, &rbuf, 8, nullptr, FI_ADDR_UNSPEC, 1, 0, &ctx[0])) return;
      if (fi_tinject(a.ep, &sbuf, 8, a.peer, 1)) return;
      if (!wait_one(a, b, b)) return;
      if (fi_trecv(a.ep, &rbuf, 8, nullptr, FI_ADDR_UNSPEC, 2, 0, &ctx[1])) return;
      if (fi_tinject(b.ep, &sbuf, 8, b.peer, 2)) return;
      if (!wait_one(a, b, a)) return;
    }
    double lat = (now_s() - t0) / (2.0 * iters);
    constexpr size_t big = 1 << 20;
    std::vector<char> src(big, 1), dst(big);
    double bw = 0;
    for (int i = 0; i < 6; i++) {
      double s = now_s();
      if (fi_trecv(b.ep, dst.data(), big, nullptr, FI_ADDR_UNSPEC, 3, 0, &ctx[0])) return;
      if (fi_tsend(a.ep, src.data(), big, nullptr, a.peer, 3, &ctx[1])) return;
      if (!wait_one(a, b, b) || !wait_one(a, b, a)) return;
      if (i >= 2) bw = std::max(bw, big / (now_s() - s));
    }
    if (lat > 0 && bw > 0) {
      d->lat_s = lat;
      d->bw_Bps = bw;
    }
  } catch (...) {}
}

}  // namespace wucp
