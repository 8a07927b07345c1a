// SPDX-License-Identifier: BSD-3-Clause
// Across two network namespaces over tcp: two "hosts" (nodes 1 and 2) joined
// by a veth pair, each actor started inside its namespace with the cluster's
// node table. Discovery goes through node 1's directory port; data through
// the provider's tcp endpoints. Needs root (to make namespaces); weft's tcp
// and Debian's tcp;ofi_rxm both carry them, and a tcp provider that cannot
// open RDM endpoints with RMA fails the tests.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "harness.hpp"

using namespace rsmt;

namespace {

constexpr size_t seg_size = 1 << 20;

// Why the tcp provider cannot carry the tests here, or "" if it can.
std::string tcp_unusable() {
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA;
  hints->fabric_attr->prov_name = strdup("tcp");
  fi_info* info = nullptr;
  int r = fi_getinfo(FI_VERSION(1, 11), "127.0.0.1", nullptr, FI_SOURCE, hints, &info);
  fi_freeinfo(hints);
  if (r)
    return std::string("the tcp provider offers no RDM endpoint with RMA (fi_getinfo: ") + fi_strerror(-r) + ")";
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_ep* ep = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  std::string why;
  fi_av_attr aa{};
  fi_cq_attr ca{};
  if ((r = fi_fabric(info->fabric_attr, &fab, nullptr)))
    why = std::string("fi_fabric(tcp): ") + fi_strerror(-r);
  else if ((r = fi_domain(fab, info, &dom, nullptr)))
    why = std::string("fi_domain(tcp): ") + fi_strerror(-r);
  else if ((r = fi_endpoint(dom, info, &ep, nullptr)))
    why = std::string("the tcp provider opens no endpoint: fi_endpoint returns ") + fi_strerror(-r);
  // Bound and enabled before it is closed: Debian's tcp;ofi_rxm (1.17) crashes
  // closing an endpoint that never was.
  if (ep && !fi_av_open(dom, &aa, &av, nullptr) && !fi_cq_open(dom, &ca, &cq, nullptr) &&
      !fi_ep_bind(ep, &av->fid, 0) && !fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) && !fi_enable(ep)) {
    fi_close(&ep->fid);
    ep = nullptr;
  }
  if (cq) fi_close(&cq->fid);
  if (av) fi_close(&av->fid);
  if (!ep && dom) fi_close(&dom->fid);
  if (!ep && fab) fi_close(&fab->fid);
  fi_freeinfo(info);
  return why;
}

int sh_run(const std::string& cmd) {
  return system((cmd + " >/dev/null 2>&1").c_str());
}

// Two namespaces joined by a veth pair: node 1 at 10.77.0.1, node 2 at
// 10.77.0.2 (private to these namespaces, so parallel runs never clash).
class NetnsPair : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (sh_run("ip -V") != 0) GTEST_SKIP() << "needs iproute2 (ip) to create network namespaces";
    std::string why = tcp_unusable();
    ASSERT_EQ(why, "");
    std::string id = std::to_string(getpid());
    a_ = "wrsm" + id + "a";
    b_ = "wrsm" + id + "b";
    std::string va = "wr" + id + "a", vb = "wr" + id + "b";
    made_ = true;
    const char* steps[] = {"ip netns add %A",
                           "ip netns add %B",
                           "ip link add %va type veth peer name %vb",
                           "ip link set %va netns %A",
                           "ip link set %vb netns %B",
                           "ip -n %A addr add 10.77.0.1/24 dev %va",
                           "ip -n %B addr add 10.77.0.2/24 dev %vb",
                           "ip -n %A link set %va up",
                           "ip -n %B link set %vb up",
                           "ip -n %A link set lo up",
                           "ip -n %B link set lo up"};
    for (const char* s : steps) {
      std::string cmd = s;
      for (auto [k, v] :
           {std::pair<std::string, std::string>{"%va", va}, {"%vb", vb}, {"%A", a_}, {"%B", b_}})
        for (size_t at; (at = cmd.find(k)) != std::string::npos;) cmd.replace(at, k.size(), v);
      if (sh_run(cmd) != 0) GTEST_SKIP() << "cannot set up network namespaces (" << cmd << ")";
    }
  }
  void TearDown() override {
    if (!made_) return;
    sh_run("ip netns del " + a_);
    sh_run("ip netns del " + b_);
  }
  pid_t on_node(int node, const std::string& actor, std::vector<std::string> env = {}) {
    env.push_back("WEFT_RSM_NODES=1=10.77.0.1 2=10.77.0.2 3=10.77.0.3");
    env.push_back("WEFT_RSM_NODE_ID=" + std::to_string(node));
    env.push_back("RSMT_CTL=tcp");
    env.push_back("RSMT_NODE_IP=10.77.0." + std::to_string(node));
    return spawn(actor, {}, env, {"ip", "netns", "exec", node == 1 ? a_ : b_});
  }
  std::string a_, b_;
  bool made_ = false;
};

double seconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec / 1e9;
}

}  // namespace

RSM_CHILD(tcp_exporter) {
  auto ctl = open_ctl("tcp");
  REQ_EQ(local_node(), 1u);
  auto* mem = static_cast<uint8_t*>(alloc_pages(seg_size, true));
  fill_pattern(mem, seg_size, 21);
  rsm_memseg_export_handle_t ex, hidden;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, seg_size, 0), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_create(ctl, &hidden, mem, 4096, 0), RSM_SUCCESS);
  rsmapi_access_entry_t to2[] = {{2, 0666}};
  rsmapi_access_entry_t to1[] = {{1, 0666}};
  rsm_memseg_id_t id = 0x600100, hid = 0x600101;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, to2, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_publish(hidden, &hid, to1, 1), RSM_SUCCESS);
  sh->u32[0] = id;
  sh->u32[1] = hid;
  sh->u32[2] = static_cast<uint32_t>(getpid());
  set_step(0, 1);
  // The importer's putv signals when it is done.
  REQ_EQ(rsm_intr_signal_wait(ex, 30000), RSM_SUCCESS);
  std::vector<uint8_t> want(seg_size);
  fill_pattern(want.data(), seg_size, 21);
  fill_pattern(want.data(), 4096, 22);  // put8
  uint64_t v64 = 0x1122334455667788ull;
  memcpy(want.data() + 8192, &v64, 8);                // put64
  fill_pattern(want.data() + 65536, 256 * 1024, 23);  // bulk put
  for (int i = 0; i < 4; i++)
    fill_pattern(want.data() + 524288 + i * 4096, 1024, 30 + static_cast<uint32_t>(i));
  REQ(memcmp(mem, want.data(), seg_size) == 0);
  REQ_EQ(rsm_intr_signal_post(ex, 0), RSM_SUCCESS);  // tell the importer
  set_step(1, 1);
  sleep(60);  // killed by the importer
  return 1;
}

RSM_CHILD(tcp_importer) {
  auto ctl = open_ctl("tcp");
  REQ_EQ(local_node(), 2u);
  // The topology: nodes 1 and 2 answer, node 3 (no such host) does not.
  rsm_topology_t* t;
  REQ_EQ(rsm_get_interconnect_topology(&t), RSM_SUCCESS);
  rsm_connections_t* tcp = nullptr;
  for (uint_t i = 0; i < t->topology_hdr.local_cntlr_count; i++)
    if (!strcmp(t->connections[i]->hdr.cntlr_name, "tcp0")) tcp = t->connections[i];
  REQ(tcp != nullptr);
  REQ_EQ(tcp->hdr.remote_cntlr_count, 3);
  for (int i = 0; i < 3; i++)
    REQ_EQ(tcp->remote_cntlr[i].connection_state, i < 2 ? RSM_CONNECTION_ACTIVE : 0);
  rsm_free_interconnect_topology(t);
  wait_step(0, 1);
  rsm_memseg_id_t id = sh->u32[0];
  rsm_memseg_import_handle_t im, x;
  REQ_EQ(rsm_memseg_import_connect(ctl, 1, sh->u32[1], RSM_PERM_READ, &x), RSMERR_SEG_NOT_PUBLISHED_TO_NODE);
  REQ_EQ(rsm_memseg_import_connect(ctl, 1, 0x600999, RSM_PERM_READ, &x), RSMERR_SEG_NOT_PUBLISHED);
  REQ_EQ(rsm_memseg_import_connect(ctl, 7, id, RSM_PERM_READ, &x), RSMERR_REMOTE_NODE_UNREACHABLE);
  REQ_EQ(rsm_memseg_import_connect(ctl, 3, id, RSM_PERM_READ, &x), RSMERR_REMOTE_NODE_UNREACHABLE);
  REQ_EQ(rsm_memseg_import_connect(ctl, 1, id, RSM_PERM_RDWR, &im), RSM_SUCCESS);
  rsmapi_barrier_t bar;
  REQ_EQ(rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, &bar), RSM_SUCCESS);
  std::vector<uint8_t> buf(256 * 1024), want(seg_size);
  fill_pattern(want.data(), seg_size, 21);
  REQ_EQ(rsm_memseg_import_get(im, 0, buf.data(), buf.size()), RSM_SUCCESS);
  REQ(memcmp(buf.data(), want.data(), buf.size()) == 0);
  fill_pattern(buf.data(), 4096, 22);
  REQ_EQ(rsm_memseg_import_put8(im, 0, buf.data(), 4096), RSM_SUCCESS);
  uint64_t v64 = 0x1122334455667788ull, back = 0;
  REQ_EQ(rsm_memseg_import_put64(im, 8192, &v64, 1), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_get64(im, 8192, &back, 1), RSM_SUCCESS);
  REQ_EQ(back, v64);
  uint32_t w32[4];
  REQ_EQ(rsm_memseg_import_get32(im, 16384, w32, 4), RSM_SUCCESS);
  REQ(memcmp(w32, want.data() + 16384, 16) == 0);
  // Bulk, inside an explicit barrier.
  REQ_EQ(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_open_barrier(&bar), RSM_SUCCESS);
  fill_pattern(buf.data(), buf.size(), 23);
  REQ_EQ(rsm_memseg_import_put(im, 65536, buf.data(), buf.size()), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_close_barrier(&bar), RSM_SUCCESS);
  std::vector<uint8_t> got(buf.size());
  REQ_EQ(rsm_memseg_import_get(im, 65536, got.data(), got.size()), RSM_SUCCESS);
  REQ(got == buf);
  // Mapping needs the exporter's node.
  void* addr = nullptr;
  REQ_EQ(rsm_memseg_import_map(im, &addr, RSM_MAP_NONE, RSM_PERM_READ, 0, 4096), RSMERR_MAP_FAILED);
  // Scatter/gather ending with a signal to the exporter.
  std::vector<uint8_t> local(4 * 4096);
  rsm_iovec_t io[4];
  for (int i = 0; i < 4; i++) {
    fill_pattern(local.data() + i * 4096, 1024, 30 + static_cast<uint32_t>(i));
    io[i] = {};
    io[i].io_type = RSM_VA_TYPE;
    io[i].local.vaddr = reinterpret_cast<caddr_t>(local.data());
    io[i].local_offset = static_cast<size_t>(i) * 4096;
    io[i].remote_offset = 524288 + static_cast<size_t>(i) * 4096;
    io[i].transfer_length = 1024;
  }
  rsm_scat_gath_t sg{};
  sg.remote_handle = im;
  sg.iovec = io;
  sg.io_request_count = 4;
  sg.flags = RSM_IMPLICIT_SIGPOST;
  REQ_EQ(rsm_memseg_import_putv(&sg), RSM_SUCCESS);
  REQ_EQ(sg.io_residual_count, 0u);
  REQ_EQ(rsm_intr_signal_wait(im, 30000), RSM_SUCCESS);  // the exporter checked it all
  wait_step(1, 1);
  // The exporter's host "dies": its importer is cut within a bound.
  double t0 = seconds();
  REQ_EQ(kill(static_cast<pid_t>(sh->u32[2]), SIGKILL), 0);
  int r = RSM_SUCCESS;
  while (r == RSM_SUCCESS && seconds() - t0 < 30) {
    r = rsm_memseg_import_get64(im, 0, &back, 1);
    usleep(10000);
  }
  REQ_EQ(r, RSMERR_CONN_ABORTED);
  REQ(seconds() - t0 < 15);
  REQ_EQ(rsm_memseg_import_destroy_barrier(&bar), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  return 0;
}

TEST_F(NetnsPair, AcrossNodes) {
  new_shared();
  pid_t e = on_node(1, "tcp_exporter");
  pid_t i = on_node(2, "tcp_importer", {"WEFT_RSM_CONNECT_TIMEOUT_MS=1500", "WEFT_RSM_LIVENESS_MS=2000"});
  std::vector<pid_t> pids{i};
  std::string why;
  int rc = wait_all(pids, 90, &why);
  kill(e, SIGKILL);
  waitpid(e, nullptr, 0);
  forget_killed(e);
  ASSERT_EQ(rc, 0) << why;
}

TEST_F(NetnsPair, HostileImporter) {
  new_shared();
  RUN_ACTORS(90, on_node(1, "hostile_exporter"), on_node(2, "hostile_importer"));
}
