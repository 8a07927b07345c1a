// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// libweft_rsm internals: the RSMAPI face written on the public fi_* API only
// (Debian's /usr/include/rdma headers, libfabric.so.1 by SONAME). Nothing here
// reaches into weft's own sources; the same library runs over Debian's
// libfabric or weft's. The design is in docs/rsm.md.
#include <dirent.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rsmapi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#define RSM_API extern "C" __attribute__((visibility("default")))

namespace weft::rsm {

// ------------------------------------------------------------------ utilities
uint64_t now_ms() noexcept;
uint64_t now_ns() noexcept;
uint64_t random64() noexcept;             // never 0
void log(const char* fmt, ...) noexcept;  // WEFT_RSM_LOG=1: one line on stderr
#define RSM_LOG(...)                                        \
  do {                                                      \
    if (::weft::rsm::log_on) ::weft::rsm::log(__VA_ARGS__); \
  } while (0)
extern bool log_on;
// Says "VAR=value: <problem> (accepted: <the row's>); <then>" once per
// variable and value on stderr, whatever WEFT_RSM_LOG says: a setting
// (settings.hpp) not taken as written. then: "the default, <the row's>, is
// used" when empty.
void report_setting(const char* var, const char* value, const char* problem, const char* then = "") noexcept;

// An enum argument's value as the int a C caller passed: C allows any int
// there, while loading an out-of-range value through the C++ enum type is
// undefined.
template <typename E>
inline int enum_value(const E& e) noexcept {
  int v;
  static_assert(sizeof(E) == sizeof(int));
  memcpy(&v, &e, sizeof v);
  return v;
}

// A directory stream that is closed however the scope is left.
struct dir_closer {
  void operator()(DIR* d) const noexcept { closedir(d); }
};
using dir_ptr = std::unique_ptr<DIR, dir_closer>;

// Reads a whole file; false if it cannot be opened. Unlike iostreams, an
// allocation failure throws (and becomes RSMERR_INSUFFICIENT_MEM) instead of
// looking like a short file.
bool read_file(const std::string& path, std::string* out);
std::vector<std::string> split_words(const std::string& s);

// Runs a C entry point's body: no exception crosses the C boundary.
template <typename F>
int guard(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return RSMERR_INSUFFICIENT_MEM;
  } catch (...) {
    return RSMERR_INSUFFICIENT_RESOURCES;
  }
}

// A deadline on CLOCK_MONOTONIC; a negative budget never expires.
struct deadline {
  uint64_t at_ms;
  explicit deadline(int64_t budget_ms) noexcept
      : at_ms(budget_ms < 0 ? UINT64_MAX : now_ms() + static_cast<uint64_t>(budget_ms)) {}
  bool expired() const noexcept { return at_ms != UINT64_MAX && now_ms() >= at_ms; }
  int remaining_ms() const noexcept;  // for poll(2): -1 = forever
};

// ------------------------------------------------------------------ configuration
struct node_entry {
  rsm_node_id_t id = 0;
  std::string host;   // as written in the table
  uint32_t ipv4 = 0;  // network order; 0 = not resolved
  uint16_t port = 0;  // directory port of this node
};

struct config {
  int error = 0;  // RSMERR_BAD_CONF when the node table is malformed
  std::string error_text;
  std::vector<node_entry> nodes;  // empty: the one-host default (node 1 = 127.0.0.1)
  bool table_given = false;
  rsm_node_id_t local_node = 1;
  bool local_known = true;                         // false: a table that names none of this host's addresses
  std::string run_dir;                             // registry root, mode 0700
  int timeout_ms = 10000;                          // bound on one data transfer
  int connect_timeout_ms = 5000;                   // bound on connect (lookup + request + reply)
  int liveness_ms = 5000;                          // a silent peer is declared dead after this
  int ack_timeout_ms = 2000;                       // rebind/republish wait for importers' acknowledgements
  int spin_us = 100;                               // service thread keeps polling this long after activity
  uint64_t put_completion = FI_DELIVERY_COMPLETE;  // or FI_TRANSMIT_COMPLETE (WEFT_RSM_COMPLETION)
  bool big_endian = false;                         // byte order this process announces
  size_t max_segment_size = 0;                     // attr_max_export_segment_size (= max import map size)
  size_t tot_export_size = 0;
  size_t tot_map_size = 0;
  unsigned long max_export_segments = 1024;
  unsigned long max_import_segments = 1024;
  const node_entry* find(rsm_node_id_t id) const noexcept;
};
const config& cfg();  // parsed once from the environment

// ------------------------------------------------------------------ handles
// Opaque handles are not pointers: an index into a process-wide slot table
// with a generation, so a stale, forged or foreign handle is refused
// (RSMERR_BAD_*_HNDL) instead of dereferenced.
enum class kind : uint8_t { controller = 1, exporter = 2, importer = 3, localmem = 4, barrier = 5 };
struct controller;
uint64_t handle_add(kind k, void* obj, controller* ctl);
void handle_remove(uint64_t h) noexcept;
// obj and ctl of a live handle of kind k, or false.
bool handle_get(uint64_t h, kind k, void** obj, controller** ctl) noexcept;
inline kind handle_kind(uint64_t h) noexcept {
  return static_cast<kind>(h & 0xff);
}
template <typename T>
inline uint64_t hval(T* p) noexcept {
  return reinterpret_cast<uint64_t>(p);
}

// ------------------------------------------------------------------ signals
// The event state of one segment handle: a count of posts not yet waited
// for, and a pipe that holds one byte while the count is not zero. The
// pipe's read end is the poll fd handed out (a pipe reports POLLRDNORM, as
// RSMAPI programs poll for; an eventfd would report POLLIN only).
struct sigstate {
  std::mutex mtx;
  int rfd = -1, wfd = -1;
  uint64_t pending = 0;  // events not yet consumed
  int pollfd_refs = 0;
  std::atomic<bool> broken{false};  // connection gone: waiters wake and see CONN_ABORTED
  sigstate();
  ~sigstate();
  void post(bool no_accumulate) noexcept;
  void wake_all() noexcept;     // connection gone
  bool consume() noexcept;      // takes one event if any
  bool pollfd_held() noexcept;  // someone holds the poll fd (RSMERR_POLLFD_IN_USE)
};

// ------------------------------------------------------------------ peers
// Another process's controller instance we talk to.
struct peer {
  uint64_t instance = 0;
  std::vector<uint8_t> addr;  // its service endpoint's fi address
  fi_addr_t svc_fa = FI_ADDR_NOTAVAIL;
  fi_addr_t data_fa = FI_ADDR_NOTAVAIL;  // in the data AV (under data_mtx)
  rsm_node_id_t node = 0;
  uint32_t pid = 0;
  int pidfd = -1;  // same node: becomes readable when it exits
  uint64_t last_rx_ms = 0;
  uint64_t last_ping_ms = 0;
  int inflight = 0;  // our sends not yet completed
  bool dead = false;
  int users = 0;  // imports + connections referring to it
};

// What an importer uses to reach the exporter's memory; immutable once
// published, replaced (not edited) on rebind or key rotation.
struct target {
  uint64_t base = 0;  // remote address of offset 0
  uint64_t key = 0;
  uint64_t size = 0;
  uint32_t gen = 0;
};

// ------------------------------------------------------------------ export side
struct binding {
  void* vaddr = nullptr;
  size_t size = 0;
  fid_mr* mr[3] = {};  // per access level: read, write, read/write
  uint64_t key[3] = {};
  int backing_fd = -1;  // shareable memory (shm file, memfd): O_RDWR, -1 if private
  uint64_t backing_off = 0;
};
int level_of(rsm_permission_t owner_bits) noexcept;  // 0400→0, 0200→1, 0600→2

struct conn;
struct export_seg {
  controller* ctl = nullptr;
  uint64_t handle = 0;
  uint32_t flags = 0;
  pid_t creator = 0;
  bool published = false;
  rsm_memseg_id_t segid = 0;
  std::vector<rsmapi_access_entry_t> acl;  // empty: every node, default permission
  std::unique_ptr<binding> bind;
  std::unordered_map<uint64_t, conn*> conns;  // conn id → connection
  std::shared_ptr<sigstate> sig;
  uint32_t gen = 1;
  int pending_acks = 0;  // importers yet to acknowledge a rebind or key rotation
  bool busy = false;     // an operation waits for acknowledgements (ctl_mtx released)
  ~export_seg();
};

// An importer connected to an export segment, as the exporter sees it.
struct conn {
  uint64_t id = 0;
  uint32_t uid = 0, gid = 0;  // as the importer announced them
  uint64_t token = 0;         // the importer must quote it
  uint64_t import_id = 0;     // the importer's name for its handle
  uint64_t import_token = 0;
  export_seg* seg = nullptr;
  peer* p = nullptr;
  rsm_permission_t perm = 0;
  rsm_node_id_t node = 0;
  uint32_t pid = 0;
  uint32_t acked_gen = 0;
  int map_fd = -1;  // the importer's mapping socket, if it mapped
};

// ------------------------------------------------------------------ import side
struct barrier_state;
struct import_seg {
  controller* ctl = nullptr;
  uint64_t handle = 0;
  uint64_t id = 0;     // our name for it, quoted by the exporter
  uint64_t token = 0;  // exporter must quote it
  uint64_t conn_id = 0, conn_token = 0;
  peer* p = nullptr;
  rsm_node_id_t node = 0;
  rsm_memseg_id_t segid = 0;
  rsm_permission_t perm = 0;
  bool swap = false;
  bool same_node = false;
  bool map_ok = false;
  uint32_t exporter_pid = 0;
  uint64_t exporter_instance = 0;
  std::atomic<const target*> tgt{nullptr};
  std::vector<std::unique_ptr<target>> old_targets;  // freed at disconnect
  std::atomic<int> aborted{0};                       // 0 or the RSMERR to report
  std::atomic<uint32_t> gen{0};                      // bumped by rebind and abort
  std::atomic<uint64_t> errors{0};                   // transfers that failed
  rsm_barrier_mode_t mode = RSM_BARRIER_MODE_IMPLICIT;
  int barriers = 0;       // initialised, not destroyed
  int open_barriers = 0;  // of those, open (data_mtx)
  std::shared_ptr<sigstate> sig;
  // mapping (under map_mtx)
  std::mutex map_mtx;
  void* map_addr = nullptr;
  size_t map_len = 0;
  off_t map_off = 0;
  int map_prot = 0;
  int map_sock = -1;                // stays open while mapped: the exporter pushes rebinds on it
  fi_addr_t fa = FI_ADDR_NOTAVAIL;  // the exporter in the data AV
  // connect handshake (under ctl->ctl_mtx)
  bool connecting = false;
  int connect_status = -1;  // -1: no reply yet
  int connect_efd = -1;     // the service thread writes it when the reply is in
  uint32_t exporter_big_endian = 0;
};

struct localmem {
  controller* ctl = nullptr;
  uint64_t handle = 0;
  char* vaddr = nullptr;
  size_t len = 0;
  fid_mr* mr = nullptr;
  void* desc = nullptr;
};

struct barrier_state {
  uint64_t import_handle = 0;
  uint64_t handle = 0;
  bool opened = false;
  uint64_t errors_at_open = 0;
  uint32_t gen_at_open = 0;
};

// One transfer's completion context on the data endpoint. A transfer given
// up on (timeout) stays allocated until the provider completes it.
struct xfer {
  fi_context2 ctx;  // first: providers may use it
  bool done = false;
  int err = 0;
  bool abandoned = false;
};

// ------------------------------------------------------------------ controller
struct service;
struct controller {
  std::string name;  // "shm0", "tcp0"
  std::string prov;  // provider name asked of fi_getinfo
  uint64_t handle = 0;
  int user_refs = 0;  // rsm_get_controller minus rsm_release_controller
  int deps = 0;       // segments and local memory handles still using it
  bool open = false;
  pid_t owner = 0;  // a forked child does not own the parent's fabric
  rsm_node_id_t node = 0;
  uint64_t instance = 0;
  bool tcp = false;

  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* svc_dom = nullptr;
  fid_av* svc_av = nullptr;
  fid_cq* svc_cq = nullptr;
  fid_ep* svc_ep = nullptr;
  fid_domain* data_dom = nullptr;
  fid_av* data_av = nullptr;
  fid_cq* data_cq = nullptr;
  fid_ep* data_ep = nullptr;
  int svc_wait_fd = -1;
  bool virt_addr = false;
  bool prov_key = false;
  uint64_t key_mask = ~0ull;
  size_t max_msg = SIZE_MAX;
  std::vector<uint8_t> svc_addr;
  uint32_t node_ipv4 = 0;  // tcp: the address its endpoints are bound to
  uint16_t dir_port = 0;

  std::mutex ctl_mtx;   // tables below, export segments, connections
  std::mutex data_mtx;  // data endpoint and CQ; an import handle's lifetime vs its users
  std::unordered_map<uint32_t, export_seg*> published;
  std::unordered_map<uint64_t, conn*> conns;
  std::unordered_map<uint64_t, import_seg*> imports;  // by import id
  std::unordered_map<uint64_t, peer*> peers;          // by instance
  std::condition_variable cv;                         // acknowledgements arrived, a segment is no longer busy
  size_t export_count = 0, export_bytes = 0, import_count = 0, map_bytes = 0;
  std::condition_variable resources_cv;  // export_create waits here without DONTWAIT

  xfer* hot = nullptr;                             // the data path's reusable context (under data_mtx)
  uint64_t put_completion = FI_DELIVERY_COMPLETE;  // completion level of puts (config)
  size_t abandoned = 0;

  std::unique_ptr<service> svc;
};

// Controllers live for the whole process (their fabric resources are closed
// when the last user goes), so a handle read without a lock never points at
// freed memory.
int controller_get(const char* name, controller** out);
int controller_release(controller* c);
int controller_lookup(rsmapi_controller_handle_t h, controller** out) noexcept;  // BAD_CTLR_HNDL, ...
void controller_dep(controller* c, int delta);   // deps +/-; closes when unused
bool controller_usable(controller* c) noexcept;  // open and owned by this process
peer* peer_find_or_add(controller* c, uint64_t instance, const uint8_t* addr, size_t len, rsm_node_id_t node,
                       uint32_t pid);                        // under ctl_mtx
void peer_put(controller* c, peer* p);                       // under ctl_mtx: one user less
int peer_data_addr(controller* c, peer* p, fi_addr_t* out);  // under data_mtx

// ------------------------------------------------------------------ registry
// The segments published on this node, one file each under
// <run_dir>/<prov>/<node>/, and the directory that answers other nodes.
struct reg_entry {
  uint64_t instance = 0;
  uint32_t pid = 0;
  uint64_t start_time = 0;  // of pid, to tell a reused pid
  std::vector<uint8_t> addr;
};
int registry_publish(controller* c, rsm_memseg_id_t* segid, const reg_entry& e);  // SEGID_IN_USE
void registry_unpublish(controller* c, rsm_memseg_id_t segid) noexcept;
int registry_lookup_local(const std::string& prov, rsm_node_id_t node, rsm_memseg_id_t segid, reg_entry* out);
int registry_lookup(controller* c, rsm_node_id_t node, rsm_memseg_id_t segid, const deadline& d,
                    reg_entry* out);  // local file or the node's directory
std::string registry_dir(const std::string& prov, rsm_node_id_t node);
std::string map_socket_path(uint32_t pid, uint64_t instance);
void registry_collect_sockets() noexcept;  // removes mapping sockets of dead processes
uint64_t process_start_time(uint32_t pid) noexcept;

// ------------------------------------------------------------------ service
// The controller's service thread: owns the service endpoint's CQ, answers
// connects, delivers signals, rebinds and aborts, watches peers, serves
// the directory and mapping requests.
int service_start(controller* c);
void service_stop(controller* c) noexcept;
void service_wake(controller* c) noexcept;
// Queue a control message to a peer (any thread).
void service_send(controller* c, peer* p, std::vector<uint8_t>&& bytes);
// Has the service thread hold the directory port while something is published.
void service_directory_update(controller* c) noexcept;

// Export side helpers used by the service thread (under ctl_mtx).
void export_cut(conn* cn, int reason) noexcept;  // tells the importer, forgets the connection
// RSM_SUCCESS, SEG_NOT_PUBLISHED_TO_NODE or PERM_DENIED for an importer of node
// `node` announcing uid/gid that asks for `want`.
int export_perm_allowed(const export_seg* s, rsm_node_id_t node, uint32_t uid, uint32_t gid,
                        rsm_permission_t want) noexcept;
int export_ensure_mr(export_seg* s, binding* b, int level) noexcept;
int export_open_backing_for(const binding* b, rsm_permission_t perm) noexcept;  // an fd to send, or -1

// Import side helpers used by the service thread (under ctl_mtx).
void import_abort(import_seg* im, int reason) noexcept;
void import_revoke_mapping(import_seg* im) noexcept;  // maps zero pages over it
void import_remap(import_seg* im, int fd, uint64_t file_off) noexcept;

// File descriptors over Unix sockets (SCM_RIGHTS).
bool send_fd_msg(int sock, const std::vector<uint8_t>& bytes, int fd) noexcept;
ssize_t recv_fd_msg(int sock, void* buf, size_t len, int* fd) noexcept;  // *fd = -1 if none came

// Errors of libfabric calls as RSMAPI codes.
int from_fi(int fi_err) noexcept;

}  // namespace weft::rsm
