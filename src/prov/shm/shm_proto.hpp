// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/shm: what processes share. Every structure here lives in a
// process-shared mapping, so: standard layout, fixed-width fields, offsets
// instead of pointers, a fixed 64-byte cache line, static_asserts on sizes.
//
// Two kinds of region, each an anonymous memfd (no file under /dev/shm, so
// nothing outlives its processes). An endpoint claims its name as the
// abstract unix socket "weft_<uid>_<name>"; a peer connects to it to learn
// the owner's pid (SO_PEERCRED), then opens /proc/<pid>/fd/<n> of the memfd
// labelled the same way (the same permission check as ptrace reads).
//
//   endpoint region  (one per enabled endpoint)
//     [header | split slots | receive queue | peer table ...]
//     The receive queue is a bounded multi-producer single-consumer ring of
//     fixed-size cells: any peer appends commands, only the owner consumes.
//     The peer table (one slot per sender) is last and grows: a sender that
//     finds no free slot extends the memfd by a chunk of slots and publishes
//     the new count in the header (see region_hdr::peer_count).
//
//   domain region    (one per domain; its fd number is in each endpoint header)
//     [header | registration table]
//     The domain's memory registrations, published so that an initiator can
//     validate (key, address, length, access) itself and then move RMA data
//     with process_vm_readv/writev, with no action by the target's CPU.
//
// Cache-line plan: the ring's producer index and consumer index sit on their
// own lines (producers contend on one, the consumer owns the other); each
// cell's sequence word shares a line with the cell header the consumer reads
// right after it, and only producers write cells (the consumer frees them
// by moving head), so a small message is one line crossing once.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "util/mr.hpp"

namespace weft::shm {

inline constexpr size_t cacheline = 64;
inline constexpr uint64_t region_magic = 0x316d687374666577ULL;  // "weftshm1"
inline constexpr uint64_t domain_magic = 0x316d6f6474666577ULL;  // "weftdom1"
inline constexpr uint32_t proto_version = 12;

inline constexpr size_t name_max = 64;            // an endpoint name, NUL included
inline constexpr size_t inject_max = 4096;        // payload bytes in one cell
inline constexpr uint32_t queue_cells = 256;      // ring depth (power of two)
// A producer in an exchange (its endpoint took a message since its last
// send) that claims the cell at this index of a lap ends the lap there: the
// same claim moves the tail to the next lap's index 0 and marks the cell
// (cell_hdr::producer negated), so the consumer moves there after taking
// it. Requests and replies then cycle through the first short_lap + 1
// cells, whose lines stay in the two cores' L1 caches, and a stream still
// has every cell (see queue_claim).
inline constexpr uint32_t short_lap = 64;
inline constexpr uint32_t peer_chunk = 64;        // peer slots a region starts with, and grows by
inline constexpr uint32_t peer_slots_max = 65536; // live senders one endpoint can hear from (cell_hdr::src)
inline constexpr uint32_t mr_table_slots = 8192;  // registrations per domain (power of two)
inline constexpr size_t iov_max = 4;
inline constexpr size_t eager_max = 262144;  // larger messages use a CMA rendezvous (split)
// The collective engine's messages (flag_coll) stream through cells up to
// this size: a step sends and receives at once on both sides, and a
// fragment stream pipelines the copy where a rendezvous first costs each
// side a descriptor, a pull and a split handshake (1 MiB allreduce of two
// processes: 117 us against 185 us with the VM's CPUs sharing a cache,
// about 580 us either way, as MPICH's and Open MPI's, when they do not).
inline constexpr size_t coll_eager_max = size_t{1} << 20;

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert((queue_cells & (queue_cells - 1)) == 0);
static_assert(short_lap > 0 && short_lap < queue_cells);
static_assert((mr_table_slots & (mr_table_slots - 1)) == 0);

// ---------------------------------------------------------------- commands
enum class op : uint8_t {
  nop = 0,           // a cell abandoned by a dead producer
  msg = 1,           // a whole message inline (size <= inject_max)
  rndv = 2,          // a large message: payload is an rndv_desc; the receiver pulls with CMA
  frag = 3,          // a large message without CMA: one piece, at `offset`
  ack = 4,           // receiver -> sender: message `id` delivered (err in `data`)
  write = 5,         // RMA write carried in cells (no CMA): rma_desc + data at `offset`
  read_req = 6,      // RMA read request without CMA: rma_desc; target answers read_resp
  read_resp = 7,     // data for read `id` at `offset`; err in `data` (last piece carries flag_last)
  notify = 8,        // remote side of a CMA RMA write: remote CQ data / counters
  atomic = 9,        // atomic request: atomic_desc + operands
  atomic_resp = 10,  // atomic result for `id`: err in `data`, fetched values inline
  cts = 11,          // receiver -> sender of rndv `id`: push a part of the message (cts_desc)
  write_help = 12,   // initiator -> target of a mapped RMA write: copy a part yourself (help_desc)
  max_op
};

// cell_hdr::flags
inline constexpr uint32_t flag_tagged = 1u << 0;          // tagged message
inline constexpr uint32_t flag_remote_cq_data = 1u << 1;  // `data` is remote CQ data
inline constexpr uint32_t flag_want_ack = 1u << 2;        // sender waits for op::ack (delivery complete)
inline constexpr uint32_t flag_first = 1u << 3;           // first fragment (carries the header fields)
inline constexpr uint32_t flag_last = 1u << 4;            // last fragment / response piece
inline constexpr uint32_t flag_read = 1u << 5;            // notify: the RMA was a read
inline constexpr uint32_t flag_fetch = 1u << 6;           // atomic: fetch form
inline constexpr uint32_t flag_compare = 1u << 7;         // atomic: compare form
inline constexpr uint32_t flag_inline = 1u << 8;          // msg: the payload is in cell_hdr::inl
inline constexpr uint32_t flag_ack_arrival = 1u << 9;     // msg: op::ack once the receiver took the cell (transmit complete)

// One cell of a receive queue. The header is one cache line; a message of
// up to inline_max bytes travels inside it (flag_inline), so a small send
// touches a single cache line on each side.
inline constexpr size_t inline_max = 16;

struct cell_hdr {
  std::atomic<uint64_t> seq;  // ring index at the claim, index + 1 once committed (see queue_claim)
  op opcode;
  uint8_t atomic_op;  // enum fi_op, for op::atomic
  uint8_t datatype;   // enum fi_datatype, for op::atomic
  uint8_t reserved0;
  uint16_t src;    // the sender's slot in the receiver's peer table
  uint16_t flags;  // flag_*
  union {
    uint64_t tag;     // messages
    uint64_t offset;  // fragments after the first, RMA pieces, read responses: where the payload goes
  };
  uint64_t data;  // remote CQ data, or an error code in responses
  uint64_t size;  // whole message / RMA / atomic length in bytes
  union {
    struct {
      uint64_t id;   // the sender's request id, echoed in responses
      uint32_t len;  // bytes valid in payload
      uint32_t reserved1;
    };
    unsigned char inl[inline_max];  // flag_inline: the message itself
  };
  int32_t producer;  // pid of the producer that claimed the cell (negated at index short_lap: the lap ends)
  uint32_t reserved2;
};
static_assert(std::is_standard_layout_v<cell_hdr>);
static_assert(sizeof(cell_hdr) == cacheline);
static_assert(offsetof(cell_hdr, src) == 12 && offsetof(cell_hdr, flags) == 14 &&
              offsetof(cell_hdr, tag) == 16 && offsetof(cell_hdr, id) == 40 &&
              offsetof(cell_hdr, inl) == 40 && offsetof(cell_hdr, len) == 48 &&
              offsetof(cell_hdr, producer) == 56);
static_assert(peer_slots_max <= 65536, "src is 16 bits");
static_assert(peer_slots_max % peer_chunk == 0);

// Every cell starts on a 128-byte boundary (protocol 10), so that its
// header line and its first payload line are one aligned pair of lines: a
// message of 17-64 bytes then crosses as fast as one of 16
// (docs/shm-protocol.md, "Cells on 128-byte boundaries"). The last line of
// a cell (64 bytes after the payload) is padding.
struct alignas(2 * cacheline) cell {
  cell_hdr h;
  alignas(cacheline) unsigned char payload[inject_max];
};
static_assert(sizeof(cell) == 2 * cacheline + inject_max && sizeof(cell) % (2 * cacheline) == 0);

// Payload of op::rndv: where the sender's data is, for process_vm_readv.
struct rndv_desc {
  int32_t pid;
  uint32_t iov_count;
  uint64_t reserved;
  struct {
    uint64_t base;
    uint64_t len;
  } iov[iov_max];
};
static_assert(std::is_standard_layout_v<rndv_desc> && sizeof(rndv_desc) == 80);

// Split copy of a large message: once a receive matched an op::rndv, the
// receiver pulls the first part of the data while the sender pushes the rest
// into the receive buffer, both with CMA: two cores copy at once. Ownership
// of the second part is decided by one CAS on a slot in the receiver's
// region, so exactly one side copies it (the receiver takes it back if the
// sender does not answer in time).
inline constexpr uint32_t split_slots = 64;
inline constexpr size_t split_min = 256 * 1024;  // smaller messages: one pull
enum split_state : uint32_t {
  split_armed = 0,     // waiting for the sender
  split_sender = 1,    // the sender is copying
  split_receiver = 2,  // the receiver copies it itself
  split_done = 3,      // the sender copied it
  split_failed = 4,    // the sender could not: the receiver copies it
};
struct split_slot {
  std::atomic<uint32_t> word;  // generation << 3 | split_state
  uint32_t reserved[15];
};
static_assert(sizeof(split_slot) == cacheline);
inline constexpr uint32_t split_word(uint32_t gen, split_state st) {
  return gen << 3 | st;
}

// Payload of op::cts.
struct cts_desc {
  uint32_t slot;
  uint32_t gen;
  int32_t pid;  // the receiver
  uint32_t iov_count;
  uint64_t offset;  // the part the sender pushes: [offset, offset + len) of the message
  uint64_t len;
  struct {
    uint64_t base;
    uint64_t len;
  } iov[iov_max];  // the whole receive buffer
};
static_assert(std::is_standard_layout_v<cts_desc> && sizeof(cts_desc) == 96);

// Payload of op::write_help. A large RMA write is split like a large
// message: the initiator copies the first part and offers the rest to the
// target, whose core is often idle in its progress loop. The target copies
// its part from the initiator's mapped backing (help_mapped: both sides'
// registrations have one, see backing_valid) or with process_vm_readv from
// the initiator's address space (help_cma). The slot is in the initiator's
// region; the target takes the part with a CAS armed -> split_receiver and
// ends it with split_done or split_failed; an initiator that finds the slot
// still armed once its own part is copied takes the rest back
// (armed -> split_sender) and copies it.
enum help_mode : uint32_t { help_mapped = 1, help_cma = 2 };
struct help_desc {
  uint32_t slot;
  uint32_t gen;
  uint32_t mode;  // help_mode
  uint32_t reserved;
  uint64_t src_key;   // help_mapped: the initiator's registration holding the source
  uint64_t src;       // help_mapped: offset in that registration; help_cma: the initiator's address
  uint64_t dst_key;   // the target's registration
  uint64_t dst_addr;  // target address of the part, as that registration names it
  uint64_t len;
};
static_assert(std::is_standard_layout_v<help_desc> && sizeof(help_desc) == 56);

// Leading payload of op::write / op::read_req / op::notify and op::atomic.
struct rma_desc {
  uint64_t addr;  // target address (as the target's registration names it)
  uint64_t key;
  uint64_t len;    // bytes covered by this request
  uint64_t count;  // atomic: element count
};
static_assert(sizeof(rma_desc) == 32);

// ---------------------------------------------------------------- regions
enum region_state : uint32_t { state_init = 0, state_ready = 1, state_closed = 2 };

struct alignas(cacheline) region_hdr {
  uint64_t magic;
  uint32_t version;
  int32_t pid;                  // the owner
  std::atomic<uint32_t> state;  // region_state
  uint32_t queue_cells;
  uint32_t cell_size;  // bytes from one cell to the next (cell_stride)
  uint32_t peer_max;   // peer_slots_max: the table never grows past it
  uint64_t size;       // bytes at creation (the memfd only grows from there)
  uint64_t peers_off;  // offset of the peer table (the end of the fixed part)
  uint64_t queue_off;  // offset of the cells
  uint32_t inject_size;
  uint32_t cma;         // the owner may be accessed with CMA (1) or not (0)
  char name[name_max];  // the endpoint's name
  int32_t domain_fd;    // the owner's fd of its domain region
  // Peer slots published: a multiple of peer_chunk. A sender that grows the
  // table first extends the memfd (ftruncate) to cover the new slots, then
  // raises this count (CAS), so a count never names bytes the file lacks.
  // Readers still bound it by the file's size (region_table_slots): the
  // memfd is sealed against shrinking, so a slot once inside stays inside.
  std::atomic<uint32_t> peer_count;
  uint32_t reserved1[14];
  std::atomic<uint32_t> rma_events;  // the owner wants notify for RMA it is the target of
  uint32_t reserved[15];
};
static_assert(std::is_standard_layout_v<region_hdr>);
static_assert(sizeof(region_hdr) == 4 * cacheline);

// The ring's two indices, each on its own line. The producers' line holds
// the tail, `limit` (the end of the cells known to be free: head + depth as
// a producer last read head, so the consumer's line is read once a lap, not
// once a message) and `sleeping`: a sender reads it right after its claim
// (the line is in its cache then) and rings the owner's bell when it is 1
// (see shm_ep.cpp). The consumer's line holds only head, which it stores
// when it frees cells; no cell is written by the consumer.
enum sleep_state : uint32_t { awake = 0, asleep = 1, rung = 2 };
struct alignas(cacheline) queue_ctl {
  alignas(cacheline) std::atomic<uint64_t> tail;  // next cell to claim (producers)
  std::atomic<uint32_t> sleeping;                 // sleep_state, set by the owner's fi_trywait
  uint32_t reserved0;
  std::atomic<uint64_t> limit;                    // cells below it are free (producers)
  alignas(cacheline) std::atomic<uint64_t> head;  // next cell to consume (owner)
};
static_assert(sizeof(queue_ctl) == 2 * cacheline);

// A sender registers itself in a free slot the first time it talks to an
// endpoint; the slot index travels in every cell (cell_hdr::src).
struct peer_slot {
  std::atomic<uint32_t> state;  // 0 free, 1 being written, 2 valid
  std::atomic<int32_t> pid;     // the sender; taking a dead sender's slot starts with a CAS on it
  uint64_t reserved;
  char name[name_max];  // the sender's endpoint name (NUL terminated)
};
static_assert(sizeof(peer_slot) == name_max + 16);

// The fixed part, then the peer table. A region is created with its first
// chunk of peer slots (region_size bytes); every process maps
// region_map_size bytes, the most the table can grow to, so growth never
// moves a mapping: the pages past the end of the memfd are only touched
// once the file covers them.
inline constexpr size_t region_split_off = sizeof(region_hdr) + sizeof(queue_ctl);
// Where the cells lie (protocol 11). Cells are cell_stride bytes apart and
// the first starts 256 bytes into a 1 KiB block, so every cell's header
// pair sits at offsets 256-383 of a 1 KiB block of addresses. Between two
// CPUs of this VM that share no cache, a line in the block's last quarter
// crossed 5-10 % slower than one in its first half, and between CPUs that
// share one the block's ends were slowest (offsets 0 and 896: 75 and 73
// ns, 256: 69); protocol 10's cells (4,224 bytes apart) visited every
// offset in turn, and an 8-byte message measured 0.88-0.90 of its time
// with the cells here in both placements (docs/shm-protocol.md, "Where a
// cell's lines lie"). The 896 bytes after each cell are not used.
inline constexpr size_t cell_stride = 5 * 1024;
inline constexpr size_t cell_block_off = 256;
static_assert(cell_stride >= sizeof(cell) && cell_stride % 1024 == 0 && cell_block_off % (2 * cacheline) == 0);
inline constexpr size_t cell_offset(uint64_t index) noexcept { return size_t(index) * cell_stride; }
inline constexpr size_t region_queue_off =
    (region_split_off + split_slots * sizeof(split_slot) + 1023) / 1024 * 1024 + cell_block_off;
inline constexpr size_t region_peers_off = region_queue_off + cell_offset(queue_cells);
inline constexpr size_t region_table_bytes(uint32_t slots) {
  return region_peers_off + size_t{slots} * sizeof(peer_slot);
}
inline constexpr size_t region_size = region_table_bytes(peer_chunk);
inline constexpr size_t region_map_size = region_table_bytes(peer_slots_max);
static_assert(region_split_off % cacheline == 0 && region_queue_off % (2 * cacheline) == 0 &&
              region_peers_off % cacheline == 0);

// The domain region's registration table: open addressing by key with
// linear probing, each slot guarded by a sequence lock (odd while being
// written). A withdrawn entry leaves no tombstone: the entries after it move
// back into the hole (domain_hdr::table_moves counts the moves, so that a
// lookup that found nothing while one happened looks again).
struct mr_slot {
  std::atomic<uint64_t> seq;
  uint32_t state;  // 0 empty, 1 live
  uint32_t reserved;
  mr_entry entry;
};
static_assert(std::is_standard_layout_v<mr_slot> && sizeof(mr_slot) == 144);

struct alignas(cacheline) domain_hdr {
  uint64_t magic;
  uint32_t version;
  int32_t pid;
  uint32_t slots;
  uint32_t reserved0;
  uint64_t size;
  uint64_t table_off;
  std::atomic<uint64_t> table_moves;  // entries moved back in the table so far
  uint64_t reserved[2];
};
static_assert(sizeof(domain_hdr) == cacheline);
inline constexpr size_t domain_table_off = sizeof(domain_hdr);
inline constexpr size_t domain_region_size = domain_table_off + size_t{mr_table_slots} * sizeof(mr_slot);

// A registration whose memory lies in one shared mapping of a memfd sealed
// against shrinking (F_SEAL_SHRINK) is published with that backing, so an
// initiator may map the same pages and move RMA data with memcpy: no system
// call per operation, and both buffers stay in the initiator's caches. The
// seal is what makes the mapping safe: the file can never become shorter
// than what the initiator mapped, so no access through it can fault.
//   mr_entry::prov[0]  backing_valid | generation << 32 | fd number in the owner
//   mr_entry::prov[1]  file offset of seg[0].addr
//   mr_entry::prov[2]  inode of the file (checked on the fd the initiator gets)
// The owner holds its own duplicate of the fd while any registration refers
// to it; the generation changes whenever a new duplicate is made, so a
// mapping cached under one generation is never used for another file.
inline constexpr uint64_t backing_valid = 1ULL << 63;
inline uint32_t backing_gen(uint64_t prov0) {
  return static_cast<uint32_t>(prov0 >> 32) & 0x7fffffffu;
}
inline int backing_fd(uint64_t prov0) {
  return static_cast<int>(static_cast<uint32_t>(prov0));
}

inline uint32_t mr_hash(uint64_t key) noexcept {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return static_cast<uint32_t>(key);
}

}  // namespace weft::shm
