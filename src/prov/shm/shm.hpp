#pragma once
// prov/shm: processes on one host. Private declarations.
//
// Data movement (see shm_proto.hpp for the shared layout):
//  * messages up to inject_max are copied through the receiver's queue;
//  * larger messages send a descriptor (op::rndv); the receiver pulls the
//    data with process_vm_readv once it has matched a receive, then acks;
//  * RMA: the initiator validates key, bounds and access against the target
//    domain's published registration table and moves the data itself with
//    process_vm_readv/writev;
//  * without CMA (refused by the kernel, or FI_SHM_DISABLE_CMA=1) the same
//    operations travel through the queue cells as fragments (a pipelined copy
//    through shared bounce buffers); RMA and atomics then need the target's
//    progress, as atomics always do.
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "prov/shm/shm_proto.hpp"
#include "util/av.hpp"
#include "util/domain.hpp"
#include "util/object.hpp"

namespace weft::shm {

// ------------------------------------------------------------------ mapping
// An mmap'ed region file. The creator unlinks it when it closes.
class mapping {
public:
  mapping() = default;
  ~mapping() { reset(); }
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;

  // Creates (O_EXCL) and maps `size` bytes; throws weft::error.
  void create(const std::string& file, size_t size);
  // Maps an existing file; returns false when it does not exist or is too small.
  bool open(const std::string& file, size_t min_size);
  void reset() noexcept;

  unsigned char* base() const noexcept { return base_; }
  size_t size() const noexcept { return size_; }
  const std::string& file() const noexcept { return file_; }
  bool owner() const noexcept { return owner_; }

private:
  unsigned char* base_ = nullptr;
  size_t size_ = 0;
  std::string file_;
  bool owner_ = false;
};

// Accessors of an endpoint region.
struct region_view {
  unsigned char* base = nullptr;
  region_hdr* hdr() const noexcept { return reinterpret_cast<region_hdr*>(base); }
  queue_ctl* ctl() const noexcept { return reinterpret_cast<queue_ctl*>(base + sizeof(region_hdr)); }
  peer_slot* peers() const noexcept { return reinterpret_cast<peer_slot*>(base + region_peers_off); }
  split_slot* splits() const noexcept { return reinterpret_cast<split_slot*>(base + region_split_off); }
  cell* cells() const noexcept { return reinterpret_cast<cell*>(base + region_queue_off); }
};

void region_init(unsigned char* base, const std::string& name, const std::string& domain_file,
                 bool cma) noexcept;

int32_t self_pid() noexcept;  // getpid(), cached (reset after fork)
extern const bool has_prefetchw;

// Bounded MPSC ring with a sequence number per cell: a cell whose sequence
// equals the producer index is free to claim; once written its sequence
// becomes index + 1 (committed); the consumer frees it with index + depth.
// Inline: these are the hot path of every send and every poll.

// Claims the next cell of a peer's queue, or nullptr when the queue is full.
inline cell* queue_claim(region_view r) noexcept {
  queue_ctl* q = r.ctl();
  cell* cells = r.cells();
  uint64_t pos = q->tail.load(std::memory_order_relaxed);
  for (;;) {
    cell* c = &cells[pos & (queue_cells - 1)];
    uint64_t seq = c->h.seq.load(std::memory_order_acquire);
    int64_t diff = static_cast<int64_t>(seq - pos);
    if (diff == 0) {
      if (q->tail.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) [[likely]] {
        c->h.producer = self_pid();
        return c;
      }
    } else if (diff < 0) {
      return nullptr;  // full
    } else {
      pos = q->tail.load(std::memory_order_relaxed);
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

// Publishes a claimed cell to the consumer.
inline void queue_commit(region_view r, cell* c) noexcept {
  // The sequence still holds the producer index the cell was claimed at.
  uint64_t pos = c->h.seq.load(std::memory_order_relaxed);
  c->h.seq.store(pos + 1, std::memory_order_release);
#if defined(__x86_64__)
  // Ask for the next cell's header line in exclusive state now, while the
  // consumer is busy with this one: the next send then writes a line it
  // already owns, and only the consumer's read remains on the critical path.
  if (has_prefetchw) [[likely]] {
    const cell* next = &r.cells()[(pos + 1) & (queue_cells - 1)];
    asm volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(&next->h)));
  }
#endif
}

// The committed cell `skip` cells past the head of our own queue (cells
// consumed but not released yet), or nullptr.
inline cell* queue_peek(region_view r, uint32_t skip = 0) noexcept {
  uint64_t pos = r.ctl()->head.load(std::memory_order_relaxed) + skip;
  cell* c = &r.cells()[pos & (queue_cells - 1)];
  if (c->h.seq.load(std::memory_order_acquire) == pos + 1) return c;
  return nullptr;
}
// Returns the n cells at the head to the producers.
void queue_release_n(region_view r, uint32_t n) noexcept;
// A dead producer's claimed-but-uncommitted head cell, turned into a nop.
cell* queue_stalled(region_view r) noexcept;
// Releases the cell queue_peek returned.
void queue_release(region_view r, cell* c) noexcept;

// File name under /dev/shm of an endpoint region / a domain region.
std::string region_file(const std::string& name);
bool valid_name(const std::string& name) noexcept;
// Addresses are "fi_shm://<name>": the one spelling of the prefix.
inline constexpr const char shm_prefix[] = "fi_shm://";
inline constexpr size_t shm_prefix_len = sizeof(shm_prefix) - 1;
std::string shm_address(const std::string& name);
// The valid endpoint name in an address of `len` bytes ("" when malformed).
std::string shm_name_of(const void* addr, size_t len);

// Removes regions whose owner process is gone (and that belong to this uid).
void remove_stale_regions() noexcept;

bool pid_alive(int32_t pid) noexcept;
bool cma_usable() noexcept;  // process_vm_readv works here (and is not disabled)

// ------------------------------------------------------------------ domain
// Per-domain state: the published registration table.
struct shm_domain {
  mapping region;
  std::string file;  // the region's file name (what endpoints advertise)
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
  bool map_mr = false;  // FI_SHM_MAP_MR and CMA both allow it
  ~shm_domain();
  static shm_domain& of(domain& d);  // created on first use
};
// Publishes (or withdraws) the registration `key` of `d` (domain::mr_changed).
void publish_mr(domain& d, uint64_t key) noexcept;
// Looks up a registration in a peer domain's table (seqlock read).
bool lookup_mr(const unsigned char* domain_base, uint64_t key, mr_entry* out) noexcept;

// ------------------------------------------------------------------ endpoint
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
  uint64_t tag = 0;
  uint64_t data = 0;
  uint64_t size = 0;
  uint64_t id = 0;
  uint32_t flags = 0;
};

enum class req_kind : uint8_t { send, read, atomic, write };

// An operation that waits for a response (op::ack, read_resp, atomic_resp).
struct request {
  uint64_t id = 0;
  req_kind kind = req_kind::send;
  void* context = nullptr;
  uint64_t flags = 0;     // completion flags
  uint64_t op_flags = 0;  // FI_COMPLETION, ...
  size_t len = 0;
  void* buf = nullptr;
  iovec iov[iov_max] = {};  // result buffers (read, fetch atomics)
  size_t iov_count = 0;
  size_t received = 0;  // bytes of response received
  fi_addr_t addr = FI_ADDR_UNSPEC;
  peer* to = nullptr;  // where the request's cells go
  uint64_t tag = 0;
  uint64_t data = 0;
  int32_t peer_pid = 0;
  // Pending fragments (no-CMA large messages and writes): what remains to go.
  std::vector<unsigned char> staged;  // copy of the payload (non-CMA path)
  size_t sent = 0;
  hdr_fields tmpl{};  // header fields for the fragments
  rma_desc rma{};
  bool needs_completion = true;
};

// A posted receive.
struct posted_recv {
  iovec iov[iov_max] = {};
  size_t iov_count = 0;
  size_t total = 0;
  fi_addr_t src = FI_ADDR_UNSPEC;
  uint64_t tag = 0;
  uint64_t ignore = 0;
  void* context = nullptr;
  uint64_t flags = 0;  // FI_COMPLETION, FI_MULTI_RECV, ...
  bool tagged = false;
  size_t multi_off = 0;  // FI_MULTI_RECV: bytes consumed so far
};

// A message that arrived before its receive.
struct unexpected {
  ep* owner = nullptr;  // the endpoint it arrived on (shared receive contexts)
  uint32_t src_slot = 0;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  uint64_t tag = 0;
  uint64_t data = 0;
  uint32_t flags = 0;
  uint64_t size = 0;
  uint64_t id = 0;
  bool rndv = false;
  bool complete = true;              // all fragments present
  rndv_desc desc{};                  // rndv: where the data is
  std::vector<unsigned char> bytes;  // inline / fragment data
  size_t filled = 0;
  bool claimed = false;  // FI_CLAIM'd by a peek
  void* claim_context = nullptr;
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

// A receive in progress: large message matched, fragments still arriving.
struct assembly {
  posted_recv recv;
  uint32_t src_slot;
  uint64_t id;
  uint64_t size;
  size_t filled = 0;
  uint64_t tag = 0, data = 0;
  uint32_t flags = 0;
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  bool to_unexpected = false;  // fragments go to an unexpected entry
  unexpected* ux = nullptr;
};

int endpoint_open(domain& dom, fi_info* info, fid_ep** out, void* context);

// Cross-memory attach: moves `len` bytes between a local and a remote iov
// list, starting `off` bytes into both. Returns 0 or a positive FI_E* code
// (FI_EIO: the process is gone; FI_EACCES: refused or not mapped).
int cma_copy(bool write, int32_t pid, const iovec* local, size_t lc, const iovec* remote, size_t rc,
             size_t off, size_t len) noexcept;
// Pulls [off, off + len) of a rendezvous message into iov. As cma_copy.
int pull_desc(const rndv_desc& d, const iovec* iov, size_t count, size_t off, size_t len) noexcept;

}  // namespace weft::shm
