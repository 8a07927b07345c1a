// SPDX-License-Identifier: BSD-3-Clause
// White-box: the shm receive queue with several producer threads racing on
// one region mapped twice in this process (TSan cannot see races between
// processes, so this is how the cross-process protocol gets checked).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "prov/shm/shm.hpp"

namespace {

using namespace weft::shm;

TEST(ShmQueue, ConcurrentProducersOneConsumer) {
  std::string name = "qtest_" + std::to_string(getpid());
  mapping owner, other;
  region_create(owner, name);
  region_init(owner.base(), name, -1, true);
  ASSERT_TRUE(other.open(getpid(), owner.fd(), region_size, region_map_size));
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

// A fresh endpoint region of this process, for the single-thread tests.
struct own_region {
  mapping owner;
  region_view r;
  explicit own_region(const char* tag) {
    const std::string name = tag + std::to_string(getpid());
    region_create(owner, name);
    region_init(owner.base(), name, -1, true);
    r = region_view{owner.base()};
  }
};

// Claims one cell of r, as a producer in an exchange or not, and commits it
// as opcode o with tag `tag`; nullptr when the queue is full.
cell* put_cell(region_view r, op o, uint64_t tag = 0, bool exchange = false) {
  cell* c = queue_claim(r, exchange);
  if (!c) return nullptr;
  c->h.opcode = o;
  c->h.tag = tag;
  queue_commit(r, c, !exchange);
  return c;
}

// Protocol 10: in a real region every cell's header line and first payload
// line form one 128-byte aligned pair, in every lap, and a message in a
// cell's payload stays inside its cell. Protocol 11: that pair lies at
// offset cell_block_off of a 1 KiB block of addresses, the cells are
// cell_stride apart, and the last one ends before the peer table.
TEST(ShmQueue, EveryCellStartsAnAlignedPairOfLines) {
  own_region reg("qalign_");
  region_view r = reg.r;
  for (uint32_t i = 0; i < queue_cells; ++i) {
    const auto at = reinterpret_cast<uintptr_t>(r.cell_at(i));
    ASSERT_EQ(at % 128, 0u) << "cell " << i;
    ASSERT_EQ(at % 1024, cell_block_off) << "cell " << i;
    ASSERT_EQ(reinterpret_cast<uintptr_t>(r.cell_at(i)->payload), at + 64) << "cell " << i;
    const auto end = reinterpret_cast<uintptr_t>(r.cell_at(i)->payload + inject_max);
    if (i + 1 < queue_cells) {
      ASSERT_EQ(reinterpret_cast<uintptr_t>(r.cell_at(i + 1)), at + cell_stride) << "cell " << i;
      ASSERT_LE(end, at + cell_stride) << "cell " << i;
    } else {
      ASSERT_LE(end, reinterpret_cast<uintptr_t>(r.peers()));
    }
  }
  ASSERT_EQ(r.cell_at(queue_cells), r.cell_at(0));  // indexes wrap
  // The cells a producer claims over three laps are those same cells.
  for (uint32_t n = 0; n < 3 * queue_cells; ++n) {
    cell* c = put_cell(r, op::nop);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(c) % 128, 0u);
    cell* got = queue_peek(r);
    ASSERT_EQ(got, c);
    queue_release(r, got);
  }
}

TEST(ShmQueue, FullQueueRefusesThenRecovers) {
  own_region reg("qfull_");
  region_view r = reg.r;
  for (uint32_t i = 0; i < queue_cells; ++i) ASSERT_NE(put_cell(r, op::nop), nullptr);
  EXPECT_EQ(queue_claim(r), nullptr);
  cell* c = queue_peek(r);
  ASSERT_NE(c, nullptr);
  queue_release(r, c);
  EXPECT_NE(queue_claim(r), nullptr);
}

// Protocol 7: the consumer frees cells by moving head alone, so a small
// message's line crosses once (producer to consumer); producers read the
// consumer's head once a lap, through the limit on their own line.
TEST(ShmQueue, ConsumerWritesNoCellAndProducersReadHeadOncePerLap) {
  own_region reg("qlap_");
  region_view r = reg.r;
  queue_ctl* q = r.ctl();
  EXPECT_EQ(q->limit.load(), queue_cells);
  for (uint64_t i = 0; i < 3 * uint64_t{queue_cells}; ++i) {
    cell* c = queue_claim(r);
    ASSERT_NE(c, nullptr) << i;
    c->h.opcode = op::msg;
    c->h.tag = i;
    queue_commit(r, c);
    cell* got = queue_peek(r);
    ASSERT_EQ(got, c);
    EXPECT_EQ(got->h.tag, i);
    cell_hdr before;
    memcpy(static_cast<void*>(&before), &c->h, sizeof before);
    queue_release(r, got);
    EXPECT_EQ(memcmp(static_cast<void*>(&before), &c->h, sizeof before), 0) << "the consumer wrote cell " << i;
    EXPECT_EQ(queue_peek(r), nullptr);
    // The limit moves only when the tail reaches it: once a lap.
    const uint64_t lap_end = (i / queue_cells + 1) * queue_cells;
    EXPECT_EQ(q->limit.load(), lap_end) << i;
  }
}

// An exchange (each send follows a message taken) ends a lap at index
// short_lap: the claim of that cell moves the tail to the next lap's first
// cell and marks the cell, so its messages cycle through the first
// short_lap + 1 cells, in order, every cell a message, and the consumer
// follows each lap's end from the cell it takes (queue_step).
TEST(ShmQueue, ExchangeReusesTheFirstCellsOfALap) {
  own_region reg("qexch_");
  region_view r = reg.r;
  int lap_ends = 0;
  for (uint64_t i = 0; i < 3 * uint64_t{queue_cells}; ++i) {
    cell* c = put_cell(r, op::msg, i, true);
    ASSERT_NE(c, nullptr) << i;
    const uint64_t index = i % (short_lap + 1);
    ASSERT_EQ(c, r.cell_at(index)) << "message " << i;
    cell* got = queue_peek(r);
    ASSERT_EQ(got, c) << i;
    EXPECT_EQ(got->h.tag, i);
    const uint32_t step = queue_step(r, got);
    if (index == short_lap) {
      EXPECT_EQ(step, queue_cells - short_lap) << i;
      EXPECT_EQ(r.ctl()->tail.load() & (queue_cells - 1), 0u) << i;
      ++lap_ends;
    } else {
      EXPECT_EQ(step, 1u) << i;
    }
    queue_release(r, got);
    EXPECT_EQ(queue_peek(r), nullptr);
  }
  EXPECT_EQ(lap_ends, int(3 * queue_cells / (short_lap + 1)));
  EXPECT_EQ(queue_stalled(r), nullptr);
}

// A stream after an exchange still has the whole queue: every cell, in
// order, then full.
TEST(ShmQueue, StreamAfterExchangeHasEveryCell) {
  own_region reg("qstream_");
  region_view r = reg.r;
  uint64_t sent = 0, got_n = 0;
  auto take = [&] {
    cell* got = queue_peek(r);
    if (!got) return false;
    EXPECT_EQ(got->h.tag, got_n);
    ++got_n;
    queue_release(r, got);
    return true;
  };
  for (uint32_t i = 0; i < short_lap + 10; ++i) {  // past the first lap's end
    ASSERT_NE(put_cell(r, op::msg, sent++, true), nullptr);
    ASSERT_TRUE(take());
  }
  uint32_t streamed = 0;
  while (put_cell(r, op::msg, sent)) {
    ++sent;
    ++streamed;
  }
  EXPECT_EQ(streamed, queue_cells);
  while (take()) {
  }
  EXPECT_EQ(got_n, sent);
  // An exchange claim at index short_lap that finds the next lap's first
  // cell busy claims index short_lap as a stream would: the lap goes on.
  while ((r.ctl()->tail.load() & (queue_cells - 1)) != short_lap + 64) {
    ASSERT_NE(put_cell(r, op::msg, sent++), nullptr);
    ASSERT_TRUE(take());
  }
  for (uint32_t i = 0; i < queue_cells - 64; ++i)  // to index short_lap, 192 cells busy
    ASSERT_NE(put_cell(r, op::msg, sent++), nullptr);
  ASSERT_EQ(r.ctl()->tail.load() & (queue_cells - 1), short_lap);
  cell* c = put_cell(r, op::msg, sent++, true);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c, r.cell_at(short_lap));
  EXPECT_EQ(queue_step(r, c), 1u);
  EXPECT_EQ(r.ctl()->tail.load() & (queue_cells - 1), short_lap + 1);
  while (take()) {
  }
  EXPECT_EQ(got_n, sent);
}

// A producer that dies between the claim that ends a lap and its commit:
// the periodic check commits the cell as a nop that keeps the mark (the
// pid negated), the consumer moves on to the next lap, and the queue goes
// on there.
TEST(ShmQueue, DeadProducersLapEndIsCommittedAsALapEnd) {
  own_region reg("qdead_");
  region_view r = reg.r;
  for (uint32_t i = 0; i < short_lap; ++i) {
    ASSERT_NE(put_cell(r, op::nop), nullptr);
    queue_release(r, queue_peek(r));
  }
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  // What queue_claim_lap_end does up to the commit, by a producer that is
  // dead now.
  queue_ctl* q = r.ctl();
  const uint64_t pos = short_lap, to = queue_cells;
  q->tail.store(to);
  q->limit.store(to + queue_cells);
  cell* c = r.cell_at(pos);
  c->h.producer = -child;
  c->h.opcode = op::msg;
  c->h.seq.store(pos);
  EXPECT_EQ(queue_peek(r), nullptr);
  ASSERT_EQ(queue_stalled(r), c);
  cell* got = queue_peek(r);
  ASSERT_EQ(got, c);
  EXPECT_EQ(got->h.opcode, op::nop);
  ASSERT_EQ(queue_step(r, got), queue_cells - short_lap);
  queue_release(r, got);
  EXPECT_EQ(queue_peek(r), nullptr);
  EXPECT_EQ(queue_stalled(r), nullptr);
  cell* next = queue_claim(r, true);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next, r.cell_at(0));
}

// The claim that ends a lap really is the one cell it names: a negated pid
// anywhere but index short_lap (a broken or hostile producer) moves the
// consumer one cell, as any other.
TEST(ShmQueue, LapEndMarkCountsOnlyAtTheLapsEnd) {
  own_region reg("qmark_");
  region_view r = reg.r;
  cell* c = put_cell(r, op::msg, 1);
  ASSERT_NE(c, nullptr);
  c->h.producer = -c->h.producer;
  cell* got = queue_peek(r);
  ASSERT_EQ(got, c);
  EXPECT_EQ(queue_step(r, got), 1u);
}

TEST(ShmRegion, Names) {
  EXPECT_TRUE(valid_name("1234_0"));
  EXPECT_FALSE(valid_name(""));
  EXPECT_FALSE(valid_name("a/b"));
  EXPECT_FALSE(valid_name(std::string(100, 'x')));
  EXPECT_TRUE(pid_alive(getpid()));
  EXPECT_FALSE(pid_alive(0));
  // A name is held by one endpoint at a time.
  std::string name = "claim_" + std::to_string(getpid());
  name_claim a, b;
  a.claim(name);
  try {
    b.claim(name);
    ADD_FAILURE() << "a name claimed twice";
  } catch (const weft::error& e) {
    EXPECT_EQ(e.code(), FI_EADDRINUSE);
  }
  a.reset();
  EXPECT_NO_THROW(b.claim(name));
}

// A process killed with its region mapped and its name claimed leaves
// nothing behind: no file under /dev/shm, the name free again.
TEST(ShmRegion, KilledOwnerLeavesNothing) {
  std::string name = "killed_" + std::to_string(getpid());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    name_claim c;
    c.claim(name);
    mapping m;
    region_create(m, name);
    region_init(m.base(), name, -1, true);
    char x = 1;
    if (write(ready[1], &x, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  mapping peer_map;
  int32_t pid = 0;
  ASSERT_EQ(open_region(name, peer_map, &pid), found::yes);
  EXPECT_EQ(pid, child);
  peer_map.reset();
  kill(child, SIGKILL);
  int status;
  waitpid(child, &status, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(open_region(name, peer_map, &pid), found::absent);
  // Nothing under /dev/shm names the dead process (other processes on the
  // machine may have files there).
  const std::string pid_text = std::to_string(child);
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* de = readdir(d)) EXPECT_EQ(strstr(de->d_name, pid_text.c_str()), nullptr) << de->d_name;
    closedir(d);
  }
  name_claim again;
  EXPECT_NO_THROW(again.claim(name));
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

// One enabled shm endpoint with its own fabric, domain, AV and CQ (the
// white-box tests below write into its queue or call its handlers).
struct lone_ep {
  fi_info* info = nullptr;
  fid_fabric* fab = nullptr;
  fid_domain* dom = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;

  void open(uint64_t caps, fi_cq_format format) {
    fi_info* hints = fi_allocinfo();
    hints->fabric_attr->prov_name = strdup("shm");
    hints->caps = caps;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0);
    fi_freeinfo(hints);
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
    ASSERT_EQ(fi_domain(fab, info, &dom, nullptr), 0);
    fi_av_attr aa{};
    ASSERT_EQ(fi_av_open(dom, &aa, &av, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = format;
    ASSERT_EQ(fi_cq_open(dom, &ca, &cq, nullptr), 0);
    ASSERT_EQ(fi_endpoint(dom, info, &ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(ep), 0);
  }
  ~lone_ep() {
    for (fid* f : {ep ? &ep->fid : nullptr, cq ? &cq->fid : nullptr, av ? &av->fid : nullptr,
                   dom ? &dom->fid : nullptr, fab ? &fab->fid : nullptr}) {
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    }
    if (info) fi_freeinfo(info);
  }
};

TEST(ShmQueue, MalformedCellsAreDropped) {
  lone_ep l;
  ASSERT_NO_FATAL_FAILURE(l.open(FI_MSG, FI_CQ_FORMAT_MSG));
  fid_ep* ep = l.ep;
  fid_cq* cq = l.cq;
  char name[128];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&ep->fid, name, &len), 0);
  mapping m;
  int32_t owner = 0;
  ASSERT_EQ(open_region(std::string(name).substr(9), m, &owner), found::yes);
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
  // A peer table count that names slots the file does not have: the owner
  // bounds it by the memfd's size, so a cell from such a slot is dropped
  // (and nothing past the end of the file is touched).
  r.hdr()->peer_count.store(peer_slots_max, std::memory_order_release);
  put(op::msg, flag_inline, 4, 0, 1000);
  put(static_cast<op>(200), 0, 0, 0, 0);      // unknown opcode
  put(op::write, 0, 8, 4, 0);                 // shorter than its descriptor
  put(static_cast<op>(13), 0, 0, 0, 0);      // protocol 8's jump, known to no later one
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
}

// A sender can rewrite a cell after the receiver's cell_sane looked at it
// (the cell stays in its reach). The message path reads the size once and
// checks that value: a message cell whose size has grown past a cell is
// dropped, not parked or copied with one size and sized with another.
// (handle_message called directly: the rewrite between the check and the
// use cannot be timed from outside.)
TEST(ShmQueue, MessageCellRewrittenAfterItsCheckIsDropped) {
  lone_ep l;
  ASSERT_NO_FATAL_FAILURE(l.open(FI_TAGGED, FI_CQ_FORMAT_TAGGED));
  fid_ep* ep = l.ep;
  fid_cq* cq = l.cq;
  weft::shm::ep& e = weft::shm::ep::of(*weft::endpoint::of(ep));
  auto c = std::make_unique<cell>();
  c->h.opcode = op::msg;
  c->h.flags = flag_tagged;
  c->h.tag = 9;
  c->h.len = 64;
  c->h.size = uint64_t{1} << 40;  // grown after a check that saw 64
  memset(c->payload, 'y', inject_max);
  // Nothing posted (it would have been parked) and a receive posted (it
  // would have been copied): dropped both times.
  EXPECT_EQ(handle_message(e, c.get()), arrival::done);
  char buf[128];
  memset(buf, 0, sizeof buf);
  ASSERT_EQ(fi_trecv(ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 9, 0, buf), 0);
  EXPECT_EQ(handle_message(e, c.get()), arrival::done);
  fi_cq_tagged_entry ce;
  EXPECT_EQ(fi_cq_read(cq, &ce, 1), -FI_EAGAIN) << "a rewritten cell completed a receive";
  EXPECT_EQ(buf[0], 0);
  // The same cell with its size as checked is a message.
  c->h.size = 64;
  EXPECT_EQ(handle_message(e, c.get()), arrival::done);
  ASSERT_EQ(fi_cq_read(cq, &ce, 1), 1);
  EXPECT_EQ(ce.len, 64u);
  EXPECT_EQ(buf[63], 'y');
}

}  // namespace
