// SPDX-License-Identifier: BSD-3-Clause
// Controllers: a controller name picks an OFI provider ("shm", "loopback":
// shm; "tcp": tcp), and opening one builds, on one fabric, two domains:
//  - the service domain (FI_THREAD_SAFE): the service endpoint that sends and
//    receives control messages and is the RMA target of exported segments,
//    its CQ read only by the service thread;
//  - the data domain (FI_THREAD_DOMAIN): the endpoint importers' transfers
//    are issued on, serialised by the controller's data mutex, so the
//    provider takes no lock of its own on that path.
// Also: controller attributes, the interconnect topology, peers.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "proto.hpp"
#include "rsm.hpp"
#include "service.hpp"

namespace weft::rsm {
namespace {

// The fi_* API level asked for, and the oldest library that provides it.
constexpr uint32_t api_version = FI_VERSION(1, 11);

std::mutex g_mtx;  // the controller list and user reference counts

// fork() while another thread holds the list lock would leave the child's copy
// locked for ever.
[[maybe_unused]] const int atfork_registered =
    pthread_atfork([] { g_mtx.lock(); }, [] { g_mtx.unlock(); }, [] { g_mtx.unlock(); });

std::vector<controller*>& controllers() {
  static std::vector<controller*>* v = new std::vector<controller*>;
  return *v;
}

struct name_parts {
  std::string type;  // "shm", "tcp"
  unsigned unit = 0;
};

bool parse_name(const char* name, name_parts* out) {
  if (!name) {
    out->type = "shm";  // Solaris: no name means the loopback controller
    return true;
  }
  size_t n = strnlen(name, MAXNAMELEN);
  if (n == 0 || n == MAXNAMELEN) return false;
  size_t d = n;
  while (d > 0 && isdigit(static_cast<unsigned char>(name[d - 1]))) d--;
  std::string type(name, d);
  if (d < n) {
    if (n - d > 3) return false;
    out->unit = static_cast<unsigned>(atoi(name + d));
  }
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char ch) { return tolower(ch); });
  if (type == "loopback") type = "shm";
  if (type != "shm" && type != "tcp") return false;
  out->type = type;
  return true;
}

fi_info* get_info(controller* c, fi_threading threading, int* err) {
  *err = -FI_ENOMEM;
  fi_info* hints = fi_allocinfo();
  if (!hints) return nullptr;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
  hints->domain_attr->threading = threading;
  hints->fabric_attr->prov_name = strdup(c->prov.c_str());
  const char* node = nullptr;
  char ip[INET_ADDRSTRLEN] = {0};
  uint64_t flags = 0;
  if (c->tcp) {
    in_addr a{c->node_ipv4};
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    node = ip;
    flags = FI_SOURCE;
  }
  fi_info* info = nullptr;
  int r = fi_getinfo(api_version, node, nullptr, flags, hints, &info);
  fi_freeinfo(hints);
  *err = r;
  if (r) {
    RSM_LOG("fi_getinfo(%s): %s", c->prov.c_str(), fi_strerror(-r));
    return nullptr;
  }
  return info;
}

void close_fid(fid_t f) noexcept {
  if (f) fi_close(f);
}

void close_fabric(controller* c) noexcept {
  close_fid(c->svc_ep ? &c->svc_ep->fid : nullptr);
  close_fid(c->data_ep ? &c->data_ep->fid : nullptr);
  close_fid(c->svc_cq ? &c->svc_cq->fid : nullptr);
  close_fid(c->data_cq ? &c->data_cq->fid : nullptr);
  close_fid(c->svc_av ? &c->svc_av->fid : nullptr);
  close_fid(c->data_av ? &c->data_av->fid : nullptr);
  close_fid(c->svc_dom ? &c->svc_dom->fid : nullptr);
  close_fid(c->data_dom ? &c->data_dom->fid : nullptr);
  close_fid(c->fabric ? &c->fabric->fid : nullptr);
  if (c->info) fi_freeinfo(c->info);
  c->svc_ep = c->data_ep = nullptr;
  c->svc_cq = c->data_cq = nullptr;
  c->svc_av = c->data_av = nullptr;
  c->svc_dom = c->data_dom = nullptr;
  c->fabric = nullptr;
  c->info = nullptr;
  c->svc_wait_fd = -1;
}

int open_endpoint(controller* c, fid_domain* dom, fi_info* info, bool svc, fid_ep** ep, fid_cq** cq,
                  fid_av** av) {
  fi_av_attr aa{};
  aa.count = 64;
  int r = fi_av_open(dom, &aa, av, nullptr);
  if (r) return r;
  fi_cq_attr ca{};
  ca.format = svc ? FI_CQ_FORMAT_MSG : FI_CQ_FORMAT_CONTEXT;
  ca.size = svc ? 512 : 128;
  ca.wait_obj = FI_WAIT_NONE;
  if (svc) {
    // A wait fd lets the service thread sleep until the provider has work
    // (tcp); where none is offered (shm) it polls on a short period.
    ca.wait_obj = FI_WAIT_FD;
    if (fi_cq_open(dom, &ca, cq, nullptr) == 0) {
      int fd = -1;
      if (fi_control(&(*cq)->fid, FI_GETWAIT, &fd) == 0) c->svc_wait_fd = fd;
    } else {
      ca.wait_obj = FI_WAIT_NONE;
      *cq = nullptr;
    }
  }
  if (!*cq && (r = fi_cq_open(dom, &ca, cq, nullptr))) return r;
  if ((r = fi_endpoint(dom, info, ep, nullptr))) return r;
  if ((r = fi_ep_bind(*ep, &(*av)->fid, 0))) return r;
  if ((r = fi_ep_bind(*ep, &(*cq)->fid, FI_TRANSMIT | FI_RECV))) return r;
  return fi_enable(*ep);
}

int open_fabric(controller* c) {
  const config& k = cfg();
  if (c->tcp) {
    if (!k.local_known) {
      RSM_LOG("tcp: the node table names none of this host's addresses; set WEFT_RSM_NODE_ID");
      return RSMERR_CTLR_NOT_PRESENT;
    }
    const node_entry* me = k.find(k.local_node);
    if (!me) {
      RSM_LOG("tcp: node %u is not in the node table", k.local_node);
      return RSMERR_CTLR_NOT_PRESENT;
    }
    c->node_ipv4 = me->ipv4;
    c->dir_port = me->port;
  }
  c->node = k.local_node;
  int gi = 0;
  fi_info* info_data = get_info(c, FI_THREAD_DOMAIN, &gi);
  if (!info_data) return gi == -FI_ENOMEM ? RSMERR_INSUFFICIENT_MEM : RSMERR_CTLR_NOT_PRESENT;
  c->info = get_info(c, FI_THREAD_SAFE, &gi);
  if (!c->info) {
    fi_freeinfo(info_data);
    return gi == -FI_ENOMEM ? RSMERR_INSUFFICIENT_MEM : RSMERR_CTLR_NOT_PRESENT;
  }
  int r = fi_fabric(c->info->fabric_attr, &c->fabric, nullptr);
  if (!r) r = fi_domain(c->fabric, c->info, &c->svc_dom, nullptr);
  if (!r) r = fi_domain(c->fabric, info_data, &c->data_dom, nullptr);
  if (!r) r = open_endpoint(c, c->svc_dom, c->info, true, &c->svc_ep, &c->svc_cq, &c->svc_av);
  if (!r) r = open_endpoint(c, c->data_dom, info_data, false, &c->data_ep, &c->data_cq, &c->data_av);
  if (!r) {
    c->virt_addr = c->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
    c->prov_key = c->info->domain_attr->mr_mode & FI_MR_PROV_KEY;
    size_t ks = c->info->domain_attr->mr_key_size;
    c->key_mask = ks >= 8 || ks == 0 ? ~0ull : (1ull << (8 * ks)) - 1;
    c->max_msg = std::min(c->info->ep_attr->max_msg_size, info_data->ep_attr->max_msg_size);
    if (c->max_msg == 0) c->max_msg = SIZE_MAX;
    uint8_t addr[proto::max_addr];
    size_t len = sizeof addr;
    r = fi_getname(&c->svc_ep->fid, addr, &len);
    if (!r) {
      try {
        c->svc_addr.assign(addr, addr + len);
      } catch (const std::bad_alloc&) {
        r = -FI_ENOMEM;
      }
    }
  }
  fi_freeinfo(info_data);
  if (r) {
    RSM_LOG("opening %s: %s", c->name.c_str(), fi_strerror(-r));
    close_fabric(c);
    return r == -FI_ENOMEM ? RSMERR_INSUFFICIENT_MEM : RSMERR_CTLR_NOT_PRESENT;
  }
  c->instance = random64();
  c->owner = getpid();
  c->put_completion = k.put_completion;
  if ((r = service_start(c))) {
    close_fabric(c);
    return r;
  }
  c->open = true;
  RSM_LOG("controller %s open: provider %s, node %u", c->name.c_str(), c->info->fabric_attr->prov_name,
          c->node);
  return RSM_SUCCESS;
}

void close_controller(controller* c) noexcept {
  service_stop(c);
  for (auto& [inst, p] : c->peers) {
    if (p->pidfd >= 0) close(p->pidfd);
    delete p;
  }
  c->peers.clear();
  close_fabric(c);
  c->open = false;
  RSM_LOG("controller %s closed", c->name.c_str());
}

// At exit, what this process published leaves the registry and its
// endpoints close, so the providers remove what they keep for them (Debian's
// shm leaves a 16 MiB region file per endpoint otherwise). The process is
// going: nothing else is torn down. Runs before libfabric's own destructors.
struct at_exit {
  ~at_exit() {
    std::unique_lock<std::mutex> l(g_mtx, std::try_to_lock);
    if (!l.owns_lock()) return;  // another thread is inside the library: leave it be
    for (controller* c : controllers()) {
      if (!c->open || c->owner != getpid()) continue;
      service_stop(c);
      std::unique_lock<std::mutex> cl(c->ctl_mtx, std::try_to_lock);
      if (cl.owns_lock())
        for (auto& [id, s] : c->published) registry_unpublish(c, id);
      std::unique_lock<std::mutex> dl(c->data_mtx, std::try_to_lock);
      if (!dl.owns_lock()) continue;
      if (c->svc_ep) fi_close(&c->svc_ep->fid);
      if (c->data_ep) fi_close(&c->data_ep->fid);
      c->svc_ep = c->data_ep = nullptr;
      c->open = false;
    }
  }
} at_exit_cleanup;

}  // namespace

int controller_get(const char* name, controller** out) {
  name_parts np;
  if (!parse_name(name, &np) || np.unit != 0) return RSMERR_CTLR_NOT_PRESENT;
  uint32_t v = fi_version();
  if (FI_VERSION_LT(v, api_version)) {  // a 2.x libfabric serves 1.x callers too
    RSM_LOG("libfabric %u.%u is older than the %u.%u the RSM face needs", FI_MAJOR(v), FI_MINOR(v),
            FI_MAJOR(api_version), FI_MINOR(api_version));
    return RSMERR_BAD_LIBRARY_VERSION;
  }
  if (cfg().error) return RSMERR_BAD_CONF;
  std::string canon = np.type + "0";
  std::lock_guard<std::mutex> l(g_mtx);
  controller* c = nullptr;
  for (controller* x : controllers())
    // A controller a parent process opened before fork() is not ours: its
    // fabric objects, threads and tables are the parent's (its handles answer
    // RSMERR_CTLR_NOT_PRESENT here). The child opens a fresh one.
    if (x->name == canon && !(x->open && x->owner != getpid())) c = x;
  if (!c) {
    auto fresh = std::make_unique<controller>();
    fresh->name = canon;
    fresh->prov = np.type;
    fresh->tcp = np.type == "tcp";
    fresh->handle = handle_add(kind::controller, fresh.get(), fresh.get());
    controllers().push_back(fresh.get());
    c = fresh.release();
  }
  if (!c->open) {
    int r = open_fabric(c);
    if (r) return r;
  }
  c->user_refs++;
  *out = c;
  return RSM_SUCCESS;
}

int controller_release(controller* c) {
  std::lock_guard<std::mutex> l(g_mtx);
  if (c->user_refs <= 0) return RSMERR_BAD_CTLR_HNDL;
  if (c->open && c->owner != getpid()) return RSMERR_CTLR_NOT_PRESENT;  // the parent's, after fork()
  if (--c->user_refs == 0 && c->deps == 0) close_controller(c);
  return RSM_SUCCESS;
}

void controller_dep(controller* c, int delta) {
  std::lock_guard<std::mutex> l(g_mtx);
  c->deps += delta;
  if (c->deps == 0 && c->user_refs == 0 && c->open && c->owner == getpid()) close_controller(c);
}

bool controller_usable(controller* c) noexcept {
  return c->open && c->owner == getpid();
}

int controller_lookup(rsmapi_controller_handle_t h, controller** out) noexcept {
  void* obj = nullptr;
  controller* c = nullptr;
  if (!h || !handle_get(hval(h), kind::controller, &obj, &c)) return RSMERR_BAD_CTLR_HNDL;
  std::lock_guard<std::mutex> l(g_mtx);
  if (c->user_refs <= 0) return RSMERR_BAD_CTLR_HNDL;
  if (!controller_usable(c)) return RSMERR_CTLR_NOT_PRESENT;
  *out = c;
  return RSM_SUCCESS;
}

peer* peer_find_or_add(controller* c, uint64_t instance, const uint8_t* addr, size_t len, rsm_node_id_t node,
                       uint32_t pid) {
  auto it = c->peers.find(instance);
  if (it != c->peers.end()) return it->second;
  if (c->peers.size() >= 4096 || len == 0 || len > proto::max_addr) return nullptr;
  auto p = std::make_unique<peer>();
  p->instance = instance;
  p->addr.assign(addr, addr + len);
  p->node = node;
  p->pid = pid;
  p->last_rx_ms = now_ms();
  if (fi_av_insert(c->svc_av, addr, 1, &p->svc_fa, 0, nullptr) != 1) {
    RSM_LOG("fi_av_insert of a peer's address failed");
    return nullptr;
  }
  if (node == c->node && pid) {
    // On the same node, a pidfd tells the service thread the moment the peer
    // exits, instead of after the liveness period.
    int fd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
    p->pidfd = fd >= 0 ? fd : -1;
  }
  peer* raw = p.get();
  c->peers.emplace(instance, raw);
  p.release();
  return raw;
}

void peer_put(controller*, peer* p) {
  if (p && p->users > 0) p->users--;
}

int peer_data_addr(controller* c, peer* p, fi_addr_t* out) {
  if (p->data_fa == FI_ADDR_NOTAVAIL) {
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    if (fi_av_insert(c->data_av, p->addr.data(), 1, &fa, 0, nullptr) != 1)
      return RSMERR_INSUFFICIENT_RESOURCES;
    p->data_fa = fa;
  }
  *out = p->data_fa;
  return RSM_SUCCESS;
}

}  // namespace weft::rsm

using namespace weft::rsm;

RSM_API int rsm_get_controller(char* name, rsmapi_controller_handle_t* controller_out) {
  return guard([&]() -> int {
    if (!controller_out) return RSMERR_BAD_CTLR_HNDL;
    controller* c = nullptr;
    int r = controller_get(name, &c);
    if (r) return r;
    *controller_out = reinterpret_cast<rsmapi_controller_handle_t>(c->handle);
    return RSM_SUCCESS;
  });
}

RSM_API int rsm_release_controller(rsmapi_controller_handle_t h) {
  return guard([&]() -> int {
    void* obj = nullptr;
    controller* c = nullptr;
    if (!h || !handle_get(hval(h), kind::controller, &obj, &c)) return RSMERR_BAD_CTLR_HNDL;
    return controller_release(c);
  });
}

RSM_API int rsm_get_controller_attr(rsmapi_controller_handle_t h, rsmapi_controller_attr_t* attr) {
  return guard([&]() -> int {
    controller* c = nullptr;
    int r = controller_lookup(h, &c);
    if (r) return r;
    if (!attr) return RSMERR_BAD_ADDR;
    const config& k = cfg();
    long psz = sysconf(_SC_PAGESIZE);
    rsmapi_controller_attr_t a{};
    // get/put of 8, 16, 32 and 64 bits are all offered; none is promised to
    // be single-copy atomic (a transfer may be split by the provider).
    a.attr_direct_access_sizes = RSM_DAS8 | RSM_DAS16 | RSM_DAS32 | RSM_DAS64;
    a.attr_atomic_sizes = 0;
    a.attr_page_size = static_cast<size_t>(psz > 0 ? psz : 4096);
    a.attr_max_export_segment_size = k.max_segment_size;
    a.attr_tot_export_segment_size = k.tot_export_size;
    a.attr_max_export_segments = k.max_export_segments;
    a.attr_max_import_map_size = k.max_segment_size;
    a.attr_tot_import_map_size = k.tot_map_size;
    a.attr_max_import_segments = k.max_import_segments;
    *attr = a;
    return RSM_SUCCESS;
  });
}

// ------------------------------------------------------------------ topology
namespace {

// Can this process open the provider behind a controller type? Opening the
// fabric, a domain and an endpoint is the only truthful test (a provider may
// list itself in fi_getinfo and still refuse endpoints).
bool provider_usable(const std::string& type) {
  static std::mutex m;
  static std::unordered_map<std::string, bool> cache;
  std::lock_guard<std::mutex> l(m);
  auto it = cache.find(type);
  if (it != cache.end()) return it->second;
  bool ok = false;
  controller* c = nullptr;
  if (controller_get(type.c_str(), &c) == RSM_SUCCESS) {
    ok = true;
    controller_release(c);
  }
  cache[type] = ok;
  return ok;
}

// A node is reachable over tcp if its address answers at all: a refused
// connection to its directory port proves the host is there.
uint32_t tcp_state(const node_entry& n) {
  if (n.id == cfg().local_node) return RSM_CONNECTION_ACTIVE;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = n.ipv4;
  sa.sin_port = htons(n.port);
  uint32_t state = 0;
  int r = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  if (r == 0 || errno == ECONNREFUSED) {
    state = RSM_CONNECTION_ACTIVE;
  } else if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 300) == 1) {
      int err = 0;
      socklen_t el = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
      if (err == 0 || err == ECONNREFUSED) state = RSM_CONNECTION_ACTIVE;
    }
  }
  close(fd);
  return state;
}

}  // namespace

RSM_API int rsm_get_interconnect_topology(rsm_topology_t** topology_data) {
  return guard([&]() -> int {
    if (!topology_data) return RSMERR_BAD_TOPOLOGY_PTR;
    *topology_data = nullptr;
    const config& k = cfg();
    if (k.error) return RSMERR_BAD_CONF;
    struct remote {
      rsm_node_id_t id;
      rsm_addr_t hw;
      uint32_t state;
    };
    struct ctlr {
      std::string name;
      rsm_addr_t hw;
      std::vector<remote> remotes;
    };
    std::vector<ctlr> ctls;
    if (provider_usable("shm")) {
      // shm reaches the processes of this node only.
      ctls.push_back({"shm0", k.local_node, {{k.local_node, k.local_node, RSM_CONNECTION_ACTIVE}}});
    }
    if (k.local_known && provider_usable("tcp")) {
      const node_entry* me = k.find(k.local_node);
      ctlr t{"tcp0", me ? ntohl(me->ipv4) : 0, {}};
      for (const node_entry& n : k.nodes) t.remotes.push_back({n.id, ntohl(n.ipv4), tcp_state(n)});
      ctls.push_back(t);
    }
    // One block: the header and its pointer array, then each connection with
    // its remote controllers; rsm_free_interconnect_topology frees it whole.
    size_t nctl = ctls.size();
    size_t head =
        offsetof(rsm_topology_t, connections) + std::max<size_t>(nctl, 1) * sizeof(rsm_connections_t*);
    head = (head + 15) & ~size_t{15};
    size_t total = head;
    std::vector<size_t> at;
    for (const ctlr& c : ctls) {
      at.push_back(total);
      size_t sz = offsetof(rsm_connections_t, remote_cntlr) +
                  std::max<size_t>(c.remotes.size(), 1) * sizeof(rsm_remote_cntlr_t);
      total += (sz + 15) & ~size_t{15};
    }
    char* block = static_cast<char*>(calloc(1, total));
    if (!block) return RSMERR_INSUFFICIENT_MEM;
    auto* t = reinterpret_cast<rsm_topology_t*>(block);
    t->topology_hdr.local_nodeid = k.local_node;
    t->topology_hdr.local_cntlr_count = static_cast<uint_t>(nctl);
    for (size_t i = 0; i < nctl; i++) {
      auto* cn = reinterpret_cast<rsm_connections_t*>(block + at[i]);
      snprintf(cn->hdr.cntlr_name, sizeof cn->hdr.cntlr_name, "%s", ctls[i].name.c_str());
      cn->hdr.local_hwaddr = ctls[i].hw;
      cn->hdr.remote_cntlr_count = static_cast<int>(ctls[i].remotes.size());
      for (size_t j = 0; j < ctls[i].remotes.size(); j++) {
        rsm_remote_cntlr_t& r = cn->remote_cntlr[j];
        r.remote_nodeid = ctls[i].remotes[j].id;
        snprintf(r.remote_cntlrname, sizeof r.remote_cntlrname, "%s", ctls[i].name.c_str());
        r.remote_hwaddr = ctls[i].remotes[j].hw;
        r.connection_state = ctls[i].remotes[j].state;
      }
      t->connections[i] = cn;
    }
    *topology_data = t;
    return RSM_SUCCESS;
  });
}

RSM_API void rsm_free_interconnect_topology(rsm_topology_t* topology_data) {
  free(topology_data);
}
