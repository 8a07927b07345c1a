// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/udp: unreliable datagram endpoints (FI_EP_DGRAM) over UDP/IPv4.
// Private declarations of the provider, built on util's endpoint core.
//
//  * One message is one datagram (udp_proto.hpp): a message larger than
//    max_msg_size is refused (-FI_EMSGSIZE), one that is lost is lost, and
//    nothing is fragmented or reassembled. The sockets set IP_PMTUDISC_DO:
//    a route whose MTU is smaller than the configured one refuses the send
//    rather than fragmenting it.
//  * A send is complete when the kernel took the datagram (sendmsg); the
//    data never waits in weft.
//  * Receives are the matcher's: each datagram that decodes is matched
//    against the posted receives (tags, directed receives, multi-receive);
//    one that finds none waits as an unexpected message within the
//    matcher's bounds, past which it is dropped.
//  * FI_MULTICAST: fi_join binds a socket to an IPv4 group on the
//    endpoint's interface (FI_JOIN_COMPLETE on the bound EQ); a send with
//    FI_MULTICAST to fi_mc_addr() goes to the group.
//  * FD waits: the sockets are in the wait objects of the endpoint's CQs
//    and counters (level-triggered: an unread datagram keeps them readable).
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>

#include <memory>
#include <string>
#include <vector>

#include "prov/udp/udp_proto.hpp"
#include "util/domain.hpp"
#include "util/ep.hpp"

namespace weft::udp {

inline constexpr size_t iov_max = 4;  // iov_limit (the header takes one more iovec of sendmsg)
static_assert(iov_max == recv_iov_max);
inline constexpr int recv_budget = 32;  // datagrams read per socket per progress call

// The provider's parameters (FI_UDP_*), read at fi_getinfo and fi_domain.
struct config {
  size_t mtu = default_mtu;
  size_t max_msg = max_msg_for(default_mtu);
};
config read_config() noexcept;

// IPv4 socket addresses as the provider's addresses (FI_SOCKADDR_IN).
// A sockaddr_in of 16 bytes, family AF_INET: 0, else -FI_EINVAL.
int addr_from(const void* p, size_t len, sockaddr_in& out) noexcept;
// The local address an endpoint takes when none was given: toward `to`
// (the address the kernel would send from), else FI_UDP_IFACE's, else
// loopback; port 0.
sockaddr_in default_addr(const sockaddr_in* to) noexcept;
std::string addr_str(const sockaddr_in& a);

struct ep;

// A multicast group the endpoint joined (fi_join): its own socket, bound to
// the group and port, receives what is sent there.
struct mc {
  fid_mc fid_;          // first; fid_.fi_addr is what fi_mc_addr() returns
  ep* owner = nullptr;  // nullptr: the endpoint closed first; fi_close only frees it
  sockaddr_in group{};
  uint64_t flags = 0;  // FI_SEND and/or FI_RECV
  int sock = -1;       // receiving members only
  size_t slot = 0;     // in ep::groups
};

struct domain_part final : prov_domain {
  explicit domain_part(domain& d) : dom(d), cfg(read_config()) {}
  int endpoint(fi_info* info, fid_ep** ep, void* context) override;
  domain& dom;
  config cfg;
};

struct ep final : endpoint {
  sockaddr_in name{};  // our address: bound, or (bound to every interface) the default one's
  bool named = false;  // set from src_addr or fi_setname before fi_enable
  int sock = -1;
  size_t max_msg = 0;
  std::unique_ptr<unsigned char[]> stage;  // one datagram as it arrives (udp_payload_max bytes)
  std::vector<mc*> groups;                 // joined groups by slot (nullptr: free)
  uint32_t next_gen = 1;                   // tells a group's fi_addr from a later one in its slot
  // FI_SOURCE / directed receives: recent senders (address -> AV entry).
  struct src_entry {
    uint64_t key = 0;
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
  };
  src_entry src_cache[16];
  // What progress dropped: datagrams that did not decode (or were cut short)
  // and messages nobody could take (the unexpected bounds were reached).
  uint64_t malformed = 0;
  uint64_t dropped = 0;

  static ep& of(endpoint& e) noexcept { return static_cast<ep&>(e); }
};

// udp_ep.cpp
void progress(ep& e) noexcept;
fi_addr_t source_of(ep& e, const sockaddr_in& from) noexcept;
int join(fid_ep* f, const void* addr, uint64_t flags, fid_mc** out, void* context) noexcept;
// The group a send with FI_MULTICAST names (nullptr: none we joined to send).
mc* group_of(ep& e, fi_addr_t a) noexcept;

// udp_msg.cpp: sends, the ops tables, the matcher's answers.
void install_ops(endpoint& e) noexcept;
extern const rx_transport rx_answers;
// A message that decoded, from `from` (on a group's socket: multicast).
void arrive(ep& e, const message& m, const sockaddr_in& from, bool multicast) noexcept;

}  // namespace weft::udp
