// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/udp: the wire format (docs/udp-protocol.md is the prose version).
//
// One message is one UDP datagram: a 24-byte header, then the payload.
// Nothing is fragmented, acknowledged, retransmitted or reassembled. The
// header is standard-layout with every offset pinned; multi-byte integers
// are little-endian on the wire. Everything in a datagram is hostile until
// decode() has accepted it: a datagram it refuses is dropped unread.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::udp {

inline constexpr uint8_t wire_magic0 = 'W';
inline constexpr uint8_t wire_magic1 = 'D';
inline constexpr uint8_t wire_version = 1;

// header::flags
inline constexpr uint8_t flag_tagged = 0x01;   // `tag` is the message's tag (fi_tsend)
inline constexpr uint8_t flag_cq_data = 0x02;  // `data` is remote CQ data (FI_REMOTE_CQ_DATA)
inline constexpr uint8_t flags_known = flag_tagged | flag_cq_data;

struct header {
  uint8_t magic[2];   // 'W', 'D'
  uint8_t version;    // wire_version
  uint8_t flags;      // flag_*; other bits zero
  uint32_t reserved;  // zero
  uint64_t tag;       // zero unless flag_tagged
  uint64_t data;      // zero unless flag_cq_data
};
static_assert(sizeof(header) == 24);
static_assert(offsetof(header, version) == 2 && offsetof(header, flags) == 3);
static_assert(offsetof(header, reserved) == 4 && offsetof(header, tag) == 8 && offsetof(header, data) == 16);

// IPv4 (20 bytes without options) and UDP (8) headers around each datagram.
inline constexpr size_t ip_udp_overhead = 28;
// The largest UDP payload over IPv4 (65535 - 20 - 8), and so the largest
// message any peer can send us (the receive buffer's size).
inline constexpr size_t udp_payload_max = 65507;
inline constexpr size_t msg_size_ceiling = udp_payload_max - sizeof(header);
// max_msg_size = mtu - ip_udp_overhead - sizeof(header): one datagram that
// the path's links carry without fragmenting it. 1500: Ethernet.
inline constexpr size_t default_mtu = 1500;
inline constexpr size_t min_mtu = 576;  // IPv4's minimum datagram every host accepts
inline constexpr size_t max_mtu = 65535;
constexpr size_t max_msg_for(size_t mtu) noexcept {
  return mtu - ip_udp_overhead - sizeof(header);
}
static_assert(max_msg_for(default_mtu) == 1448 && max_msg_for(max_mtu) == msg_size_ceiling);

template <class T>
constexpr T le(T v) noexcept {
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1)
    return v;
  else if constexpr (sizeof(T) == 4)
    return __builtin_bswap32(v);
  else
    return __builtin_bswap64(v);
}

// The header of a message we send.
inline header encode(bool tagged, uint64_t tag, bool cq_data, uint64_t data) noexcept {
  header h{};
  h.magic[0] = wire_magic0;
  h.magic[1] = wire_magic1;
  h.version = wire_version;
  h.flags = static_cast<uint8_t>((tagged ? flag_tagged : 0) | (cq_data ? flag_cq_data : 0));
  h.tag = le(tagged ? tag : uint64_t{0});
  h.data = le(cq_data ? data : uint64_t{0});
  return h;
}

// A datagram decode() accepted.
struct message {
  bool tagged;
  bool cq_data;
  uint64_t tag;
  uint64_t data;
  const unsigned char* payload;  // inside the datagram
  size_t len;
};

// Checks the `n` bytes of a datagram at `p` and describes its message:
// false (drop it) unless it holds a whole header with magic and version,
// only known flags, zero reserved bits, and a zero tag and data where the
// flags say there are none.
inline bool decode(const unsigned char* p, size_t n, message& out) noexcept {
  if (n < sizeof(header)) return false;
  header h;
  memcpy(&h, p, sizeof h);
  if (h.magic[0] != wire_magic0 || h.magic[1] != wire_magic1 || h.version != wire_version) return false;
  if ((h.flags & ~flags_known) || h.reserved) return false;
  out.tagged = h.flags & flag_tagged;
  out.cq_data = h.flags & flag_cq_data;
  out.tag = le(h.tag);
  out.data = le(h.data);
  if ((!out.tagged && out.tag) || (!out.cq_data && out.data)) return false;
  out.payload = p + sizeof h;
  out.len = n - sizeof h;
  return true;
}

}  // namespace weft::udp
