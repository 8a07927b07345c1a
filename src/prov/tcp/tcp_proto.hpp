// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/tcp: the wire format. docs/tcp-protocol.md is the prose version.
//
// Everything here crosses the network, so: standard-layout, fixed-width
// structs, no pointers, every size and offset pinned by static_assert, and
// one byte order. Multi-byte integers are LITTLE-ENDIAN on the wire (every
// host weft targets is little-endian, so encoding is free there; le() swaps
// on a big-endian host). IP addresses are byte arrays in network order, as
// in a sockaddr.
//
// A connection carries, in order:
//   1. the handshake: hs_hdr + body messages (hello, challenge, proof,
//      accept | reject), see "handshake" below;
//   2. then frames: one frame_hdr per operation, `iov_count` rma_desc
//      descriptors, then `length` payload bytes.
// Every value that comes from the wire is hostile until tcp_frame.cpp has
// checked it (frame_check / hs_check_*): no field indexes or sizes memory
// before that.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace weft::tcp {

// ------------------------------------------------------------ byte order
template <class T>
constexpr T le(T v) noexcept {
  static_assert(std::is_integral_v<T> && std::is_unsigned_v<T>);
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(T) == 4) {
    return __builtin_bswap32(v);
  } else {
    return __builtin_bswap64(v);
  }
}

// ------------------------------------------------------------ versions and limits
inline constexpr uint64_t wire_magic = 0x7063742d74666577ULL;  // the bytes "weft-tcp"
inline constexpr uint16_t proto_version = 2;  // 2: flag_ack_arrival

inline constexpr size_t cm_data_max = 256;       // FI_OPT_CM_DATA_SIZE: private data per CM message
inline constexpr size_t auth_key_max = 64;       // auth_key bytes (domain/endpoint attribute)
inline constexpr size_t nonce_size = 16;         // handshake challenge
inline constexpr size_t proof_size = 32;         // HMAC-SHA-256
inline constexpr uint8_t rma_iov_max_wire = 16;  // descriptors per frame, protocol ceiling

// ------------------------------------------------------------ addresses
// An endpoint's identity: the address it listens on (what fi_getname gives
// and peers insert into their AV) plus a random instance number chosen when
// the endpoint opens, which tells a restarted endpoint at the same address
// from its predecessor. RDM receivers report FI_SOURCE from it, and
// simultaneous connects are resolved by comparing identities (tcp_peers.hpp).
enum class wire_family : uint8_t { none = 0, ipv4 = 4, ipv6 = 6 };

struct wire_addr {
  uint8_t family;  // wire_family; none: an endpoint that does not listen (address and port zero)
  uint8_t reserved0;
  uint16_t port;  // host number (little-endian on the wire like every integer)
  uint32_t reserved1;
  uint8_t addr[16];  // IPv4: the first 4 bytes, the rest zero; network order
  uint64_t instance;
};
static_assert(std::is_standard_layout_v<wire_addr> && sizeof(wire_addr) == 32);
static_assert(offsetof(wire_addr, port) == 2 && offsetof(wire_addr, addr) == 8 &&
              offsetof(wire_addr, instance) == 24);

// ------------------------------------------------------------ handshake
// connector                                   acceptor
//   hello  {ep type, identity, nonce_c, credit, cm data}  ->
//                      <- challenge {ep type, identity, nonce_a, proof_a}
//                         (or reject{version|ep_type} and close)
//   proof  {proof_c}  ->
//                      <- accept {credit, cm data} | reject {reason, cm data}
//   frames ...        <->  frames ...
//
// proof_a = HMAC-SHA-256(auth_key, "weft-tcp acceptor"  || T)
// proof_c = HMAC-SHA-256(auth_key, "weft-tcp connector" || T)
// T = the hello message's bytes || the challenge message's bytes with its
// proof field zeroed. Both nonces are in T, so a proof cannot be replayed,
// and the key never travels. An empty key is a key too: a side with a key
// and a side without one refuse each other. Each side checks the other's
// proof before it trusts anything else the other said; the acceptor tells
// its owner about the connection (FI_CONNREQ, cm data) only after that.
//
// hs_hdr is frozen across protocol versions (magic and version at the same
// offsets forever), and so is a reject body: an acceptor that receives a
// hello of another version answers reject{reason version} carrying its own
// version, and closes.
enum class hs_kind : uint8_t { hello = 1, challenge = 2, proof = 3, accept = 4, reject = 5, max };

enum class reject_reason : uint8_t {
  none = 0,
  app = 1,      // the application rejected (fi_reject); cm data from it
  version = 2,  // protocol version mismatch
  ep_type = 3,  // MSG met RDM or the reverse
  auth = 4,     // the connector's proof is wrong (sent before closing: helps debugging, tells nothing)
  crossed = 5,  // simultaneous connect: the other connection is kept (tcp_peers.hpp)
  busy = 6,     // the acceptor cannot take more connections (descriptors, pending handshakes)
  max
};

enum class wire_ep_type : uint8_t { none = 0, msg = 1, rdm = 2, max };

struct hs_hdr {
  uint64_t magic;
  uint16_t version;
  uint8_t kind;    // hs_kind
  uint8_t reason;  // reject_reason for reject, 0 otherwise
  uint32_t body_len;
};
static_assert(std::is_standard_layout_v<hs_hdr> && sizeof(hs_hdr) == 16);
static_assert(offsetof(hs_hdr, version) == 8 && offsetof(hs_hdr, kind) == 10 &&
              offsetof(hs_hdr, body_len) == 12);

struct hs_hello {
  uint8_t ep_type;  // wire_ep_type
  uint8_t flags;    // 0
  uint16_t cm_len;  // <= cm_data_max, the bytes follow this body
  uint32_t reserved;
  wire_addr src;  // the connector's identity
  uint8_t nonce[nonce_size];
  uint64_t credit;  // eager bytes the connector lets the acceptor send before it grants more
};
static_assert(std::is_standard_layout_v<hs_hello> && sizeof(hs_hello) == 64);
static_assert(offsetof(hs_hello, src) == 8 && offsetof(hs_hello, nonce) == 40 &&
              offsetof(hs_hello, credit) == 56);

struct hs_challenge {
  uint8_t ep_type;
  uint8_t flags;
  uint16_t reserved0;
  uint32_t reserved1;
  wire_addr src;  // the acceptor's identity
  uint8_t nonce[nonce_size];
  uint8_t proof[proof_size];
};
static_assert(std::is_standard_layout_v<hs_challenge> && sizeof(hs_challenge) == 88);
static_assert(offsetof(hs_challenge, nonce) == 40 && offsetof(hs_challenge, proof) == 56);

struct hs_proof {
  uint8_t proof[proof_size];
};
static_assert(sizeof(hs_proof) == 32);

// accept and reject share a layout.
struct hs_verdict {
  uint16_t cm_len;
  uint16_t reserved0;
  uint32_t reserved1;
  uint64_t credit;  // accept: eager bytes the acceptor lets the connector send; reject: 0
};
static_assert(std::is_standard_layout_v<hs_verdict> && sizeof(hs_verdict) == 16);

// The largest handshake message: header, the largest body, cm data.
inline constexpr size_t hs_msg_max = sizeof(hs_hdr) + sizeof(hs_hello) + cm_data_max;
static_assert(hs_msg_max >= sizeof(hs_hdr) + sizeof(hs_challenge));

// ------------------------------------------------------------ frames
enum class op : uint8_t {
  none = 0,         // never valid
  msg = 1,          // message: eager payload, or flag_rndv: announce `aux` bytes, no payload
  tagged = 2,       // the same, tagged (`tag`)
  cts = 3,          // receiver -> sender: rndv `id` matched; send `aux` bytes of it now
  rndv_data = 4,    // sender -> receiver: `length` bytes of rndv `id` at offset `aux`
  write = 5,        // RMA write: descriptors, payload = their bytes in order
  read_req = 6,     // RMA read request: descriptors, no payload
  read_resp = 7,    // RMA read data for `id`; status in `aux` (error: no payload)
  atomic = 8,       // atomic: descriptors, payload = operands [+ compare operands]
  atomic_resp = 9,  // atomic result for `id`: fetched values (fetch/compare forms); status in `aux`
  ack = 10,         // `id` done at the target (delivery complete, write/atomic ack); status in `aux`
  credit = 11,      // grants `aux` more eager bytes
  shutdown = 12,    // the sender sends nothing more; the connection closes after it
  max
};

// frame_hdr::flags. Which bits an op allows is in tcp_frame.cpp (allowed_flags).
inline constexpr uint8_t flag_cq_data = 1u << 0;   // `data` is remote CQ data
inline constexpr uint8_t flag_want_ack = 1u << 1;  // the initiator wants op::ack (or a response) for `id`
inline constexpr uint8_t flag_rndv = 1u << 2;      // msg/tagged: rendezvous announcement
inline constexpr uint8_t flag_fetch = 1u << 3;     // atomic: fetch form
inline constexpr uint8_t flag_compare = 1u << 4;   // atomic: compare form
inline constexpr uint8_t flag_last = 1u << 5;      // rndv_data: the last piece
// msg/tagged, eager: the initiator wants op::ack for `id` once the payload
// is in the target endpoint (its process read it: transmit complete), not
// only once a receive took it (flag_want_ack: delivery complete).
inline constexpr uint8_t flag_ack_arrival = 1u << 6;

// One header per operation, 48 bytes. Fields an op does not use must be
// zero (checked), so they can take a meaning in a later version.
struct frame_hdr {
  uint8_t op;         // enum op
  uint8_t flags;      // flag_*
  uint8_t iov_count;  // rma_desc that follow (write, read_req, atomic), else 0
  uint8_t atomic_op;  // enum fi_op (atomic), else 0
  uint8_t datatype;   // enum fi_datatype (atomic), else 0
  uint8_t reserved[3];
  uint64_t length;  // payload bytes after the descriptors
  uint64_t id;      // the initiator's request id, echoed in cts/ack/responses
  uint64_t tag;     // tagged only
  uint64_t data;    // remote CQ data (flag_cq_data) only
  uint64_t aux;     // per op: message size, rndv offset, cts bytes, credit, status
};
static_assert(std::is_standard_layout_v<frame_hdr> && sizeof(frame_hdr) == 48);
static_assert(offsetof(frame_hdr, iov_count) == 2 && offsetof(frame_hdr, datatype) == 4 &&
              offsetof(frame_hdr, length) == 8 && offsetof(frame_hdr, id) == 16 &&
              offsetof(frame_hdr, tag) == 24 && offsetof(frame_hdr, data) == 32 &&
              offsetof(frame_hdr, aux) == 40);

// A remote buffer: RMA (len in bytes) and atomics (len in bytes, a multiple
// of the datatype's size; the initiator converts fi_rma_ioc counts).
struct rma_desc {
  uint64_t addr;
  uint64_t len;
  uint64_t key;
};
static_assert(std::is_standard_layout_v<rma_desc> && sizeof(rma_desc) == 24);

inline constexpr size_t frame_prefix_max = sizeof(frame_hdr) + rma_iov_max_wire * sizeof(rma_desc);

// A status in ack/read_resp/atomic_resp: 0, or a positive FI_E* value below this.
inline constexpr uint64_t status_max = 1u << 16;

}  // namespace weft::tcp
