// SPDX-License-Identifier: BSD-3-Clause
// Event queues: fi_eq_open, the fi_ops_eq table and the internal interface of
// eq.hpp (eq_post, eq_post_error) that asynchronous objects report through.
//
// Events are variable-length (CM events carry connection data), so the queue
// is a deque of owned buffers: the EQ is a control-path object. Successes and
// errors share one queue, so order is kept: fi_eq_read returns -FI_EAVAIL when
// the head is an error entry, and fi_eq_readerr takes it.
#include "util/eq.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "core/info.hpp"
#include "util/fabric.hpp"
#include "util/util.hpp"
#include "util/wait.hpp"

namespace weft {

namespace {

struct eq_event {
  uint32_t event = 0;
  bool is_err = false;
  std::vector<uint8_t> data;  // the event as fi_eq_read returns it
  fi_eq_err_entry err{};      // when is_err (err_data lives in err_data)
  std::vector<uint8_t> err_data;
};

}  // namespace

struct eq {
  fid_eq fid_;  // first
  fabric* fab;
  uint64_t flags;
  wait_set* set;
  std::mutex mtx;
  std::deque<eq_event> q;
  std::vector<uint8_t> err_buf;  // provider-owned err_data handed out by readerr
  waiter w;
  progress_list progress;
  users users_;

  eq(fabric* f, const fi_eq_attr& attr, void* context, wait_set* ws);
};

namespace {

eq* of(fid_eq* f) noexcept {
  return from_fid<eq>(f);
}

bool is_cm_event(uint32_t event) noexcept {
  return event == FI_CONNREQ || event == FI_CONNECTED || event == FI_SHUTDOWN;
}

// Lock held.
ssize_t read_locked(eq* e, uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept {
  if (e->q.empty()) return -FI_EAGAIN;
  eq_event& ev = e->q.front();
  if (ev.is_err) return -FI_EAVAIL;
  size_t n = ev.data.size();
  if (len < n) {
    // CM events may be cut short of their connection data, never of the header.
    if (!is_cm_event(ev.event) || len < sizeof(fi_eq_cm_entry)) return -FI_ETOOSMALL;
    n = len;
  }
  if (n) std::memcpy(buf, ev.data.data(), n);
  if (event) *event = ev.event;
  if (!(flags & FI_PEEK)) e->q.pop_front();
  return static_cast<ssize_t>(n);
}

ssize_t eq_read_op(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept {
  if (!buf && len) return -FI_EINVAL;
  if (!only(flags, FI_PEEK)) return -FI_EBADFLAGS;
  eq* e = of(f);
  e->progress.run();
  std::lock_guard<std::mutex> l(e->mtx);
  return read_locked(e, event, buf, len, flags);
}

ssize_t eq_readerr_op(fid_eq* f, fi_eq_err_entry* buf, uint64_t flags) noexcept {
  if (!buf) return -FI_EINVAL;
  if (!only(flags, FI_PEEK)) return -FI_EBADFLAGS;
  eq* e = of(f);
  e->progress.run();
  std::lock_guard<std::mutex> l(e->mtx);
  if (e->q.empty() || !e->q.front().is_err) return -FI_EAGAIN;
  eq_event& ev = e->q.front();
  // API < 1.5 callers pass the older struct (no err_data_size) and always get
  // a buffer the EQ owns.
  bool v15 = e->fab->api_version >= FI_VERSION(1, 5);
  fi_eq_err_entry out = ev.err;
  size_t user_size = v15 ? buf->err_data_size : 0;
  if (user_size && buf->err_data) {
    size_t n = std::min(user_size, ev.err_data.size());
    if (n) std::memcpy(buf->err_data, ev.err_data.data(), n);
    out.err_data = buf->err_data;
    out.err_data_size = n;
  } else {
    try {
      e->err_buf = ev.err_data;  // valid until the next read of this EQ
    } catch (...) {
      return -FI_ENOMEM;
    }
    out.err_data = e->err_buf.empty() ? nullptr : e->err_buf.data();
    out.err_data_size = e->err_buf.size();
  }
  size_t size = v15 ? sizeof(out) : offsetof(fi_eq_err_entry, err_data_size);
  std::memcpy(buf, &out, size);
  if (!(flags & FI_PEEK)) e->q.pop_front();
  return static_cast<ssize_t>(size);
}

ssize_t eq_write_op(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept {
  // FI_WRITE at open is not required: libfabric accepts writes without it.
  if (flags) return -FI_EBADFLAGS;
  if (!buf || !len) return -FI_EINVAL;
  return eq_post(f, event, buf, len, flags);
}

ssize_t eq_sread_op(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout, uint64_t flags) noexcept {
  eq* e = of(f);
  if (!e->w.can_block()) return -FI_EINVAL;  // FI_WAIT_NONE or FI_WAIT_SET
  if (!buf && len) return -FI_EINVAL;
  if (!only(flags, FI_PEEK)) return -FI_EBADFLAGS;
  blocking_pass pass(e->w);
  if (!pass) return -FI_ECANCELED;
  deadline d(timeout);
  for (;;) {
    e->progress.run();
    bool pollers = !e->progress.empty();
    uint64_t seen = e->w.seq();
    {
      std::lock_guard<std::mutex> l(e->mtx);
      if (!e->q.empty()) return read_locked(e, event, buf, len, flags);
    }
    if (e->w.is_shut()) return -FI_ECANCELED;  // the EQ is being closed
    if (d.expired()) return -FI_EAGAIN;
    e->w.block(seen, d, pollers ? progress_slice_ms : -1);
  }
}

const char* eq_strerror_op(fid_eq*, int prov_errno, const void*, char* buf, size_t len) noexcept {
  return completion_strerror(prov_errno, buf, len);
}

int eq_close(fid* f) noexcept {
  eq* e = from_fid<eq>(f);
  if (e->users_.busy()) return -FI_EBUSY;
  e->w.shut();  // a thread asleep in fi_eq_sread returns first
  if (e->set) wait_set_detach(e->set, f);
  e->fab->users_.drop();
  delete e;
  return 0;
}

int eq_control(fid* f, int command, void* arg) noexcept {
  eq* e = from_fid<eq>(f);
  switch (command) {
    case FI_GETWAIT:
      return e->w.get_wait(arg);
    case FI_GETWAITOBJ:
      return e->w.get_wait_obj(arg);
    default:
      return -FI_ENOSYS;
  }
}

fi_ops eq_fi_ops = {
    sizeof(fi_ops), eq_close, fid_no_bind, eq_control, fid_no_ops_open, fid_no_tostr, fid_no_ops_set,
};

fi_ops_eq eq_ops = {
    sizeof(fi_ops_eq), eq_read_op, eq_readerr_op, eq_write_op, eq_sread_op, eq_strerror_op,
};

ssize_t push(eq* e, eq_event&& ev) noexcept {
  try {
    std::lock_guard<std::mutex> l(e->mtx);
    e->q.push_back(std::move(ev));
  } catch (...) {
    return -FI_ENOMEM;
  }
  e->w.signal();
  return 0;
}

}  // namespace

eq::eq(fabric* f, const fi_eq_attr& attr, void* context, wait_set* ws)
    : fab(f), flags(attr.flags), set(ws), w(attr.wait_obj, ws) {
  fid_.fid.fclass = FI_CLASS_EQ;
  fid_.fid.context = context;
  fid_.fid.ops = &eq_fi_ops;
  fid_.ops = &eq_ops;
}

int eq_open(fabric& fab, fi_eq_attr* attr, fid_eq** out, void* context) noexcept {
  return guard([&]() -> int {
    if (!attr || !out) return -FI_EINVAL;
    if (!only(attr->flags, FI_WRITE | FI_AFFINITY)) return -FI_EBADFLAGS;
    if ((attr->flags & FI_AFFINITY) && attr->signaling_vector < 0) return -FI_EINVAL;
    if (int r = check_wait_obj(attr->wait_obj, attr->wait_set)) return r;
    wait_set* ws = attr->wait_obj == FI_WAIT_SET ? wait_set_check(attr->wait_set, &fab) : nullptr;
    auto e = std::make_unique<eq>(&fab, *attr, context, ws);
    if (ws) wait_set_attach(ws, &e->fid_.fid);
    fab.users_.add();
    *out = &e.release()->fid_;
    return 0;
  });
}

// ---------------------------------------------------------------- internal
bool is_eq(const fid* f) noexcept {
  return is_class(f, FI_CLASS_EQ) && f->ops == &eq_fi_ops;
}

ssize_t eq_post(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t) noexcept {
  if (!f || !is_eq(&f->fid) || (!buf && len)) return -FI_EINVAL;
  eq_event ev;
  ev.event = event;
  try {
    const auto* p = static_cast<const uint8_t*>(buf);
    if (len) ev.data.assign(p, p + len);
  } catch (...) {
    return -FI_ENOMEM;
  }
  ssize_t r = push(of(f), std::move(ev));
  return r ? r : static_cast<ssize_t>(len);
}

int eq_post_error(fid_eq* f, fid_t fid, void* context, uint64_t data, int err, int prov_errno,
                  const void* err_data, size_t err_data_size) noexcept {
  if (!f || !is_eq(&f->fid) || err <= 0 || (!err_data && err_data_size)) return -FI_EINVAL;
  eq_event ev;
  ev.is_err = true;
  ev.err.fid = fid;
  ev.err.context = context;
  ev.err.data = data;
  ev.err.err = err;
  ev.err.prov_errno = prov_errno;
  try {
    const auto* p = static_cast<const uint8_t*>(err_data);
    if (err_data_size) ev.err_data.assign(p, p + err_data_size);
  } catch (...) {
    return -FI_ENOMEM;
  }
  return static_cast<int>(push(of(f), std::move(ev)));
}

void eq_take(fid_eq* f) noexcept {
  of(f)->users_.add();
}
void eq_drop(fid_eq* f) noexcept {
  of(f)->users_.drop();
}

size_t eq_count(fid_eq* f) noexcept {
  eq* e = of(f);
  std::lock_guard<std::mutex> l(e->mtx);
  return e->q.size();
}

bool eq_has_events(fid_eq* f) noexcept {
  return eq_count(f) != 0;
}

bool eq_progress(fid_eq* f) noexcept {
  eq* e = of(f);
  e->progress.run();
  return !e->progress.empty();
}
waiter& eq_waiter(fid_eq* f) noexcept {
  return of(f)->w;
}
fabric* eq_fabric(fid_eq* f) noexcept {
  return of(f)->fab;
}

int eq_add_poller(fid_eq* f, void (*fn)(void*), void* arg) noexcept {
  if (!fn) return -FI_EINVAL;
  return guard([&]() -> int {
    of(f)->progress.add(fn, arg);
    return 0;
  });
}

int eq_del_poller(fid_eq* f, void (*fn)(void*), void* arg) noexcept {
  return of(f)->progress.remove(fn, arg) ? 0 : -FI_ENOENT;
}

size_t eq_forget(fid_eq* f, const fid* gone) noexcept {
  eq* e = of(f);
  std::lock_guard<std::mutex> l(e->mtx);
  size_t n = 0;
  for (auto it = e->q.begin(); it != e->q.end();) {
    const fid* about = nullptr;
    if (it->is_err) {
      about = it->err.fid;
    } else if (it->data.size() >= sizeof(fid_t)) {
      memcpy(&about, it->data.data(), sizeof about);  // fi_eq_entry and fi_eq_cm_entry start with fid
    }
    if (about != gone) {
      ++it;
      continue;
    }
    if (!it->is_err && it->event == FI_CONNREQ && it->data.size() >= sizeof(fi_eq_cm_entry)) {
      fi_info* info = nullptr;
      memcpy(&info, it->data.data() + offsetof(fi_eq_cm_entry, info), sizeof info);
      info_free(info);  // nobody will read it: its request goes with the listener
    }
    it = e->q.erase(it);
    ++n;
  }
  return n;
}

}  // namespace weft
