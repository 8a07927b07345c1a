// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: the progress engine (see tcp_progress.hpp).
#include "prov/tcp/tcp_progress.hpp"

#include <rdma/fi_errno.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#include "common/object.hpp"

namespace weft::tcp {

namespace {
constexpr uint64_t listener_tag = 1;  // epoll data: pointer | 1 for a listener
constexpr int accept_batch = 64;      // accepts per listener per round
constexpr uint32_t epoll_events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
}  // namespace

uint64_t now_ns() noexcept {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

poller::poller(const poller_config& cfg) : cfg_(cfg) {
  if (cfg_.epoll_every == 0) cfg_.epoll_every = 1;
  if (cfg_.hot_idle_rounds == 0) cfg_.hot_idle_rounds = 1;
  const int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) fail(-fi_errno(errno), "epoll_create1");
  ep_.reset(fd);
}

poller::~poller() {
  while (all_) destroy(all_);
  while (dead_) {
    conn* c = dead_;
    dead_ = c->dead_next_;
    delete c;
  }
  while (listeners_) close_listener(listeners_);
}

// ------------------------------------------------------------ bookkeeping
int poller::watch(int fd, void* tag) noexcept {
  epoll_event ev{};
  ev.events = epoll_events;
  ev.data.ptr = tag;
  return epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev) ? fi_errno(errno) : 0;
}

void poller::add_conn(conn* c) noexcept {
  c->all_prev_ = nullptr;
  c->all_next_ = all_;
  if (all_) all_->all_prev_ = c;
  all_ = c;
  ++n_conns_;
}

void poller::make_hot(conn* c) noexcept {
  c->idle_rounds_ = 0;
  c->idle_since_ns_ = 0;
  if (c->hot_) return;
  c->hot_ = true;
  c->hot_next_ = nullptr;
  c->hot_prev_ = hot_tail_;
  if (hot_tail_)
    hot_tail_->hot_next_ = c;
  else
    hot_head_ = c;
  hot_tail_ = c;
  ++n_hot_;
}

void poller::unhot(conn* c) noexcept {
  if (!c->hot_) return;
  if (c->hot_prev_)
    c->hot_prev_->hot_next_ = c->hot_next_;
  else
    hot_head_ = c->hot_next_;
  if (c->hot_next_)
    c->hot_next_->hot_prev_ = c->hot_prev_;
  else
    hot_tail_ = c->hot_prev_;
  c->hot_ = false;
  c->hot_prev_ = c->hot_next_ = nullptr;
  --n_hot_;
}

void poller::deadline_set(conn* c, int ms) noexcept {
  if (!c->deadline_ns_) ++n_timed_;
  c->deadline_ns_ = now_ns() + static_cast<uint64_t>(ms > 0 ? ms : 0) * 1000000ull;
  if (!c->deadline_ns_) c->deadline_ns_ = 1;
  next_check_ns_ = 0;
}

void poller::deadline_clear(conn* c) noexcept {
  if (!c->deadline_ns_) return;
  c->deadline_ns_ = 0;
  --n_timed_;
}

void poller::destroy(conn* c) noexcept {
  unhot(c);
  deadline_clear(c);
  if (c->all_prev_)
    c->all_prev_->all_next_ = c->all_next_;
  else if (all_ == c)
    all_ = c->all_next_;
  if (c->all_next_) c->all_next_->all_prev_ = c->all_prev_;
  c->all_prev_ = c->all_next_ = nullptr;
  --n_conns_;
  delete c;
}

void poller::retire(conn* c) noexcept {
  if (in_progress_) {
    // The progress loop may hold it: free it when the round ends.
    c->dead_next_ = dead_;
    dead_ = c;
  } else {
    destroy(c);
  }
}

void poller::reap() noexcept {
  while (dead_) {
    conn* c = dead_;
    dead_ = c->dead_next_;
    destroy(c);
  }
}

// ------------------------------------------------------------ opening
int poller::connect(conn_owner& owner, std::shared_ptr<const conn_config> cfg, const sock_addr& to,
                    const void* cm, size_t cm_len, conn** out, const sock_addr* from,
                    scoped_fd* reserved) noexcept {
  if (!cfg || !out || cm_len > cm_data_max || (cm_len && !cm)) return -FI_EINVAL;
  if (cfg->auth_key.size() > auth_key_max || cfg->rx_stage < sizeof(frame_hdr)) return -FI_EINVAL;
  scoped_fd fd;
  if (int rc = sock_connect(to, fd, from, reserved)) return rc;
  sock_nodelay(fd.get());
  sock_bufsizes(fd.get(), cfg->sndbuf, cfg->rcvbuf);
  sock_liveness(fd.get(), cfg->user_timeout_ms, cfg->keepalive_s);
  const int raw = fd.get();
  conn* c = new (std::nothrow) conn(*this, std::move(cfg), &owner, true, std::move(fd));
  if (!c) return -FI_ENOMEM;
  add_conn(c);
  int rc = c->start_connector(cm, cm_len);
  if (!rc) rc = watch(raw, c);
  if (rc) {
    destroy(c);
    return rc;
  }
  c->peer_.addr = to;
  make_hot(c);
  *out = c;
  return 0;
}

int poller::listen(conn_owner& owner, std::shared_ptr<const conn_config> cfg, const sock_addr& addr,
                   int backlog, listener** out, scoped_fd* reserved) noexcept {
  if (!cfg || !out) return -FI_EINVAL;
  if (cfg->auth_key.size() > auth_key_max || cfg->rx_stage < sizeof(frame_hdr)) return -FI_EINVAL;
  listener* l = new (std::nothrow) listener;
  if (!l) return -FI_ENOMEM;
  l->stats_ = std::shared_ptr<listener_stats>(new (std::nothrow) listener_stats);
  int rc = l->stats_ ? sock_listen(addr, backlog, l->fd_, l->addr_, reserved) : -FI_ENOMEM;
  if (!rc) rc = watch(l->fd_.get(), reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(l) | listener_tag));
  if (rc) {
    delete l;
    return rc;
  }
  open_reserve(l->reserve_);  // best effort: without it, EMFILE only stops accepting for a round
  l->cfg_ = std::move(cfg);
  l->owner_ = &owner;
  l->next_ = listeners_;
  if (listeners_) listeners_->prev_ = l;
  listeners_ = l;
  *out = l;
  return 0;
}

void poller::close_listener(listener* l) noexcept {
  if (!l) return;
  if (l->prev_)
    l->prev_->next_ = l->next_;
  else
    listeners_ = l->next_;
  if (l->next_) l->next_->prev_ = l->prev_;
  delete l;  // closes the socket, which leaves the epoll set
}

int poller::accept_some(listener& l) noexcept {
  int work = 0;
  l.hot_ = false;
  for (int i = 0; i < accept_batch; ++i) {
    scoped_fd fd;
    sock_addr peer;
    const busy_reject& busy = busy_reject_msg();
    const int rc = sock_accept(l.fd_.get(), fd, &peer, &l.reserve_, busy.bytes, busy.len);
    if (rc == -FI_EAGAIN) return work;
    ++work;
    if (rc) {
      l.last_err_ = rc;
      ++l.stats_->refused;
      if (rc == -FI_EMFILE && !l.reserve_) {
        l.hot_ = true;  // the peer still waits in the backlog: try again next round
        return work;
      }
      continue;
    }
    if (l.stats_->pending >= l.cfg_->max_pending) {
      ++l.stats_->refused;  // too many handshakes at once: this one is refused unheard
      send_busy(fd.get());
      continue;
    }
    sock_nodelay(fd.get());
    sock_bufsizes(fd.get(), l.cfg_->sndbuf, l.cfg_->rcvbuf);
    sock_liveness(fd.get(), l.cfg_->user_timeout_ms, l.cfg_->keepalive_s);
    const int raw = fd.get();
    conn* c = new (std::nothrow) conn(*this, l.cfg_, l.owner_, false, std::move(fd));
    if (!c) {
      l.last_err_ = -FI_ENOMEM;
      ++l.stats_->refused;
      continue;
    }
    add_conn(c);
    if (c->start_acceptor() || watch(raw, c)) {
      destroy(c);
      ++l.stats_->refused;
      continue;
    }
    c->peer_.addr = peer;
    c->stats_ = l.stats_;
    ++l.stats_->pending;
    make_hot(c);
  }
  l.hot_ = true;  // more may wait, and the edge has been used up
  return work;
}

int poller::move_to(conn& c, poller& other) noexcept {
  if (&other == this) return 0;
  if (c.released_) return -FI_EINVAL;
  const bool open = static_cast<bool>(c.fd_);
  if (open) {
    if (int rc = other.watch(c.fd_.get(), &c)) return rc;
    epoll_ctl(ep_.get(), EPOLL_CTL_DEL, c.fd_.get(), nullptr);
  }
  const uint64_t deadline = c.deadline_ns_;
  unhot(&c);
  deadline_clear(&c);
  if (c.all_prev_)
    c.all_prev_->all_next_ = c.all_next_;
  else
    all_ = c.all_next_;
  if (c.all_next_) c.all_next_->all_prev_ = c.all_prev_;
  --n_conns_;
  c.poller_ = &other;
  other.add_conn(&c);
  if (deadline) {
    ++other.n_timed_;
    c.deadline_ns_ = deadline;
    other.next_check_ns_ = 0;
  }
  other.make_hot(&c);
  return 0;
}

// ------------------------------------------------------------ progress
int poller::poll_epoll(int timeout_ms) noexcept {
  epoll_event ev[64];
  const int n = epoll_wait(ep_.get(), ev, 64, timeout_ms);
  if (n <= 0) return 0;
  for (int i = 0; i < n; ++i) {
    const auto tag = reinterpret_cast<uintptr_t>(ev[i].data.ptr);
    if (tag & listener_tag) {
      reinterpret_cast<listener*>(tag & ~uintptr_t{listener_tag})->hot_ = true;
    } else {
      conn* c = static_cast<conn*>(ev[i].data.ptr);
      if (c->released_) continue;
      // A connection that is not read (rx deferred) still learns that its
      // peer is gone: a reset or an error ends it now.
      if (c->rx_blocked_ && (ev[i].events & (EPOLLHUP | EPOLLERR)) && c->state_ != conn_state::closed) {
        const int e = c->fd_ ? sock_error(c->fd_.get()) : 0;
        c->fail(e ? e : -FI_ECONNRESET, "the peer reset the connection");
      }
      make_hot(c);
    }
  }
  return n;
}

void poller::check_deadlines() noexcept {
  const uint64_t now = now_ns();
  uint64_t next = UINT64_MAX;
  for (conn* c = all_; c; c = c->all_next_) {
    if (!c->deadline_ns_) continue;
    if (now >= c->deadline_ns_) {
      c->on_deadline();  // no callbacks here: fail() leaves them to poll()
    } else if (c->deadline_ns_ < next) {
      next = c->deadline_ns_;
    }
  }
  // Look again at the nearest deadline, or in 10 ms when one was just set.
  next_check_ns_ = next == UINT64_MAX ? now + 10000000ull : next;
}

int poller::progress() noexcept {
  int work = 0;
  ++in_progress_;
  ++round_;
  if (watch_idle_) idle_watch_.reset();  // before epoll_wait: a wakeup after it fires the next watch
  if (n_hot_ == 0 || round_ % cfg_.epoll_every == 0) work += poll_epoll(0);
  bool listener_hot = false;
  for (listener* l = listeners_; l; l = l->next_)
    if (l->hot_) {
      work += accept_some(*l);
      listener_hot |= l->hot_;
    }
  for (conn* c = hot_head_; c;) {
    const int w = c->poll();
    work += w;
    conn* next = c->hot_next_;  // read after poll(): callbacks may have appended
    if (c->released_ || (c->state_ == conn_state::closed && c->close_reported_)) {
      unhot(c);
    } else if (w) {
      c->idle_rounds_ = 0;
      c->idle_since_ns_ = 0;
    } else if (++c->idle_rounds_ >= cfg_.hot_idle_rounds) [[unlikely]] {
      c->idle_rounds_ = 0;
      const uint64_t now = now_ns();
      if (!c->idle_since_ns_)
        c->idle_since_ns_ = now;
      else if (now - c->idle_since_ns_ >= uint64_t{cfg_.hot_idle_us} * 1000)
        unhot(c);  // its last read (and write) just returned EAGAIN: epoll sees the next edge
    }
    c = next;
  }
  if (n_timed_ && now_ns() >= next_check_ns_) check_deadlines();
  if (--in_progress_ == 0) {
    reap();
    // Nothing hot: what happens next raises an edge in the epoll set, and
    // the watch (one system call to arm, once per wakeup) sees it. Armed
    // on a set that is readable already, it fires at once.
    if (watch_idle_ && n_hot_ == 0 && !listener_hot && !idle_watch_.armed()) idle_watch_.arm(ep_.get());
  }
  return work;
}

int poller::trywait() noexcept {
  if (progress()) return -FI_EAGAIN;
  for (listener* l = listeners_; l; l = l->next_)
    if (l->hot_) return -FI_EAGAIN;
  // Edges raised while their sockets were hot are still in the ready
  // list: take them now, or a sleeper would wake at once for nothing.
  ++in_progress_;
  const int events = poll_epoll(0);
  --in_progress_;
  if (events) return -FI_EAGAIN;
  // Nothing moved in this round, so every hot connection's last read and
  // write returned EAGAIN: all of them may cool now.
  while (hot_head_) unhot(hot_head_);
  return 0;
}

int poller::next_timeout_ms() const noexcept {
  if (!n_timed_) return -1;
  uint64_t next = UINT64_MAX;
  for (conn* c = all_; c; c = c->all_next_)
    if (c->deadline_ns_ && c->deadline_ns_ < next) next = c->deadline_ns_;
  if (next == UINT64_MAX) return -1;
  const uint64_t now = now_ns();
  return next <= now ? 0 : static_cast<int>((next - now + 999999) / 1000000);
}

int poller::wait(int timeout_ms) noexcept {
  if (trywait()) return progress();
  int t = next_timeout_ms();
  if (t < 0 || (timeout_ms >= 0 && timeout_ms < t)) t = timeout_ms;
  ++in_progress_;
  poll_epoll(t);
  --in_progress_;
  return progress();
}

}  // namespace weft::tcp
