// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp: hosts on a network. Private declarations of the provider's
// upper half — the endpoints, built on util's endpoint core — over the
// transport of tcp_conn / tcp_peers / tcp_progress (docs/tcp-protocol.md).
//
//  * RDM: one connection per peer (tcp_peers.hpp), opened on first send;
//    FI_SOURCE from the sender's identity, looked up in the AV.
//  * MSG: one connection, made by fi_connect or by fi_accept of a request a
//    passive endpoint raised (tcp_cm.cpp); CM events go to the bound EQ.
//  * Messages up to 64 KiB go eager while the receiver's credit lasts,
//    larger ones by rendezvous (announce, clear-to-send, data); payloads
//    leave from the user's buffers and land in posted buffers.
//  * RMA and atomics are validated by the target against its registrations
//    before any byte moves, and always answered (ack, read data, result).
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "prov/tcp/tcp_conn.hpp"
#include "prov/tcp/tcp_peers.hpp"
#include "prov/tcp/tcp_progress.hpp"
#include "util/absent_peers.hpp"
#include "util/atomic_ops.hpp"
#include "util/domain.hpp"
#include "util/ep.hpp"
#include "util/request.hpp"

namespace weft {
struct atomic_call;  // util/ep_ops.hpp
}

namespace weft::tcp {

inline constexpr size_t iov_max = 4;                      // iov_limit, rma_iov_limit
inline constexpr size_t inject_max = 4096;                // fi_inject copies up to this
inline constexpr uint64_t eager_max = uint64_t{64} << 10;  // larger messages: rendezvous
inline constexpr uint64_t credit_window = uint64_t{4} << 20;  // eager bytes a peer may have in flight to us
inline constexpr size_t atomic_max_bytes = 4096;          // operand bytes of one atomic (per array)
// Before a connection is up its credit is unknown: small messages go eager
// up to this many bytes in all (every weft peer grants credit_window).
inline constexpr uint64_t early_eager_max = 4096;
inline constexpr uint64_t early_eager_window = uint64_t{64} << 10;
static_assert(iov_max == recv_iov_max);

struct ep;
struct link;

// Where a frame we send belongs (tx_entry first: on_sent gives the entry).
enum class out_kind : uint8_t { request, data, response };
struct frame_out {
  tx_entry tx;
  out_kind kind = out_kind::request;
  void* owner = nullptr;
};

enum class req_kind : uint8_t { send, write, read, atomic };

// An operation of ours under way.
struct request {
  uint64_t id = 0;  // request_pool's: travels in frames and comes back in answers
  req_kind kind = req_kind::send;
  void* context = nullptr;
  uint64_t cq_flags = 0;
  uint64_t op_flags = 0;
  size_t len = 0;
  iovec iov[iov_max] = {};  // what a send/write carries, where read data / atomic results land
  size_t iov_count = 0;
  conn* c = nullptr;       // the connection it went on, once known
  bool written = false;    // the frame(s) left
  bool answered = false;   // the ack / response came (or none is expected)
  bool rndv = false;       // a rendezvous send: data frame after the receiver's cts
  int err = 0;
  frame_out out;   // the frame
  frame_out data;  // rendezvous: the data frame
  unsigned char inline_buf[inject_max];  // an injected payload, copied

  // What alloc() resets (the buffers are not cleared: a send overwrites them).
  void recycle() noexcept {
    kind = req_kind::send;
    context = nullptr;
    cq_flags = op_flags = 0;
    len = 0;
    iov_count = 0;
    c = nullptr;
    written = answered = rndv = false;
    err = 0;
  }
};

// An answer or control frame we send (ack, cts, read data, atomic result,
// credit): lives until written.
struct response {
  uint64_t id = 0;
  frame_out out;
  link* lk = nullptr;
  bool credit = false;  // a credit grant (the link waits for it to leave)
  // Atomics: the operands land here, then the result leaves from here.
  unsigned char operands[2 * atomic_max_bytes];
  unsigned char result[atomic_max_bytes];

  void recycle() noexcept {
    lk = nullptr;
    credit = false;
  }
};

// A receive matched to a rendezvous announcement: the data frames land in it.
struct rndv_recv {
  posted_recv recv;
  landing l;
  uint64_t n = 0;     // bytes that land (cts)
  uint64_t size = 0;  // the message's size
  uint64_t got = 0;
  uint64_t cq_flags = 0;
  uint64_t tag = 0, data = 0;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  uint64_t sender_id = 0;
  uint64_t link_serial = 0;
};

// What the frame being received does with its payload.
enum class rx_kind : uint8_t { none, expected, unexpected, rndv_data, write, read_resp, atomic, atomic_resp, skip };

// The endpoint's state for one connection (conn::user).
struct link {
  conn* c = nullptr;
  uint64_t serial = 0;                // names the connection in unexpected entries
  fi_addr_t src = FI_ADDR_NOTAVAIL;  // the peer's AV entry (FI_SOURCE), once found
  uint32_t src_state = 0;            // that entry's av::entry_state when found
  int64_t credit = 0;                 // eager bytes we may still send it (known once connected)
  uint64_t early = 0;                 // eager bytes sent before we knew its credit
  bool credit_known = false;
  uint64_t owed = 0;                  // eager bytes consumed here, not yet granted back
  bool granting = false;              // a credit frame is on its way
  // The frame being received.
  rx_kind kind = rx_kind::none;
  posted_recv recv;
  landing l{};
  uint64_t cq_flags = 0;
  fi_addr_t msg_src = FI_ADDR_NOTAVAIL;
  int status = 0;
  request* req = nullptr;
  response* resp = nullptr;
  rndv_recv* rr = nullptr;
  std::vector<unsigned char> buf;  // an unexpected eager message, arriving
  unexpected* ux = nullptr;        // its entry in the unexpected queue (until a receive adopts it)
  bool adopted = false;            // a receive took it over while it arrived
  rma_desc desc{};                 // an atomic's target
  iovec iov[rx_iov_max];
  size_t iov_count = 0;
};

// ------------------------------------------------------------------ domain
struct tcp_domain final : prov_domain {
  explicit tcp_domain(domain& d) : dom(d) {}
  int endpoint(fi_info* info, fid_ep** ep, void* context) override;
  int stx_ctx(fi_tx_attr* attr, fid_stx** stx, void* context) override;
  int srx_ctx(fi_rx_attr* attr, fid_ep** rx, void* context) override;
  int query_atomic(fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) override;
  domain& dom;
};

// ------------------------------------------------------------------ endpoint
// The endpoint's answers to its connections. A member, not a base: a base
// with virtual functions would sit at offset 0, where the fid_ep must be.
struct ep_owner final : conn_owner {
  ep* e = nullptr;
  void on_connreq(conn& c) noexcept override;
  void on_connected(conn& c) noexcept override;
  rx_target on_frame(conn& c, const frame_hdr& h, const rma_desc* descs) noexcept override;
  void on_payload(conn& c, const frame_hdr& h, uint64_t landed) noexcept override;
  void on_sent(conn& c, tx_entry& e, int err) noexcept override;
  void on_closed(conn& c, int err) noexcept override;
};

struct ep final : endpoint {
  fi_ep_type type = FI_EP_RDM;
  std::shared_ptr<conn_config> cfg;
  std::unique_ptr<poller> poll;     // destroyed after peers (declared before)
  std::unique_ptr<peer_map> peers;  // RDM
  listener* listen = nullptr;       // RDM: where peers reach us
  sock_addr name;                   // our address (fi_getname)
  bool named = false;               // name set (src_addr, fi_setname, a passive endpoint's, or bound)
  scoped_fd reserved;               // MSG: a passive endpoint's bound socket, taken over; connects from it
  // MSG: the one connection, and the request it came from (fi_accept).
  conn* msg_conn = nullptr;
  conn* pending_accept = nullptr;
  bool connected = false;
  bool shut = false;
  std::vector<unsigned char> auth_key;

  request_pool<request> requests;
  request_pool<response> responses;
  // Responses queued behind a full socket: while there are any, our CQs
  // hold their entries back (ep_owing, util/cq.hpp says why).
  uint32_t responses_queued = 0;
  std::unordered_map<uint64_t, link*> links;  // by serial
  uint64_t next_serial = 1;
  std::list<rndv_recv> rndv_recvs;
  std::vector<uint64_t> deferred;  // links (serials) whose reading waits for room
  uint32_t polls = 0;
  ep_owner owner;
  // Wakes an application asleep on a wait object's fd at the next deadline
  // (fi_trywait arms it); -1 when no wait object has an fd.
  int timer = -1;
  bool timer_armed = false;

  static ep& of(endpoint& e) noexcept { return static_cast<ep&>(e); }
};

std::unique_ptr<ep> make_ep(domain& dom, const fi_info* info, void* context);
void install_ops(endpoint& e) noexcept;  // tcp_msg.cpp
void progress(ep& e) noexcept;           // tcp_ep.cpp
void expire_parked(ep& e) noexcept;      // tcp_ep.cpp: fail frames whose peer never answered

// tcp_ep.cpp: connections and frames.
link* link_of(ep& e, conn& c) noexcept;  // creates the link on first use (nullptr: no memory)
// Where a frame to `dest` goes: RDM: its address (-FI_EINVAL when the AV
// does not hold it) and the connection when there is one; MSG: the
// connection (-FI_ENOTCONN before it is up).
struct route {
  sock_addr to;
  conn* c = nullptr;
};
int route_to(ep& e, fi_addr_t dest, route& rt) noexcept;
// Sends a frame along a route (RDM: opening the connection on first use);
// rt.c is the connection afterwards when known. Returns conn::send's result.
int send_on(ep& e, route& rt, tx_entry& tx) noexcept;
// Both, for frames that need no look at the connection first.
int send_frame(ep& e, fi_addr_t dest, tx_entry& tx, conn** used) noexcept;
// A response frame: header, descriptors none, payload iov. Sent on lk's
// connection; freed when written.
int respond(ep& e, link& lk, const frame_hdr& h, const iovec* payload, size_t count, response* r = nullptr) noexcept;
response* new_response(ep& e) noexcept;
int ack(ep& e, link& lk, uint64_t id, int status) noexcept;
void give_credit(ep& e, link& lk, uint64_t bytes) noexcept;
request* new_request(ep& e, req_kind kind, void* context, uint64_t cq_flags, uint64_t op_flags, size_t len) noexcept;
// The request ended (written and answered, or failed): completes it; a
// failure's error entry carries prov_errno (0: -err).
void finish(ep& e, request* r, int prov_errno = 0) noexcept;
// It failed: an error entry whose prov_errno is `prov_errno` (0: -err;
// conn::foreign_note() names a peer that does not speak weft's protocol).
void fail_request(ep& e, request* r, int err, int prov_errno = 0) noexcept;
fi_addr_t source_of(ep& e, link& lk) noexcept;
inline bool ops_outstanding(const ep& e) noexcept {
  return !e.requests.empty();
}

// tcp_msg.cpp: the message frames' receive side.
rx_target msg_frame(ep& e, link& lk, const frame_hdr& h) noexcept;
void msg_payload(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept;
rx_target rndv_data_frame(ep& e, link& lk, const frame_hdr& h) noexcept;
void rndv_data_payload(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept;
void cts_frame(ep& e, link& lk, const frame_hdr& h) noexcept;
extern const rx_transport rx_answers;
// Drops what waits for a connection that ended (unexpected announcements,
// rendezvous receives).
void forget_link(ep& e, link& lk, int err) noexcept;

// tcp_rma.cpp
ssize_t rma(ep& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
            const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx, uint64_t flags) noexcept;
ssize_t atomic(ep& e, const atomic_call& call) noexcept;
size_t atomic_max_count(atomic_form form, fi_datatype dt) noexcept;
rx_target write_frame(ep& e, link& lk, const frame_hdr& h, const rma_desc* d) noexcept;
void write_payload(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept;
void read_req_frame(ep& e, link& lk, const frame_hdr& h, const rma_desc* d) noexcept;
rx_target read_resp_frame(ep& e, link& lk, const frame_hdr& h) noexcept;
void read_resp_payload(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept;
rx_target atomic_frame(ep& e, link& lk, const frame_hdr& h, const rma_desc* d) noexcept;
void atomic_payload_done(ep& e, link& lk, const frame_hdr& h, uint64_t landed) noexcept;
rx_target atomic_resp_frame(ep& e, link& lk, const frame_hdr& h) noexcept;
void ack_frame(ep& e, link& lk, const frame_hdr& h) noexcept;

// tcp_cm.cpp: passive endpoints and the MSG endpoint's connection management.
int passive_ep_open(fabric& fab, fi_info* info, fid_pep** out, void* context);
extern fi_ops_cm msg_cm_ops;
extern fi_ops_cm rdm_cm_ops;
// An fi_info's handle from FI_CONNREQ: the connection it names, moved to
// `to` and given to `owner`, or nullptr (not a request, or already answered).
conn* take_connreq(fid_t handle, poller& to, conn_owner& owner) noexcept;
// fi_endpoint(3): an active endpoint made with a passive endpoint as the
// info's handle takes over its address: the name it has (named false: none
// yet) and the socket fi_setname reserved (moved to `reserved`). The
// passive endpoint stops listening and can no longer listen or be named.
// 0, or -FI_EINVAL (not one of tcp's passive endpoints, or taken already).
int take_pep(fid_t handle, sock_addr& name, bool& named, scoped_fd& reserved) noexcept;
void cm_connected(ep& e, conn& c) noexcept;
void cm_closed(ep& e, conn& c, int err) noexcept;

// tcp_init.cpp: addresses, and the parameters every connection takes.
void apply_params(conn_config& cfg);
// (interfaces, default_src, same_host: tcp_sock.hpp)

}  // namespace weft::tcp
