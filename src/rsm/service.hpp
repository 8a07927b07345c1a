// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The service thread's private state (see service.cpp).
#include <deque>
#include <thread>

#include "proto.hpp"
#include "rsm.hpp"

namespace weft::rsm {

// Every buffer handed to the service endpoint starts with its context.
struct svc_op {
  fi_context2 ctx;  // providers may use it (FI_CONTEXT/FI_CONTEXT2)
  enum kind_t : int { rx, tx } op;
};

struct outmsg {
  svc_op op{{}, svc_op::tx};
  uint64_t instance = 0;  // the peer it goes to (looked up again before posting)
  std::vector<uint8_t> bytes;
};

struct rxbuf {
  svc_op op{{}, svc_op::rx};
  uint8_t data[proto::max_msg];
};

// A socket the service thread reads a small request from before a deadline.
struct sock_client {
  int fd = -1;
  uint64_t deadline_ms = 0;
  std::vector<uint8_t> buf;
};

struct service {
  std::thread thr;
  std::atomic<bool> stop{false};
  int wake_fd = -1;  // eventfd: new work from other threads
  std::mutex q_mtx;
  std::deque<std::unique_ptr<outmsg>> queue;  // messages other threads asked to send
  // The rest belongs to the service thread.
  std::deque<std::unique_ptr<outmsg>> backlog;  // refused by the provider (-FI_EAGAIN) for now
  std::vector<std::unique_ptr<rxbuf>> rx;
  std::unordered_map<outmsg*, std::unique_ptr<outmsg>> inflight;
  int dir_fd = -1;  // directory listener, while this process holds it
  uint64_t dir_retry_ms = 0;
  std::vector<sock_client> dir_clients;
  int map_fd = -1;  // mapping socket listener
  std::string map_path;
  std::vector<sock_client> map_clients;
  uint64_t last_busy_ns = 0;
  uint64_t last_timer_ms = 0;
  std::atomic<int> published{0};  // segments this controller has published (directory duty)
};

}  // namespace weft::rsm
