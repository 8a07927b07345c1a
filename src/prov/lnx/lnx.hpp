// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/lnx: the linked provider. One RDM endpoint for a whole job: a peer on
// this host is reached over an shm endpoint, any other over a tcp endpoint,
// both parts of the one endpoint the application holds (libfabric >= 2.0
// calls such a provider LNX, "LINKx"; FI_LNX_PROV_LINKS=shm+tcp names the
// links).
//
//  * A domain holds a part domain of each provider (util/domain.hpp):
//    they share its registrations, so one fi_mr_reg gives one key that
//    both parts' access checks know.
//  * An AV holds lnx addresses; each part keeps a mirror AV with the same
//    indices (the shm name of a peer on this host, the tcp address of every
//    peer), filled when an address is inserted (prov_domain::av_filled).
//    The path to a peer is decided there, once: shm when its host is ours.
//    A part's FI_SOURCE is thus the linked AV's fi_addr_t.
//  * An endpoint's parts share its CQs, counters, receive queues and lock
//    (util/ep.hpp, endpoint_share): one matcher fed by both transports.
//    The data path is one branch on the peer's path, then the part's own
//    send, RMA or atomic (shm_part.hpp, tcp_part.hpp).
//
// Addresses (FI_ADDR_STR, at most FI_NAME_MAX bytes with the NUL):
//   fi_lnx://<host>;<shm name>;<ipv4>:<port>
// An endpoint's name (fi_getname) is filled with '#' to FI_NAME_MAX - 1
// characters, one length for every name: programs that pass fi_av_insert several
// addresses packed at the stride of their own (Open MPI's mtl ofi) and
// those that pack them end to end (libfabric's shm reads them so) agree.
// <host> is 12 hex digits naming this host (the kernel boot, host name and
// IPC, network and pid namespaces: processes that can share memory), the
// shm name is the shm part's (without "fi_shm://"). A host or shm name may
// be empty (an address resolved from a node and service: tcp only), and
// "fi_lnx://<ipv4>:<port>" is the same as "fi_lnx://;;<ipv4>:<port>".
#include <rdma/fabric.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/provider.hpp"
#include "prov/tcp/tcp_sock.hpp"
#include "util/av.hpp"
#include "util/domain.hpp"
#include "util/ep.hpp"
#include "util/ep_part.hpp"

namespace weft::lnx {

inline constexpr const char* prov_name = "lnx";
inline constexpr const char* links = "shm+tcp";  // the one link set built here
inline constexpr size_t addr_max = FI_NAME_MAX;

// ------------------------------------------------------------------ addresses (lnx_init.cpp)
struct address {
  uint64_t host = 0;   // 0: unknown
  std::string shm;     // the shm part's name; empty: unknown
  tcp::sock_addr tcp;  // family 0: none
};
// This host, as addresses carry it (48 bits, never 0). A few system calls:
// the control path only.
uint64_t host_id() noexcept;
// Parses an FI_ADDR_STR lnx address of at most len bytes: false when malformed.
bool parse(const void* p, size_t len, address& out);
// The printable address; empty when it does not fit addr_max bytes with its
// NUL. An endpoint's name (fi_getname) is filled up to that length.
std::string format(const address& a, bool fill_up = false);

// ------------------------------------------------------------------ domain (lnx_domain.cpp)
// The parts' mirrors of one linked AV.
struct mirrors {
  av* shm = nullptr;
  av* tcp = nullptr;
};

struct lnx_domain final : prov_domain {
  explicit lnx_domain(domain& d);
  ~lnx_domain() override;
  int endpoint(fi_info* info, fid_ep** ep, void* context) override;
  int stx_ctx(fi_tx_attr* attr, fid_stx** stx, void* context) override;
  int srx_ctx(fi_rx_attr* attr, fid_ep** rx, void* context) override;
  int query_atomic(fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) override;
  void mr_changed(uint64_t key) noexcept override;
  void av_opened(av& a) override;
  int av_filled(av& a, uint64_t index, const void* addr, size_t len) noexcept override;
  void av_emptied(av& a, uint64_t index) noexcept override;
  void av_closed(av& a) noexcept override;
  // The mirrors of a linked AV of this domain.
  mirrors mirrors_of(const av& a);

  static lnx_domain& of(domain& d) noexcept { return static_cast<lnx_domain&>(*d.pd); }

  domain& dom;
  domain_part shm;  // the parts
  domain_part tcp;
  uint64_t host;
  std::mutex mu;  // avs
  std::unordered_map<const av*, mirrors> avs;
};

// ------------------------------------------------------------------ endpoint (lnx_ep.cpp)
struct ep final : weft::endpoint {
  weft::endpoint* shm = nullptr;  // the parts (closed with the endpoint)
  weft::endpoint* tcp = nullptr;
  weft::av* shm_av = nullptr;  // the shm part's mirror: a peer it holds is reached over shm
  uint32_t rounds = 0;         // progress calls: an idle tcp part is looked at every 16th
  uint64_t tcp_polled_us = 0;  // now_us() at the idle tcp part's last poll
  part_probe tcp_probe;        // as the tcp part's last round left it (gap 0 until one ran)

  static ep& of(weft::endpoint& e) noexcept { return static_cast<ep&>(e); }
  // The peer `dest` is on this host: its path is shm.
  bool local(fi_addr_t dest) const noexcept { return shm_av->lookup(dest) != nullptr; }
};

int endpoint_open(domain& dom, lnx_domain& ld, fi_info* info, fid_ep** out, void* context);
size_t endpoint_inject_max() noexcept;  // the smaller part's

}  // namespace weft::lnx
