// White-box: the shm receive queue with several producer threads racing on
// one region mapped twice in this process (TSan cannot see races between
// processes, so this is how the cross-process protocol gets checked).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "prov/shm/shm.hpp"

namespace {

using namespace weft::shm;

TEST(ShmQueue, ConcurrentProducersOneConsumer) {
  std::string name = "qtest_" + std::to_string(getpid());
  mapping owner, other;
  owner.create(region_file(name), region_size);
  region_init(owner.base(), name, "none", true);
  ASSERT_TRUE(other.open(region_file(name), region_size));
  region_view mine{owner.base()}, theirs{other.base()};

  constexpr int producers = 3, per_producer = 20000;
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < producers; ++t) {
    threads.emplace_back([&, t] {
      started++;
      for (int i = 0; i < per_producer;) {
        cell* c = queue_claim(theirs);
        if (!c) {
          std::this_thread::yield();
          continue;
        }
        c->h.opcode = op::msg;
        c->h.src = static_cast<uint32_t>(t);
        c->h.tag = static_cast<uint64_t>(i);
        c->h.len = sizeof(int) * 2;
        int v[2] = {t, i};
        memcpy(c->payload, v, sizeof v);
        queue_commit(theirs, c);
        ++i;
      }
    });
  }
  std::vector<int> next(producers, 0);
  int received = 0;
  while (received < producers * per_producer) {
    cell* c = queue_peek(mine);
    if (!c) continue;
    int v[2];
    memcpy(v, c->payload, sizeof v);
    ASSERT_EQ(c->h.opcode, op::msg);
    ASSERT_EQ(static_cast<int>(c->h.src), v[0]);
    ASSERT_EQ(static_cast<int>(c->h.tag), v[1]);
    ASSERT_EQ(v[1], next[v[0]]) << "producer " << v[0] << " out of order";
    next[v[0]]++;
    queue_release(mine, c);
    ++received;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(queue_peek(mine), nullptr);
  EXPECT_EQ(queue_stalled(mine), nullptr);
}

TEST(ShmQueue, FullQueueRefusesThenRecovers) {
  std::string name = "qfull_" + std::to_string(getpid());
  mapping owner;
  owner.create(region_file(name), region_size);
  region_init(owner.base(), name, "none", true);
  region_view r{owner.base()};
  for (uint32_t i = 0; i < queue_cells; ++i) {
    cell* c = queue_claim(r);
    ASSERT_NE(c, nullptr);
    c->h.opcode = op::nop;
    queue_commit(r, c);
  }
  EXPECT_EQ(queue_claim(r), nullptr);
  cell* c = queue_peek(r);
  ASSERT_NE(c, nullptr);
  queue_release(r, c);
  EXPECT_NE(queue_claim(r), nullptr);
}

TEST(ShmRegion, NamesAndStaleRegions) {
  EXPECT_TRUE(valid_name("1234_0"));
  EXPECT_FALSE(valid_name(""));
  EXPECT_FALSE(valid_name("a/b"));
  EXPECT_FALSE(valid_name(std::string(100, 'x')));
  EXPECT_TRUE(pid_alive(getpid()));
  EXPECT_FALSE(pid_alive(0));
  // A region whose owner is gone is removed.
  pid_t child = fork();
  if (child == 0) {
    mapping m;
    m.create(region_file("stale_test_" + std::to_string(getpid())), region_size);
    region_init(m.base(), "x", "none", true);
    _exit(0);  // exits without unmapping: the file stays
  }
  int status;
  waitpid(child, &status, 0);
  std::string file = "/dev/shm/" + region_file("stale_test_" + std::to_string(child));
  // The child's static cleanup may already have removed it; make one by hand if so.
  if (access(file.c_str(), F_OK) != 0) {
    FILE* f = fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    region_hdr h{};
    h.magic = region_magic;
    h.pid = child;
    fwrite(&h, sizeof h, 1, f);
    fclose(f);
  }
  remove_stale_regions();
  EXPECT_NE(access(file.c_str(), F_OK), 0) << "stale region not removed";
}

}  // namespace

// A hostile or broken peer writes malformed cells into an endpoint's queue:
// they are dropped (no crash, no out-of-bounds access), and a good cell that
// follows is delivered.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>

namespace {

TEST(ShmQueue, MalformedCellsAreDropped) {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("shm");
  hints->caps = FI_MSG;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0);
  fi_freeinfo(hints);
  fid_fabric* fab;
  fid_domain* dom;
  fid_av* av;
  fid_cq* cq;
  fid_ep* ep;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
  ASSERT_EQ(fi_domain(fab, info, &dom, nullptr), 0);
  fi_av_attr aa{};
  ASSERT_EQ(fi_av_open(dom, &aa, &av, nullptr), 0);
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_MSG;
  ASSERT_EQ(fi_cq_open(dom, &ca, &cq, nullptr), 0);
  ASSERT_EQ(fi_endpoint(dom, info, &ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_enable(ep), 0);
  char name[128];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&ep->fid, name, &len), 0);
  mapping m;
  ASSERT_TRUE(m.open(region_file(std::string(name).substr(9)), region_size));
  region_view r{m.base()};
  auto put = [&](op o, uint16_t flags, uint64_t size, uint32_t clen, uint16_t src) {
    cell* c = queue_claim(r);
    ASSERT_NE(c, nullptr);
    c->h.opcode = o;
    c->h.flags = flags;
    c->h.size = size;
    if (!(flags & flag_inline)) c->h.len = clen;
    c->h.src = src;
    c->h.tag = 0;
    memset(c->h.inl, 'x', sizeof c->h.inl);
    queue_commit(r, c);
  };
  put(op::msg, flag_inline, 1u << 30, 0, 0);  // inline claiming 1 GiB
  put(op::msg, 0, 100000, 100000, 0);         // larger than a cell
  put(op::msg, 0, 10, 20, 0);                 // len disagrees with size
  put(op::msg, flag_inline, 4, 0, 60000);     // sender slot out of range
  put(static_cast<op>(200), 0, 0, 0, 0);      // unknown opcode
  put(op::write, 0, 8, 4, 0);                 // shorter than its descriptor
  put(op::msg, flag_inline, 5, 0, 0);         // finally a good one
  char buf[64] = {};
  ASSERT_EQ(fi_recv(ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, buf), 0);
  fi_cq_msg_entry ce;
  ssize_t n = -FI_EAGAIN;
  for (int i = 0; i < 1000000 && n == -FI_EAGAIN; ++i) n = fi_cq_read(cq, &ce, 1);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(ce.len, 5u);
  EXPECT_EQ(memcmp(buf, "xxxxx", 5), 0);
  EXPECT_EQ(fi_cq_read(cq, &ce, 1), -FI_EAGAIN);  // nothing from the bad cells
  m.reset();
  EXPECT_EQ(fi_close(&ep->fid), 0);
  EXPECT_EQ(fi_close(&cq->fid), 0);
  EXPECT_EQ(fi_close(&av->fid), 0);
  EXPECT_EQ(fi_close(&dom->fid), 0);
  EXPECT_EQ(fi_close(&fab->fid), 0);
  fi_freeinfo(info);
}

}  // namespace
