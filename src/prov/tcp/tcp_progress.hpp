// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp: the progress engine of a set of connections and listeners.
//
// Busy polling without a poll/epoll call per message: every socket is in
// one epoll set, edge-triggered, but a connection that moved data recently
// is "hot" and is simply read (recv on a non-blocking socket) and written
// on every progress() round. epoll_wait(0) runs only every `epoll_every`
// rounds (and on every round when nothing is hot), to find sockets that
// woke up. A hot connection that did nothing for `hot_idle_us` cools down
// (the clock is read once per `hot_idle_rounds` idle rounds, never per
// message: a count of rounds alone cooled connections within one round
// trip on a loaded machine, where rounds are fast and peers slow); it only
// cools right after its read (and write, if it had something queued)
// returned EAGAIN, which is what makes edge-triggered epoll safe: any later
// arrival is an edge, so epoll reports it.
//
// Sleeping: fd() is the epoll descriptor (the FD wait object). trywait()
// says whether it is safe to sleep on it: only when nothing is hot (a hot
// socket may hold data that already raised its edge). next_timeout_ms()
// bounds the sleep by the nearest handshake or connect deadline.
//
// Not thread-safe: one thread at a time (the owner's lock).
#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/ready_watch.hpp"
#include "prov/tcp/tcp_conn.hpp"
#include "prov/tcp/tcp_sock.hpp"

namespace weft::tcp {

struct poller_config {
  uint32_t epoll_every = 16;       // rounds between epoll_wait(0) calls while something is hot
  uint32_t hot_idle_rounds = 256;  // idle rounds between looks at the clock
  uint32_t hot_idle_us = 1000;     // a hot connection idle this long cools
};

struct listener_stats {
  uint32_t pending = 0;  // accepted connections still in the handshake
  uint64_t refused = 0;  // connections closed at once: too many pending, or no descriptors
  uint64_t foreign = 0;  // peers that did not speak weft's protocol (or another version of it)
};

class listener {
public:
  const sock_addr& addr() const noexcept { return addr_; }  // the bound address (ephemeral port filled in)
  int fd() const noexcept { return fd_.get(); }
  const listener_stats& stats() const noexcept { return *stats_; }
  int last_error() const noexcept { return last_err_; }  // the last accept error (e.g. -FI_EMFILE)

private:
  friend class poller;
  listener() = default;
  scoped_fd fd_;
  scoped_fd reserve_;
  sock_addr addr_;
  std::shared_ptr<const conn_config> cfg_;
  std::shared_ptr<listener_stats> stats_;
  conn_owner* owner_ = nullptr;
  int last_err_ = 0;
  bool hot_ = false;  // accept again next round (stopped before EAGAIN)
  listener* prev_ = nullptr;
  listener* next_ = nullptr;
};

class poller {
public:
  explicit poller(const poller_config& cfg = {});  // throws weft::error
  ~poller();  // closes and frees every connection and listener, without callbacks
  poller(const poller&) = delete;
  poller& operator=(const poller&) = delete;

  int fd() const noexcept { return ep_.get(); }

  // Opens a connection to `to`; the handshake runs in progress(). Frames
  // may be sent at once: they wait in the queue for the handshake. cm data
  // (at most cm_data_max bytes) travels in the hello. 0 or -FI_E*. The
  // connection leaves from `from` when given, or from the socket `reserved`
  // holds (sock_bind; taken).
  int connect(conn_owner& owner, std::shared_ptr<const conn_config> cfg, const sock_addr& to, const void* cm,
              size_t cm_len, conn** out, const sock_addr* from = nullptr,
              scoped_fd* reserved = nullptr) noexcept;

  // Listens on `addr` (port 0: an ephemeral port, see listener::addr()),
  // or on the socket `reserved` holds (sock_bind; taken). Connections it
  // accepts get `owner` (on_connreq) and `cfg`.
  int listen(conn_owner& owner, std::shared_ptr<const conn_config> cfg, const sock_addr& addr, int backlog,
             listener** out, scoped_fd* reserved = nullptr) noexcept;
  void close_listener(listener* l) noexcept;

  // Moves a connection to another poller (e.g. from a passive endpoint's to
  // the endpoint fi_accept names). Not from inside one of its callbacks.
  int move_to(conn& c, poller& other) noexcept;

  // One round: reads and writes the hot connections, now and then asks
  // epoll which others woke, delivers callbacks, enforces deadlines.
  // Returns how many things happened (0: nothing).
  int progress() noexcept;
  // 0 when it is safe to sleep on fd(); -FI_EAGAIN when progress() has work.
  int trywait() noexcept;
  // trywait(), then epoll_wait on fd() for at most timeout_ms (bounded by
  // the nearest deadline), then progress(). For tests and simple owners.
  int wait(int timeout_ms) noexcept;
  // Milliseconds to the nearest deadline, -1 if there is none.
  int next_timeout_ms() const noexcept;

  size_t conn_count() const noexcept { return n_conns_; }
  size_t hot_count() const noexcept { return n_hot_; }

  // For an owner that runs rounds only now and then while nothing is hot
  // (the linked provider's tcp part, which the shm part's rounds keep
  // busy): once asked to, every round that leaves nothing hot arms a
  // ready_watch on the epoll set, and woke() says by one load whether a
  // socket woke since (a round takes the watch's completion). watching():
  // the watch is armed; never where io_uring is not available, and then the
  // owner polls by the clock as before.
  void watch_when_idle() noexcept { watch_idle_ = true; }
  bool watching() const noexcept { return idle_watch_.armed(); }
  bool woke() const noexcept { return idle_watch_.fired(); }
  const ready_watch& idle_watch() const noexcept { return idle_watch_; }
  // The count hot_count() returns, where it lives: an owner between rounds
  // reads it to learn that something went hot (make_hot).
  const size_t* hot_word() const noexcept { return &n_hot_; }

private:
  friend class conn;
  void add_conn(conn* c) noexcept;
  int watch(int fd, void* tag) noexcept;
  void make_hot(conn* c) noexcept;
  void unhot(conn* c) noexcept;
  void destroy(conn* c) noexcept;
  void retire(conn* c) noexcept;
  int poll_epoll(int timeout_ms) noexcept;
  int accept_some(listener& l) noexcept;
  void check_deadlines() noexcept;
  void deadline_set(conn* c, int ms) noexcept;
  void deadline_clear(conn* c) noexcept;
  void reap() noexcept;

  poller_config cfg_;
  scoped_fd ep_;
  uint64_t round_ = 0;
  int in_progress_ = 0;
  conn* all_ = nullptr;
  conn* hot_head_ = nullptr;
  conn* hot_tail_ = nullptr;
  size_t n_conns_ = 0;
  size_t n_hot_ = 0;
  size_t n_timed_ = 0;
  uint64_t next_check_ns_ = 0;
  listener* listeners_ = nullptr;
  conn* dead_ = nullptr;  // released during progress: freed at its end
  bool watch_idle_ = false;
  ready_watch idle_watch_;  // armed on ep_ after a round that left nothing hot (watch_when_idle)
};

// Monotonic clock in nanoseconds.
uint64_t now_ns() noexcept;

}  // namespace weft::tcp
