// SPDX-License-Identifier: BSD-3-Clause
// Poll sets: fi_poll_open, fi_poll_add/del, fi_poll.
//
// A poll set holds CQs and counters of one domain; each member keeps a
// reference (closing it returns -FI_EBUSY until fi_poll_del), and the set
// refuses to close while it has members.
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "util/cntr.hpp"
#include "util/cq.hpp"
#include "util/domain.hpp"
#include "util/util.hpp"
#include "util/wait.hpp"

namespace weft {

struct poll_set {
  fid_poll fid_;  // first
  domain* dom;
  std::mutex mtx;
  std::vector<fid*> members;

  explicit poll_set(domain* d);
};

namespace {

poll_set* of(fid_poll* p) noexcept {
  return from_fid<poll_set>(p);
}

int poll_poll(fid_poll* p, void** context, int count) noexcept {
  if (!context || count <= 0) return -FI_EINVAL;
  poll_set* ps = of(p);
  std::lock_guard<std::mutex> l(ps->mtx);
  int n = 0;
  for (fid* m : ps->members) {
    if (n == count) break;
    bool events = false;
    if (m->fclass == FI_CLASS_CQ) {
      auto* cq = reinterpret_cast<fid_cq*>(m);
      cq_progress(cq);
      events = cq_has_events(cq);
    } else {
      auto* c = reinterpret_cast<fid_cntr*>(m);
      cntr_progress(c);
      events = cntr_poll_changed(c);
    }
    if (events) context[n++] = m->context;
  }
  return n;
}

int poll_add(fid_poll* p, fid* f, uint64_t flags) noexcept {
  if (flags) return -FI_EBADFLAGS;
  poll_set* ps = of(p);
  if (is_cq(f)) {
    if (cq_domain(reinterpret_cast<fid_cq*>(f)) != ps->dom) return -FI_EINVAL;
  } else if (is_cntr(f)) {
    if (cntr_domain(reinterpret_cast<fid_cntr*>(f)) != ps->dom) return -FI_EINVAL;
  } else {
    return -FI_EINVAL;  // only CQs and counters
  }
  return guard([&]() -> int {
    std::lock_guard<std::mutex> l(ps->mtx);
    if (std::find(ps->members.begin(), ps->members.end(), f) != ps->members.end()) return -FI_EALREADY;
    ps->members.push_back(f);
    if (f->fclass == FI_CLASS_CQ)
      cq_take(reinterpret_cast<fid_cq*>(f));
    else
      cntr_take(reinterpret_cast<fid_cntr*>(f));
    return 0;
  });
}

int poll_del(fid_poll* p, fid* f, uint64_t flags) noexcept {
  if (flags) return -FI_EBADFLAGS;
  if (!f) return -FI_EINVAL;
  poll_set* ps = of(p);
  std::lock_guard<std::mutex> l(ps->mtx);
  auto it = std::find(ps->members.begin(), ps->members.end(), f);
  if (it == ps->members.end()) return -FI_EINVAL;  // not a member
  ps->members.erase(it);
  if (f->fclass == FI_CLASS_CQ)
    cq_drop(reinterpret_cast<fid_cq*>(f));
  else
    cntr_drop(reinterpret_cast<fid_cntr*>(f));
  return 0;
}

int poll_close(fid* f) noexcept {
  poll_set* ps = from_fid<poll_set>(f);
  {
    std::lock_guard<std::mutex> l(ps->mtx);
    if (!ps->members.empty()) return -FI_EBUSY;
  }
  ps->dom->users_.drop();
  delete ps;
  return 0;
}

fi_ops poll_fi_ops = {
    sizeof(fi_ops), poll_close, fid_no_bind, fid_no_control, fid_no_ops_open, fid_no_tostr, fid_no_ops_set,
};

fi_ops_poll poll_ops = {sizeof(fi_ops_poll), poll_poll, poll_add, poll_del};

}  // namespace

poll_set::poll_set(domain* d) : dom(d) {
  fid_.fid.fclass = FI_CLASS_POLL;
  fid_.fid.context = nullptr;
  fid_.fid.ops = &poll_fi_ops;
  fid_.ops = &poll_ops;
}

int poll_open(domain& dom, fi_poll_attr* attr, fid_poll** out) noexcept {
  return guard([&]() -> int {
    if (!out) return -FI_EINVAL;
    if (attr && attr->flags) return -FI_EBADFLAGS;  // reserved, must be 0
    auto ps = std::make_unique<poll_set>(&dom);
    dom.users_.add();
    *out = &ps.release()->fid_;
    return 0;
  });
}

}  // namespace weft
