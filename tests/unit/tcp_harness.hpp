// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Test helpers for the tcp transport (tests/unit/test_tcp_*.cpp): an owner
// that records every callback and lands payloads in fresh buffers, frames
// with checkable payloads, a loop that drives pollers until a condition
// holds, and a raw client that speaks the handshake by hand (to send what a
// proper peer never would).
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/fi_errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "prov/tcp/tcp_auth.hpp"
#include "prov/tcp/tcp_conn.hpp"
#include "prov/tcp/tcp_peers.hpp"
#include "prov/tcp/tcp_progress.hpp"

namespace tcp_test {

using namespace weft::tcp;

struct test_owner final : conn_owner {
  bool auto_accept = true;
  bool reject_all = false;
  std::vector<uint8_t> accept_cm, reject_cm;
  peer_map* map = nullptr;  // RDM mode: connection requests and closes go through the map
  bool defer = false;       // answer rx_action::defer
  size_t deliver_cap = SIZE_MAX;

  struct frame {
    conn* c;
    frame_hdr h;
    std::vector<unsigned char> data;
  };
  std::vector<conn*> requests, connected;
  std::map<conn*, int> closed;
  int closes = 0;
  std::vector<frame> frames;
  int sent_ok = 0;
  std::vector<int> sent_err;
  std::vector<unsigned char> buf;
  iovec iov{};

  void on_connreq(conn& c) noexcept override {
    requests.push_back(&c);
    if (map)
      map->on_connreq(c);
    else if (reject_all)
      c.reject(reject_cm.data(), reject_cm.size());
    else if (auto_accept)
      c.accept(accept_cm.data(), accept_cm.size());
  }
  void on_connected(conn& c) noexcept override { connected.push_back(&c); }
  rx_target on_frame(conn&, const frame_hdr& h, const rma_desc*) noexcept override {
    if (defer) return {rx_action::defer};
    buf.assign(static_cast<size_t>(std::min<uint64_t>(h.length, deliver_cap)), 0);
    iov = {buf.data(), buf.size()};
    return {rx_action::deliver, &iov, 1};
  }
  void on_payload(conn& c, const frame_hdr& h, uint64_t landed) noexcept override {
    buf.resize(static_cast<size_t>(landed));
    frames.push_back({&c, h, std::move(buf)});
    buf.clear();
  }
  void on_sent(conn&, tx_entry&, int err) noexcept override {
    if (err)
      sent_err.push_back(err);
    else
      ++sent_ok;
  }
  void on_closed(conn& c, int err) noexcept override {
    closed[&c] = err;
    ++closes;
    if (map) map->on_closed(c, err);
  }
};

// A frame whose payload is a pattern derived from `seed`, split into `pieces` iovecs.
struct out_frame {
  tx_entry e;
  std::vector<unsigned char> data;
  explicit out_frame(size_t len, uint64_t seed, int pieces = 1, op o = op::msg, uint64_t tag = 0) {
    data.resize(len);
    std::mt19937_64 r(seed);
    for (auto& b : data) b = static_cast<unsigned char>(r());
    frame_hdr h{};
    h.op = static_cast<uint8_t>(o);
    h.length = h.aux = len;
    h.id = seed;
    h.tag = tag;
    iovec v[4];
    size_t at = 0;
    int n = 0;
    for (int i = 0; i < pieces; ++i) {
      const size_t k = i == pieces - 1 ? len - at : len / static_cast<size_t>(pieces);
      v[n++] = {data.data() + at, k};
      at += k;
    }
    EXPECT_EQ(e.prepare(h, nullptr, v, static_cast<size_t>(n)), 0);
  }
};

inline std::vector<unsigned char> pattern(size_t len, uint64_t seed) {
  std::vector<unsigned char> d(len);
  std::mt19937_64 r(seed);
  for (auto& b : d) b = static_cast<unsigned char>(r());
  return d;
}

// Drives the pollers until pred() holds or ms elapse; returns pred().
template <class P>
bool run_until(std::initializer_list<poller*> ps, P pred, int ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return pred();
    for (poller* p : ps) p->progress();
  }
  return true;
}

inline std::shared_ptr<conn_config> make_cfg(const char* key = "", wire_ep_type t = wire_ep_type::rdm) {
  auto c = std::make_shared<conn_config>();
  c->ep_type = t;
  c->auth_key.assign(key, key + strlen(key));
  c->limits.eager_max = 1 << 22;
  c->connect_timeout_ms = 3000;
  c->handshake_timeout_ms = 3000;
  c->verdict_timeout_ms = 3000;
  c->new_instance();
  return c;
}

inline sock_addr loopback(int family = AF_INET) {
  sock_addr a;
  EXPECT_EQ(sock_addr::parse(family == AF_INET ? "127.0.0.1" : "::1", 0, a), 0);
  return a;
}

// An endpoint for tests: a poller, a listener on loopback, an owner.
struct endpoint {
  std::shared_ptr<conn_config> cfg;
  poller p;
  test_owner owner;
  listener* l = nullptr;
  explicit endpoint(std::shared_ptr<conn_config> c, int family = AF_INET) : cfg(std::move(c)) {
    EXPECT_EQ(p.listen(owner, cfg, loopback(family), 0, &l), 0);  // backlog SOMAXCONN
    if (l) cfg->self = to_wire(l->addr(), cfg->self.instance);  // before any connection uses it
  }
  sock_addr addr() const { return l->addr(); }
};

// ------------------------------------------------------------ raw client
// Reads exactly n bytes from a non-blocking socket while driving `p`.
inline bool pump_read(int fd, poller& p, void* buf, size_t n, int ms = 3000) {
  auto* out = static_cast<unsigned char*>(buf);
  size_t got = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (got < n) {
    const ssize_t r = ::recv(fd, out + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return false;
    if (errno != EAGAIN) return false;
    if (std::chrono::steady_clock::now() > end) return false;
    p.progress();
  }
  return true;
}

// True when the peer closed the socket (EOF or reset) within ms, driving `p`.
inline bool pump_eof(int fd, poller& p, int ms = 3000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  unsigned char b[4096];
  for (;;) {
    const ssize_t r = ::recv(fd, b, sizeof b, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN)) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    p.progress();
  }
}

inline bool send_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  while (n) {
    const ssize_t r = ::send(fd, b, n, MSG_NOSIGNAL);
    if (r <= 0) {
      if (r < 0 && errno == EAGAIN) {
        pollfd pf{fd, POLLOUT, 0};
        ::poll(&pf, 1, 100);
        continue;
      }
      return false;
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Reads one handshake message (header, then body) into `m`'s raw bytes.
inline bool read_hs(int fd, poller& p, std::vector<unsigned char>& raw) {
  raw.resize(sizeof(hs_hdr));
  if (!pump_read(fd, p, raw.data(), raw.size())) return false;
  hs_hdr h;
  memcpy(&h, raw.data(), sizeof h);
  const uint32_t body = le(h.body_len);
  if (body > hs_msg_max) return false;
  raw.resize(sizeof h + body);
  return pump_read(fd, p, raw.data() + sizeof h, body);
}

struct raw_client {
  scoped_fd fd;
  std::vector<unsigned char> transcript;
  hs_hdr last{};  // the last handshake header read (host order)

  // Connects (a blocking socket: reads use MSG_DONTWAIT).
  bool connect(const sock_addr& to) {
    fd.reset(::socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    return fd && ::connect(fd.get(), to.sa(), to.len) == 0;
  }

  // The full handshake as a proper connector would do it. Returns the kind
  // of the acceptor's last message (accept, reject) or 0 on failure.
  int handshake(poller& p, const std::vector<uint8_t>& key, wire_ep_type t = wire_ep_type::rdm,
                uint16_t version = proto_version) {
    hs_hello b{};
    b.ep_type = static_cast<uint8_t>(t);
    b.src.family = static_cast<uint8_t>(wire_family::ipv4);
    b.src.addr[0] = 127;
    b.src.addr[3] = 1;
    b.src.port = 9;
    b.src.instance = 12345;
    random_bytes(b.nonce, sizeof b.nonce);
    transcript.resize(hs_msg_max);
    transcript.resize(
        hs_encode(hs_kind::hello, reject_reason::none, &b, nullptr, 0, transcript.data(), version));
    if (!send_all(fd.get(), transcript.data(), transcript.size())) return 0;
    std::vector<unsigned char> m;
    if (!read_hs(fd.get(), p, m)) return 0;
    memcpy(&last, m.data(), sizeof last);
    last.version = le(last.version);
    if (last.kind != static_cast<uint8_t>(hs_kind::challenge)) return last.kind;
    memset(m.data() + sizeof(hs_hdr) + offsetof(hs_challenge, proof), 0, proof_size);
    transcript.insert(transcript.end(), m.begin(), m.end());
    static constexpr char label[] = "weft-tcp connector";
    byte_span parts[2] = {{label, sizeof label - 1}, {transcript.data(), transcript.size()}};
    hs_proof pr;
    hmac_sha256(key.data(), key.size(), parts, 2, pr.proof);
    unsigned char out[hs_msg_max];
    const size_t n = hs_encode(hs_kind::proof, reject_reason::none, &pr, nullptr, 0, out);
    if (!send_all(fd.get(), out, n)) return 0;
    if (!read_hs(fd.get(), p, m)) return 0;
    memcpy(&last, m.data(), sizeof last);
    return last.kind;
  }
};

}  // namespace tcp_test
