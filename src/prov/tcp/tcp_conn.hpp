// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp: one TCP connection between two endpoints: the handshake state
// machine, the send queue and the receive state machine. docs/tcp-protocol.md
// ("implementation") describes how an endpoint plugs in.
//
// * Send: the owner hands in tx_entry objects it owns (embedded in its
//   requests, from its pools: no allocation here). An entry is a frame
//   prefix (header + descriptors, in the entry) and iovecs pointing straight
//   at the user's buffers; entries are written with sendmsg, several per
//   call when queued, partial writes resumed where they stopped. Nothing is
//   copied.
// * Receive: the connection reads into a small staging buffer, decodes one
//   header, then asks its owner where the payload goes: an iovec list (a
//   posted buffer: the rest of the payload is read straight into it with
//   readv), discard, or defer ("not now": this socket is not read again
//   until the owner calls resume_rx(); TCP's own flow control then stops
//   the sender, and nothing is dropped).
// * Callbacks come only from poller::progress(), never from inside a call
//   the owner makes, so an owner never re-enters itself. A connection the
//   owner has seen ends with exactly one on_closed(); after release() there
//   are no more callbacks at all.
//
// Not thread-safe: the owner serialises access to a poller and its
// connections (the endpoint's lock, per the threading level).
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prov/tcp/tcp_frame.hpp"
#include "prov/tcp/tcp_proto.hpp"
#include "prov/tcp/tcp_sock.hpp"

namespace weft::tcp {

class conn;
class poller;
struct listener_stats;

// Everything a connection needs to know about its own side. Shared by all
// connections of an endpoint (and its listener); immutable once in use.
struct conn_config {
  wire_ep_type ep_type = wire_ep_type::rdm;
  wire_addr self{};               // our identity: listening address and instance
  std::vector<uint8_t> auth_key;  // shared secret (may be empty; at most auth_key_max)
  frame_limits limits;            // what we accept from the peer
  uint64_t credit = 0;            // eager bytes we grant the peer at the handshake
  // The handshake's bounds. Each step after the TCP connect waits for the
  // other process to run its progress, or (the verdict of a MSG connection)
  // for its application to call fi_accept: a healthy process on a loaded
  // machine may take tens of seconds. A dead peer is found sooner by TCP
  // (its exit resets the connection; a dead host: user_timeout_ms and
  // keepalive), so these only end a hung or hostile peer.
  int connect_timeout_ms = 10000;    // connector: TCP connect, until the hello is written
  int handshake_timeout_ms = 60000;  // connector: then until the challenge; acceptor: until the proof
  int verdict_timeout_ms = 60000;    // acceptor: the owner's accept()/reject() (MSG: the application);
                                     // connector, after its proof: this + handshake_timeout_ms
  int linger_ms = 1000;              // after our shutdown frame: wait this long for the peer's close
  uint32_t rx_stage = 16384;         // staging buffer per connection (bytes)
  uint32_t max_pending = 256;        // listener: connections still in the handshake
  int sndbuf = 0, rcvbuf = 0;        // SO_SNDBUF / SO_RCVBUF when non-zero (tests)
  int user_timeout_ms = 0;           // TCP_USER_TIMEOUT: unacknowledged data fails the connection
  int keepalive_s = 0;               // keepalive idle time: a vanished idle peer is noticed

  // Fills self.instance with a random number. 0 or -FI_E*.
  int new_instance() noexcept;
  // The longest a healthy peer's connection takes to reach its acceptor's
  // owner (on_connreq): the TCP connect, then the handshake's steps.
  uint64_t handshake_bound_ns() const noexcept {
    return (static_cast<uint64_t>(connect_timeout_ms) + static_cast<uint64_t>(handshake_timeout_ms)) *
           1000000ull;
  }
};

// One frame to send. The owner embeds it in its request; it must stay put
// until on_sent() (or until send() returned 1, or the connection was
// released).
inline constexpr size_t tx_iov_max = 16;

struct tx_entry {
  tx_entry* next = nullptr;
  uint64_t left = 0;  // bytes not yet written
  uint32_t iov_count = 0;
  uint32_t iov_pos = 0;  // first iovec not completely written
  iovec iov[tx_iov_max];
  alignas(8) unsigned char prefix[frame_prefix_max];

  // Header (host order) and its descriptors go into `prefix` in wire order,
  // iov[0] points at it, the payload pieces follow. -FI_EINVAL when the
  // header has more descriptors than the wire allows, there are more than
  // tx_iov_max - 1 pieces, or their bytes differ from h.length.
  int prepare(const frame_hdr& h, const rma_desc* descs, const iovec* payload, size_t count) noexcept;
};

enum class rx_action : uint8_t { deliver, discard, defer };

// The owner's answer to a frame header.
struct rx_target {
  rx_action action = rx_action::discard;
  const iovec* iov = nullptr;  // deliver: where the payload lands (copied; at most rx_iov_max pieces).
  size_t iov_count = 0;        // Room for fewer bytes than the payload: the rest is discarded.
};
inline constexpr size_t rx_iov_max = 16;

// What an endpoint implements to own connections. All callbacks are
// noexcept and come from poller::progress().
class conn_owner {
public:
  // Acceptor: a connector proved it holds the auth_key. The owner answers
  // with c.accept() or c.reject(), now or later (MSG: when the application
  // calls fi_accept/fi_reject); until then the connection waits, at most
  // conn_config::verdict_timeout_ms. c.peer() tells who it is.
  virtual void on_connreq(conn& c) noexcept = 0;
  // Both sides: the connection carries frames now.
  virtual void on_connected(conn& c) noexcept = 0;
  // A frame header arrived (control frames the connection handles itself,
  // shutdown, never show). Descriptors are validated against the limits.
  virtual rx_target on_frame(conn& c, const frame_hdr& h, const rma_desc* descs) noexcept = 0;
  // The frame's payload is complete: `landed` bytes went to the target's
  // iovecs (fewer than h.length when they had less room or it was discarded).
  virtual void on_payload(conn& c, const frame_hdr& h, uint64_t landed) noexcept = 0;
  // A queued entry was written (err 0) or will never be (err < 0).
  virtual void on_sent(conn& c, tx_entry& e, int err) noexcept = 0;
  // The connection ended: 0 after an orderly shutdown (either side), else
  // the error (-FI_ECONNREFUSED with c.rejected() telling why; when that is
  // reject_reason::crossed the queued entries are NOT returned: the owner
  // takes them with take_unsent() here and sends them on the connection that
  // is kept (tcp_peers.hpp does); any left after on_closed are failed,
  // -FI_ECONNRESET, -FI_ETIMEDOUT, -FI_EKEYREJECTED, err_version,
  // err_foreign, err_malformed, ...). Queued entries were returned with on_sent before.
  virtual void on_closed(conn& c, int err) noexcept = 0;

protected:
  ~conn_owner() = default;
};

// Who the peer is, from its handshake messages (verified by the proofs).
struct peer_info {
  wire_addr id{};           // its identity (listening address + instance)
  sock_addr addr;           // the socket's remote address
  std::vector<uint8_t> cm;  // cm data of its hello (acceptor) or accept/reject (connector)
  uint64_t credit = 0;      // eager bytes it granted us
};

// reject{busy}, the bytes a listener (or an acceptor closing before it
// read a hello) sends a connection it will not take: a weft connector then
// reads "refused", never a close it would take for a peer that does not
// speak weft's protocol (conn::foreign()).
struct busy_reject {
  unsigned char bytes[sizeof(hs_hdr) + sizeof(hs_verdict)];
  size_t len;
};
const busy_reject& busy_reject_msg() noexcept;
// One non-blocking write of it: best effort.
void send_busy(int fd) noexcept;

enum class conn_state : uint8_t {
  wait_challenge,  // connector: TCP connect and hello under way, then the challenge awaited
  wait_verdict,    // connector: proof sent
  wait_hello,      // acceptor
  wait_proof,      // acceptor: challenge sent
  wait_owner,      // acceptor: on_connreq delivered, waiting for accept()/reject()
  established,
  closing,  // a shutdown frame (or a reject) is queued; closes once written
  closed,
};

class conn {
public:
  ~conn();
  conn(const conn&) = delete;
  conn& operator=(const conn&) = delete;

  conn_state state() const noexcept { return state_; }
  bool is_connector() const noexcept { return connector_; }
  bool established() const noexcept { return state_ == conn_state::established; }
  const peer_info& peer() const noexcept { return peer_; }
  reject_reason rejected() const noexcept { return rejected_; }
  int error() const noexcept { return err_; }
  const char* why() const noexcept { return why_; }  // what went wrong, for logs and tests
  // A connector that failed before the acceptor's first handshake message
  // because nobody answered at that address (refused, timed out, unreachable).
  bool unanswered() const noexcept { return unanswered_; }
  // A peer that does not speak weft's protocol (or speaks another version
  // of it), recognised at first contact: the connection failed with
  // err_foreign (err_version), and the log named the peer (once per peer
  // and cause, util/peer_note.hpp). kind none for every other connection.
  //   acceptor: its first bytes were not weft's hello;
  //   connector: its answer was not weft's, or it closed the connection on
  //   our hello before answering anything (foreign_kind::closed; a weft
  //   acceptor always answers, if only to refuse).
  const foreign_peer& foreign() const noexcept { return foreign_; }
  // The sentence that names it ("the peer at ... does not speak weft's
  // protocol (...): is it running another libfabric?"). Throws bad_alloc.
  std::string foreign_text() const;
  // The prov_errno for the error entries of its operations: a code whose
  // text fi_cq_strerror / fi_eq_strerror give (util/peer_note.hpp); 0 when
  // the peer is not foreign. Filed on the first call (cold).
  int foreign_note() noexcept;
  int fd() const noexcept { return fd_.get(); }
  conn_owner* owner() const noexcept { return owner_; }
  void set_owner(conn_owner* o) noexcept { owner_ = o; }
  const conn_config& config() const noexcept { return *cfg_; }

  void* user = nullptr;  // the owner's slot

  // Acceptor in wait_owner: accept with cm data (at most cm_data_max
  // bytes), or reject (the connector reads FI_ECONNREFUSED, the reason
  // and the data). 0, -FI_EINVAL (too much data, a reason other than app,
  // crossed or busy), -FI_EOPBADSTATE.
  int accept(const void* cm, size_t len) noexcept;
  int reject(const void* cm, size_t len, reject_reason reason = reject_reason::app) noexcept;

  // Queues or writes a frame. 1: written whole at once (no on_sent will
  // come); 0: queued (on_sent later; frames sent before the handshake
  // ended wait for it); < 0: refused and not queued (-FI_ESHUTDOWN or the
  // connection's error once it is closing or closed, -FI_EINVAL for an
  // empty entry).
  int send(tx_entry& e) noexcept;
  bool tx_idle() const noexcept { return !tx_head_; }

  // Entries queued but never written, in order, detached from this
  // connection (only before it is established: a connection that lost a
  // simultaneous connect hands its queue to the one kept).
  tx_entry* take_unsent() noexcept;

  // After rx_action::defer: ask again about the same frame, soon.
  void resume_rx() noexcept;
  bool rx_deferred() const noexcept { return rx_blocked_; }

  // Orderly close: a shutdown frame after everything queued, then the
  // socket is closed once the peer closed too (or after linger_ms);
  // on_closed(0) follows. Frames sent later are refused.
  int shutdown() noexcept;

  // Closes the connection with an error (-FI_E*): on_sent(err) for what is
  // queued and on_closed(err) follow from progress. E.g. a peer replaced
  // by a restarted one, or an address removed from the AV. The socket is
  // reset (not closed with a FIN), so the peer learns it even while it
  // does not read. A connection whose reading is deferred ends the same
  // way when its peer resets; a peer's orderly close (FIN) shows only when
  // reading resumes, after the frames that came before it.
  void abort(int err) noexcept;

  // The owner is done: closes the socket if open, drops queued entries
  // without callbacks, and frees the object at a safe point. No callback
  // comes after this.
  void release() noexcept;

private:
  friend class poller;
  struct handshake;
  conn(poller& p, std::shared_ptr<const conn_config> cfg, conn_owner* owner, bool connector, scoped_fd fd);

  // Called by the poller.
  int poll() noexcept;  // one round of work; callbacks from here
  void fail(int err, const char* why) noexcept;
  void on_deadline() noexcept;

  int start_connector(const void* cm, size_t len) noexcept;
  int start_acceptor() noexcept;
  int poll_tx() noexcept;
  int poll_rx() noexcept;
  int read_some() noexcept;
  void process() noexcept;
  void process_handshake() noexcept;
  void process_frames() noexcept;
  bool start_frame() noexcept;
  void copy_payload(const unsigned char* p, size_t n) noexcept;
  void finish_frame() noexcept;
  void hs_message() noexcept;
  void hs_queue(hs_kind kind, reject_reason reason, const void* body, const void* cm,
                uint16_t cm_len) noexcept;
  void refuse(reject_reason reason, int err, const char* why) noexcept;
  void spoke_foreign(const foreign_peer& f) noexcept;
  bool hello_unanswered() const noexcept {
    return connector_ && state_ == conn_state::wait_challenge && hello_sent_ && !heard_;
  }
  void compute_proof(bool acceptor, uint8_t out[proof_size]) const noexcept;
  void set_state(conn_state s) noexcept;
  void enqueue(tx_entry& e) noexcept;
  void mark_hot() noexcept;
  void report_close() noexcept;
  void leave_pending() noexcept;

  poller* poller_;
  std::shared_ptr<const conn_config> cfg_;
  std::shared_ptr<listener_stats> stats_;  // the listener that accepted us (pending count)
  conn_owner* owner_;
  scoped_fd fd_;
  conn_state state_;
  bool connector_;
  bool owner_knows_ = false;    // on_connreq/on_connected delivered: on_closed is owed
  bool connected_due_ = false;  // on_connected to deliver
  bool connreq_due_ = false;    // on_connreq to deliver
  bool close_reported_ = false;
  bool released_ = false;
  bool rx_blocked_ = false;
  bool in_frame_ = false;
  bool shut_sent_ = false;   // our shutdown frame is written
  bool peer_shut_ = false;   // the peer's shutdown frame arrived
  bool small_read_ = false;  // the last frame was large: read the next header with little after it
  bool unanswered_ = false;  // see unanswered()
  bool hello_sent_ = false;  // connector: our hello is written whole
  bool heard_ = false;       // a byte of the handshake came from the peer
  foreign_peer foreign_;
  int note_ = 0;             // foreign_note(), once filed
  rx_action act_ = rx_action::discard;
  reject_reason rejected_ = reject_reason::none;
  int err_ = 0;
  int tx_err_ = 0;  // a write failed in send(); reported from poll()
  const char* why_ = nullptr;
  peer_info peer_;

  // receive
  std::unique_ptr<unsigned char[]> stage_;
  uint32_t s_begin_ = 0, s_end_ = 0;
  frame_decoder dec_;
  iovec rx_iov_[rx_iov_max];
  uint32_t rx_iov_n_ = 0, rx_iov_pos_ = 0;
  uint64_t landed_ = 0;

  // send
  tx_entry* tx_head_ = nullptr;
  tx_entry* tx_tail_ = nullptr;
  std::unique_ptr<tx_entry> shut_entry_;
  std::unique_ptr<handshake> hs_;

  // poller bookkeeping
  conn* hot_prev_ = nullptr;
  conn* hot_next_ = nullptr;
  bool hot_ = false;
  uint32_t idle_rounds_ = 0;
  uint64_t idle_since_ns_ = 0;  // when the clock first saw it idle (0: busy)
  conn* all_prev_ = nullptr;
  conn* all_next_ = nullptr;
  conn* dead_next_ = nullptr;
  uint64_t deadline_ns_ = 0;  // 0: none
};

}  // namespace weft::tcp
