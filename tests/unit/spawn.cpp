// SPDX-License-Identifier: BSD-3-Clause
#include "spawn.hpp"

#include <fcntl.h>
#include <sched.h>

#include <chrono>

#include "fixture.hpp"

namespace weft_test {

namespace {

bool write_all(int fd, const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len) {
    ssize_t n = write(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* buf, size_t len, int timeout_ms = 30000) {
  char* p = static_cast<char*>(buf);
  while (len) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return false;
    ssize_t n = read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool open_objects(mp_peer& p, const mp_options& opt) {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup(opt.prov ? opt.prov : current_mode().prov);
  hints->ep_attr->type = opt.ep_type;
  hints->caps = opt.caps;
  hints->domain_attr->data_progress = opt.progress;
  hints->domain_attr->threading = opt.threading;
  hints->domain_attr->mr_mode = opt.mr_mode;
  int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &p.info);
  fi_freeinfo(hints);
  if (ret) return false;
  if (fi_fabric(p.info->fabric_attr, &p.fabric, nullptr)) return false;
  if (fi_domain(p.fabric, p.info, &p.domain, nullptr)) return false;
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if (fi_av_open(p.domain, &av_attr, &p.av, nullptr)) return false;
  fi_cq_attr cq_attr{};
  cq_attr.format = opt.cq_format;
  cq_attr.wait_obj = opt.cq_wait;
  cq_attr.size = 4096;
  if (fi_cq_open(p.domain, &cq_attr, &p.cq, nullptr)) return false;
  if (fi_endpoint(p.domain, p.info, &p.ep, nullptr)) return false;
  if (fi_ep_bind(p.ep, &p.av->fid, 0)) return false;
  if (fi_ep_bind(p.ep, &p.cq->fid, opt.tx_flags_bind)) return false;
  if (fi_ep_bind(p.ep, &p.cq->fid, opt.rx_flags_bind)) return false;
  if (opt.eq) {
    fi_eq_attr ea{};
    ea.wait_obj = FI_WAIT_UNSPEC;
    if (fi_eq_open(p.fabric, &ea, &p.eq, nullptr)) return false;
    if (fi_ep_bind(p.ep, &p.eq->fid, 0)) return false;
  }
  if (opt.counters) {
    fi_cntr_attr ca{};
    ca.events = FI_CNTR_EVENTS_COMP;
    fid_cntr** all[] = {&p.cntr_send,  &p.cntr_recv,   &p.cntr_read,
                        &p.cntr_write, &p.cntr_rwrite, &p.cntr_rread};
    uint64_t flags[] = {FI_SEND, FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_WRITE, FI_REMOTE_READ};
    for (int i = 0; i < 6; ++i) {
      if (fi_cntr_open(p.domain, &ca, all[i], nullptr)) return false;
      if (fi_ep_bind(p.ep, &(*all[i])->fid, flags[i])) return false;
    }
  }
  return fi_enable(p.ep) == 0;
}

void close_one(fid* f) {
  if (f) {
    EXPECT_EQ(fi_close(f), 0);
  }
}

void close_objects(mp_peer& p) {
  close_one(p.ep ? &p.ep->fid : nullptr);
  for (fid_cntr* c : {p.cntr_send, p.cntr_recv, p.cntr_read, p.cntr_write, p.cntr_rwrite, p.cntr_rread})
    close_one(c ? &c->fid : nullptr);
  close_one(p.cq ? &p.cq->fid : nullptr);
  close_one(p.eq ? &p.eq->fid : nullptr);
  close_one(p.av ? &p.av->fid : nullptr);
  close_one(p.domain ? &p.domain->fid : nullptr);
  close_one(p.fabric ? &p.fabric->fid : nullptr);
  if (p.info) fi_freeinfo(p.info);
}

constexpr size_t name_len = 128;

}  // namespace

namespace {
// Every mode of every provider, in order; mp_modes() keeps those offered.
const mp_mode all_modes[] = {
    {"shm_cma", "shm", nullptr, true},
    {"shm_nocma", "shm", "FI_SHM_DISABLE_CMA=1", false},
    {"tcp", "tcp", nullptr, false},
    // Each rank on its own "host": a network namespace of tests/netns/netns.sh
    // (offered only when that script runs the tests: WEFT_NS_1.. are set).
    {"tcp_hosts", "tcp", "FI_TCP_IFACE=eth0", false},
    // The linked provider: on one host every peer is reached over shm; with
    // hosts, rank r on host r % hosts, so suites of three or more ranks mix
    // peers over shm and over tcp in one endpoint.
    {"lnx", "lnx", nullptr, true},
    {"lnx_hosts", "lnx", nullptr, false},
};
const mp_mode* running = nullptr;

// all_modes with provider and variable names as the program knows them
// (prov_name, prov_var): the same list in each binary.
const std::vector<mp_mode>& known_modes() {
  static std::vector<std::string> vars;
  static std::vector<mp_mode> modes;
  if (modes.empty()) {
    vars.reserve(std::size(all_modes));
    for (const mp_mode& m : all_modes) {
      mp_mode k = m;
      k.prov = prov_name(m.prov);
      if (m.env) k.env = vars.emplace_back(prov_var(m.env)).c_str();
      modes.push_back(k);
    }
  }
  return modes;
}

#ifdef WEFT_TEST_PLUGIN_DIR
// weft_plugin_tests: Debian's libfabric loads weft's plugins from the build,
// unless FI_PROVIDER_PATH already names a folder (an installed prefix's).
const bool plugin_path_set = setenv("FI_PROVIDER_PATH", WEFT_TEST_PLUGIN_DIR, 0) == 0;
#endif
}  // namespace

bool is_hosts_mode(const mp_mode& m) {
  return std::string_view(m.name).ends_with("_hosts");
}

std::vector<mp_mode> mp_modes(const char* only_prov) {
  std::vector<mp_mode> out;
  const bool hosts = getenv("WEFT_NS_1") != nullptr;
  for (size_t i = 0; i < std::size(all_modes); ++i) {
    const mp_mode& m = known_modes()[i];
    if ((!only_prov || !strcmp(all_modes[i].prov, only_prov)) && offered(m.prov) && is_hosts_mode(m) == hosts)
      out.push_back(m);
  }
  return out;
}

namespace {
// Rank r runs on host r % hosts: its process enters that namespace.
bool enter_host(int rank) {
  const char* n = getenv("WEFT_NS_HOSTS");
  const int hosts = n ? atoi(n) : 0;
  if (hosts <= 0) return false;
  const std::string var = "WEFT_NS_" + std::to_string(rank % hosts + 1);
  const char* ns = getenv(var.c_str());
  if (!ns) return false;
  const std::string path = std::string("/var/run/netns/") + ns;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = setns(fd, CLONE_NEWNET) == 0;
  close(fd);
  return ok;
}
}  // namespace

const mp_mode& current_mode() {
  return running ? *running : known_modes()[0];
}

void mp_test::SetUp() {
  running = &GetParam();
  if (const char* env = GetParam().env) {
    std::string kv = env;
    size_t eq = kv.find('=');
    setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
}

void mp_test::TearDown() {
  if (const char* env = GetParam().env) {
    std::string kv = env;
    unsetenv(kv.substr(0, kv.find('=')).c_str());
  }
  running = nullptr;
}

void mp_peer::barrier() {
  char b = 'b';
  if (rank == 0) {
    for (int fd : barrier_in) ASSERT_TRUE(read_all(fd, &b, 1)) << "barrier: a peer is gone";
    for (int fd : barrier_out) ASSERT_TRUE(write_all(fd, &b, 1));
  } else {
    ASSERT_TRUE(write_all(barrier_out[0], &b, 1));
    ASSERT_TRUE(read_all(barrier_in[0], &b, 1)) << "barrier: rank 0 is gone";
  }
}

void mp_run(int n, const mp_body& body, const mp_options& opt) {
  std::vector<int> up_r(n), up_w(n), down_r(n), down_w(n);
  for (int i = 1; i < n; ++i) {
    int up[2], down[2];
    ASSERT_EQ(pipe2(up, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(down, O_CLOEXEC), 0);
    up_r[i] = up[0];
    up_w[i] = up[1];
    down_r[i] = down[0];
    down_w[i] = down[1];
  }
  std::vector<pid_t> kids(n, 0);
  int rank = 0;
  for (int i = 1; i < n; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      rank = i;
      break;
    }
    kids[i] = pid;
  }

  mp_peer p;
  p.rank = rank;
  p.size = n;
  bool ok = !is_hosts_mode(current_mode()) || enter_host(rank);
  if (!ok) ADD_FAILURE() << "rank " << rank << " cannot enter its network namespace";
  ok = ok && open_objects(p, opt);
  char name[name_len] = {};
  size_t len = sizeof name;
  if (ok) ok = fi_getname(&p.ep->fid, name, &len) == 0;
  std::vector<char> names(name_len * n, 0);

  if (rank == 0) {
    EXPECT_TRUE(ok) << "rank 0 could not open its endpoint";
    memcpy(&names[0], name, name_len);
    for (int i = 1; i < n; ++i)
      EXPECT_TRUE(read_all(up_r[i], &names[name_len * i], name_len)) << "rank " << i << " sent no name";
    for (int i = 1; i < n; ++i) write_all(down_w[i], names.data(), names.size());
    for (int i = 1; i < n; ++i) {
      p.barrier_in.push_back(up_r[i]);
      p.barrier_out.push_back(down_w[i]);
    }
  } else {
    if (!ok) _exit(3);
    write_all(up_w[rank], name, name_len);
    if (!read_all(down_r[rank], names.data(), names.size())) _exit(4);
    p.barrier_in.push_back(down_r[rank]);
    p.barrier_out.push_back(up_w[rank]);
  }

  if (ok && !::testing::Test::HasFatalFailure()) {
    p.addr.resize(n);
    for (int i = 0; i < n; ++i) {
      const char* nm = &names[name_len * i];
      ok = ok && fi_av_insert(p.av, nm, 1, &p.addr[i], 0, nullptr) == 1;
    }
    EXPECT_TRUE(ok) << "fi_av_insert failed";
    if (ok) body(p);
  }
  close_objects(p);

  if (rank != 0) _exit(::testing::Test::HasFailure() ? 1 : 0);

  // Rank 0: wait for the children with a deadline.
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int i = 1; i < n; ++i) {
    int status = 0;
    for (;;) {
      pid_t r = waitpid(kids[i], &status, WNOHANG);
      if (r == kids[i]) break;
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec > opt.timeout_s) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], &status, 0);
        ADD_FAILURE() << "rank " << i << " timed out";
        break;
      }
      usleep(1000);
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << i << " failed (status " << status << ")";
  }
  for (int i = 1; i < n; ++i)
    for (int fd : {up_r[i], up_w[i], down_r[i], down_w[i]}) close(fd);
}

namespace {

// Rank 1's AV entry removed and rank 2's address inserted: `fresh` is the
// index it gets (rank 1's, the lowest free one).
void give_index_1_to_rank_2(mp_peer& p, fi_addr_t& fresh) {
  char raw[256];
  size_t len = sizeof raw;
  ASSERT_EQ(fi_av_lookup(p.av, p.addr[2], raw, &len), 0);
  ASSERT_LE(len, sizeof raw);
  ASSERT_EQ(fi_av_remove(p.av, &p.addr[1], 1, 0), 0);
  ASSERT_EQ(fi_av_insert(p.av, raw, 1, &fresh, 0, nullptr), 1);
  EXPECT_EQ(fresh, p.addr[1]) << "the removed index is taken again";
}

}  // namespace

void send_to_reused_av_index(mp_peer& p) {
  fi_cq_tagged_entry ce;
  if (p.rank == 0) {
    uint64_t v = 1;
    p.barrier();  // the receives are posted
    // Twice: the second send goes through what the first left cached. Each
    // waits for its completion, which drives a network provider's progress.
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(fi_tsend(p.ep, &v, sizeof v, nullptr, p.addr[1], 7, nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce), 1);
    }
    p.barrier();
    fi_addr_t fresh = FI_ADDR_NOTAVAIL;
    ASSERT_NO_FATAL_FAILURE(give_index_1_to_rank_2(p, fresh));
    p.barrier();  // the receives are posted
    v = 2;
    ASSERT_EQ(fi_tsend(p.ep, &v, sizeof v, nullptr, fresh, 7, nullptr), 0);
    ASSERT_EQ(p.wait_cq(&ce), 1);
    p.barrier();
  } else if (p.rank == 1) {
    uint64_t in[2] = {}, late = 0;
    for (uint64_t& x : in) ASSERT_EQ(fi_trecv(p.ep, &x, sizeof x, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), 0);
    p.barrier();
    for (int i = 0; i < 2; ++i) ASSERT_EQ(p.wait_cq(&ce), 1);
    EXPECT_EQ(in[0], 1u);
    EXPECT_EQ(in[1], 1u);
    p.barrier();
    ASSERT_EQ(fi_trecv(p.ep, &late, sizeof late, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), 0);
    p.barrier();
    p.barrier();  // rank 2 has its message: none may come here, in 100 ms of progress
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(100))
      ASSERT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN) << "a message reached the removed peer";
    EXPECT_EQ(late, 0u);
  } else {
    uint64_t v = 0;
    p.barrier();
    p.barrier();
    ASSERT_EQ(fi_trecv(p.ep, &v, sizeof v, nullptr, FI_ADDR_UNSPEC, 7, 0, nullptr), 0);
    p.barrier();
    ASSERT_EQ(p.wait_cq(&ce), 1);
    EXPECT_EQ(v, 2u);
    p.barrier();
  }
  p.barrier();  // rank 1 checked: the endpoints may close
}

void source_of_reused_av_index(mp_peer& p) {
  fi_cq_tagged_entry ce;
  // Each sender's message waits for its completion, which drives a network
  // provider's progress while rank 0 reads its CQ.
  auto send = [&](uint64_t v) {
    ASSERT_EQ(fi_tsend(p.ep, &v, sizeof v, nullptr, p.addr[0], 7, nullptr), 0);
    ASSERT_EQ(p.wait_cq(&ce), 1);
  };
  if (p.rank == 1) {
    p.barrier();  // the receives are posted
    send(1);
    p.barrier();
    p.barrier();  // rank 0's AV has no entry for this rank now
    send(2);
    p.barrier();
    p.barrier();
  } else if (p.rank == 2) {
    p.barrier();
    send(10);
    p.barrier();
    p.barrier();
    p.barrier();  // rank 0 has rank 1's second message
    send(3);
    p.barrier();
  } else {
    uint64_t first[2] = {};
    for (uint64_t& x : first) ASSERT_EQ(fi_trecv(p.ep, &x, sizeof x, nullptr, FI_ADDR_UNSPEC, 7, 0, &x), 0);
    p.barrier();
    // Heard from both: the source of each is cached where a provider caches it.
    for (int i = 0; i < 2; ++i) {
      fi_addr_t src = FI_ADDR_NOTAVAIL;
      ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1);
      const uint64_t v = *static_cast<uint64_t*>(ce.op_context);
      ASSERT_TRUE(v == 1 || v == 10) << v;
      EXPECT_EQ(src, p.addr[v == 1 ? 1 : 2]);
    }
    p.barrier();
    // Rank 1 leaves the AV and its index is given to rank 2's address,
    // which then leaves its old index: rank 2 is named by rank 1's old one.
    fi_addr_t fresh = FI_ADDR_NOTAVAIL;
    ASSERT_NO_FATAL_FAILURE(give_index_1_to_rank_2(p, fresh));
    ASSERT_EQ(fi_av_remove(p.av, &p.addr[2], 1, 0), 0);
    uint64_t from_new = 0, from_any = 0;
    ASSERT_EQ(fi_trecv(p.ep, &from_new, sizeof from_new, nullptr, fresh, 7, 0, &from_new), 0);
    ASSERT_EQ(fi_trecv(p.ep, &from_any, sizeof from_any, nullptr, FI_ADDR_UNSPEC, 7, 0, &from_any), 0);
    p.barrier();
    fi_addr_t src = 0;
    ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1);
    EXPECT_EQ(ce.op_context, &from_any) << "the removed sender's message took the receive for the index's new peer";
    EXPECT_EQ(src, FI_ADDR_NOTAVAIL);
    EXPECT_EQ(*static_cast<uint64_t*>(ce.op_context), 2u);
    p.barrier();
    src = 0;
    ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1);
    EXPECT_EQ(ce.op_context, &from_new);
    EXPECT_EQ(src, fresh);
    EXPECT_EQ(*static_cast<uint64_t*>(ce.op_context), 3u);
    p.barrier();
  }
  p.barrier();  // rank 0 read both: the endpoints may close
}

}  // namespace weft_test
