// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The UCP face: internal objects. Written only on the public fi_* API
// (Debian's /usr/include/rdma) and compiled against Debian's UCX 1.13 headers,
// whose layouts are the ABI this library keeps. Nothing here reaches into
// weft's src/.
//
// Map of UCP onto OFI (docs/ucp.md has the long form):
//   context  -> one fabric + domain per transport (shm, tcp)
//   worker   -> per transport: an RDM endpoint, an AV, a CQ; posted FI_MSG
//               buffers for the face's own frames (AM, stream, control)
//   endpoint -> an fi_addr in the worker's AV + the peer endpoint's id
//   tag      -> fi_tsend/fi_trecv directly (the provider matches; sync sends
//               carry remote CQ data and are acknowledged by a frame)
//   RMA/AMO  -> fi_write/fi_read/fi_atomic with FI_DELIVERY_COMPLETE
#include <deque>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include "include/ucp/api/ucp_1_18.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#define UCP_EXPORT extern "C" __attribute__((visibility("default")))

namespace wucp {

// ---------------------------------------------------------------- logging
// UCX_LOG_LEVEL: fatal, error, warn (default), diag, info, debug, trace.
enum log_lvl : int { L_FATAL, L_ERROR, L_WARN, L_DIAG, L_INFO, L_DEBUG, L_TRACE };
extern int g_log_level;
void log_msg(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3), cold));
#define WUCP_LOG(l, ...)                                               \
  do {                                                                 \
    if ((l) <= ::wucp::g_log_level) ::wucp::log_msg((l), __VA_ARGS__); \
  } while (0)

// ---------------------------------------------------------------- list
// Intrusive circular doubly linked list; a node unlinked is self-linked.
struct link {
  link* prev = this;
  link* next = this;
  bool empty() const noexcept { return next == this; }
  bool linked() const noexcept { return next != this; }
  void push_back(link* n) noexcept {
    n->prev = prev;
    n->next = this;
    prev->next = n;
    prev = n;
  }
  void unlink() noexcept {
    prev->next = next;
    next->prev = prev;
    prev = next = this;
  }
};
template <class T, link T::*M>
T* owner(link* l) noexcept {
  return reinterpret_cast<T*>(reinterpret_cast<char*>(l) -
                              reinterpret_cast<size_t>(&(static_cast<T*>(nullptr)->*M)));
}

// ---------------------------------------------------------------- config
struct config {
  std::vector<std::string> tls;  // UCX_TLS tokens ("all" when unset)
  bool tls_negate = false;
  std::vector<std::string> net_devices;  // UCX_NET_DEVICES ("all" when unset)
  std::string log_level = "warn";
  double keepalive_s = 1.0;   // UCX_KEEPALIVE_INTERVAL
  size_t rx_buf_size = 8192;  // frames above this travel by rendezvous (RDMA read)
  std::vector<std::pair<std::string, std::string>> modified;  // ucp_config_modify
};
config read_config(const char* prefix);
bool tl_enabled(const config& c, const char* kind_name);
bool device_enabled(const config& c, const char* dev);
void apply_log_level(const std::string& s);
// Says "VAR=value: text" once per variable and value, at WARN (UCX's default
// level): a setting not taken as it was written.
void report_once(const std::string& var, const std::string& value, const std::string& text);

// ---------------------------------------------------------------- transports
// TP_LNX: libfabric's linked provider (weft's "lnx": shm to peers on this
// host, tcp to the others, one endpoint and one matcher), opened instead of
// the two when UCX_TLS allows both and the library offers it.
enum tp_kind : uint8_t { TP_SHM = 1, TP_TCP = 2, TP_LNX = 3 };
const char* tp_name(uint8_t kind) noexcept;

// One provider opened by a context: fabric + domain. Shared by the workers.
struct domain_tp {
  uint8_t kind = 0;
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  std::string prov_name, dev_name;
  size_t inject = 0, iov_limit = 1, max_msg = 0;
  bool atomics = false;    // FI_ATOMIC usable
  bool virt_addr = false;  // FI_MR_VIRT_ADDR: RMA addresses are virtual
  bool prov_key = false;
  bool tagged_peek = true;
  double lat_s = 1e-6, bw_Bps = 1e9;  // for ucp_ep_evaluate_perf, measured at context start
  ~domain_tp();
};

// ---------------------------------------------------------------- requests & ops
enum req_flags : uint16_t {
  RF_COMPLETED = 1,
  RF_RELEASED = 2,  // the application freed it; return to the pool when done
  RF_EXTERNAL = 4,  // memory of the application (nbr, OP_ATTR_FIELD_REQUEST)
  RF_DEFERRED = 8,  // on the worker's deferred-callback queue
  RF_USER_CB = 16,
  RF_ALLOCATED = 32,  // from ucp_request_alloc: a pool request only ucp_request_free gives back
  RF_WAIT_ACK = 64,  // completes only when the peer acknowledged (sync send, AM rendezvous)
};
enum cb_kind : uint8_t {
  CB_NONE,
  CB_SEND_NB,      // ucp_send_callback_t(req, status)
  CB_SEND_NBX,     // ucp_send_nbx_callback_t(req, status, user_data)
  CB_TAG_RECV_NB,  // ucp_tag_recv_callback_t(req, status, info*)
  CB_TAG_RECV_NBX,
  CB_STREAM_NB,  // (req, status, length)
  CB_STREAM_NBX,
  CB_AM_DATA,   // ucp_am_recv_data_nbx_callback_t
  CB_INTERNAL,  // void (*)(request*): the face's own continuation
};
enum req_kind : uint8_t {
  RK_SEND,
  RK_TAG_RECV,
  RK_STREAM_RECV,
  RK_FLUSH,
  RK_CLOSE,
  RK_AM_DATA,
  RK_ATOMIC,
  RK_RMA,
  RK_SYNC_SEND,
};

struct ucp_dt_info;

// The UCP request: it lies just before the application's request_size bytes,
// which is what the handle returned to the application points at.
struct alignas(16) request {
  // A contiguous tag receive from the pool hands this context to the
  // provider itself (no separate op): the byte after it says so (OP_TRECV_REQ),
  // at the same offset as op::type.
  fi_context2 fctx;
  uint8_t ctx_type = 0;
  uint16_t flags = 0;
  ucs_status_t status = UCS_INPROGRESS;
  uint8_t kind = RK_SEND;
  uint8_t cbk = CB_NONE;
  uint32_t pending = 0;  // provider operations still attached
  uint32_t id = 0;       // in the worker's request map (sync sends, rendezvous)
  ucp_worker* w = nullptr;
  ucp_ep* ep = nullptr;
  link ep_link;  // on ep->reqs while in flight (failure, FORCE close)
  void* cb = nullptr;
  void* user_data = nullptr;
  request* next_free = nullptr;  // pool free list / deferred queue
  ucp_tag_recv_info_t info{};    // tag receive result; length for stream/AM data
  size_t* length_out = nullptr;
  ucp_tag_recv_info_t* info_out = nullptr;
  // datatype handling for the receive side (IOV beyond the provider's limit,
  // generic): received into bounce, scattered at completion
  ucp_datatype_t dt = 0;
  void* buf = nullptr;
  size_t count = 0;
  void* bounce = nullptr;
  size_t bounce_len = 0;
  // stream receive
  size_t want = 0, got = 0;
  unsigned sflags = 0;
  // generic datatype receive: the unpack state is taken at post time
  void* g_state = nullptr;
  ucs_status_t (*g_unpack)(void*, size_t, const void*, size_t) = nullptr;
  void (*g_finish)(void*) = nullptr;
  void* aux = nullptr;   // kind-specific (AM rendezvous descriptor, the receive op)
  fid_mr* mr = nullptr;  // rendezvous source registration, closed at completion
  void* user() noexcept { return this + 1; }
  static request* of(void* user) noexcept { return static_cast<request*>(user) - 1; }
};
static_assert(sizeof(request) % 16 == 0);

enum op_type : uint8_t {
  OP_FREE,
  OP_TSEND,  // fi_tsend*
  OP_TRECV,  // fi_trecv*
  OP_TPEEK,  // fi_trecvmsg FI_PEEK (ucp_tag_probe_nb)
  OP_MSEND,  // a frame (control, AM, stream) by fi_sendv
  OP_MRECV,  // a posted frame buffer (rx_buf)
  OP_WRITE,
  OP_READ,
  OP_ATOMIC,
  OP_FATOMIC,  // fetching/compare atomics
  OP_KEEPALIVE,
  OP_TRECV_REQ,  // the context is a request's (a contiguous tag receive)
};
enum op_flags : uint16_t {
  OPF_ON_EP = 1,    // linked on ep->ops
  OPF_PENDING = 2,  // not issued yet (back-pressure), on ep->pending
  OPF_COUNTS = 4,   // counted in ep->inflight (flush)
  OPF_CLAIMED = 8,  // a peeked message claimed (FI_CLAIM) for ucp_tag_msg_recv
  OPF_FREE_BOUNCE = 16,
  OPF_SYNC = 32,       // tagged send needs the receiver's acknowledgement
  OPF_FENCED = 64,     // issue only once the endpoint has nothing else in flight
  OPF_NEEDS_ID = 128,  // needs the peer endpoint's id (frames, sync sends)
  OPF_AM_ACK = 256,    // an AM rendezvous read: acknowledge the sender when done
  OPF_PEEK_DONE = 512,
  OPF_LINGER = 1024,  // a close frame counted in the worker's lingering (send_close_frame)
};

struct frame;
struct iface;

// One provider operation. Its fi_context2 is what the provider holds; it is
// separate from the request so that a request may complete (FORCE close,
// failure) while the provider still owns the operation.
struct op {
  fi_context2 fctx;  // must stay first: op_context -> op
  uint8_t type = OP_FREE;
  uint8_t niov = 0;
  uint16_t flags = 0;
  uint8_t frame_type = 0;
  uint8_t pad[3]{};
  request* req = nullptr;
  ucp_ep* ep = nullptr;
  iface* tp = nullptr;
  link ep_link;  // on ep->ops (issued) or ep->pending (not issued)
  op* next_free = nullptr;
  fi_addr_t dest = FI_ADDR_UNSPEC;
  iovec iov[4]{};
  uint64_t tag = 0, ignore = 0, data = 0;
  uint64_t raddr = 0, rkey = 0;
  void* bounce = nullptr;
  fid_mr* mr = nullptr;  // rendezvous registration
  void* desc = nullptr;  // the source's local descriptor (fi_mr_desc), when it lies in mapped memory
  // atomics
  uint32_t aop = 0, adt = 0;
  uint64_t operand = 0, compare = 0, result = 0;
  void* result_ptr = nullptr;
  size_t result_size = 0;
  alignas(8) uint8_t hdr[64];  // frame header lives here while the send is in flight
  static op* of(void* ctx) noexcept { return static_cast<op*>(ctx); }
};
static_assert(offsetof(op, type) == sizeof(fi_context2) &&
              offsetof(request, ctx_type) == sizeof(fi_context2));

// A posted buffer for frames (FI_MSG).
struct rx_buf {
  op o;
  iface* tp = nullptr;
  size_t size = 0;
  bool held = false;  // kept by the application (AM DATA): reposted when released
  alignas(64) uint8_t data[];
};

// ---------------------------------------------------------------- wire
// Frames of the face's own protocol, sent with fi_send on the same RDM
// endpoint as the tagged traffic. Every field from a peer is checked before use.
enum frame_type : uint8_t {
  F_CONN_REQ = 1,  // payload: sender's worker address; aux = conn_sn; src = sender ep id
  F_CONN_REP,      // dst = requester's ep, src = replier's ep
  F_SYNC_ACK,      // aux = request id of the sync send
  F_AM,            // am_id, hdr_len, payload = user header + data
  F_AM_RTS,        // payload = user header; len = data length; raddr/rkey; aux = request id
  F_AM_ATS,        // aux = request id; status in flags
  F_STREAM,        // payload = data
  F_CLOSE,         // the sender closed its endpoint
  F_KEEPALIVE,
  F_LAST,
};
enum frame_flags : uint8_t { FF_REPLY = 1, FF_NO_LOOPBACK = 2, FF_ERROR = 4 };
struct frame {
  uint8_t type;
  uint8_t flags;
  uint16_t pad;
  uint32_t am_id;
  uint32_t dst;  // receiver's endpoint id (~0: none)
  uint32_t src;  // sender's endpoint id
  uint32_t hdr_len;
  uint32_t pad2;
  uint64_t len;
  uint64_t aux;
  uint64_t raddr;
  uint64_t rkey;
};
static_assert(sizeof(frame) == 56 && offsetof(frame, len) == 24);
inline constexpr uint32_t no_id = ~0u;

// Worker address: header + one entry per transport.
struct addr_hdr {
  uint32_t magic;
  uint8_t version;
  uint8_t count;
  uint16_t flags;
  uint64_t uuid;
  uint64_t host;
  uint32_t pid;
  uint32_t pad;
};
static_assert(sizeof(addr_hdr) == 32);
inline constexpr uint32_t addr_magic = 0x50435577;  // "wUCP"
struct addr_entry {                                 // followed by len bytes of the provider's address
  uint8_t kind;
  uint8_t len;
};
struct peer_addr {
  uint64_t uuid = 0, host = 0;
  uint32_t pid = 0;
  struct ent {
    uint8_t kind;
    std::vector<uint8_t> bytes;
  };
  std::vector<ent> ents;
};
bool parse_address(const void* a, size_t len, peer_addr& out) noexcept;
size_t address_length(const void* a) noexcept;  // 0 when not valid

// ---------------------------------------------------------------- per-worker transport
struct iface {
  domain_tp* d = nullptr;
  ucp_worker* w = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  size_t inject = 0;  // d->inject, next to ep for the send fast path
  std::vector<uint8_t> name;
  std::vector<rx_buf*> rx;  // every buffer this iface owns
  size_t rx_posted = 0;
  std::vector<rx_buf*> rx_spare;  // owned, not posted: a held buffer came back
  std::unordered_map<std::string, fi_addr_t> av_cache;
  ~iface();
};

// ---------------------------------------------------------------- endpoint state
enum ep_state : uint8_t { EP_CONNECTING, EP_CONNECTED, EP_FAILED, EP_CLOSED };
enum ep_flags_int : uint32_t {
  EPF_USER = 1,  // handed to the application (not an internal reply endpoint)
  EPF_NO_LOOPBACK = 2,
  EPF_CM_CLIENT = 4,  // created from a socket address
  EPF_CM_SERVER = 8,  // created from a connection request
  EPF_REMOTE_CLOSED = 16,
  EPF_CLOSING = 32,
  EPF_ERR_NOTIFIED = 64,
  EPF_STREAM_READY = 128,  // on worker->stream_ready
  EPF_FAIL_QUEUED = 256,
  EPF_CONN_SENT = 512,
};

struct stream_chunk {
  std::unique_ptr<uint8_t[]> data;
  size_t len = 0, off = 0;
};

struct conn_pair_key {
  uint64_t uuid;
  uint64_t sn;
  bool operator==(const conn_pair_key& o) const noexcept { return uuid == o.uuid && sn == o.sn; }
};
struct conn_pair_hash {
  size_t operator()(const conn_pair_key& k) const noexcept { return k.uuid * 31 + k.sn; }
};

struct listener_impl;
struct conn_req_impl;

}  // namespace wucp

// The opaque handles of ucp_def.h are these structures.
struct ucp_config {
  wucp::config c;
};

struct ucp_context {
  uint64_t features = 0;
  size_t user_req_size = 0;
  ucp_request_init_callback_t req_init = nullptr;
  ucp_request_cleanup_callback_t req_cleanup = nullptr;
  bool mt_shared = false;
  std::string name;
  wucp::config cfg;
  std::vector<std::unique_ptr<wucp::domain_tp>> tps;
  uint64_t host_id = 0;
  std::mutex lock;  // registrations, worker list
  uint64_t next_key = 1;
  std::map<uintptr_t, ucp_mem*> regions;  // mapped memory by start address (local descriptors)
};

struct ucp_ep {
  ucp_worker* w = nullptr;
  wucp::iface* tp = nullptr;
  fi_addr_t dest = FI_ADDR_UNSPEC;
  uint32_t id = wucp::no_id;
  uint32_t remote_id = wucp::no_id;
  uint8_t state = wucp::EP_CONNECTING;
  uint32_t flags = 0;
  ucp_err_handling_mode_t err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucp_err_handler_t err_handler{};
  void* user_data = nullptr;
  ucs_status_t fail_status = UCS_OK;
  char name[UCP_ENTITY_NAME_MAX]{};
  wucp::peer_addr peer;
  uint64_t conn_sn = 0;
  wucp::link ops;       // issued provider operations
  wucp::link pending;   // operations waiting for connection or back-pressure
  wucp::link reqs;      // requests in flight (send side)
  size_t inflight = 0;  // ops (issued or queued) that a flush waits for
  size_t issued = 0;    // of those, handed to the provider
  ucs_status_t nbi_error = UCS_OK;  // the first failure of one without a request: the next flush's, which clears it
  uint32_t fence_epoch = 0;
  bool on_pend_list = false;
  bool ka_inflight = false;
  uint8_t close_stage = 0;
  std::vector<wucp::request*> flushes;
  wucp::link fail_link;    // on worker->failed
  wucp::link stream_link;  // on worker->stream_ready
  std::vector<wucp::stream_chunk> stream_q;
  size_t stream_bytes = 0;
  std::vector<wucp::request*> stream_recvs;
  // client/server
  fid_ep* cm_ep = nullptr;
  wucp::listener_impl* listener = nullptr;
  sockaddr_storage local_sa{}, remote_sa{};
  bool has_sa = false;
  uint64_t client_id = 0;
  int pidfd = -1;                                       // peer on this host: liveness without traffic
  std::vector<std::pair<wucp::rx_buf*, size_t>> early;  // frames before CONNECTED (client)
  // Active messages are handled in the order they were sent: while an old
  // handler's rendezvous message is being fetched, later ones wait here.
  uint32_t am_fetching = 0;
  std::deque<std::pair<wucp::rx_buf*, size_t>> am_later;
  double last_alive = 0;
  wucp::request* close_req = nullptr;
  // ucp_ep_query transports: names valid until the endpoint closes
  std::string tl_name, dev_name;
};

struct ucp_rkey {
  ucp_ep* ep = nullptr;
  uint64_t key = 0;
  uint64_t base = 0;  // start of the remote region (offset addressing)
  uint64_t len = 0;
  bool virt = true;
  uint8_t kind = 0;
  // Whether [raddr, raddr + n) lies in the remote region: what the target's
  // provider would check, told at the call rather than at completion.
  bool holds(uint64_t raddr, uint64_t n) const noexcept {
    return raddr >= base && n <= len && raddr - base <= len - n;
  }
};

struct ucp_mem {
  ucp_context* ctx = nullptr;
  void* addr = nullptr;
  size_t len = 0;
  bool allocated = false;
  int memfd = -1;
  std::vector<std::pair<wucp::domain_tp*, fid_mr*>> mrs;
  unsigned prot = 0;
};

struct ucp_worker {
  // hot: what ucp_worker_progress looks at first
  bool attn = false;  // something besides completions needs progress (see progress())
  bool in_progress = false;
  bool am_called = false;  // an active-message callback ran in this progress call
  wucp::iface* tp0 = nullptr;
  fi_cq_tagged_entry cqe[16];  // where the fast path reads completions
  ucp_context* ctx = nullptr;
  bool mt = false;
  std::recursive_mutex mtx;
  ucs_thread_mode_t thread_mode = UCS_THREAD_MODE_SINGLE;
  uint64_t uuid = 0;
  uint64_t client_id = 0;
  void* user_data = nullptr;
  bool external_efd = false;  // UCP_WORKER_PARAM_FIELD_EVENT_FD: events go to the application's fd
  std::string name;
  std::vector<std::unique_ptr<wucp::iface>> tps;
  std::vector<uint8_t> address;
  // endpoint ids: index in the low 20 bits, generation above
  std::vector<ucp_ep*> eps;
  std::vector<uint32_t> ep_gen;
  std::vector<uint32_t> ep_free;
  // request ids (sync sends, rendezvous)
  std::vector<wucp::request*> rmap;
  std::vector<uint32_t> rmap_gen;
  std::vector<uint32_t> rmap_free;
  std::unordered_map<uint64_t, uint64_t> conn_sn;  // next sequence number per remote worker
  std::unordered_map<wucp::conn_pair_key, ucp_ep*, wucp::conn_pair_hash> unmatched;  // internal eps
  std::unordered_map<wucp::conn_pair_key, ucp_ep*, wucp::conn_pair_hash>
      expect;                      // user eps awaiting their peer
  std::vector<ucp_ep*> graveyard;  // closed endpoints, deleted at the end of progress
  // pools
  std::vector<std::unique_ptr<uint8_t[]>> req_chunks;
  wucp::request* req_free = nullptr;
  size_t req_stride = 0;
  std::vector<std::unique_ptr<wucp::op[]>> op_chunks;
  wucp::op* op_free = nullptr;
  // deferred user callbacks (completions found outside progress)
  wucp::request* deferred_head = nullptr;
  wucp::request* deferred_tail = nullptr;
  // completions read while waiting for a peek result
  std::vector<std::pair<wucp::iface*, fi_cq_tagged_entry>> stash;
  size_t stash_pos = 0;
  wucp::link failed;                    // endpoints whose error handler is due
  wucp::link stream_ready;              // endpoints with stream data
  std::vector<ucp_ep*> pend_list;       // endpoints with queued operations
  std::vector<wucp::op*> ctrl_pending;  // control frames the provider pushed back
  uint32_t fence_epoch = 0;
  // active messages
  struct am_handler {
    ucp_am_recv_callback_t cb = nullptr;
    ucp_am_callback_t old_cb = nullptr;
    void* arg = nullptr;
    uint32_t flags = 0;
  };
  std::vector<am_handler> am;
  struct held {
    uint8_t kind;  // 1 rx_buf (eager data), 2 fetched message (am_buffer), 3 rendezvous descriptor, 4 stream chunk
    void* obj;
    size_t len = 0;  // kind 2: its size
  };
  std::unordered_map<void*, held> am_held;  // data pointer handed to the application
  void* am_spare = nullptr;  // the last fetched message's buffer, kept for the next (am_buffer)
  size_t am_spare_len = 0;
  // wakeup
  int epfd = -1, evfd = -1, tfd = -1;
  bool armed = false;
  // CM (client/server) over FI_EP_MSG
  fid_eq* eq = nullptr;
  fid_fabric* cm_fabric = nullptr;
  fid_domain* cm_domain = nullptr;
  fid_cq* cm_cq = nullptr;
  fi_info* cm_info = nullptr;
  size_t cm_users = 0;
  std::vector<wucp::listener_impl*> listeners;
  std::vector<ucp_ep*> cm_eps;
  // keepalive
  uint32_t ka_tick = 0;
  double ka_last = 0;
  size_t peer_mode_eps = 0;
  size_t inflight = 0;
  ucs_status_t nbi_error = UCS_OK;  // as ucp_ep::nbi_error, for ucp_worker_flush
  size_t lingering = 0;  // close frames not completed yet (send_close_frame)
  std::vector<wucp::request*> flushes;
  bool destroying = false;
};

namespace wucp {

struct listener_impl {
  ucp_worker* w = nullptr;
  fid_pep* pep = nullptr;
  ucp_listener_conn_handler_t conn{};
  ucp_listener_accept_handler_t accept{};
  sockaddr_storage sa{};
  std::vector<conn_req_impl*> reqs;
};

struct conn_req_impl {
  listener_impl* l = nullptr;
  fi_info* info = nullptr;
  sockaddr_storage client_sa{};
  std::vector<uint8_t> priv;
  uint64_t client_id = 0;
  bool has_client_id = false;
  uint32_t client_ep = no_id;
};

// ---------------------------------------------------------------- helpers
struct worker_guard {
  ucp_worker* w;
  explicit worker_guard(ucp_worker* w_) noexcept : w(w_) {
    if (w->mt) w->mtx.lock();
  }
  ~worker_guard() {
    if (w->mt) w->mtx.unlock();
  }
};

double now_s() noexcept;
ucs_status_t from_fi(int fi_err) noexcept;  // -FI_E* or FI_E* -> ucs_status_t
uint64_t random64() noexcept;
uint64_t host_identity() noexcept;

// requests (request.cpp)
void req_pool_grow(ucp_worker* w) noexcept;
void call_cb(request* r) noexcept;
request* req_from_param(ucp_worker* w, const ucp_request_param_t* p) noexcept;
void req_set_cb(request* r, const ucp_request_param_t* p, uint8_t nbx_kind) noexcept;
// The callback of an _nb call (old_cb, of kind old_kind) or else of the param.
void req_set_any_cb(request* r, const ucp_request_param_t* p, uint8_t nbx_kind, void* old_cb,
                    uint8_t old_kind) noexcept;
void req_complete(request* r, ucs_status_t st) noexcept;
void run_deferred(ucp_worker* w) noexcept;
inline ucs_status_ptr_t req_return(request* r) noexcept { return r->user(); }  // the handle to give the application
uint32_t rmap_add(ucp_worker* w, request* r);
request* rmap_take(ucp_worker* w, uint32_t id) noexcept;
request* rmap_get(ucp_worker* w, uint32_t id) noexcept;
ucs_status_ptr_t imm_complete(ucp_worker* w, const ucp_request_param_t* p, ucs_status_t st, uint8_t nbx_kind,
                              size_t length = 0, const ucp_tag_recv_info_t* info = nullptr) noexcept;
void req_pool_destroy(ucp_worker* w) noexcept;

// ops (worker.cpp)
void op_pool_grow(ucp_worker* w) noexcept;
void op_attach(op* o, ucp_ep* ep, request* r, bool counts) noexcept;
void op_finish(ucp_worker* w, op* o, ucs_status_t st) noexcept;  // detach from ep/req, update flush, free
void req_op_done(request* r, ucs_status_t st) noexcept;
unsigned progress(ucp_worker* w) noexcept;
unsigned progress_full(ucp_worker* w) noexcept;
void bury(ucp_worker* w) noexcept;
int cq_read_some(iface* tp, fi_cq_tagged_entry* e, size_t n, bool* err) noexcept;
void handle_cq_error(ucp_worker* w, iface* tp) noexcept;
void dispatch(ucp_worker* w, iface* tp, const fi_cq_tagged_entry& e) noexcept;
void check_flushes(ucp_worker* w, ucp_ep* ep) noexcept;
void dispatch_batch(ucp_worker* w, iface* tp, const fi_cq_tagged_entry* e, ssize_t k) noexcept;
void drain_completions(ucp_worker* w) noexcept;
int issue_one_sided(ucp_worker* w, ucp_ep* ep, op* o) noexcept;
void ep_close_progress(ucp_ep* ep) noexcept;
void trecv_done(ucp_worker* w, op* o, const fi_cq_tagged_entry& e) noexcept;
void sync_acked(ucp_worker* w, const frame& f) noexcept;
void send_sync_ack(ucp_worker* w, uint64_t data) noexcept;
void stream_cancel(request* r) noexcept;
void am_read_done(ucp_worker* w, void* desc, bool ok) noexcept;
void am_release_all(ucp_worker* w) noexcept;
void replay_early(ucp_ep* ep) noexcept;
void frame_recv(ucp_worker* w, iface* tp, rx_buf* b, size_t len) noexcept;
void ensure_pending(ucp_ep* ep) noexcept;
bool progress_pending(ucp_worker* w) noexcept;
void make_address(ucp_worker* w);
iface* pick_transport(ucp_worker* w, const peer_addr& pa, fi_addr_t* dest, ucs_status_t* st);
// The transport and device an endpoint's traffic takes (ucp_ep_query,
// ucp_ep_print_info): over the linked provider, shm for a peer on this host
// (its lnx address names our host) and tcp for any other.
void set_path_names(ucp_ep* ep);
int post_rx(iface* tp, rx_buf* b) noexcept;
// A buffer the application or the face held is back: posted again, or kept
// spare when enough are posted (replace_rx posted one in its place).
void repost_rx(iface* tp, rx_buf* b) noexcept;
// A buffer of `size` bytes is held: a spare one, or a new one, is posted in
// its place.
void replace_rx(iface* tp, size_t size) noexcept;
// in_turn: the frame's earlier ones of its endpoint have been handled (am_drain).
void am_handle(ucp_worker* w, iface* tp, rx_buf* b, const frame& f, size_t total, bool in_turn) noexcept;
void am_drain(ucp_worker* w, ucp_ep* ep) noexcept;
void am_ats(ucp_worker* w, const frame& f) noexcept;
void stream_handle(ucp_worker* w, ucp_ep* ep, const uint8_t* data, size_t len) noexcept;
void stream_fail(ucp_ep* ep, ucs_status_t st) noexcept;
// `nested`: called from a dispatch (a frame that came before its CONNECTED
// event), where completions are not drained before a disconnection.
void cm_progress(ucp_worker* w, bool nested) noexcept;
void cm_close_ep(ucp_ep* ep) noexcept;
void cm_destroy(ucp_worker* w) noexcept;
ucs_status_t cm_connect(ucp_worker* w, const ucp_ep_params_t* p, ucp_ep** out);
ucs_status_t cm_accept(ucp_worker* w, const ucp_ep_params_t* p, ucp_ep** out);
void keepalive(ucp_worker* w) noexcept;

// endpoints (ep.cpp)
ucp_ep* ep_lookup(ucp_worker* w, uint32_t id) noexcept;
ucp_ep* ep_new(ucp_worker* w);
void ep_free(ucp_ep* ep) noexcept;
void ep_fail(ucp_ep* ep, ucs_status_t st) noexcept;
void ep_connected(ucp_ep* ep, uint32_t remote_id) noexcept;
void ep_conn_req(ucp_worker* w, iface* tp, const frame& f, const uint8_t* payload, size_t len) noexcept;
void ep_conn_rep(ucp_worker* w, const frame& f) noexcept;
void ep_remote_closed(ucp_worker* w, const frame& f) noexcept;
int ep_attach_peer(ucp_ep* ep, const void* addr, size_t len, ucs_status_t* st);
void run_failed(ucp_worker* w) noexcept;
void apply_params(ucp_ep* ep, const ucp_ep_params_t* p);
void ep_purge(ucp_ep* ep, ucs_status_t st) noexcept;

// frames
// Sends a frame with up to two payload pieces. When it cannot go now (the
// endpoint is not connected yet, or back-pressure), it is queued on the
// endpoint. r may be null (no completion wanted). Returns 0 or -FI_E*.
int send_frame(ucp_ep* ep, const frame& f, const void* p1, size_t l1, const void* p2, size_t l2, request* r,
               bool must_queue_copy = true) noexcept;
int issue(ucp_worker* w, op* o) noexcept;  // first issue or retry of a queued op; 0, -FI_EAGAIN, -err
void enqueue(ucp_ep* ep, op* o) noexcept;
int send_ctrl_to(iface* tp, fi_addr_t dest, const frame& f, const void* payload, size_t len) noexcept;
// Sends a connected peer a last frame of `type` from `ep` (F_CLOSE: the
// endpoint closes; F_KEEPALIVE: nothing for the peer, which ignores it)
// with a completion, never injected, counted in w->lingering until it ends:
// ucp_worker_destroy waits for those (bounded) before the providers'
// endpoints close, so that frames the endpoint injected before it are
// written out too (the provider sends a peer's frames in order).
void send_close_frame(ucp_ep* ep, uint8_t type) noexcept;

// datatypes (datatype.cpp)
struct dt_view {
  uint8_t cls;    // UCP_DATATYPE_CONTIG / IOV / GENERIC
  size_t length;  // bytes (generic: packed size)
  const ucp_dt_iov_t* iov = nullptr;
  size_t iovcnt = 0;
  const ucp_generic_dt_ops_t* ops = nullptr;
  void* dt_ctx = nullptr;
};
bool dt_describe(ucp_datatype_t dt, const void* buf, size_t count, dt_view& v, bool for_send) noexcept;
// The bytes of `count` elements of a contiguous datatype; false when they
// overflow size_t.
inline bool contig_bytes(ucp_datatype_t dt, size_t count, size_t* len) noexcept {
  const size_t elem = dt >> UCP_DATATYPE_SHIFT;
  if (elem && count > SIZE_MAX / elem) return false;
  *len = elem * count;
  return true;
}
// Packs a send-side buffer of any datatype into dst (v.length bytes).
ucs_status_t dt_pack(ucp_datatype_t dt, const void* buf, size_t count, void* dst, size_t len) noexcept;
// Packs any datatype into a new buffer (malloc), taking one pack state.
ucs_status_t dt_pack_alloc(ucp_datatype_t dt, const void* buf, size_t count, void** out,
                           size_t* len) noexcept;
// Unpacks len received bytes into the receive buffer of any datatype.
ucs_status_t dt_unpack(ucp_datatype_t dt, void* buf, size_t count, const void* src, size_t len) noexcept;
// The receive side of a datatype: IOV and generic receive into the request's
// bounce buffer and are unpacked at completion. A generic datatype's unpack
// state is taken here, when the receive is posted (as UCX does), so that the
// application may destroy the datatype while the receive is pending.
ucs_status_t recv_dt_begin(request* r, ucp_datatype_t dt, void* buf, size_t count, size_t* capacity) noexcept;
ucs_status_t recv_dt_end(request* r, size_t len) noexcept;  // unpack r->bounce
void recv_dt_abort(request* r) noexcept;

// rma/amo
ucs_status_ptr_t rma_post(ucp_ep* ep, bool write, void* buf, size_t len, uint64_t raddr, ucp_rkey_h rkey,
                          const ucp_request_param_t* p, bool nbi) noexcept;
ucs_status_ptr_t amo_post(ucp_ep* ep, ucp_atomic_op_t opc, const void* value, size_t size, uint64_t raddr,
                          ucp_rkey_h rkey, void* result, const ucp_request_param_t* p, bool fetch) noexcept;

// blocking helper for the old blocking calls: progress until the request is done
ucs_status_t wait_ptr(ucp_worker* w, ucs_status_ptr_t p) noexcept;

// perf measurements for evaluate_perf
void measure_transport(domain_tp* d) noexcept;

// ---------------------------------------------------------------- hot inline helpers
// Pools: a free list; growth is out of line.
inline request* req_alloc(ucp_worker* w) noexcept {
  if (!w->req_free) [[unlikely]] {
    req_pool_grow(w);
    if (!w->req_free) return nullptr;
  }
  request* r = w->req_free;
  w->req_free = r->next_free;
  r->next_free = nullptr;
  r->flags = 0;
  r->status = UCS_INPROGRESS;
  r->pending = 0;
  r->id = 0;
  r->w = w;
  r->ep = nullptr;
  r->cbk = CB_NONE;
  r->cb = nullptr;
  r->user_data = nullptr;
  r->info = {};
  r->length_out = nullptr;
  r->info_out = nullptr;
  r->bounce = nullptr;
  r->bounce_len = 0;
  r->got = r->want = 0;
  r->aux = nullptr;
  r->mr = nullptr;
  r->g_state = nullptr;
  return r;
}

inline void req_maybe_release(request* r) noexcept {
  if ((r->flags & (RF_COMPLETED | RF_RELEASED)) != (RF_COMPLETED | RF_RELEASED)) return;
  if (r->pending || (r->flags & (RF_EXTERNAL | RF_DEFERRED))) return;
  ucp_worker* w = r->w;
  r->flags = 0;
  r->next_free = w->req_free;
  w->req_free = r;
}

inline op* op_alloc(ucp_worker* w) noexcept {
  if (!w->op_free) [[unlikely]] {
    op_pool_grow(w);
    if (!w->op_free) return nullptr;
  }
  op* o = w->op_free;
  w->op_free = o->next_free;
  o->next_free = nullptr;
  o->flags = 0;
  o->niov = 0;
  o->req = nullptr;
  o->ep = nullptr;
  o->tp = nullptr;
  o->bounce = nullptr;
  o->mr = nullptr;
  o->result_ptr = nullptr;
  o->desc = nullptr;
  o->data = 0;
  return o;
}

inline void op_free(ucp_worker* w, op* o) noexcept {
  o->type = OP_FREE;
  o->next_free = w->op_free;
  w->op_free = o;
}

// Completion of a request that holds nothing (a contiguous tag receive): the
// general req_complete without its releases.
inline void req_complete_plain(request* r) noexcept {
  r->status = UCS_OK;
  if (r->info_out) [[unlikely]]
    *r->info_out = r->info;
  if (r->length_out) [[unlikely]]
    *r->length_out = r->info.length;
  r->flags |= RF_COMPLETED;
  if (r->cbk != CB_NONE) {
    if (!r->w->in_progress) [[unlikely]] {
      r->flags &= ~RF_COMPLETED;
      req_complete(r, UCS_OK);
      return;
    }
    call_cb(r);
  }
  req_maybe_release(r);
}

}  // namespace wucp
