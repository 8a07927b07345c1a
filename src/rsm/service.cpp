// SPDX-License-Identifier: BSD-3-Clause
// The controller's service thread. It alone reads the service endpoint's CQ,
// which is also what progresses the provider for the RMA that importers aim
// at this process's exported segments. It:
//  - answers connect requests (access list, permissions, the key of the
//    registration for the granted access level) and disconnects;
//  - delivers signals, aborts and rebinds to import handles, acknowledges
//    rebinds;
//  - sends every control message other threads queue;
//  - watches peers: pings those it has not heard from, declares dead one
//    silent for the liveness period or (same node) whose pidfd fires, and
//    aborts the imports it served;
//  - holds the node's directory port while something is published here, and
//    serves the mapping socket that hands same-node importers a descriptor
//    for an exported segment's memory.
// It never waits for another thread: control work is short and done under
// the controller's ctl_mtx; the data mutex is never taken here.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "service.hpp"

namespace weft::rsm {
namespace {

constexpr int rx_count = 32;
constexpr int max_inflight_per_peer = 256;
constexpr size_t max_clients = 64;
constexpr size_t dir_request_len = 16 + 4 + 4 + proto::prov_len;
constexpr size_t map_request_len = 16 + 8 + 8;

void post_rx(controller* c, rxbuf* b) {
  for (int tries = 0; tries < 1000; tries++) {
    ssize_t r = fi_recv(c->svc_ep, b->data, sizeof b->data, nullptr, FI_ADDR_UNSPEC, &b->op.ctx);
    if (r != -FI_EAGAIN) {
      if (r) RSM_LOG("fi_recv: %s", fi_strerror(static_cast<int>(-r)));
      return;
    }
    fi_cq_read(c->svc_cq, nullptr, 0);
  }
}

peer* find_peer(controller* c, uint64_t instance) {
  auto it = c->peers.find(instance);
  return it == c->peers.end() ? nullptr : it->second;
}

// Queues a message from the service thread itself (it is posted on the next
// turn of the loop).
void send_now(controller* c, uint64_t instance, std::vector<uint8_t>&& bytes) {
  auto m = std::make_unique<outmsg>();
  m->instance = instance;
  m->bytes = std::move(bytes);
  std::lock_guard<std::mutex> l(c->svc->q_mtx);
  c->svc->queue.push_back(std::move(m));
}

// A peer that exited or stopped answering: every import it served is cut,
// every connection it held here is forgotten. (ctl_mtx held)
void peer_dead(controller* c, peer* p) {
  if (p->dead) return;
  p->dead = true;
  RSM_LOG("peer %016llx (node %u pid %u) is gone", static_cast<unsigned long long>(p->instance), p->node,
          p->pid);
  if (p->pidfd >= 0) {
    close(p->pidfd);
    p->pidfd = -1;
  }
  for (auto& [id, im] : c->imports)
    if (im->p == p) {
      if (im->connecting) {
        im->connecting = false;
        im->connect_status = RSMERR_REMOTE_NODE_UNREACHABLE;
        uint64_t one = 1;
        if (im->connect_efd >= 0) (void)!write(im->connect_efd, &one, sizeof one);
      } else {
        import_abort(im, RSMERR_CONN_ABORTED);
      }
    }
  std::vector<conn*> gone;
  for (auto& [id, cn] : c->conns)
    if (cn->p == p) gone.push_back(cn);
  for (conn* cn : gone) {
    cn->p = nullptr;  // nobody to tell
    export_cut(cn, RSMERR_CONN_ABORTED);
  }
  c->cv.notify_all();
}

// ------------------------------------------------------------------ control messages

void on_connect_req(controller* c, uint64_t sender, proto::reader& r) {
  uint64_t import_id = r.u64(), import_token = r.u64();
  rsm_memseg_id_t segid = r.u32();
  rsm_permission_t perm = r.u32();
  rsm_node_id_t node = r.u32();
  uint32_t uid = r.u32(), gid = r.u32(), pid = r.u32();
  r.u8();  // the importer's byte order: it does the swapping
  std::vector<uint8_t> addr;
  if (!r.bytes(&addr, proto::max_addr) || !r.ok() || addr.empty()) return;
  std::lock_guard<std::mutex> l(c->ctl_mtx);
  peer* p = peer_find_or_add(c, sender, addr.data(), addr.size(), node, pid);
  if (!p || p->dead) return;
  p->last_rx_ms = now_ms();
  int status = RSM_SUCCESS;
  export_seg* s = nullptr;
  auto it = c->published.find(segid);
  if (it == c->published.end() || !it->second->published) {
    status = RSMERR_SEG_NOT_PUBLISHED;
  } else {
    s = it->second;
    status = export_perm_allowed(s, node, uid, gid, perm);
  }
  int level = level_of(perm);
  if (!status && level >= 0) status = export_ensure_mr(s, s->bind.get(), level);
  conn* cn = nullptr;
  if (!status) {
    auto fresh = std::make_unique<conn>();
    fresh->id = random64();
    fresh->token = random64();
    fresh->import_id = import_id;
    fresh->import_token = import_token;
    fresh->seg = s;
    fresh->p = p;
    fresh->perm = perm;
    fresh->node = node;
    fresh->pid = pid;
    fresh->uid = uid;
    fresh->gid = gid;
    fresh->acked_gen = s->gen;
    cn = fresh.release();
    s->conns.emplace(cn->id, cn);
    c->conns.emplace(cn->id, cn);
    p->users++;
  }
  const binding* b = s ? s->bind.get() : nullptr;
  proto::writer w(proto::connect_rep, c->instance);
  w.u64(import_id).u32(static_cast<uint32_t>(status));
  w.u64(cn ? cn->id : 0).u64(cn ? cn->token : 0);
  w.u64(b && cn ? b->size : 0);
  w.u64(b && cn && c->virt_addr ? reinterpret_cast<uint64_t>(b->vaddr) : 0);
  w.u64(b && cn && level >= 0 ? b->key[level] : 0);
  w.u32(s ? s->gen : 0).u8(cfg().big_endian).u32(static_cast<uint32_t>(getpid()));
  w.u8(b && cn && b->backing_fd >= 0 && node == c->node);
  send_now(c, sender, std::move(w.out()));
  RSM_LOG("connect from node %u pid %u for segment %#x perm %o: %d", node, pid, segid, perm, status);
}

void on_connect_rep(controller* c, uint64_t sender, proto::reader& r) {
  uint64_t import_id = r.u64();
  int status = static_cast<int>(r.u32());
  uint64_t conn_id = r.u64(), conn_token = r.u64();
  auto t = std::make_unique<target>();
  t->size = r.u64();
  t->base = r.u64();
  t->key = r.u64();
  t->gen = r.u32();
  uint32_t big = r.u8();
  uint32_t pid = r.u32();
  bool map_ok = r.u8();
  if (!r.ok()) return;
  std::lock_guard<std::mutex> l(c->ctl_mtx);
  auto it = c->imports.find(import_id);
  import_seg* im = it == c->imports.end() ? nullptr : it->second;
  if (!im || !im->connecting || im->exporter_instance != sender) {
    // Nobody waits any more (the connect timed out or was interrupted):
    // release the connection the exporter made for it.
    if (status == RSM_SUCCESS) {
      proto::writer w(proto::disconnect, c->instance);
      w.u64(conn_id).u64(conn_token);
      send_now(c, sender, std::move(w.out()));
    }
    return;
  }
  if (status < 0 || status > RSMERR_SEG_NOT_CONNECTED) status = RSMERR_CONN_ABORTED;
  im->connect_status = status;
  if (!status) {
    im->conn_id = conn_id;
    im->conn_token = conn_token;
    im->gen.store(t->gen, std::memory_order_relaxed);
    im->tgt.store(t.get(), std::memory_order_release);
    im->old_targets.push_back(std::move(t));
    im->exporter_big_endian = big;
    im->exporter_pid = pid;
    im->map_ok = map_ok;
  }
  im->connecting = false;
  uint64_t one = 1;
  if (im->connect_efd >= 0) (void)!write(im->connect_efd, &one, sizeof one);
}

conn* find_conn(controller* c, uint64_t id, uint64_t token, uint64_t sender) {
  auto it = c->conns.find(id);
  if (it == c->conns.end()) return nullptr;
  conn* cn = it->second;
  if (cn->token != token || !cn->p || cn->p->instance != sender) return nullptr;
  return cn;
}

import_seg* find_import(controller* c, uint64_t id, uint64_t token, uint64_t sender) {
  auto it = c->imports.find(id);
  if (it == c->imports.end()) return nullptr;
  import_seg* im = it->second;
  if (im->token != token || im->exporter_instance != sender || im->connecting) return nullptr;
  return im;
}

void drain_pushes(controller* c, import_seg* im, int wait_ms);

void on_message(controller* c, const uint8_t* data, size_t len) {
  proto::reader r(data, len);
  uint16_t t;
  uint64_t sender;
  if (!r.header(&t, &sender) || sender == 0) return;
  if (t != proto::ping && t != proto::pong)
    RSM_LOG("message %u from %016llx", t, static_cast<unsigned long long>(sender));
  if (t == proto::connect_req) return on_connect_req(c, sender, r);
  if (t == proto::connect_rep) {
    {
      std::lock_guard<std::mutex> l(c->ctl_mtx);
      if (peer* p = find_peer(c, sender)) p->last_rx_ms = now_ms();
    }
    return on_connect_rep(c, sender, r);
  }
  std::lock_guard<std::mutex> l(c->ctl_mtx);
  peer* p = find_peer(c, sender);
  if (!p) return;  // we never spoke to it: not a peer of ours
  p->last_rx_ms = now_ms();
  switch (t) {
    case proto::disconnect: {
      uint64_t id = r.u64(), token = r.u64();
      if (!r.ok()) return;
      if (conn* cn = find_conn(c, id, token, sender)) {
        cn->p = nullptr;  // it asked: no abort to send back
        p->users--;
        export_cut(cn, 0);
      }
      return;
    }
    case proto::abort: {
      uint64_t id = r.u64(), token = r.u64();
      uint32_t reason = r.u32();
      if (!r.ok()) return;
      (void)reason;  // unpublished, destroyed or permission revoked: the same to the importer
      if (import_seg* im = find_import(c, id, token, sender)) import_abort(im, RSMERR_CONN_ABORTED);
      return;
    }
    case proto::rebind: {
      uint64_t id = r.u64(), token = r.u64();
      auto nt = std::make_unique<target>();
      nt->base = r.u64();
      nt->key = r.u64();
      nt->size = r.u64();
      nt->gen = r.u32();
      bool map_ok = r.u8();
      if (!r.ok()) return;
      import_seg* im = find_import(c, id, token, sender);
      if (!im || im->aborted.load()) return;
      const target* old = im->tgt.load(std::memory_order_relaxed);
      if (old && nt->size != old->size) return;  // a rebind keeps the size
      im->map_ok = map_ok;
      // The exporter pushed the new memory on the mapping socket before this
      // message left: remap first, so that an acknowledged rebind means the
      // mapping points at the new memory too.
      if (im->map_sock >= 0) drain_pushes(c, im, 200);
      uint32_t gen = nt->gen;
      im->tgt.store(nt.get(), std::memory_order_release);
      im->old_targets.push_back(std::move(nt));
      im->gen.fetch_add(1, std::memory_order_acq_rel);  // open barriers report the rebind
      proto::writer w(proto::rebind_ack, c->instance);
      w.u64(im->conn_id).u64(im->conn_token).u32(gen);
      send_now(c, sender, std::move(w.out()));
      return;
    }
    case proto::rebind_ack: {
      uint64_t id = r.u64(), token = r.u64();
      uint32_t gen = r.u32();
      if (!r.ok()) return;
      conn* cn = find_conn(c, id, token, sender);
      if (cn && gen == cn->seg->gen && cn->acked_gen != gen) {
        cn->acked_gen = gen;
        if (cn->seg->pending_acks > 0) cn->seg->pending_acks--;
        c->cv.notify_all();
      }
      return;
    }
    case proto::signal_to_export: {
      uint64_t id = r.u64(), token = r.u64();
      uint32_t flags = r.u32();
      if (!r.ok()) return;
      if (conn* cn = find_conn(c, id, token, sender)) cn->seg->sig->post(flags & RSM_SIGPOST_NO_ACCUMULATE);
      return;
    }
    case proto::signal_to_import: {
      uint64_t id = r.u64(), token = r.u64();
      uint32_t flags = r.u32();
      if (!r.ok()) return;
      if (import_seg* im = find_import(c, id, token, sender))
        im->sig->post(flags & RSM_SIGPOST_NO_ACCUMULATE);
      return;
    }
    case proto::ping: {
      uint64_t nonce = r.u64();
      if (!r.ok()) return;
      proto::writer w(proto::pong, c->instance);
      w.u64(nonce);
      send_now(c, sender, std::move(w.out()));
      return;
    }
    case proto::pong:
    default:
      return;
  }
}

// ------------------------------------------------------------------ the endpoint

// Posts what is waiting; false when nothing could be posted.
bool flush_sends(controller* c) {
  service& s = *c->svc;
  {
    std::lock_guard<std::mutex> l(s.q_mtx);
    while (!s.queue.empty()) {
      s.backlog.push_back(std::move(s.queue.front()));
      s.queue.pop_front();
    }
  }
  bool any = false;
  size_t n = s.backlog.size();
  for (size_t i = 0; i < n && !s.backlog.empty(); i++) {
    std::unique_ptr<outmsg> m = std::move(s.backlog.front());
    s.backlog.pop_front();
    fi_addr_t fa;
    {
      std::lock_guard<std::mutex> l(c->ctl_mtx);
      peer* p = find_peer(c, m->instance);
      if (!p || p->dead) continue;  // dropped: nobody to deliver to
      if (p->inflight >= max_inflight_per_peer) {
        s.backlog.push_back(std::move(m));
        continue;
      }
      fa = p->svc_fa;
      p->inflight++;
    }
    ssize_t r = fi_send(c->svc_ep, m->bytes.data(), m->bytes.size(), nullptr, fa, &m->op.ctx);
    if (r == 0) {
      outmsg* raw = m.get();
      s.inflight.emplace(raw, std::move(m));
      any = true;
      continue;
    }
    std::lock_guard<std::mutex> l(c->ctl_mtx);
    peer* p = find_peer(c, m->instance);
    if (p) p->inflight--;
    if (r == -FI_EAGAIN) {
      s.backlog.push_back(std::move(m));
      break;  // the provider is full: progress first
    }
    RSM_LOG("fi_send: %s", fi_strerror(static_cast<int>(-r)));
    if (p && from_fi(static_cast<int>(r)) == RSMERR_CONN_ABORTED) peer_dead(c, p);
  }
  return any;
}

void tx_done(controller* c, svc_op* op, int err) {
  service& s = *c->svc;
  auto it = s.inflight.find(reinterpret_cast<outmsg*>(op));
  if (it == s.inflight.end()) return;
  std::unique_ptr<outmsg> m = std::move(it->second);
  s.inflight.erase(it);
  std::lock_guard<std::mutex> l(c->ctl_mtx);
  peer* p = find_peer(c, m->instance);
  if (!p) return;
  p->inflight--;
  if (err) {
    RSM_LOG("control message to %016llx failed: %s", static_cast<unsigned long long>(m->instance),
            fi_strerror(err));
    if (from_fi(err) == RSMERR_CONN_ABORTED) peer_dead(c, p);
  }
}

// Reads the service CQ until empty; true if anything completed.
bool drain_cq(controller* c) {
  bool any = false;
  fi_cq_msg_entry e[16];
  for (;;) {
    ssize_t n = fi_cq_read(c->svc_cq, e, 16);
    if (n == -FI_EAGAIN) return any;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(c->svc_cq, &err, 0) != 1) return any;
      any = true;
      svc_op* op = static_cast<svc_op*>(err.op_context);
      if (!op) continue;
      if (op->op == svc_op::rx) {
        if (!c->svc->stop.load()) post_rx(c, reinterpret_cast<rxbuf*>(op));
      } else {
        tx_done(c, op, err.err ? err.err : FI_EIO);
      }
      continue;
    }
    if (n < 0) return any;
    any = true;
    for (ssize_t i = 0; i < n; i++) {
      svc_op* op = static_cast<svc_op*>(e[i].op_context);
      if (!op) continue;
      if (op->op == svc_op::rx) {
        auto* b = reinterpret_cast<rxbuf*>(op);
        try {
          on_message(c, b->data, std::min(e[i].len, sizeof b->data));
        } catch (...) {
          // Out of memory: this message is lost (its sender's bounded wait
          // or our liveness checks deal with that); the buffer is not.
          RSM_LOG("a control message was dropped: out of memory");
        }
        post_rx(c, b);
      } else {
        tx_done(c, op, 0);
      }
    }
  }
}

// ------------------------------------------------------------------ sockets

int listen_unix(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) {
    close(fd);
    return -1;
  }
  memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || chmod(path.c_str(), 0600) != 0 ||
      listen(fd, 16) != 0) {
    close(fd);
    unlink(path.c_str());
    return -1;
  }
  return fd;
}

void accept_clients(int lfd, std::vector<sock_client>& clients) {
  for (;;) {
    int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (clients.size() >= max_clients) {
      close(fd);  // too many at once: the asker retries
      continue;
    }
    clients.push_back({fd, now_ms() + 1000, {}});
  }
}

// Reads what has arrived; true once want bytes are in.
bool read_request(sock_client& cl, size_t want, bool* dead) {
  uint8_t tmp[128];
  while (cl.buf.size() < want) {
    ssize_t n = recv(cl.fd, tmp, std::min(sizeof tmp, want - cl.buf.size()), 0);
    if (n > 0) {
      cl.buf.insert(cl.buf.end(), tmp, tmp + n);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) *dead = true;
    return false;
  }
  return true;
}

void serve_directory(controller* c, sock_client& cl) {
  proto::reader r(cl.buf.data(), cl.buf.size());
  uint16_t t;
  uint64_t sender;
  if (!r.header(&t, &sender) || t != proto::lookup) return;
  rsm_node_id_t node = r.u32();
  rsm_memseg_id_t segid = r.u32();
  char prov[proto::prov_len + 1];
  if (!r.fixed(prov, proto::prov_len) || !r.ok()) return;
  reg_entry e;
  int status = RSMERR_SEG_NOT_PUBLISHED;
  // Answer for this node only, and only names made of letters.
  bool name_ok = prov[0] != 0;
  for (const char* q = prov; *q; q++)
    if (!isalnum(static_cast<unsigned char>(*q))) name_ok = false;
  if (node == c->node && name_ok) status = registry_lookup_local(prov, node, segid, &e);
  proto::writer w(proto::lookup_rep, c->instance);
  w.u32(static_cast<uint32_t>(status)).u64(status ? 0 : e.instance).u32(status ? 0 : e.pid);
  if (status)
    w.bytes(nullptr, 0);
  else
    w.bytes(e.addr.data(), e.addr.size());
  (void)!send(cl.fd, w.out().data(), w.out().size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// A same-node importer asks for its mapping descriptor. The connection id and
// token it quotes, its credentials (SO_PEERCRED) and the connection's
// permission decide what it gets: a read-only descriptor for a read-only
// connection, so even a hostile importer cannot map it writable.
void serve_map(controller* c, sock_client& cl) {
  proto::reader r(cl.buf.data(), cl.buf.size());
  uint16_t t;
  uint64_t sender;
  if (!r.header(&t, &sender) || t != proto::map_req) return;
  uint64_t id = r.u64(), token = r.u64();
  if (!r.ok()) return;
  ucred cred{};
  socklen_t cl_len = sizeof cred;
  if (getsockopt(cl.fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl_len) != 0) return;
  std::lock_guard<std::mutex> l(c->ctl_mtx);
  int status = RSMERR_MAP_FAILED;
  int fd = -1;
  const binding* b = nullptr;
  auto it = c->conns.find(id);
  conn* cn = it == c->conns.end() ? nullptr : it->second;
  if (!cn || cn->token != token || cn->pid != static_cast<uint32_t>(cred.pid) || cred.uid != geteuid()) {
    status = RSMERR_SEG_NOT_CONNECTED;
  } else if (cn->node == c->node && cn->seg->published && (b = cn->seg->bind.get()) && b->backing_fd >= 0) {
    fd = export_open_backing_for(b, cn->perm);
    if (fd >= 0) status = RSM_SUCCESS;
  }
  proto::writer w(proto::map_rep, c->instance);
  w.u32(static_cast<uint32_t>(status)).u64(status ? 0 : b->backing_off).u64(status ? 0 : b->size);
  bool sent = send_fd_msg(cl.fd, w.out(), fd);
  if (fd >= 0) close(fd);
  if (sent && status == RSM_SUCCESS) {
    // Keep the socket: a rebind pushes the new memory on it.
    if (cn->map_fd >= 0) close(cn->map_fd);
    cn->map_fd = cl.fd;
    cl.fd = -1;
  }
}

void serve_clients(controller* c, std::vector<sock_client>& clients, size_t want,
                   void (*serve)(controller*, sock_client&)) {
  uint64_t now = now_ms();
  for (size_t i = 0; i < clients.size();) {
    sock_client& cl = clients[i];
    bool dead = false;
    bool done = read_request(cl, want, &dead);
    if (done) serve(c, cl);
    if (done || dead || now >= cl.deadline_ms) {
      if (cl.fd >= 0) close(cl.fd);
      clients[i] = std::move(clients.back());
      clients.pop_back();
      continue;
    }
    i++;
  }
}

// Hold the directory port while this controller has something published;
// let it go when nothing is, so another process can take it.
void directory_duty(controller* c) {
  service& s = *c->svc;
  if (!c->tcp) return;
  bool want = s.published.load() > 0;
  if (!want && s.dir_fd >= 0) {
    close(s.dir_fd);
    s.dir_fd = -1;
  }
  if (!want || s.dir_fd >= 0 || now_ms() < s.dir_retry_ms) return;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = c->node_ipv4;
  sa.sin_port = htons(c->dir_port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && listen(fd, 32) == 0) {
    s.dir_fd = fd;
    RSM_LOG("holding the directory of node %u on port %u", c->node, c->dir_port);
    return;
  }
  close(fd);
  s.dir_retry_ms = now_ms() + 200;  // held by another process: try again later
}

// Pings peers we have not heard from, buries those silent too long.
void liveness(controller* c) {
  const config& k = cfg();
  uint64_t now = now_ms();
  std::lock_guard<std::mutex> l(c->ctl_mtx);
  for (auto& [inst, p] : c->peers) {
    if (p->dead || p->users <= 0) continue;
    uint64_t quiet = now - std::min(now, p->last_rx_ms);
    if (quiet >= static_cast<uint64_t>(k.liveness_ms)) {
      peer_dead(c, p);
      continue;
    }
    uint64_t period = static_cast<uint64_t>(k.liveness_ms) / 4;
    if (quiet >= period && now - p->last_ping_ms >= period) {
      p->last_ping_ms = now;
      proto::writer w(proto::ping, c->instance);
      w.u64(now);
      send_now(c, inst, std::move(w.out()));
    }
  }
}

// The exporter pushes a rebound segment's memory on an importer's mapping
// socket; apply what has arrived. (ctl_mtx held)
void drain_pushes(controller* c, import_seg* im, int wait_ms) {
  (void)c;
  for (;;) {
    if (im->map_sock < 0) return;
    uint8_t buf[64];
    int fd = -1;
    ssize_t n = recv_fd_msg(im->map_sock, buf, sizeof buf, &fd);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_ms <= 0) return;
      pollfd pf{im->map_sock, POLLIN, 0};
      if (poll(&pf, 1, wait_ms) <= 0) return;
      wait_ms = 0;
      continue;
    }
    if (n <= 0) {
      // The exporter closes this socket only when it cuts the connection
      // (or dies): the control message saying so may still be on its way.
      if (fd >= 0) close(fd);
      import_abort(im, RSMERR_CONN_ABORTED);
      return;
    }
    proto::reader r(buf, static_cast<size_t>(n));
    uint16_t t;
    uint64_t sender;
    bool good = r.header(&t, &sender) && t == proto::map_push;
    uint32_t status = r.u32();
    uint64_t off = r.u64();
    r.u64();
    if (good && r.ok() && status == RSM_SUCCESS && fd >= 0) {
      import_remap(im, fd, off);
    } else {
      import_revoke_mapping(im);  // the new memory cannot be shared
    }
    if (fd >= 0) close(fd);
    wait_ms = 0;
  }
}

// ------------------------------------------------------------------ the loop

struct watch {
  enum what_t { wake, cq, dir, dir_client, map, map_client, conn_map, import_map, pidfd } what;
  uint64_t id;
};

// Sleeps (up to timeout ms) on everything that can bring work, then handles
// what is ready. Returns false when fi_trywait says completions are pending.
bool poll_once(controller* c, int timeout, std::vector<pollfd>& pfds, std::vector<watch>& ws) {
  service& s = *c->svc;
  pfds.clear();
  ws.clear();
  auto add = [&](int fd, watch::what_t w, uint64_t id = 0) {
    pfds.push_back({fd, POLLIN, 0});
    ws.push_back({w, id});
  };
  add(s.wake_fd, watch::wake);
  bool cq_armed = false;
  if (timeout > 0 && c->svc_wait_fd >= 0) {
    fid* f = &c->svc_cq->fid;
    int tw = fi_trywait(c->fabric, &f, 1);
    if (tw == -FI_EAGAIN) return false;  // completions are pending: read them
    if (tw == 0) {
      add(c->svc_wait_fd, watch::cq);
      cq_armed = true;
    }
  }
  if (s.dir_fd >= 0) add(s.dir_fd, watch::dir);
  for (auto& cl : s.dir_clients) add(cl.fd, watch::dir_client);
  if (s.map_fd >= 0) add(s.map_fd, watch::map);
  for (auto& cl : s.map_clients) add(cl.fd, watch::map_client);
  bool active;
  {
    std::lock_guard<std::mutex> l(c->ctl_mtx);
    for (auto& [id, cn] : c->conns)
      if (cn->map_fd >= 0) add(cn->map_fd, watch::conn_map, id);
    for (auto& [id, im] : c->imports)
      if (im->map_sock >= 0) add(im->map_sock, watch::import_map, id);
    active = !c->published.empty() || !c->imports.empty() || !c->conns.empty();
    for (auto& [inst, p] : c->peers)
      if (p->pidfd >= 0 && !p->dead && p->users > 0) add(p->pidfd, watch::pidfd, inst);
  }
  active |= !s.backlog.empty() || !s.inflight.empty();
  // With a wait fd the provider wakes us (tcp); without one (shm) incoming
  // messages and target-side progress need polling, every millisecond while
  // anything is published, connected or in flight.
  // (shm providers offer a wait fd that a remote sender never signals: poll.)
  if (timeout > 0) timeout = !active ? 100 : cq_armed && c->tcp ? 20 : 1;
  int n = poll(pfds.data(), pfds.size(), timeout);
  if (n <= 0) return true;
  s.last_busy_ns = now_ns();  // woken by something: stay responsive a while
  for (size_t i = 0; i < pfds.size(); i++) {
    if (!pfds[i].revents) continue;
    switch (ws[i].what) {
      case watch::wake: {
        uint64_t v;
        (void)!read(s.wake_fd, &v, sizeof v);
        break;
      }
      case watch::cq:
        break;
      case watch::dir:
        accept_clients(s.dir_fd, s.dir_clients);
        break;
      case watch::map:
        accept_clients(s.map_fd, s.map_clients);
        break;
      case watch::dir_client:
      case watch::map_client:
        s.last_timer_ms = 0;  // serve them now
        break;
      case watch::conn_map: {
        // The importer unmapped (closed its end) or sent garbage.
        std::lock_guard<std::mutex> l(c->ctl_mtx);
        auto it = c->conns.find(ws[i].id);
        if (it != c->conns.end() && it->second->map_fd >= 0) {
          char junk[64];
          ssize_t r = recv(it->second->map_fd, junk, sizeof junk, MSG_DONTWAIT);
          if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            close(it->second->map_fd);
            it->second->map_fd = -1;
          }
        }
        break;
      }
      case watch::import_map: {
        std::lock_guard<std::mutex> l(c->ctl_mtx);
        auto it = c->imports.find(ws[i].id);
        if (it != c->imports.end()) drain_pushes(c, it->second, 0);
        break;
      }
      case watch::pidfd: {
        // It exited: first take what it sent before (a last signal, an
        // abort), then bury it.
        drain_cq(c);
        std::lock_guard<std::mutex> l(c->ctl_mtx);
        if (peer* p = find_peer(c, ws[i].id)) peer_dead(c, p);
        break;
      }
    }
  }
  return true;
}

void run(controller* c) {
  service& s = *c->svc;
  for (auto& b : s.rx) post_rx(c, b.get());
  std::vector<pollfd> pfds;
  std::vector<watch> ws;
  const uint64_t spin_ns = static_cast<uint64_t>(cfg().spin_us) * 1000;
  while (!s.stop.load(std::memory_order_acquire)) try {
      bool busy = drain_cq(c);
      busy |= flush_sends(c);
      uint64_t now = now_ms();
      uint64_t tns = now_ns();
      if (busy) s.last_busy_ns = tns;
      bool spinning = busy || tns - s.last_busy_ns < spin_ns;
      if (now - s.last_timer_ms >= 50) {
        s.last_timer_ms = now;
        liveness(c);
        directory_duty(c);
        // While spinning the loop never sleeps in poll: look at the sockets now.
        if (spinning) poll_once(c, 0, pfds, ws);
        serve_clients(c, s.dir_clients, dir_request_len, serve_directory);
        serve_clients(c, s.map_clients, map_request_len, serve_map);
      }
      if (spinning) continue;
      poll_once(c, 1, pfds, ws);
    } catch (...) {
      // Out of memory somewhere in a turn: the thread must live on.
      RSM_LOG("service thread: out of memory, retrying");
      usleep(1000);
    }
  // Closing: what was queued (a last signal, the aborts of an unpublish)
  // still goes out, for a bounded while.
  deadline d(500);
  while (!d.expired()) {
    try {
      drain_cq(c);
      flush_sends(c);
    } catch (...) {
      break;
    }
    bool empty;
    {
      std::lock_guard<std::mutex> l(s.q_mtx);
      empty = s.queue.empty();
    }
    if (empty && s.backlog.empty() && s.inflight.empty()) break;
    usleep(100);
  }
}

}  // namespace

int service_start(controller* c) {
  std::unique_ptr<service> s;
  try {
    s = std::make_unique<service>();
    for (int i = 0; i < rx_count; i++) s->rx.push_back(std::make_unique<rxbuf>());
    s->map_path = map_socket_path(static_cast<uint32_t>(getpid()), c->instance);
  } catch (const std::bad_alloc&) {
    return RSMERR_INSUFFICIENT_MEM;
  }
  s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->wake_fd < 0) return RSMERR_INSUFFICIENT_RESOURCES;
  // The mapping socket lives in the (private) registry directory.
  struct stat st;
  const std::string& root = cfg().run_dir;
  if ((mkdir(root.c_str(), 0700) == 0 || errno == EEXIST) && lstat(root.c_str(), &st) == 0 &&
      S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077)) {
    registry_collect_sockets();
    s->map_fd = listen_unix(s->map_path);
  }
  if (s->map_fd < 0) RSM_LOG("no mapping socket: segments of this process cannot be mapped by others");
  c->svc = std::move(s);
  int err = RSM_SUCCESS;
  try {
    c->svc->thr = std::thread(run, c);
  } catch (const std::bad_alloc&) {
    err = RSMERR_INSUFFICIENT_MEM;
  } catch (...) {
    err = RSMERR_INSUFFICIENT_RESOURCES;
  }
  if (err) {
    close(c->svc->wake_fd);
    if (c->svc->map_fd >= 0) {
      close(c->svc->map_fd);
      unlink(c->svc->map_path.c_str());
    }
    c->svc.reset();
  }
  return err;
}

void service_stop(controller* c) noexcept {
  service* s = c->svc.get();
  if (!s) return;
  s->stop.store(true, std::memory_order_release);
  service_wake(c);
  if (s->thr.joinable()) s->thr.join();
  for (auto& cl : s->dir_clients) close(cl.fd);
  for (auto& cl : s->map_clients) close(cl.fd);
  s->dir_clients.clear();
  s->map_clients.clear();
  if (s->dir_fd >= 0) close(s->dir_fd);
  if (s->map_fd >= 0) {
    close(s->map_fd);
    unlink(s->map_path.c_str());
  }
  s->dir_fd = s->map_fd = -1;
  close(s->wake_fd);
  s->wake_fd = -1;
  // The rx buffers and in-flight messages stay allocated until the endpoint
  // is closed (the provider may still hold them); the caller frees c->svc after.
}

void service_wake(controller* c) noexcept {
  if (!c->svc || c->svc->wake_fd < 0) return;
  uint64_t one = 1;
  (void)!write(c->svc->wake_fd, &one, sizeof one);
}

void service_send(controller* c, peer* p, std::vector<uint8_t>&& bytes) {
  auto m = std::make_unique<outmsg>();
  m->instance = p->instance;
  m->bytes = std::move(bytes);
  {
    std::lock_guard<std::mutex> l(c->svc->q_mtx);
    c->svc->queue.push_back(std::move(m));
  }
  service_wake(c);
}

void service_directory_update(controller* c) noexcept {
  service_wake(c);
}

}  // namespace weft::rsm
