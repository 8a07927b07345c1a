// SPDX-License-Identifier: BSD-3-Clause
// prov/tcp: one connection (see tcp_conn.hpp).
#include "prov/tcp/tcp_conn.hpp"

#include <rdma/fi_errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "prov/tcp/tcp_auth.hpp"
#include "prov/tcp/tcp_progress.hpp"
#include "util/addr.hpp"
#include "util/peer_note.hpp"

namespace weft::tcp {

namespace {
constexpr char label_acceptor[] = "weft-tcp acceptor";
constexpr char label_connector[] = "weft-tcp connector";
// While a payload is read straight into its buffer, at most this much of
// what follows it lands in the staging buffer (the next header, a small
// payload): larger amounts would be copied twice.
constexpr size_t stage_tail = 512;

inline size_t min_sz(uint64_t a, size_t b) {
  return a < b ? static_cast<size_t>(a) : b;
}
}  // namespace

int conn_config::new_instance() noexcept {
  return random_bytes(&self.instance, sizeof self.instance);
}

int tx_entry::prepare(const frame_hdr& h, const rma_desc* descs, const iovec* payload,
                      size_t count) noexcept {
  if (h.iov_count > rma_iov_max_wire || count > tx_iov_max - 1 || (h.iov_count && !descs) ||
      (count && !payload)) [[unlikely]]
    return -FI_EINVAL;
  const frame_hdr w = swap_hdr(h);
  memcpy(prefix, &w, sizeof w);
  size_t plen = sizeof w;
  for (uint32_t i = 0; i < h.iov_count; ++i) {
    const rma_desc d = swap_desc(descs[i]);
    memcpy(prefix + plen, &d, sizeof d);
    plen += sizeof d;
  }
  iov[0] = {prefix, plen};
  uint32_t n = 1;
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!payload[i].iov_len) continue;
    iov[n++] = payload[i];
    total += payload[i].iov_len;
  }
  if (total != h.length) [[unlikely]]
    return -FI_EINVAL;
  iov_count = n;
  iov_pos = 0;
  left = plen + total;
  next = nullptr;
  return 0;
}

// What only the handshake needs; freed once the connection is established.
struct conn::handshake {
  hs_decoder dec;
  unsigned char out[2 * hs_msg_max];  // handshake bytes to write before any frame
  uint32_t out_len = 0, out_pos = 0;
  unsigned char transcript[2 * hs_msg_max];  // hello || challenge (proof zeroed)
  uint32_t t_len = 0;
  bool close_after_out = false;  // a reject is queued: close once it is written
};

conn::conn(poller& p, std::shared_ptr<const conn_config> cfg, conn_owner* owner, bool connector, scoped_fd fd)
    : poller_(&p),
      cfg_(std::move(cfg)),
      owner_(owner),
      fd_(std::move(fd)),
      state_(connector ? conn_state::wait_challenge : conn_state::wait_hello),
      connector_(connector),
      owner_knows_(connector),
      dec_(cfg_->limits) {}

const busy_reject& busy_reject_msg() noexcept {
  static const busy_reject m = [] {
    busy_reject r{};
    hs_verdict v{};
    r.len = hs_encode(hs_kind::reject, reject_reason::busy, &v, nullptr, 0, r.bytes);
    return r;
  }();
  return m;
}

void send_busy(int fd) noexcept {
  const busy_reject& m = busy_reject_msg();
  if (fd >= 0) (void)::send(fd, m.bytes, m.len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

conn::~conn() {
  // An acceptor closed before the hello was read (its endpoint closing):
  // the connector hears that it was refused.
  if (fd_ && !connector_ && state_ == conn_state::wait_hello) send_busy(fd_.get());
}

// ------------------------------------------------------------ states
void conn::set_state(conn_state s) noexcept {
  state_ = s;
  switch (s) {
    case conn_state::wait_challenge:
      poller_->deadline_set(this, cfg_->connect_timeout_ms);
      break;
    case conn_state::wait_hello:
      poller_->deadline_set(this, cfg_->handshake_timeout_ms);
      break;
    case conn_state::wait_owner:
      poller_->deadline_set(this, cfg_->verdict_timeout_ms);
      break;
    case conn_state::wait_verdict:
      // As long as the acceptor gives its owner, and its answer's way back.
      poller_->deadline_set(this, cfg_->verdict_timeout_ms + cfg_->handshake_timeout_ms);
      break;
    case conn_state::closing:
      poller_->deadline_set(this, cfg_->linger_ms);
      break;
    case conn_state::established:
    case conn_state::closed:
      poller_->deadline_clear(this);
      break;
    default:  // wait_proof: the deadline of the handshake's start still runs
      break;
  }
}

void conn::leave_pending() noexcept {
  if (stats_) {
    if (stats_->pending) --stats_->pending;
    stats_.reset();
  }
}

void conn::mark_hot() noexcept {
  poller_->make_hot(this);
}

void conn::fail(int err, const char* why) noexcept {
  if (state_ == conn_state::closed) return;
  err_ = err;
  why_ = why;
  unanswered_ = connector_ && state_ == conn_state::wait_challenge && rejected_ == reject_reason::none &&
                (err == -FI_ECONNREFUSED || err == -FI_ETIMEDOUT || err == -FI_EHOSTUNREACH ||
                 err == -FI_ENETUNREACH || err == -FI_EHOSTDOWN);
  set_state(conn_state::closed);
  leave_pending();
  fd_.reset();
  s_begin_ = s_end_ = 0;
  rx_blocked_ = false;
  mark_hot();  // poll() delivers on_sent errors and on_closed
}

void conn::on_deadline() noexcept {
  if (state_ != conn_state::closing) {
    fail(-FI_ETIMEDOUT, "timed out");
  } else if (hs_ && hs_->close_after_out) {
    fail(-FI_ECONNREFUSED, "rejected");
  } else {
    fail(0, "closed (linger expired)");
  }
}

void conn::report_close() noexcept {
  close_reported_ = true;
  const int e = err_ ? err_ : -FI_ESHUTDOWN;
  if (rejected_ == reject_reason::crossed && owner_knows_ && !released_) {
    // The owner moves what is queued to the connection that is kept.
    owner_->on_closed(*this, err_);
    if (released_) return;
    while (tx_head_) {
      tx_entry* t = tx_head_;
      tx_head_ = t->next;
      t->next = nullptr;
      if (!released_) owner_->on_sent(*this, *t, e);
    }
    tx_tail_ = nullptr;
    return;
  }
  while (tx_head_) {
    tx_entry* t = tx_head_;
    tx_head_ = t->next;
    t->next = nullptr;
    if (t == shut_entry_.get()) continue;
    if (owner_knows_ && !released_) owner_->on_sent(*this, *t, e);
  }
  tx_tail_ = nullptr;
  if (owner_knows_) {
    if (!released_) owner_->on_closed(*this, err_);
  } else {
    release();  // nobody else will: a connection that never passed the handshake
  }
}

// ------------------------------------------------------------ owner calls
int conn::accept(const void* cm, size_t len) noexcept {
  if (state_ != conn_state::wait_owner || !hs_) return -FI_EOPBADSTATE;
  if (len > cm_data_max || (len && !cm)) return -FI_EINVAL;
  hs_verdict v{};
  v.credit = cfg_->credit;
  hs_queue(hs_kind::accept, reject_reason::none, &v, cm, static_cast<uint16_t>(len));
  set_state(conn_state::established);
  connected_due_ = true;
  mark_hot();
  return 0;
}

int conn::reject(const void* cm, size_t len, reject_reason reason) noexcept {
  if (state_ != conn_state::wait_owner || !hs_) return -FI_EOPBADSTATE;
  if (len > cm_data_max || (len && !cm)) return -FI_EINVAL;
  if (reason != reject_reason::app && reason != reject_reason::crossed && reason != reject_reason::busy)
    return -FI_EINVAL;
  hs_verdict v{};
  hs_queue(hs_kind::reject, reason, &v, cm, static_cast<uint16_t>(len));
  hs_->close_after_out = true;
  rejected_ = reason;
  set_state(conn_state::closing);
  mark_hot();
  return 0;
}

void conn::enqueue(tx_entry& e) noexcept {
  e.next = nullptr;
  if (tx_tail_)
    tx_tail_->next = &e;
  else
    tx_head_ = &e;
  tx_tail_ = &e;
}

int conn::send(tx_entry& e) noexcept {
  if (state_ == conn_state::established && !tx_head_ && !hs_ && !tx_err_) [[likely]] {
    if (!e.left) [[unlikely]]
      return -FI_EINVAL;
    msghdr m{};
    m.msg_iov = e.iov;
    m.msg_iovlen = e.iov_count;
    const ssize_t n = ::sendmsg(fd_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (static_cast<uint64_t>(n) == e.left) [[likely]]
      return 1;
    if (n > 0) {
      // Partial: the rest goes out from progress.
      size_t done = static_cast<size_t>(n);
      e.left -= done;
      while (done) {
        iovec& v = e.iov[e.iov_pos];
        if (done >= v.iov_len) {
          done -= v.iov_len;
          ++e.iov_pos;
        } else {
          v.iov_base = static_cast<char*>(v.iov_base) + done;
          v.iov_len -= done;
          done = 0;
        }
      }
    } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
      tx_err_ = fi_errno(errno);
    }
    enqueue(e);
    mark_hot();
    return 0;
  }
  if (state_ == conn_state::closed || state_ == conn_state::closing) return err_ ? err_ : -FI_ESHUTDOWN;
  if (!e.left) return -FI_EINVAL;
  enqueue(e);
  mark_hot();
  return 0;
}

tx_entry* conn::take_unsent() noexcept {
  if (state_ == conn_state::established || state_ == conn_state::closing) return nullptr;
  tx_entry* h = tx_head_;
  tx_head_ = tx_tail_ = nullptr;
  return h;
}

void conn::resume_rx() noexcept {
  if (!rx_blocked_) return;
  rx_blocked_ = false;
  mark_hot();
}

int conn::shutdown() noexcept {
  if (state_ == conn_state::closed) return err_ ? err_ : -FI_ESHUTDOWN;
  if (state_ == conn_state::closing) return 0;
  if (state_ != conn_state::established) {
    fail(0, "shut down before the handshake ended");
    return 0;
  }
  if (!shut_entry_) {
    shut_entry_.reset(new (std::nothrow) tx_entry);
    if (!shut_entry_) return -FI_ENOMEM;
  }
  frame_hdr h{};
  h.op = static_cast<uint8_t>(op::shutdown);
  shut_entry_->prepare(h, nullptr, nullptr, 0);
  enqueue(*shut_entry_);
  set_state(conn_state::closing);
  mark_hot();
  return 0;
}

void conn::abort(int err) noexcept {
  if (state_ == conn_state::closed || released_) return;
  if (fd_) {
    // A reset, not a FIN: the peer learns at once that nothing more comes,
    // even if it is not reading.
    const linger l{1, 0};
    setsockopt(fd_.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  fail(err < 0 ? err : -FI_ECONNABORTED, "aborted by the owner");
}

void conn::release() noexcept {
  if (released_) return;
  released_ = true;
  if (state_ != conn_state::closed) {
    set_state(conn_state::closed);
    leave_pending();
    fd_.reset();
  }
  tx_head_ = tx_tail_ = nullptr;
  poller_->retire(this);
}

// ------------------------------------------------------------ handshake
int conn::start_connector(const void* cm, size_t len) noexcept {
  if (len > cm_data_max || (len && !cm)) return -FI_EINVAL;
  hs_.reset(new (std::nothrow) handshake);
  stage_.reset(new (std::nothrow) unsigned char[cfg_->rx_stage]);
  if (!hs_ || !stage_) return -FI_ENOMEM;
  hs_hello b{};
  b.ep_type = static_cast<uint8_t>(cfg_->ep_type);
  b.src = cfg_->self;
  b.credit = cfg_->credit;
  if (int rc = random_bytes(b.nonce, sizeof b.nonce)) return rc;
  const size_t n =
      hs_encode(hs_kind::hello, reject_reason::none, &b, cm, static_cast<uint16_t>(len), hs_->out);
  memcpy(hs_->transcript, hs_->out, n);
  hs_->t_len = static_cast<uint32_t>(n);
  hs_->out_len = static_cast<uint32_t>(n);
  set_state(conn_state::wait_challenge);
  return 0;
}

int conn::start_acceptor() noexcept {
  hs_.reset(new (std::nothrow) handshake);
  stage_.reset(new (std::nothrow) unsigned char[cfg_->rx_stage]);
  if (!hs_ || !stage_) return -FI_ENOMEM;
  set_state(conn_state::wait_hello);
  return 0;
}

void conn::hs_queue(hs_kind kind, reject_reason reason, const void* body, const void* cm,
                    uint16_t cm_len) noexcept {
  // out holds at most a challenge and an accept/reject at once (2 * hs_msg_max).
  if (hs_->out_pos == hs_->out_len) hs_->out_pos = hs_->out_len = 0;
  hs_->out_len += static_cast<uint32_t>(hs_encode(kind, reason, body, cm, cm_len, hs_->out + hs_->out_len));
}

void conn::compute_proof(bool acceptor, uint8_t out[proof_size]) const noexcept {
  const byte_span parts[2] = {{acceptor ? label_acceptor : label_connector,
                               acceptor ? sizeof label_acceptor - 1 : sizeof label_connector - 1},
                              {hs_->transcript, hs_->t_len}};
  hmac_sha256(cfg_->auth_key.data(), cfg_->auth_key.size(), parts, 2, out);
}

// Best effort: tell the peer why (one non-blocking write), then close.
void conn::refuse(reject_reason reason, int err, const char* why) noexcept {
  unsigned char msg[sizeof(hs_hdr) + sizeof(hs_verdict)];
  hs_verdict v{};
  const size_t n = hs_encode(hs_kind::reject, reason, &v, nullptr, 0, msg);
  if (fd_) (void)::send(fd_.get(), msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  fail(err, why);
}

// The peer's first bytes (acceptor) or its answer to our hello (connector)
// were not weft's handshake of our version. Named in the log once per peer
// and cause (an acceptor's peers by host: a foreign client reconnects from
// a new port each time); the connector's owner names it in error entries.
[[gnu::cold]] void conn::spoke_foreign(const foreign_peer& f) noexcept {
  foreign_ = f;
  if (stats_) ++stats_->foreign;
  const bool version = f.kind == foreign_kind::weft_version;
  try {
    sock_addr host = peer_.addr;
    if (!connector_) host.set_port(0);
    const std::string key = std::string(connector_ ? "tcp>" : "tcp<") + host.str() + "/" +
                            std::to_string(static_cast<int>(f.kind)) + "/" + std::to_string(f.version);
    peer_note_log("tcp", key, "tcp: " + foreign_text());
  } catch (...) {
    // No memory for the words: the error codes still say it.
  }
  if (version && state_ == conn_state::wait_hello)
    return refuse(reject_reason::version, err_version, "protocol version mismatch");
  fail(version ? err_version : err_foreign,
       version ? "protocol version mismatch" : "the peer does not speak weft's protocol");
}

std::string conn::foreign_text() const {
  char what[160];
  describe_foreign(foreign_, what, sizeof what);
  return peer_foreign_text(addr::to_string(FI_SOCKADDR, peer_.addr.sa(), peer_.addr.len), what,
                           foreign_.kind == foreign_kind::weft_version, proto_version);
}

int conn::foreign_note() noexcept {
  if (foreign_.kind == foreign_kind::none) [[likely]]
    return 0;
  if (!note_) {
    try {
      note_ = peer_note(foreign_text(), 0);
    } catch (...) {
      return 0;
    }
  }
  return note_;
}

void conn::hs_message() noexcept {
  const hs_msg& m = hs_->dec.msg();
  const auto kind = static_cast<hs_kind>(m.hdr.kind);
  switch (state_) {
    case conn_state::wait_challenge: {
      if (kind == hs_kind::reject) {
        rejected_ = static_cast<reject_reason>(m.hdr.reason);
        peer_.cm.assign(m.cm, m.cm + m.cm_len);
        fail(-FI_ECONNREFUSED, "rejected");
        return;
      }
      if (kind != hs_kind::challenge) return fail(err_malformed, "expected a challenge");
      const hs_challenge& c = m.body.challenge;
      if (c.ep_type != static_cast<uint8_t>(cfg_->ep_type))
        return fail(err_malformed, "endpoint type differs");
      const uint32_t at = hs_->t_len;
      const size_t raw = hs_->dec.raw_len();
      if (at + raw > sizeof hs_->transcript) return fail(err_malformed, "handshake too long");
      memcpy(hs_->transcript + at, hs_->dec.raw(), raw);
      memset(hs_->transcript + at + sizeof(hs_hdr) + offsetof(hs_challenge, proof), 0, proof_size);
      hs_->t_len += static_cast<uint32_t>(raw);
      uint8_t expect[proof_size];
      compute_proof(true, expect);
      if (!ct_equal(expect, c.proof, proof_size))
        return fail(-FI_EKEYREJECTED, "the acceptor's proof is wrong");
      peer_.id = c.src;
      hs_proof p;
      compute_proof(false, p.proof);
      hs_queue(hs_kind::proof, reject_reason::none, &p, nullptr, 0);
      set_state(conn_state::wait_verdict);
      mark_hot();
      return;
    }
    case conn_state::wait_verdict:
      if (kind == hs_kind::reject) {
        rejected_ = static_cast<reject_reason>(m.hdr.reason);
        peer_.cm.assign(m.cm, m.cm + m.cm_len);
        return fail(-FI_ECONNREFUSED, "rejected");
      }
      if (kind != hs_kind::accept) return fail(err_malformed, "expected accept or reject");
      peer_.cm.assign(m.cm, m.cm + m.cm_len);
      peer_.credit = m.body.verdict.credit;
      set_state(conn_state::established);
      mark_hot();
      owner_->on_connected(*this);
      return;
    case conn_state::wait_hello: {
      if (kind != hs_kind::hello) return fail(err_malformed, "expected a hello");
      const hs_hello& h = m.body.hello;
      if (h.ep_type != static_cast<uint8_t>(cfg_->ep_type))
        return refuse(reject_reason::ep_type, err_malformed, "endpoint type differs");
      const size_t raw = hs_->dec.raw_len();
      memcpy(hs_->transcript, hs_->dec.raw(), raw);
      hs_->t_len = static_cast<uint32_t>(raw);
      peer_.id = h.src;
      peer_.cm.assign(m.cm, m.cm + m.cm_len);
      peer_.credit = h.credit;
      hs_challenge c{};
      c.ep_type = static_cast<uint8_t>(cfg_->ep_type);
      c.src = cfg_->self;
      if (random_bytes(c.nonce, sizeof c.nonce)) return fail(-FI_EIO, "no random bytes");
      // The transcript holds the challenge with its proof zeroed; the proof
      // is computed over it and then patched into the bytes written out.
      if (hs_->out_pos == hs_->out_len) hs_->out_pos = hs_->out_len = 0;
      const uint32_t at = hs_->out_len;
      const size_t n = hs_encode(hs_kind::challenge, reject_reason::none, &c, nullptr, 0, hs_->out + at);
      memcpy(hs_->transcript + hs_->t_len, hs_->out + at, n);
      hs_->t_len += static_cast<uint32_t>(n);
      uint8_t proof[proof_size];
      compute_proof(true, proof);
      memcpy(hs_->out + at + sizeof(hs_hdr) + offsetof(hs_challenge, proof), proof, proof_size);
      hs_->out_len += static_cast<uint32_t>(n);
      state_ = conn_state::wait_proof;
      mark_hot();
      return;
    }
    case conn_state::wait_proof: {
      if (kind != hs_kind::proof) return fail(err_malformed, "expected a proof");
      uint8_t expect[proof_size];
      compute_proof(false, expect);
      if (!ct_equal(expect, m.body.proof.proof, proof_size))
        return refuse(reject_reason::auth, -FI_EKEYREJECTED, "the connector's proof is wrong");
      leave_pending();
      set_state(conn_state::wait_owner);
      sock_remote(fd_.get(), peer_.addr);
      owner_knows_ = true;
      owner_->on_connreq(*this);
      return;
    }
    default:
      return fail(err_malformed, "unexpected handshake message");
  }
}

void conn::process_handshake() noexcept {
  if (s_begin_ < s_end_) heard_ = true;
  while (s_begin_ < s_end_ && !released_ &&
         (state_ == conn_state::wait_challenge || state_ == conn_state::wait_verdict ||
          state_ == conn_state::wait_hello || state_ == conn_state::wait_proof)) {
    s_begin_ += static_cast<uint32_t>(hs_->dec.feed(stage_.get() + s_begin_, s_end_ - s_begin_));
    if (hs_->dec.failed()) {
      // Not weft's magic, or another version of it: a peer to name. The
      // decoder fails on those at the header, its first 16 bytes.
      const foreign_peer f = classify_foreign(hs_->dec.raw(), hs_->dec.raw_len());
      if (f.kind != foreign_kind::none) [[unlikely]]
        return spoke_foreign(f);
      return fail(hs_->dec.error(), hs_->dec.why());
    }
    if (!hs_->dec.ready()) return;
    hs_message();
    if (hs_ && state_ != conn_state::closed) hs_->dec.next();
  }
}

// ------------------------------------------------------------ receive
void conn::copy_payload(const unsigned char* p, size_t n) noexcept {
  dec_.take_payload(n);
  if (act_ != rx_action::deliver) return;
  while (n && rx_iov_pos_ < rx_iov_n_) {
    iovec& v = rx_iov_[rx_iov_pos_];
    const size_t k = n < v.iov_len ? n : v.iov_len;
    memcpy(v.iov_base, p, k);
    v.iov_base = static_cast<char*>(v.iov_base) + k;
    v.iov_len -= k;
    landed_ += k;
    p += k;
    n -= k;
    if (!v.iov_len) ++rx_iov_pos_;
  }
}

bool conn::start_frame() noexcept {
  const frame_hdr& h = dec_.hdr();
  if (h.op == static_cast<uint8_t>(op::shutdown)) [[unlikely]] {
    peer_shut_ = true;
    fail(0, "the peer shut down");
    return false;
  }
  const rx_target t = owner_->on_frame(*this, h, dec_.descs());
  if (released_ || state_ != conn_state::established) return false;
  if (t.action == rx_action::defer) {
    rx_blocked_ = true;
    return false;
  }
  in_frame_ = true;
  act_ = t.action;
  landed_ = 0;
  rx_iov_pos_ = 0;
  rx_iov_n_ = 0;
  if (act_ == rx_action::deliver && t.iov) {
    const size_t n = t.iov_count < rx_iov_max ? t.iov_count : rx_iov_max;
    for (size_t i = 0; i < n; ++i)
      if (t.iov[i].iov_len) rx_iov_[rx_iov_n_++] = t.iov[i];
  }
  return true;
}

void conn::finish_frame() noexcept {
  const frame_hdr h = dec_.hdr();
  in_frame_ = false;
  // After a large payload the next one is likely large too: read its
  // header with a short read, so that little of its payload is copied
  // through the stage (the rest goes straight into its buffer).
  small_read_ = h.length >= cfg_->rx_stage / 2;
  dec_.next();
  owner_->on_payload(*this, h, landed_);
}

void conn::process_frames() noexcept {
  while (state_ == conn_state::established && !released_ && !rx_blocked_) {
    if (!in_frame_) {
      if (!dec_.ready()) {
        if (s_begin_ == s_end_) return;
        s_begin_ += static_cast<uint32_t>(dec_.feed(stage_.get() + s_begin_, s_end_ - s_begin_));
        if (dec_.failed()) [[unlikely]]
          return fail(err_malformed, dec_.why());
        if (!dec_.ready()) return;
      }
      if (!start_frame()) return;
    }
    const uint64_t left = dec_.payload_left();
    if (left && s_begin_ < s_end_) {
      const size_t k = min_sz(left, s_end_ - s_begin_);
      copy_payload(stage_.get() + s_begin_, k);
      s_begin_ += static_cast<uint32_t>(k);
    }
    if (dec_.payload_left()) return;  // the rest comes with the next read
    finish_frame();
  }
}

void conn::process() noexcept {
  if (state_ != conn_state::established && state_ != conn_state::wait_owner && state_ != conn_state::closing)
    process_handshake();
  if (state_ == conn_state::wait_owner && s_begin_ < s_end_)
    return fail(err_malformed, "data before the connection was accepted");
  if (state_ == conn_state::established) process_frames();
  if (state_ == conn_state::closing) s_begin_ = s_end_;  // after our shutdown or reject: not read
}

int conn::read_some() noexcept {
  s_begin_ = s_end_ = 0;
  const size_t cap = cfg_->rx_stage;
  ssize_t n;
  if (in_frame_ && act_ == rx_action::deliver && rx_iov_pos_ < rx_iov_n_ && dec_.payload_left()) {
    // Straight into the posted buffer, and a little of what follows into the stage.
    iovec v[rx_iov_max + 1];
    const uint64_t want = dec_.payload_left();
    uint64_t dest = 0;
    int nv = 0;
    for (uint32_t i = rx_iov_pos_; i < rx_iov_n_ && dest < want; ++i) {
      v[nv] = rx_iov_[i];
      if (v[nv].iov_len > want - dest) v[nv].iov_len = static_cast<size_t>(want - dest);
      dest += v[nv].iov_len;
      ++nv;
    }
    v[nv++] = {stage_.get(), dest == want ? (cap < stage_tail ? cap : stage_tail) : cap};
    n = ::readv(fd_.get(), v, nv);
    if (n > 0) {
      size_t k = min_sz(dest, static_cast<size_t>(n));
      dec_.take_payload(k);
      landed_ += k;
      while (k) {
        iovec& r = rx_iov_[rx_iov_pos_];
        const size_t t = k < r.iov_len ? k : r.iov_len;
        r.iov_base = static_cast<char*>(r.iov_base) + t;
        r.iov_len -= t;
        k -= t;
        if (!r.iov_len) ++rx_iov_pos_;
      }
      s_end_ = static_cast<uint32_t>(static_cast<size_t>(n) - min_sz(dest, static_cast<size_t>(n)));
    }
  } else {
    n = ::recv(fd_.get(), stage_.get(), small_read_ && cap > stage_tail ? stage_tail : cap, MSG_DONTWAIT);
    if (n > 0) s_end_ = static_cast<uint32_t>(n);
  }
  if (n > 0) [[likely]]
    return static_cast<int>(n > INT32_MAX ? INT32_MAX : n);
  if (hello_unanswered() && (n == 0 || errno == ECONNRESET)) [[unlikely]] {
    // Closed on our hello with no answer at all: no weft acceptor does
    // that (it answers, if only reject{busy} when it cannot take us), and
    // libfabric's tcp provider does (it reads its own header's 32 bytes,
    // finds another version and closes).
    foreign_peer f;
    f.kind = foreign_kind::closed;
    spoke_foreign(f);
    return -1;
  }
  if (n == 0) {
    if (state_ == conn_state::closing && (shut_sent_ || (hs_ && hs_->close_after_out)))
      fail(hs_ && hs_->close_after_out ? -FI_ECONNREFUSED : 0, "closed");
    else
      fail(-FI_ECONNRESET, in_frame_ || dec_.ready() ? "the peer closed the connection mid-frame"
                                                     : "the peer closed the connection");
    return -1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  fail(fi_errno(errno), "read failed");
  return -1;
}

int conn::poll_rx() noexcept {
  if (rx_blocked_ || state_ == conn_state::closed || released_) return 0;
  int work = 0;
  if (s_begin_ < s_end_ || (!in_frame_ && dec_.ready())) {
    process();
    work = 1;
    if (s_begin_ < s_end_ || rx_blocked_ || state_ == conn_state::closed || released_) return work;
  }
  const int r = read_some();
  if (r == 0) return work;
  if (r > 0) process();
  return 1;
}

// ------------------------------------------------------------ send
int conn::poll_tx() noexcept {
  int work = 0;
  if (hs_ && hs_->out_pos < hs_->out_len) {
    const ssize_t n =
        ::send(fd_.get(), hs_->out + hs_->out_pos, hs_->out_len - hs_->out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      fail(fi_errno(errno), state_ == conn_state::wait_challenge ? "connect failed" : "write failed");
      return 1;
    }
    hs_->out_pos += static_cast<uint32_t>(n);
    work = 1;
    if (hs_->out_pos < hs_->out_len) return work;
    hs_->out_pos = hs_->out_len = 0;
    // The hello is out: TCP connected, the acceptor's process has it to answer.
    if (state_ == conn_state::wait_challenge) {
      hello_sent_ = true;
      poller_->deadline_set(this, cfg_->handshake_timeout_ms);
    }
    if (hs_->close_after_out) {
      // Our reject is out: let the connector read it before the socket goes.
      ::shutdown(fd_.get(), SHUT_WR);
      return work;
    }
  }
  if (state_ != conn_state::established && state_ != conn_state::closing) return work;
  if (!tx_head_) return work;

  constexpr int batch = 64;
  iovec v[batch];
  int nv = 0;
  for (tx_entry* e = tx_head_; e && nv < batch; e = e->next)
    for (uint32_t i = e->iov_pos; i < e->iov_count && nv < batch; ++i) v[nv++] = e->iov[i];
  msghdr m{};
  m.msg_iov = v;
  m.msg_iovlen = static_cast<size_t>(nv);
  const ssize_t n = ::sendmsg(fd_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return work;
    fail(fi_errno(errno), "write failed");
    return 1;
  }
  // Advance the queue; entries written whole are completed after it is
  // consistent again (their callbacks may queue more).
  tx_entry* done = nullptr;
  tx_entry** done_tail = &done;
  size_t left = static_cast<size_t>(n);
  while (left && tx_head_) {
    tx_entry* e = tx_head_;
    if (left >= e->left) {
      left -= static_cast<size_t>(e->left);
      e->left = 0;
      tx_head_ = e->next;
      if (!tx_head_) tx_tail_ = nullptr;
      e->next = nullptr;
      *done_tail = e;
      done_tail = &e->next;
      continue;
    }
    e->left -= left;
    while (left) {
      iovec& x = e->iov[e->iov_pos];
      if (left >= x.iov_len) {
        left -= x.iov_len;
        ++e->iov_pos;
      } else {
        x.iov_base = static_cast<char*>(x.iov_base) + left;
        x.iov_len -= left;
        left = 0;
      }
    }
  }
  while (done) {
    tx_entry* e = done;
    done = e->next;
    e->next = nullptr;
    if (e == shut_entry_.get()) {
      shut_sent_ = true;
      ::shutdown(fd_.get(), SHUT_WR);
      continue;
    }
    if (!released_) owner_->on_sent(*this, *e, 0);
  }
  return 1;
}

// ------------------------------------------------------------ one round
int conn::poll() noexcept {
  if (released_) return 0;
  int work = 0;
  if (connected_due_ && state_ == conn_state::established) {
    connected_due_ = false;
    owner_->on_connected(*this);
    work = 1;
  }
  if (tx_err_ && state_ != conn_state::closed) fail(tx_err_, "write failed");
  if (state_ != conn_state::closed && !released_) {
    if (tx_head_ || (hs_ && hs_->out_pos < hs_->out_len)) work += poll_tx();
    if (state_ != conn_state::closed && !released_) work += poll_rx();
  }
  if (released_) return work;
  if (connected_due_ && state_ == conn_state::established) {
    connected_due_ = false;
    owner_->on_connected(*this);
    work = 1;
  }
  if (state_ == conn_state::closed && !close_reported_) {
    report_close();
    return work + 1;
  }
  if (hs_ && state_ == conn_state::established && hs_->out_pos == hs_->out_len) hs_.reset();
  return work;
}

}  // namespace weft::tcp
