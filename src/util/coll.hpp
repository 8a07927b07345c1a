// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Collectives (man fi_collective, fi_av_set), written once for every
// provider on the endpoint core and the tagged send/receive path: an AV set
// names the members, fi_join_collective makes a group of them (the join
// completes through the endpoint's EQ), and barrier, broadcast, allreduce,
// allgather, reduce_scatter, reduce, alltoall, scatter and gather run as
// tagged messages between the members, completing with FI_COLLECTIVE entries
// on the transmit CQ. docs/design.md ("Collectives") has the algorithms, the
// tag layout and the failure rules.
//
// The engine's own messages carry coll_tag_bit in their tag, and its sends
// and receives carry flag_coll in their operation flags: the completion
// functions of util/ep.hpp hand those to the engine instead of the CQ, and
// the matcher never lets an application's receive take such a message on
// queues a collective engine uses (recv_matches).
#include <rdma/fi_collective.h>
#include <sys/uio.h>

#include <cstdint>

namespace weft {

struct endpoint;
struct domain;
class av;

// Internal operation flag (a bit no public flag uses): a send or receive of
// the collective engine. Its context is the engine's, never the application's.
inline constexpr uint64_t flag_coll = 1ULL << 62;
// The collective engine's tag space: messages whose tag has this bit go to
// the engine's receives only (once an engine exists on the receive queues).
inline constexpr uint64_t coll_tag_bit = 1ULL << 63;

// A transport's tagged send for the engine (util/ep_ops.hpp installs it):
// the transport's own send<true>, after no entry point checks.
using coll_send_fn = ssize_t (*)(endpoint& e, const iovec* iov, size_t count, fi_addr_t dest, uint64_t tag,
                                 void* ctx, uint64_t flags) noexcept;

// Completions of the engine's sends and receives (called by tx_done,
// tx_fail, rx_done and rx_finish for operations carrying flag_coll, under the
// endpoint's lock: they only record the outcome). err: 0 or a positive FI_E*.
void coll_tx_done(void* ctx, int err) noexcept;
void coll_rx_done(void* ctx, size_t len, int err) noexcept;

struct coll_engine;
// Drives the engine of `e` (after the transport's progress, outside the
// endpoint's lock). A no-op while another thread drives it.
void coll_progress(coll_engine& c) noexcept;
// fi_trywait: false while the engine has work only progress can move (a
// send the transport refused for now).
bool coll_arm(coll_engine& c) noexcept;
// fi_close of the endpoint, after its transport closed and before its
// bindings are dropped. Groups still open outlive the endpoint without
// their operations: their fi_close frees them.
void coll_close(endpoint& e) noexcept;

// fi_join with FI_COLLECTIVE (fi_join_collective): what every transport's
// cm ops table names as join. Without FI_COLLECTIVE: -FI_ENOSYS.
int coll_join(fid_ep* ep, const void* addr, uint64_t flags, fid_mc** mc, void* context) noexcept;

// fi_query_collective on a domain.
int coll_query(domain& dom, fi_collective_op coll, fi_collective_attr* attr, uint64_t flags) noexcept;

// fi_av_set on an AV (util/av_set.cpp).
int av_set_open(av& a, fi_av_set_attr* attr, fid_av_set** set, void* context) noexcept;

// The collective ops of an endpoint that offers them (installed with its
// tagged ops), and of every other endpoint object (-FI_ENOSYS).
extern fi_ops_collective coll_ops;
extern fi_ops_collective coll_ops_none;

}  // namespace weft
