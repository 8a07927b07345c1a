// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: an endpoint hears from as many senders as come, its peer table
// growing as they appear. 1,024 processes on this host (all alive at once)
// each send a few messages to one endpoint: every message arrives once, in
// order per sender, with its data, tag and source (FI_SOURCE) checked.
//
// The senders are light: a helper process forks them; each opens its own
// endpoint, sends, waits for its completions, and then only sleeps on a pipe
// until the receiver has everything (so all of them are live senders at that
// moment), then exits. A sender that finds the receiver's queue full, or its
// name backlog full (-FI_EAGAIN), sleeps a little and tries again, so 1,024
// processes do not spin against the one receiver on a small machine.
//
// WEFT_SHM_SENDERS=N runs it with N senders (300 by default in sanitizer
// builds, see below); the test prints the receiver region's size.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "prov/shm/shm.hpp"
#include "plain_ep.hpp"
#include "spawn.hpp"

namespace {

using weft_test::fill;

constexpr int per_sender = 3;
// Inline in the cell header, one cell's payload, more than a cell (fragments
// without CMA, a rendezvous pull with it).
constexpr size_t sizes[per_sender] = {8, 1000, 6000};
constexpr size_t buf_len = 8192;

// Under a sanitizer every sender is a heavy process (1,024 of them took 33 s
// and 3.5 GB under ASan here, per mode): 300 there, still more than the
// fixed table of 256 held, all alive at once. The bound on the whole run is
// longer there: 300 senders under TSan take 17 s alone, and over 50 s when
// ctest -j2 runs both modes at once (CI, 2026-11-28: 862 of 900 messages by
// 50 s). It stays under ctest's 120 s with the reaping after it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int default_senders = 300;
constexpr int deadline_s = 90;
#else
constexpr int default_senders = 1024;
constexpr int deadline_s = 50;
#endif

int sender_count() {
  const char* v = getenv("WEFT_SHM_SENDERS");
  const int n = v ? atoi(v) : default_senders;
  return n > 0 && n <= 60000 ? n : default_senders;
}

using plain::reap;
using plain::seconds_since;

std::string base_name() {
  return "wpeers_" + std::to_string(getpid());
}
std::string sender_name(const std::string& base, int i) {
  return base + ":s" + std::to_string(i);
}
uint64_t tag_of(int sender, int k) {
  return (static_cast<uint64_t>(sender) << 8) | static_cast<uint64_t>(k);
}

// One sender: its messages to `receiver`, then sleep until `release` closes.
int sender_main(const std::string& base, int i, int release) {
  plain::endpoint o;
  if (!o.open("shm", FI_TAGGED | FI_SOURCE, ("fi_shm://" + sender_name(base, i)).c_str())) return 2;
  const std::string rx = "fi_shm://" + base + ":rx";
  fi_addr_t to = FI_ADDR_NOTAVAIL;
  if (fi_av_insert(o.av, rx.c_str(), 1, &to, 0, nullptr) != 1) return 3;
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  std::vector<unsigned char> bufs[per_sender];
  const std::string who = "sender " + std::to_string(i);
  for (int k = 0; k < per_sender; ++k) {
    bufs[k].resize(sizes[k]);
    fill(bufs[k], static_cast<unsigned>(tag_of(i, k)));
    if (ssize_t r = o.tsend(bufs[k].data(), sizes[k], to, tag_of(i, k), t0, deadline_s)) {
      fprintf(stderr, "%s: fi_tsend: %s\n", who.c_str(), fi_strerror(static_cast<int>(-r)));
      return 4;
    }
  }
  if (!o.wait_completions(per_sender, t0, deadline_s, who.c_str())) return 5;
  pollfd pfd{release, POLLIN, 0};
  if (poll(&pfd, 1, deadline_s * 1000) != 1) return 6;
  return o.close() ? 0 : 7;
}

// Forks senders first .. first + n - 1, then reaps them; exits 0 when
// every one exited 0.
[[noreturn]] void helper_main(const std::string& base, int first, int n, int release) {
  std::vector<pid_t> kids;
  int failed = 0;
  for (int i = first; i < first + n; ++i) {
    pid_t pid = fork();
    if (pid == 0) _exit(sender_main(base, i, release));
    if (pid < 0) {
      fprintf(stderr, "senders: fork %d failed: %s\n", i, strerror(errno));
      ++failed;
      break;
    }
    kids.push_back(pid);
  }
  close(release);
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (pid_t k : kids) {
    const int status = reap(k, t0, deadline_s + 5);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (failed < 5) fprintf(stderr, "senders: a sender ended with status %d\n", status);
      ++failed;
    }
  }
  _exit(failed ? 1 : 0);
}

// The helper and its senders, from the receiver's side: releasing them and
// reaping the helper happen however the test ends.
struct senders {
  pid_t helper = -1;
  int release = -1;  // our end of the pipe the senders sleep on
  timespec t0{};
  bool reaped_ok = false;

  void start(const std::string& base, int first, int n) {
    int p[2];
    ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    helper = fork();
    ASSERT_GE(helper, 0);
    if (helper == 0) {
      close(p[1]);
      helper_main(base, first, n, p[0]);
    }
    close(p[0]);
    release = p[1];
  }
  // Lets the senders exit and reaps the helper: true when all exited 0.
  bool finish() {
    if (release >= 0) close(release);
    release = -1;
    if (helper <= 0) return reaped_ok;
    const int status = reap(helper, t0, deadline_s + 10);
    helper = -1;
    reaped_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    return reaped_ok;
  }
  ~senders() { finish(); }
};

// The receiving endpoint: wildcard receives, reposted as they complete, and
// the fi_addr_t of every sender name (FI_SOURCE is checked against them).
struct receiver {
  static constexpr int window = 64;
  plain::endpoint o;
  std::vector<fi_addr_t> addr;
  std::vector<std::vector<unsigned char>> bufs;

  void open(const std::string& base, int senders) {
    ASSERT_TRUE(o.open("shm", FI_TAGGED | FI_SOURCE, ("fi_shm://" + base + ":rx").c_str()));
    addr.resize(senders);
    for (int i = 0; i < senders; ++i) {
      const std::string a = "fi_shm://" + sender_name(base, i);
      ASSERT_EQ(fi_av_insert(o.av, a.c_str(), 1, &addr[i], 0, nullptr), 1);
    }
    bufs.assign(window, std::vector<unsigned char>(buf_len));
    for (auto& b : bufs) ASSERT_EQ(fi_trecv(o.ep, b.data(), buf_len, nullptr, FI_ADDR_UNSPEC, 0, ~0ULL, &b), 0);
  }

  // Receives the messages of senders first .. first + n - 1, checking each
  // (data, size, order per sender, FI_SOURCE). Returns how many came.
  int receive(int first, int n, const timespec& t0) {
    std::vector<int> next(addr.size(), 0);
    std::vector<unsigned char> want;
    int received = 0, errors = 0;
    while (received < n * per_sender && errors < 10 && seconds_since(t0) < deadline_s) {
      fi_cq_tagged_entry ce;
      fi_addr_t src = FI_ADDR_NOTAVAIL;
      ssize_t r = fi_cq_readfrom(o.cq, &ce, 1, &src);
      if (r == -FI_EAGAIN) continue;
      if (r != 1) {
        fi_cq_err_entry err{};
        fi_cq_readerr(o.cq, &err, 0);
        ADD_FAILURE() << "receive failed: " << fi_strerror(err.err);
        ++errors;
        continue;
      }
      const int i = static_cast<int>(ce.tag >> 8), k = static_cast<int>(ce.tag & 0xff);
      auto* buf = static_cast<std::vector<unsigned char>*>(ce.op_context);
      const bool known = i >= first && i < first + n;
      bool ok = known && k < per_sender && k == next[i] && src == addr[i] && ce.len == sizes[k];
      if (ok) {
        want.assign(sizes[k], 0);
        fill(want, static_cast<unsigned>(ce.tag));
        ok = memcmp(buf->data(), want.data(), sizes[k]) == 0;
      }
      if (!ok) {
        ADD_FAILURE() << "message tag " << ce.tag << " (sender " << i << ", #" << k << ", " << ce.len
                      << " bytes, source " << src << ") wrong: expected #" << (known ? next[i] : -1)
                      << " from source " << (known ? addr[i] : 0);
        ++errors;
      }
      if (known) next[i] = k + 1;
      ++received;
      if (fi_trecv(o.ep, buf->data(), buf_len, nullptr, FI_ADDR_UNSPEC, 0, ~0ULL, buf) != 0) {
        ADD_FAILURE() << "fi_trecv failed";
        break;
      }
    }
    return received;
  }
};

// Our own peer table, as the senders left it (white-box: the region read
// through a mapping of our own).
struct table_state {
  uint32_t slots = 0;    // slots published (and inside the file)
  int live = 0;          // registered to a process that exists
  long long bytes = 0;   // the memfd's size
  long long allocated = 0;
};
table_state look_at_table(const std::string& base) {
  table_state t;
  weft::shm::mapping m;
  int32_t owner = 0;
  EXPECT_EQ(weft::shm::open_region(base + ":rx", m, &owner), weft::shm::found::yes);
  if (!m.base()) return t;
  weft::shm::region_view r{m.base()};
  t.slots = weft::shm::region_table_slots(r, m.fd());
  for (uint32_t s = 0; s < t.slots; ++s) {
    const weft::shm::peer_slot& ps = r.peers()[s];
    const int32_t pid = ps.pid.load(std::memory_order_relaxed);
    if (ps.state.load(std::memory_order_acquire) == 2 && pid > 0 && kill(pid, 0) == 0) ++t.live;
  }
  struct stat st;
  if (fstat(m.fd(), &st) == 0) {
    t.bytes = st.st_size;
    t.allocated = static_cast<long long>(st.st_blocks) * 512;
  }
  return t;
}

using shm_peers = weft_test::mp_test;

TEST_P(shm_peers, ThousandSendersIntoOneEndpoint) {
  const int n = sender_count();
  const std::string base = base_name();
  senders group;
  group.start(base, 0, n);
  if (HasFatalFailure()) return;
  receiver rx;
  rx.open(base, n);
  if (HasFatalFailure()) return;
  const int received = rx.receive(0, n, group.t0);
  const double took = seconds_since(group.t0);
  EXPECT_EQ(received, n * per_sender) << "after " << took << " s";

  // Every sender still lives (none may exit before `release` closes), and
  // each holds a slot of our peer table: the table grew past its first
  // chunk, to at least n slots.
  const table_state t = look_at_table(base);
  EXPECT_GE(t.live, n) << "live registered senders";
  EXPECT_GE(t.slots, static_cast<uint32_t>(n));
  printf("[ shm peers ] %d senders, %d messages in %.2f s; receiver region: %u peer slots, %lld bytes, "
         "%lld bytes allocated\n",
         n, received, took, t.slots, t.bytes, t.allocated);
  EXPECT_TRUE(group.finish()) << "a sender failed (its status is on stderr)";
  EXPECT_TRUE(rx.o.close());
}

// Senders that are gone leave their slots to new ones: a second wave of
// senders after the first has exited takes the first wave's slots (the
// table does not grow), and each new sender is reported as itself
// (FI_SOURCE), not as the one that had its slot before.
TEST_P(shm_peers, SlotsOfDeadSendersAreTakenAgain) {
  constexpr int wave = 100;  // two chunks of the table (64 slots each)
  const std::string base = base_name();
  receiver rx;
  rx.open(base, 2 * wave);
  if (HasFatalFailure()) return;
  for (int w = 0; w < 2; ++w) {
    senders group;
    group.start(base, w * wave, wave);
    if (HasFatalFailure()) return;
    EXPECT_EQ(rx.receive(w * wave, wave, group.t0), wave * per_sender) << "wave " << w;
    EXPECT_EQ(look_at_table(base).live, wave) << "wave " << w;
    EXPECT_TRUE(group.finish()) << "a sender failed (its status is on stderr)";
  }
  const table_state t = look_at_table(base);
  EXPECT_EQ(t.slots, 128u) << "the second wave grew the table instead of taking dead senders' slots";
  EXPECT_EQ(t.live, 0);
  EXPECT_TRUE(rx.o.close());
}

// Senders find an endpoint by connecting to its name, and the endpoint
// accepts those connections only when it progresses. 1,000 lookups of an
// endpoint that does not progress (its process busy, as a receiver that is
// still forking its senders) all find it: none is told "not there yet".
TEST(shm_name, ThousandLookupsWhileTheOwnerDoesNotProgress) {
  constexpr int lookups = 1000;
  FILE* f = fopen("/proc/sys/net/core/somaxconn", "r");
  int somaxconn = 0;
  if (f) {
    if (fscanf(f, "%d", &somaxconn) != 1) somaxconn = 0;
    fclose(f);
  }
  if (somaxconn < lookups) GTEST_SKIP() << "net.core.somaxconn is " << somaxconn << ", below " << lookups;
  const std::string name = base_name() + ":idle";
  plain::endpoint o;
  ASSERT_TRUE(o.open("shm", FI_TAGGED, ("fi_shm://" + name).c_str()));
  int found = 0;
  for (int i = 0; i < lookups; ++i) {
    weft::shm::mapping m;
    int32_t owner = 0;
    if (weft::shm::open_region(name, m, &owner) == weft::shm::found::yes && owner == getpid()) ++found;
  }
  EXPECT_EQ(found, lookups);
  o.close();
}

INSTANTIATE_TEST_SUITE_P(mode, shm_peers, ::testing::ValuesIn(weft_test::mp_modes("shm")),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
