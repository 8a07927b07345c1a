// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp: decoding and encoding the wire format of tcp_proto.hpp.
//
// The decoders are pure (no I/O, no allocation, no global state): they are
// fed whatever chunks a socket produced, in any split, and either produce a
// validated header or fail with the one error code `err_malformed`, after
// which the connection is closed. A value is checked before anything is
// indexed or sized by it: the opcode before it selects a rule, counts
// before descriptors are read, lengths against the receiver's limits,
// reserved fields and bits against zero. The fuzz target
// (tests/fuzz/tcp_frame_fuzz.cpp) and the corpus replay test drive them.
#include <rdma/fi_errno.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "prov/tcp/tcp_proto.hpp"

namespace weft::tcp {

// What a malformed frame or handshake message is reported as.
inline constexpr int err_malformed = -FI_EREMOTEIO;
// The peer speaks another protocol version.
inline constexpr int err_version = -FI_ENOPROTOOPT;
// The peer does not speak weft's protocol at all (another libfabric, most
// likely): see classify_foreign. EPROTO, "Protocol error" (fi_errno.h
// leaves FI_EPROTO commented out; an error entry may carry any errno).
inline constexpr int err_foreign = -EPROTO;

// What a receiver accepts. The provider derives them from its attributes;
// tests and the fuzzer use small ones.
struct frame_limits {
  uint64_t msg_max = uint64_t{1} << 32;      // largest message (an rndv announcement)
  uint64_t eager_max = uint64_t{64} << 10;   // largest eager payload
  uint64_t rma_max = uint64_t{1} << 32;      // bytes one RMA operation covers
  uint64_t atomic_max = uint64_t{64} << 10;  // operand bytes of one atomic (per operand array)
  uint64_t credit_max = uint64_t{1} << 32;   // one credit grant
  uint8_t rma_iov_max = 4;                   // descriptors per frame, <= rma_iov_max_wire
};

// ------------------------------------------------------------ byte order
frame_hdr swap_hdr(const frame_hdr& h) noexcept;  // host <-> wire (its own inverse)
rma_desc swap_desc(const rma_desc& d) noexcept;
wire_addr swap_addr(const wire_addr& a) noexcept;

// Checks a host-order header against the limits: 0 or err_malformed, with
// a short reason in *why (for logs). Descriptors are checked by
// frame_check_descs once they have arrived.
int frame_check(const frame_hdr& h, const frame_limits& lim, const char** why = nullptr) noexcept;
// Checks the descriptors of a header that passed frame_check.
int frame_check_descs(const frame_hdr& h, const rma_desc* d, const frame_limits& lim,
                      const char** why = nullptr) noexcept;

// Bytes of payload an atomic request of `total` operand bytes carries.
uint64_t atomic_payload(const frame_hdr& h, uint64_t total) noexcept;

// ------------------------------------------------------------ frame decoder
// Incremental: feed() takes bytes up to the end of one frame's header and
// descriptors and stops there, so that the caller can move the payload
// itself (straight into a posted buffer). Then ready() is true; the caller
// takes payload_left() bytes (take_payload) and calls next().
class frame_decoder {
public:
  explicit frame_decoder(const frame_limits& lim = {}) noexcept;

  // Consumes bytes of the current header/descriptors from [p, p + n);
  // returns how many. Stops early when a frame is ready or decoding failed.
  size_t feed(const void* p, size_t n) noexcept;

  bool ready() const noexcept { return state_ == state::payload; }
  bool failed() const noexcept { return state_ == state::failed; }
  int error() const noexcept { return failed() ? err_malformed : 0; }
  const char* why() const noexcept { return why_; }

  // The ready frame, host order.
  const frame_hdr& hdr() const noexcept { return hdr_; }
  const rma_desc* descs() const noexcept { return descs_; }
  uint64_t payload_left() const noexcept { return left_; }

  // The caller moved n <= payload_left() payload bytes.
  void take_payload(uint64_t n) noexcept { left_ -= n < left_ ? n : left_; }
  // Done with the ready frame (its payload all taken): decode the next one.
  void next() noexcept;

  // Forget everything (a new connection).
  void reset() noexcept;
  const frame_limits& limits() const noexcept { return lim_; }

private:
  enum class state : uint8_t { header, descs, payload, failed };
  void fail(const char* why) noexcept;

  frame_limits lim_;
  state state_ = state::header;
  uint32_t have_ = 0;  // bytes of the current header/descriptors gathered in buf_
  uint32_t need_ = 0;  // bytes wanted in this state
  uint64_t left_ = 0;  // payload bytes of the ready frame not yet taken
  const char* why_ = nullptr;
  frame_hdr hdr_{};
  rma_desc descs_[rma_iov_max_wire]{};
  alignas(8) unsigned char buf_[frame_prefix_max];
};

// ------------------------------------------------------------ handshake
// A whole handshake message, host order: the header, the fixed body of its
// kind and its cm data.
struct hs_msg {
  hs_hdr hdr;
  union {
    hs_hello hello;
    hs_challenge challenge;
    hs_proof proof;
    hs_verdict verdict;
  } body;
  uint16_t cm_len;
  unsigned char cm[cm_data_max];
};

// Fixed body size of a kind (0 for an unknown kind).
size_t hs_body_size(hs_kind k) noexcept;

// Checks a host-order header: 0, err_version (magic right, another
// version: the body is not read), or err_malformed.
int hs_check_hdr(const hs_hdr& h, const char** why = nullptr) noexcept;
// Checks a whole message whose header passed hs_check_hdr: 0 or err_malformed.
int hs_check_msg(const hs_msg& m, const char** why = nullptr) noexcept;

// Incremental, like frame_decoder: feed() stops at the end of one message.
class hs_decoder {
public:
  size_t feed(const void* p, size_t n) noexcept;
  bool ready() const noexcept { return state_ == state::done; }
  bool failed() const noexcept { return state_ == state::failed; }
  int error() const noexcept { return error_; }
  const char* why() const noexcept { return why_; }
  const hs_msg& msg() const noexcept { return msg_; }
  // The raw bytes of the ready message as they came (for the transcript).
  const unsigned char* raw() const noexcept { return buf_; }
  size_t raw_len() const noexcept { return have_; }
  void next() noexcept;

private:
  enum class state : uint8_t { header, body, done, failed };
  void fail(int err, const char* why) noexcept;

  state state_ = state::header;
  uint32_t have_ = 0;
  uint32_t need_ = sizeof(hs_hdr);
  int error_ = 0;
  const char* why_ = nullptr;
  hs_msg msg_{};
  alignas(8) unsigned char buf_[hs_msg_max];
};

// ------------------------------------------------------------ peers that speak something else
// What a peer said at first contact instead of weft's handshake, for the
// message that names it (docs/tcp-protocol.md, "A peer that speaks another
// protocol"). Decided from the first 16 bytes, the header hs_decoder read.
enum class foreign_kind : uint8_t {
  none,           // weft's handshake (or too little to tell)
  weft_version,   // weft's magic, another protocol version: `version`
  libfabric_tcp,  // libfabric's tcp provider (xnet/tcpx): an ofi_ctrl_hdr, `version` its cm version,
                  // `type` 0 connection request, 1 response, 6 rejection
  other,          // anything else: its first bytes in `head`
  closed,         // set by the connector: the connection ended on our hello, before any answer
};
struct foreign_peer {
  foreign_kind kind = foreign_kind::none;
  uint8_t type = 0;
  uint16_t version = 0;
  uint8_t head_len = 0;
  unsigned char head[8] = {};
};
// Classifies the bytes a peer sent first (n >= sizeof(hs_hdr) for anything
// but none). Pure.
foreign_peer classify_foreign(const unsigned char* p, size_t n) noexcept;
// What the peer did, as a clause ("it sent libfabric's tcp provider's
// connection request, cm protocol version 3"); returns out.
const char* describe_foreign(const foreign_peer& f, char* out, size_t len) noexcept;

// Encodes a handshake message (host-order fields in) into out (wire
// order); returns its length. `cm` may be null when cm_len is 0.
size_t hs_encode(hs_kind kind, reject_reason reason, const void* body, const void* cm, uint16_t cm_len,
                 unsigned char* out, uint16_t version = proto_version) noexcept;

}  // namespace weft::tcp
