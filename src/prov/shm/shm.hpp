// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// prov/shm: processes on one host. Private declarations.
//
// shm is the transport only: the endpoint core (bindings, the matcher,
// completions, progress) is util/'s. Data movement (layout in shm_proto.hpp,
// protocol in docs/shm-protocol.md):
//  * messages up to 16 bytes ride in a queue cell's header line, up to 4 KiB
//    in one cell, up to 256 KiB as fragments the receiver copies out as the
//    sender fills them; larger ones send a descriptor and the receiver pulls
//    the data with process_vm_readv (split with the sender above 256 KiB);
//  * RMA: the initiator validates key, bounds and access against the target
//    domain's published registration table and moves the data itself (CMA,
//    or memcpy through a mapped shrink-sealed memfd);
//  * without CMA the same operations travel through the queue cells; RMA and
//    atomics then need the target's progress, as atomics always do.
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sys/uio.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.hpp"
#include "common/iov.hpp"
#include "prov/shm/shm_proto.hpp"
#include "util/absent_peers.hpp"
#include "util/atomic_ops.hpp"
#include "util/av.hpp"
#include "util/domain.hpp"
#include "util/ep.hpp"
#include "util/request.hpp"

namespace weft {
struct atomic_call;  // util/ep_ops.hpp
}

namespace weft::shm {

static_assert(iov_max == recv_iov_max);

// ------------------------------------------------------------------ regions (shm_region.cpp)
// A shared-memory region: an anonymous memfd mapped by its owner (nothing
// under /dev/shm, nothing left behind when a process dies) and reached by
// peers through /proc/<pid>/fd/<n>.
class mapping {
public:
  mapping() = default;
  ~mapping() { reset(); }
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;

  // Creates `size` bytes in a new memfd named `label` and maps map_size
  // bytes of it (at least `size`: room for the file to grow into); with
  // `seal` the file can never shrink (F_SEAL_SHRINK). Throws.
  void create(const std::string& label, size_t size, size_t map_size = 0, bool seal = false);
  // Maps fd `fd` of process `pid` (its whole size, or map_size bytes when
  // larger); false when it is gone, not ours or too small. With keep_fd our
  // own fd of the file stays open (fd()) until close_fd() or reset().
  bool open(int32_t pid, int fd, size_t min_size, size_t map_size = 0, bool keep_fd = false) noexcept;
  void close_fd() noexcept;
  void reset() noexcept;

  unsigned char* base() const noexcept { return base_; }
  size_t size() const noexcept { return size_; }  // bytes mapped
  int fd() const noexcept { return fd_; }  // the owner's fd, a peer's while kept, else -1

private:
  unsigned char* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

// An endpoint name, claimed on this host for as long as the endpoint is
// open: an abstract unix socket "weft_<uid>_<name>" (freed by the kernel
// when the process dies). A peer connects to it to learn the owner's pid.
class name_claim {
public:
  name_claim() = default;
  ~name_claim() { reset(); }
  name_claim(const name_claim&) = delete;
  name_claim& operator=(const name_claim&) = delete;
  // Claims `name`; throws weft::error (FI_EADDRINUSE when taken).
  void claim(const std::string& name);
  void reset() noexcept;
  // Closes the connections peers made to learn our pid (they never talk).
  void drain() noexcept;

private:
  int fd_ = -1;
};

// An endpoint's bell: a datagram socket bound to "weftbell_<uid>_<name>"
// (abstract, non-blocking), in the FD wait objects of its CQs and counters.
// A sender that finds the owner asleep (queue_ctl::sleeping) sends it a
// byte (ring_bell), which wakes an application polling such an fd. Returns
// the socket, or -1.
int bell_open(const std::string& name) noexcept;
void bell_drain(int fd) noexcept;

// Accessors of an endpoint region.
struct region_view {
  unsigned char* base = nullptr;
  region_hdr* hdr() const noexcept { return reinterpret_cast<region_hdr*>(base); }
  queue_ctl* ctl() const noexcept { return reinterpret_cast<queue_ctl*>(base + sizeof(region_hdr)); }
  peer_slot* peers() const noexcept { return reinterpret_cast<peer_slot*>(base + region_peers_off); }
  split_slot* splits() const noexcept { return reinterpret_cast<split_slot*>(base + region_split_off); }
  // The cell at producer or consumer index pos (the ring wraps it).
  cell* cell_at(uint64_t pos) const noexcept {
    return reinterpret_cast<cell*>(base + region_queue_off + cell_offset(pos & (queue_cells - 1)));
  }
};

void region_init(unsigned char* base, const std::string& name, int domain_fd, bool cma) noexcept;
std::string region_label(const std::string& name);  // "weft_<uid>_<name>"
// Creates (and maps) an endpoint region's memfd: region_size bytes, sealed
// against shrinking, mapped region_map_size bytes long. Throws.
void region_create(mapping& m, const std::string& name);
// The peer slots of region r that lie inside its memfd (fd: any fd of it):
// the published count, bounded by the file's size and peer_slots_max. Slots
// below it can be touched; the count never falls (the file cannot shrink).
uint32_t region_table_slots(region_view r, int fd) noexcept;

// Finding a peer's region by its endpoint name.
enum class found { yes, absent, refused, other_version };
// yes: `m` maps the region of the live endpoint `name`, *pid its owner;
// absent: no such endpoint now (not enabled yet, or closed); refused: it
// exists but cannot be mapped (another user, /proc refused, malformed);
// other_version: weft's region of another protocol version (*version).
found open_region(const std::string& name, mapping& m, int32_t* pid, uint32_t* version = nullptr) noexcept;
// A region another libfabric's shm provider made for `name`: libfabric's
// shm names its regions /dev/shm/<name>, and an address of its
// ("fi_shm://13736:0:0") is a valid weft name. What it is, as a clause
// ("/dev/shm/13736:0:0 is a region of libfabric's shm provider, version 4,
// of process 13736"), or "" when there is none or its process is gone (a
// file left behind). Cold: a few system calls.
std::string foreign_region(const std::string& name);

// getpid(), cached (reset after fork). Inline: every claim stores it.
extern std::atomic<int32_t> cached_pid;
int32_t self_pid_slow() noexcept;
inline int32_t self_pid() noexcept {
  int32_t p = cached_pid.load(std::memory_order_relaxed);
  if (p) [[likely]]
    return p;
  return self_pid_slow();
}
extern const bool has_prefetchw;
bool pid_alive(int32_t pid) noexcept;
bool cma_usable(bool disabled) noexcept;  // process_vm_readv works here (and is not disabled)

// Bounded MPSC ring (protocol 7). Only producers write a cell: at the claim
// its sequence becomes the producer index, at the commit index + 1, which is
// what the consumer polls for. The consumer frees cells by moving `head`
// (its own line); producers learn which cells are free from the `limit` on
// their own line (head + depth, as some producer last read head), and read
// the consumer's line only when the tail reaches that limit: about once per
// lap of the ring, not once per message. A cell line therefore crosses once
// per message, writer to reader, and comes back as an invalidation.
// Inline: these are the hot path of every send and every poll.

// The consumer's head, read by a producer whose tail reached the limit
// (once a lap): raises the limit, or says the queue is full (cold).
bool queue_refill(queue_ctl* q, uint64_t pos) noexcept;

// An exchange's claim at index short_lap of a lap (cold: once in
// short_lap + 1 messages): claims that cell and moves the tail to the next
// lap's index 0 in one CAS, and marks the claim as the lap's end (the pid
// negated), or returns nullptr when the next lap's first cell is not free
// yet (the caller claims as usual). The cell carries a message as any other:
// the consumer learns of the lap's end from the line it polls, with the
// message, and no cell of its own crosses for it (queue_step).
cell* queue_claim_lap_end(region_view r, uint64_t pos) noexcept;

// Claims the next cell of a peer's queue, or nullptr when the queue is full.
// `exchange`: the sender took a message since its previous send (a request
// and its reply, a ping-pong): at index short_lap of a lap it ends the lap
// (queue_claim_lap_end), so that such traffic reuses the first short_lap + 1 cells and
// their lines stay in both L1 caches (256 cells take all of them, and each
// lap then fetches every line anew). A stream claims every cell in turn.
inline cell* queue_claim(region_view r, bool exchange = false) noexcept {
  queue_ctl* q = r.ctl();
  uint64_t pos = q->tail.load(std::memory_order_relaxed);
  for (;;) {
    if (exchange && (pos & (queue_cells - 1)) == short_lap) [[unlikely]] {
      if (cell* c = queue_claim_lap_end(r, pos)) return c;
      pos = q->tail.load(std::memory_order_relaxed);
      if ((pos & (queue_cells - 1)) == short_lap) exchange = false;  // the next lap is busy: go on in this one
      continue;
    }
    if (static_cast<int64_t>(pos - q->limit.load(std::memory_order_acquire)) >= 0) [[unlikely]] {
      if (!queue_refill(q, pos)) {
        uint64_t now = q->tail.load(std::memory_order_relaxed);
        if (now == pos) return nullptr;  // full
        pos = now;
        continue;
      }
    }
    // seq_cst (the same locked instruction on x86): ordered before the
    // load of `sleeping` in queue_commit, against the owner's arm().
    if (q->tail.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst, std::memory_order_relaxed))
        [[likely]] {
      cell* c = r.cell_at(pos);
#if defined(__SANITIZE_THREAD__)
      // The cell is free because the consumer moved head past it, which we
      // learned through `limit`: that chain runs through the consumer's own
      // mapping of the region, and ThreadSanitizer, which tells atomics by
      // their address, cannot follow it when producers map the region
      // elsewhere (the white-box tests map it twice in one process). This
      // load of the word the cell's last producer released hands it the
      // same edge, through our mapping. Not in other builds: the cell is
      // not read on the send path.
      (void)c->h.seq.load(std::memory_order_acquire);
#endif
      // The pid first, then the claim: a consumer that finds the sequence
      // at this index finds this producer's pid (queue_stalled).
      c->h.producer = self_pid();
      c->h.seq.store(pos, std::memory_order_release);
      return c;
    }
  }
}

// Copies n <= 16 bytes (an inline message) with at most two pairs of
// overlapping loads and stores: no call into memcpy on the small-message path.
inline void copy_small(void* dst, const void* src, size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<const unsigned char*>(src);
  if (n >= 8) {
    uint64_t a, b;
    __builtin_memcpy(&a, s, 8);
    __builtin_memcpy(&b, s + n - 8, 8);
    __builtin_memcpy(d, &a, 8);
    __builtin_memcpy(d + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    __builtin_memcpy(&a, s, 4);
    __builtin_memcpy(&b, s + n - 4, 4);
    __builtin_memcpy(d, &a, 4);
    __builtin_memcpy(d + n - 4, &b, 4);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  }
}

// Wakes the owner of region r, asleep on its wait object's fd (cold).
void ring_bell(region_view r) noexcept;

// Asks for the header line of the cell at producer index `pos` in
// exclusive state (the caller checks has_prefetchw): the send that writes
// that cell then finds the line already on its way or owned.
inline void prefetchw_cell(region_view r, uint64_t pos) noexcept {
#if defined(__x86_64__)
  const cell* c = r.cell_at(pos);
  asm volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(&c->h)));
#endif
}

// Publishes a claimed cell to the consumer. `prefetch`: take the next
// cell's line exclusive now (a stream's next send writes it); an exchange
// does not, as the consumer polls that line and would fetch it back.
inline void queue_commit(region_view r, cell* c, bool prefetch = true) noexcept {
  // The sequence still holds the producer index the cell was claimed at.
  uint64_t pos = c->h.seq.load(std::memory_order_relaxed);
  c->h.seq.store(pos + 1, std::memory_order_release);
  if (r.ctl()->sleeping.load(std::memory_order_seq_cst) == asleep) [[unlikely]]
    ring_bell(r);
  // Ask for the next cell's header line in exclusive state now, while the
  // consumer is busy with this one: the next send then writes a line it
  // already owns, and only the consumer's read remains on the critical path.
  if (has_prefetchw && prefetch) [[likely]]
    prefetchw_cell(r, pos + 1);
}

// The committed cell `skip` cells past the head of our own queue (cells
// consumed but not released yet), or nullptr. Sequences left from earlier
// laps (index + 1 - k * depth) never equal it.
inline cell* queue_peek(region_view r, uint32_t skip = 0) noexcept {
  uint64_t pos = r.ctl()->head.load(std::memory_order_relaxed) + skip;
  cell* c = r.cell_at(pos);
  if (c->h.seq.load(std::memory_order_acquire) == pos + 1) return c;
  return nullptr;
}
// The first payload line of the cell queue_peek(r, skip) looks at.
inline const unsigned char* queue_next_payload(region_view r, uint32_t skip = 0) noexcept {
  uint64_t pos = r.ctl()->head.load(std::memory_order_relaxed) + skip;
  return r.cell_at(pos)->payload;
}
// How many cells the consumer moves past when it takes c (a cell that
// queue_peek returned): one, or to the next lap's index 0 after a claim that
// ended its lap (queue_claim_lap_end: the pid negated, at index short_lap;
// a negated pid anywhere else counts as one cell).
inline uint32_t queue_step(region_view r, const cell* c) noexcept {
  if (c->h.producer >= 0) [[likely]]
    return 1;
  return c == r.cell_at(short_lap) ? queue_cells - short_lap : 1;
}
// Returns the n cells at the head to the producers: one store to `head`,
// nothing written to the cells.
inline void queue_release_n(region_view r, uint32_t n) noexcept {
  queue_ctl* q = r.ctl();
  q->head.store(q->head.load(std::memory_order_relaxed) + n, std::memory_order_release);
}
// A dead producer's claimed-but-uncommitted head cell, turned into a nop.
cell* queue_stalled(region_view r) noexcept;
// Releases the cell queue_peek returned, and after a cell that ended its
// lap the rest of that lap (queue_step).
void queue_release(region_view r, const cell* c) noexcept;

bool valid_name(const std::string& name) noexcept;
// Addresses are "fi_shm://<name>": the one spelling of the prefix.
inline constexpr const char shm_prefix[] = "fi_shm://";
inline constexpr size_t shm_prefix_len = sizeof(shm_prefix) - 1;
std::string shm_address(const std::string& name);
// The valid endpoint name in an address of `len` bytes ("" when malformed).
std::string shm_name_of(const void* addr, size_t len);
// The name an endpoint opened from `info` takes: an address with a service
// part as it is; one without (a node alone, or the default address
// fi_getinfo gives) with a suffix unique in this process, like port 0 on a
// socket; none at all: a fresh one. `kind` tags generated names.
std::string endpoint_name(const fi_info* info, const char* kind);
// The process a name made by endpoint_name belongs to (0: not such a name).
int32_t pid_of_name(const std::string& name) noexcept;
// The names of this user's enabled endpoints on this host (contexts of
// scalable endpoints left out), from the kernel's list of abstract sockets.
// Control path: it reads /proc/net/unix.
std::vector<std::string> names_on_host();

// ------------------------------------------------------------------ domain (shm_domain.cpp)
// The provider's parameters, read at fi_domain.
struct config {
  bool cma = true;                  // cross-memory attach usable (and FI_SHM_DISABLE_CMA not set)
  bool split = true;                // FI_SHM_SPLIT_COPY
  bool map_mr = true;               // FI_SHM_MAP_MR, and CMA
  size_t inject_size = inject_max;  // FI_SHM_INJECT_SIZE
};
config read_config();

// shm_vma.cpp: the mapping of this process that holds a range.
struct shared_mapping {
  uint64_t dev = 0, ino = 0;    // its file
  uint64_t off = 0;             // the file offset of the range's first byte
  uint64_t start = 0, end = 0;  // the mapping
};
enum class vma_lookup {
  any,         // the kernel's PROCMAP_QUERY where it has it, else as old_kernel
  old_kernel,  // as before Linux 6.11: /proc/self/pagemap, then /proc/self/maps read whole
};
// /proc/self/maps kept open between lookups (opening it costs more than
// PROCMAP_QUERY itself). One user at a time.
struct vma_source {
  int fd = -1;
  pid_t pid = 0;  // the process it was opened in: a child after fork opens its own
  vma_source() = default;
  vma_source(const vma_source&) = delete;
  vma_source& operator=(const vma_source&) = delete;
  ~vma_source();
};
// Whether [addr, addr + len) lies within one readable and writable shared
// mapping of a file in this process; fills *out when it does.
bool shared_mapping_of(vma_source& src, uint64_t addr, uint64_t len, shared_mapping* out,
                       vma_lookup how = vma_lookup::any) noexcept;

// Per-domain state: the published registration table.
struct shm_domain final : prov_domain {
  explicit shm_domain(domain& d);
  ~shm_domain() override;
  int endpoint(fi_info* info, fid_ep** ep, void* context) override;
  int scalable_ep(fi_info* info, fid_ep** sep, void* context) override;
  int stx_ctx(fi_tx_attr* attr, fid_stx** stx, void* context) override;
  int srx_ctx(fi_rx_attr* attr, fid_ep** rx, void* context) override;
  int query_atomic(fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) override;
  // Publishes (or withdraws) the registration `key` in the table.
  void mr_changed(uint64_t key) noexcept override;

  domain& dom;
  config cfg;
  mapping region;
  std::mutex lock;
  // Shared backings of published registrations (see backing_valid), under `lock`.
  struct backing {
    uint64_t dev = 0, ino = 0;
    int fd = -1;  // our own duplicate
    uint32_t gen = 0;
    uint32_t refs = 0;
  };
  struct published {
    uint64_t addr = 0, len = 0;
    uint64_t prov[3] = {};
    size_t backing = SIZE_MAX;  // index in backings, SIZE_MAX: none
  };
  std::vector<backing> backings;
  std::unordered_map<uint64_t, published> by_key;  // registrations looked at
  uint32_t next_gen = 1;
  vma_source vmas;  // under `lock`

  static shm_domain& of(domain& d) noexcept { return static_cast<shm_domain&>(*d.pd); }
};
// Looks up a registration in a peer domain's table (seqlock read).
bool lookup_mr(const unsigned char* domain_base, uint64_t key, mr_entry* out) noexcept;
// Writes the entry of `key` in the table of the domain region whose header
// is h: e when live, else withdrawn. The caller serialises writers
// (shm_domain::lock).
void write_table(domain_hdr* h, mr_slot* table, uint64_t key, bool live, const mr_entry& e) noexcept;

// ------------------------------------------------------------------ peers (shm_peer.cpp)
struct ep;

// A peer we send to, cached per AV index.
struct peer {
  std::string name;
  mapping region;              // its endpoint region
  mapping domain_region;       // its domain's registration table (mapped on first RMA)
  uint32_t slot = UINT32_MAX;  // our slot in its peer table
  int32_t pid = 0;
  uint32_t av_gen = 0;
  bool cma = true;
  bool dead = false;
  // Our mappings of its registrations' shared backings (see backing_valid);
  // base == nullptr records a backing we could not map (not tried again).
  struct remote_map {
    uint32_t gen = 0;
    unsigned char* base = nullptr;
    size_t size = 0;
  };
  std::vector<remote_map> maps;
  peer() = default;
  peer(const peer&) = delete;
  peer& operator=(const peer&) = delete;
  ~peer();
  region_view view() const noexcept { return region_view{region.base()}; }
};

// The fields of a cell header a sender fills (a copyable template).
struct hdr_fields {
  op opcode = op::nop;
  uint8_t atomic_op = 0;
  uint8_t datatype = 0;
  uint64_t tag = 0;  // or the offset of a fragment / response piece
  uint64_t data = 0;
  uint64_t size = 0;
  uint64_t id = 0;
  uint32_t flags = 0;
};

enum class req_kind : uint8_t { send, read, atomic, write };

// An operation that waits for a response (op::ack, read_resp, atomic_resp)
// or still has cells to push (fragments).
struct request {
  uint64_t id = 0;  // request_pool's
  req_kind kind = req_kind::send;
  void* context = nullptr;
  uint64_t flags = 0;     // completion flags
  uint64_t op_flags = 0;  // FI_COMPLETION, ...
  size_t len = 0;
  iovec iov[iov_max] = {};  // source (sends, writes) or result buffers (reads, fetch atomics)
  size_t iov_count = 0;
  peer* to = nullptr;  // where the request's cells go
  int32_t peer_pid = 0;
  // Fragments still to push (no-CMA large messages and writes).
  std::vector<unsigned char> staged;  // copy of an injected payload
  size_t sent = 0;
  hdr_fields tmpl{};  // header fields for the fragments
  rma_desc rma{};
  bool needs_completion = true;
};

// A receive whose message is being copied in two parts (see split_slot).
struct split_recv {
  posted_recv recv;
  iovec iov[iov_max];
  size_t count;
  void* buf;       // completion buf (multi-receive)
  rndv_desc desc;  // where the sender's data is
  uint64_t first;  // [0, first) pulled by us; [first, n) the split part
  uint64_t n;      // bytes that land
  uint64_t size;   // the message's size
  uint32_t slot;   // split slot in our region
  uint32_t gen;
  uint32_t src_slot;  // the sender's peer slot
  uint64_t id;        // the sender's request id
  uint64_t cq_flags;
  uint64_t tag, data;
  fi_addr_t src;
  uint64_t armed_at_us;
  int err;  // from our own part
};

// A message arriving in fragments: into a receive, or into an unexpected entry.
struct assembly {
  posted_recv recv;  // taken off the posted list (multi-receive: what remains goes back)
  uint32_t src_slot;
  uint64_t id;
  uint64_t size;
  size_t filled = 0;
  uint64_t tag = 0, data = 0;
  uint32_t flags = 0;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  unexpected* ux = nullptr;  // fragments go to this unexpected entry until a receive adopts it
};

// ------------------------------------------------------------------ endpoint (shm_ep.cpp)
// FI_EP_DGRAM endpoints: RDM's protocol for what fits one cell, with RMA,
// atomics, fragments and rendezvous left out. A larger message is refused
// (-FI_EMSGSIZE); one of another protocol that arrives is refused back.
inline constexpr size_t dgram_max = inject_max;  // max_msg_size: one cell's payload
inline constexpr uint32_t src_inline = 256;  // FI_SOURCE cache entries inside the endpoint

struct ep : endpoint {
  std::string name;  // our endpoint name (address "fi_shm://<name>")
  bool dgram = false;  // FI_EP_DGRAM
  config cfg;
  name_claim claim;
  mapping region;
  region_view me;
  bool cma = true;
  bool split_enabled = true;  // FI_SHM_SPLIT_COPY=0 turns it off
  bool map_mr = true;         // FI_SHM_MAP_MR=0 turns it off

  // Peers we talk to: by name, and a cache by AV index.
  std::unordered_map<std::string, std::unique_ptr<peer>> by_name;
  // Names whose holder does not speak weft's protocol (another libfabric's
  // region, or weft's of another version): the error entry's err and
  // prov_errno (util/peer_note.hpp), by the name without its context
  // suffix. Bounded: peer_note_keys_max names.
  struct foreign_note {
    int err;   // EPROTO (another libfabric), FI_ENOPROTOOPT (weft of another version)
    int note;  // prov_errno
  };
  std::unordered_map<std::string, foreign_note> foreign;
  std::vector<peer*> by_index;
  std::vector<std::unique_ptr<peer>> retired;  // replaced peers: requests may still point at them
  // The destination of the last send that found its peer in by_index, and
  // that peer: a send to the same address reaches it with one load.
  fi_addr_t last_dest = FI_ADDR_NOTAVAIL;
  peer* last_peer = nullptr;
  // Sender slot -> fi_addr (FI_SOURCE), and the pid the entry was for: the
  // first src_inline slots here, the others in src_more (below).
  fi_addr_t src_cache[src_inline];
  int32_t src_pid[src_inline] = {};

  std::list<assembly> assemblies;
  std::list<split_recv> splits;  // large receives copied in two parts
  uint64_t split_busy = 0;       // bitmap of split slots in use (split_slots = 64)
  uint32_t split_gen[split_slots] = {};

  request_pool<request> requests;
  std::list<request*> outgoing;  // requests with cells still to push, in order
  struct pending_cell {
    peer* to;
    hdr_fields h;
    std::vector<unsigned char> payload;
  };
  std::list<pending_cell> backlog;  // responses that found the peer's queue full
  uint64_t last_liveness_check = 0;
  uint32_t polls = 0;  // progress calls, to pace the periodic checks
  // Progress calls in a row that found nothing: at idle_yield_polls the
  // thread yields its CPU (see progress).
  uint32_t idle_polls = 0;
  // Cells consumed by the last progress call and handed back at the start of
  // the next one (one store to head): it then never sits in front of the
  // locked instruction of a send the application makes in between.
  uint32_t unreleased = 0;
  // Sleeping on an FD wait object (fi_trywait): the bell peers ring, and a
  // timer that wakes a sleeper now and then to look for peers that died
  // while it waits on them. -1 when no wait object has an fd.
  int bell = -1;
  int timer = -1;
  bool armed = false;  // queue_ctl::sleeping set since the last progress
  // Payload lines of the last message taken, when it had at most
  // payload_hint_max of them (0 otherwise): while the queue is empty,
  // progress keeps that many lines of the next cell asked for.
  uint8_t payload_hint = 0;
  // Progress took a cell since our last send: the next inline send (the
  // message in the header line: fi_inject, up to inline_max bytes) answers
  // something and does not prefetch its next cell (queue_commit) ...
  bool took = false;
  // ... and when the send before it answered too, the endpoint is in an
  // exchange (request, reply, request: a ping-pong) and claims in short
  // laps (queue_claim). The first send of a stream's window answers the
  // last one's acknowledgement, but the send before it did not: a stream
  // keeps the whole ring (docs/shm-protocol.md, "Short laps").
  bool exchanging = false;

  // Slots of our peer table known to lie inside our memfd: a cell naming a
  // slot past them makes us look again (senders grow the table), and is
  // dropped when it is past the table still.
  uint32_t peer_cap = 0;
  // The FI_SOURCE cache of slots from src_inline on, grown with the table.
  // (Here at the end, and the first slots inline above as they always
  // were: the fields the polling path reads keep their places; moving them
  // by 3 KiB measured 3-7% slower for 8 B to 1 KiB messages on this VM.)
  // A cached source holds while its AV entry's state word (av::entry_word)
  // has the value it had when found: a removed entry, or one given to
  // another address, makes the sender be looked up again (src_addr_of).
  struct src_seen {
    const uint32_t* word = nullptr;
    uint32_t state = 0;
  };
  struct src_entry {
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
    int32_t pid = 0;
    src_seen seen;
  };
  std::vector<src_entry> src_more;
  src_seen src_seen_inline[src_inline];  // for src_cache

  ep() {
    for (auto& s : src_cache) s = FI_ADDR_NOTAVAIL;
  }
  static ep& of(endpoint& e) noexcept { return static_cast<ep&>(e); }
};

// fi_trywait's arm (see queue_ctl::sleeping) and its undoing at the start
// of the next progress.
bool arm(ep& e) noexcept;
void unarm(ep& e) noexcept;

// Opens an endpoint object of any role (not enabled); throws.
std::unique_ptr<ep> make_ep(domain& dom, const fi_info* info, void* context, ep_role role, std::string name);
extern const ep_transport transport;

// ------------------------------------------------------------------ peers (shm_peer.cpp)
// Why a destination has no peer to send to.
enum class reach { ok, not_in_av, not_yet, gone, foreign };
struct peer_ref {
  peer* p;
  reach why;
};
peer_ref peer_of_slow(ep& e, fi_addr_t addr) noexcept;
fi_addr_t src_addr_slow(ep& e, uint32_t slot) noexcept;

// Whether a cached peer may still be used for `addr`: the AV entry is the
// one it was found for (its generation) and the peer is alive.
inline bool peer_current(const ep& e, const peer& p, fi_addr_t addr) noexcept {
  return p.av_gen == e.av->generation(addr) && !p.dead;
}

// The peer an fi_addr_t names (mapped on first use). Inline: the cached
// cases are on every send. Both caches are checked by peer_current; the
// last destination only saves the loads that find the peer.
inline peer_ref peer_of(ep& e, fi_addr_t addr) noexcept {
  if (addr == e.last_dest && e.last_peer) [[likely]] {
    peer* p = e.last_peer;
    if (peer_current(e, *p, addr)) [[likely]]
      return {p, reach::ok};
  }
  if (e.av && !e.av->rx_index(addr)) [[likely]] {
    uint64_t idx = e.av->index(addr);
    if (idx < e.by_index.size()) {
      peer* p = e.by_index[idx];
      if (p && peer_current(e, *p, addr)) [[likely]] {
        e.last_dest = addr;
        e.last_peer = p;
        return {p, reach::ok};
      }
    }
  }
  return peer_of_slow(e, addr);
}

// The fi_addr_t of the sender in peer slot `slot` (FI_SOURCE), cached per
// slot (inline for the first src_inline slots; the others, in src_more,
// through src_addr_slow).
inline fi_addr_t src_addr_of(ep& e, uint32_t slot) noexcept {
  if (slot < src_inline && e.src_cache[slot] != FI_ADDR_NOTAVAIL &&
      e.src_pid[slot] == e.me.peers()[slot].pid.load(std::memory_order_relaxed) &&
      av::word_now(e.src_seen_inline[slot].word) == e.src_seen_inline[slot].state) [[likely]]
    return e.src_cache[slot];
  return src_addr_slow(e, slot);
}
// Whether `slot` lies in our peer table (looking again at its size when it
// lies past what we knew). Cold: the polling path compares with peer_cap.
bool peer_slot_known(ep& e, uint32_t slot) noexcept;

// The peer that sent a cell (from its slot), mapped for responses.
peer* sender_of(ep& e, uint32_t slot) noexcept;
cell* claim_to_slow(ep& e, peer& p) noexcept;  // p's queue was full: progress once, try again
// Claims a cell of p's queue (nullptr: full even after progressing once).
// It may progress the endpoint: a request for the cell is made after the
// claim, never before (progress would see it half built: push_outgoing
// streamed a fragment request whose first fragment had not gone yet, and
// check_liveness may end requests to a peer that died).
inline cell* claim_to(ep& e, peer& p, bool exchange = false) noexcept {
  cell* c = queue_claim(p.view(), exchange);
  if (!c) [[unlikely]]
    return claim_to_slow(e, p);
  c->h.src = static_cast<uint16_t>(p.slot);
  return c;
}
// Commits a claimed cell as a no-op: the operation it was claimed for could
// not go after all (no memory for its request).
void abandon_cell(peer& p, cell* c) noexcept;
// Fills a claimed cell of p's queue from h and the payload, and commits it.
void post_cell(peer& p, cell* c, const hdr_fields& h, const void* payload, size_t len) noexcept;
// Sends one cell (header fields from h) to p, or keeps it in the backlog
// when p's queue is full. Returns false only on allocation failure.
bool send_cell(ep& e, peer& p, const hdr_fields& h, const void* payload, size_t len) noexcept;
// Tells the sender in peer slot `slot` that its request `id` ended (err: 0
// or a positive FI_E* code).
void send_ack(ep& e, uint32_t slot, uint64_t id, int err) noexcept;
// A send to a destination without a peer (why != ok): -FI_EINVAL when the
// AV does not hold it, -FI_EAGAIN while the peer is not there yet, an
// FI_EIO completion (and 0) when it is gone, an EPROTO or FI_ENOPROTOOPT
// completion whose fi_cq_strerror names the peer when it does not speak
// weft's protocol (ep::foreign).
ssize_t unreachable(ep& e, fi_addr_t dest, reach why, void* context, uint64_t cq_flags,
                    uint64_t op_flags) noexcept;

// ------------------------------------------------------------------ requests (shm_progress.cpp)
// Empty progress calls in a row after which a polling thread yields its CPU
// (sched_yield): a peer that waits on this CPU for its turn (both ranks of a
// ping-pong on one CPU, more ranks than CPUs) then runs at once instead of
// at the end of our time slice. A few microseconds of polling: far more
// than a message takes between two CPUs, so a busy two-CPU exchange never
// gets here, and with nothing else to run the call returns at once.
inline constexpr uint32_t idle_yield_polls = 256;
request* new_request(ep& e, peer* to, req_kind kind, void* context, uint64_t cq_flags, uint64_t op_flags,
                     size_t len) noexcept;
void finish_request(ep& e, request* r) noexcept;
inline bool ops_outstanding(const ep& e) noexcept {
  return !e.requests.empty() || !e.outgoing.empty();
}
// Pushes backlogged response cells and fragment streams as far as queues allow.
void push_outgoing(ep& e) noexcept;
void progress(ep& e) noexcept;

// Takes a free split slot of our region (the caller checked that one is
// free: split_busy != ~0), arms it under a fresh generation and marks it
// busy. Returns the slot; *gen is the generation the peer must echo.
// (Out of line: large copies only, kept out of the polling loop's code.)
uint32_t arm_split(ep& e, uint32_t* gen) noexcept;

// ------------------------------------------------------------------ the data path
// shm_msg.cpp: sends, and the ops tables of util/ep_ops.hpp for a new endpoint.
void install_ops(endpoint& e, ep_role role) noexcept;
// shm_recv.cpp: arriving messages and the matcher's questions.
extern const rx_transport rx_answers;
// A message cell (msg, rndv, or a first fragment) nobody took on the fast path.
enum class arrival { done, held_back };
arrival handle_message(ep& e, cell* c) noexcept;
void handle_fragment(ep& e, cell* c) noexcept;
void handle_cts(ep& e, cell* c) noexcept;
void poll_splits(ep& e) noexcept;
// shm_rma.cpp
ssize_t rma(ep& e, bool write, const iovec* iov, void* const* desc, size_t count, fi_addr_t addr,
            const fi_rma_iov* riov, size_t rcount, uint64_t data, void* ctx, uint64_t flags) noexcept;
void handle_write(ep& e, cell* c) noexcept;
void handle_read_req(ep& e, cell* c) noexcept;
void handle_read_resp(ep& e, cell* c) noexcept;
void handle_notify(ep& e, cell* c) noexcept;
void handle_write_help(ep& e, cell* c) noexcept;
// shm_atomic.cpp
size_t atomic_max_count(atomic_form form, fi_datatype dt) noexcept;
ssize_t atomic(ep& e, const atomic_call& call) noexcept;
void handle_atomic(ep& e, cell* c) noexcept;
void handle_atomic_resp(ep& e, cell* c) noexcept;
int query_atomic(fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags);

// shm_cma.cpp: cross-memory attach and mapped registrations.
// Moves `len` bytes between a local and a remote iov list, starting `off`
// bytes into both. Returns 0 or a positive FI_E* code (FI_EIO: the process
// is gone; FI_EACCES: refused or not mapped).
int cma_copy(bool write, int32_t pid, const iovec* local, size_t lc, const iovec* remote, size_t rc,
             size_t off, size_t len) noexcept;
// Pulls [off, off + len) of a rendezvous message into iov. As cma_copy.
int pull_desc(const rndv_desc& d, const iovec* iov, size_t count, size_t off, size_t len) noexcept;
// Maps the peer's domain region (its registration table); false when it cannot.
bool map_domain(peer& p) noexcept;
// Our mapping of a peer registration's shared backing: the local address of
// its first byte, or nullptr (none, or it cannot be mapped: then CMA).
unsigned char* mapped_mr(peer& p, const mr_entry& me) noexcept;

}  // namespace weft::shm
