// SPDX-License-Identifier: BSD-3-Clause
// What the libfabric man pages and introduction say about addresses and
// completions, checked across processes in every mode of every provider.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <iterator>
#include <vector>

#include "fixture.hpp"
#include "spawn.hpp"

namespace {

using weft_test::mp_peer;
using weft_test::mp_run;
using semantics = weft_test::mp_test;

// fi_av_insert of NULL: an entry "associated with 'any' address (similar to
// the IPv4 address of 0.0.0.0)". A directed receive from it takes a
// message from whichever peer sends; nothing can be sent to it, or read
// from it (-FI_EINVAL: there is no peer).
TEST_P(semantics, AnyAddressEntryReceivesFromEverySender) {
  mp_run(3, [](mp_peer& p) {
    fi_cq_tagged_entry ce;
    if (p.rank == 0) {
      fi_addr_t any = FI_ADDR_NOTAVAIL;
      ASSERT_EQ(fi_av_insert(p.av, nullptr, 1, &any, 0, nullptr), 1);
      ASSERT_NE(any, FI_ADDR_NOTAVAIL);
      uint64_t in[2] = {};
      for (auto& v : in) ASSERT_EQ(fi_trecv(p.ep, &v, sizeof v, nullptr, any, 5, 0, &v), 0);
      uint64_t x = 1;
      EXPECT_EQ(fi_tsend(p.ep, &x, sizeof x, nullptr, any, 5, nullptr), -FI_EINVAL);
      EXPECT_EQ(fi_tinject(p.ep, &x, sizeof x, any, 5), -FI_EINVAL);
      EXPECT_EQ(fi_read(p.ep, &x, sizeof x, nullptr, any, 0, 0, nullptr), -FI_EINVAL);
      p.barrier();  // the senders go
      fi_addr_t src[2];
      for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src[i]), 1);
        EXPECT_EQ(ce.tag, 5u);
      }
      EXPECT_EQ(in[0] + in[1], 101u + 102u) << "one message from each sender";
      EXPECT_NE(src[0], src[1]);
      for (fi_addr_t s : src) EXPECT_TRUE(s == p.addr[1] || s == p.addr[2]) << "the sender, never 'any'";
      // A directed receive from a real peer still waits for that peer.
      uint64_t only = 0;
      ASSERT_EQ(fi_trecv(p.ep, &only, sizeof only, nullptr, p.addr[2], 6, 0, &only), 0);
      p.barrier();
      ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src[0]), 1);
      EXPECT_EQ(src[0], p.addr[2]);
      EXPECT_EQ(only, 202u);
      p.barrier();
    } else {
      p.barrier();
      uint64_t v = 100 + p.rank;
      fi_cq_tagged_entry ce2;
      ASSERT_EQ(fi_tsend(p.ep, &v, sizeof v, nullptr, p.addr[0], 5, nullptr), 0);
      ASSERT_EQ(p.wait_cq(&ce2), 1);
      p.barrier();
      if (p.rank == 1) {  // sent first: a directed receive from rank 2 must not take it
        uint64_t w = 201;
        ASSERT_EQ(fi_tsend(p.ep, &w, sizeof w, nullptr, p.addr[0], 6, nullptr), 0);
        ASSERT_EQ(p.wait_cq(&ce2), 1);
      } else {
        usleep(20000);
        uint64_t w = 202;
        ASSERT_EQ(fi_tsend(p.ep, &w, sizeof w, nullptr, p.addr[0], 6, nullptr), 0);
        ASSERT_EQ(p.wait_cq(&ce2), 1);
      }
      p.barrier();
    }
  });
}

// Polls `cq` (driving progress) until `done()` or 10 s; true if done. A
// receive posted without a completion is seen only in its buffer.
template <class Done>
bool progress_until(fid_cq* cq, Done done) {
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (done()) return true;
    fi_cq_tagged_entry ce;
    EXPECT_EQ(fi_cq_read(cq, &ce, 1), -FI_EAGAIN) << "no completion was asked for";
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec > 10) return done();
  }
}

void set_ops_flags(fid_ep* ep, uint64_t flags) {
  ASSERT_EQ(fi_control(&ep->fid, FI_SETOPSFLAG, &flags), 0);
}

// Default operation flags (man fi_endpoint: FI_GETOPSFLAG / FI_SETOPSFLAG,
// and an alias with its own): with selective completion, FI_COMPLETION
// among the defaults makes fi_send / fi_recv complete, without it they do
// not; an alias keeps its own flags.
TEST_P(semantics, DefaultOpFlagsDecideCompletions) {
  weft_test::mp_options opt;
  opt.tx_flags_bind = FI_TRANSMIT | FI_SELECTIVE_COMPLETION;
  opt.rx_flags_bind = FI_RECV | FI_SELECTIVE_COMPLETION;
  mp_run(
      2,
      [](mp_peer& p) {
        fi_cq_tagged_entry ce;
        uint64_t flags = FI_TRANSMIT;
        ASSERT_EQ(fi_control(&p.ep->fid, FI_GETOPSFLAG, &flags), 0);
        EXPECT_EQ(flags, FI_TRANSMIT | p.info->tx_attr->op_flags);
        if (p.rank == 0) {
          uint64_t v[3] = {1, 2, 3};
          ASSERT_EQ(fi_send(p.ep, &v[0], 8, nullptr, p.addr[1], &v[0]), 0);
          set_ops_flags(p.ep, FI_TRANSMIT | FI_COMPLETION);
          flags = FI_TRANSMIT;
          ASSERT_EQ(fi_control(&p.ep->fid, FI_GETOPSFLAG, &flags), 0);
          EXPECT_EQ(flags, FI_TRANSMIT | FI_COMPLETION);
          ASSERT_EQ(fi_send(p.ep, &v[1], 8, nullptr, p.addr[1], &v[1]), 0);
          ASSERT_EQ(p.wait_cq(&ce), 1);
          EXPECT_EQ(ce.op_context, &v[1]);
          fid* al = nullptr;
          struct fi_alias a{&al, FI_TRANSMIT};  // no completion through the alias
          ASSERT_EQ(fi_control(&p.ep->fid, FI_ALIAS, &a), 0);
          ASSERT_EQ(fi_send(reinterpret_cast<fid_ep*>(al), &v[2], 8, nullptr, p.addr[1], &v[2]), 0);
          p.barrier();  // the receiver has all three
          EXPECT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN) << "only the second asked for a completion";
          EXPECT_EQ(fi_close(al), 0);
        } else {
          uint64_t in[3] = {};
          ASSERT_EQ(fi_recv(p.ep, &in[0], 8, nullptr, FI_ADDR_UNSPEC, &in[0]), 0);
          EXPECT_TRUE(progress_until(p.cq, [&] { return std::atomic_ref<uint64_t>(in[0]).load() == 1; }));
          set_ops_flags(p.ep, FI_RECV | FI_COMPLETION);
          ASSERT_EQ(fi_recv(p.ep, &in[1], 8, nullptr, FI_ADDR_UNSPEC, &in[1]), 0);
          ASSERT_EQ(p.wait_cq(&ce), 1);
          EXPECT_EQ(ce.op_context, &in[1]);
          EXPECT_EQ(in[1], 2u);
          set_ops_flags(p.ep, FI_RECV);
          ASSERT_EQ(fi_recv(p.ep, &in[2], 8, nullptr, FI_ADDR_UNSPEC, &in[2]), 0);
          EXPECT_TRUE(progress_until(p.cq, [&] { return std::atomic_ref<uint64_t>(in[2]).load() == 3; }));
          p.barrier();
        }
      },
      opt);
}

// FI_INJECT_COMPLETE: once the completion is out the buffer is the
// application's again. The sender scribbles over each buffer the moment
// its send completes; the receiver still gets every byte as sent, at every
// size (inline, eager, rendezvous), asked per operation and as a default.
TEST_P(semantics, InjectCompleteFreesTheBuffer) {
  static const size_t sizes[] = {8, 3000, 70000, size_t{1} << 20};
  mp_run(2, [](mp_peer& p) {
    fi_cq_tagged_entry ce;
    fi_cq_err_entry err{};
    constexpr int n = 2 * std::size(sizes);
    if (p.rank == 1) {
      std::vector<std::vector<unsigned char>> in(n);
      for (int i = 0; i < n; ++i) {
        in[i].assign(sizes[i % 4], 0);
        ASSERT_EQ(fi_trecv(p.ep, in[i].data(), in[i].size(), nullptr, FI_ADDR_UNSPEC, i, 0, nullptr), 0);
      }
      p.barrier();
      for (int i = 0; i < n; ++i) ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      for (int i = 0; i < n; ++i) {
        std::vector<unsigned char> want(sizes[i % 4]);
        weft_test::fill(want, i);
        EXPECT_TRUE(in[i] == want) << "message " << i << " changed after its inject completion";
      }
      p.barrier();
    } else {
      p.barrier();
      std::vector<unsigned char> buf;
      for (int i = 0; i < n; ++i) {
        if (i == n / 2) set_ops_flags(p.ep, FI_TRANSMIT | FI_INJECT_COMPLETE);
        buf.assign(sizes[i % 4], 0);
        weft_test::fill(buf, i);
        if (i < n / 2) {
          iovec iov{buf.data(), buf.size()};
          fi_msg_tagged m{&iov, nullptr, 1, p.addr[1], static_cast<uint64_t>(i), 0, &buf, 0};
          ASSERT_EQ(fi_tsendmsg(p.ep, &m, FI_INJECT_COMPLETE | FI_COMPLETION), 0);
        } else {
          ASSERT_EQ(fi_tsend(p.ep, buf.data(), buf.size(), nullptr, p.addr[1], i, &buf), 0);
        }
        ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
        EXPECT_EQ(ce.op_context, &buf);
        std::fill(buf.begin(), buf.end(), 0xee);  // the buffer is ours again
      }
      p.barrier();
    }
  });
}

// Errors reach the CQ under selective completion ("regardless of whether
// the operation asked for a completion"): a write and a read with a bad key,
// and a receive too small for its message, none with FI_COMPLETION, each
// end in an error entry; the successful ones make none.
TEST_P(semantics, ErrorsReachTheCqUnderSelectiveCompletion) {
  weft_test::mp_options opt;
  opt.tx_flags_bind = FI_TRANSMIT | FI_SELECTIVE_COMPLETION;
  opt.rx_flags_bind = FI_RECV | FI_SELECTIVE_COMPLETION;
  mp_run(
      2,
      [](mp_peer& p) {
        std::vector<unsigned char> target(4096, 0x11);
        fid_mr* mr = nullptr;
        ASSERT_EQ(fi_mr_reg(p.domain, target.data(), target.size(), FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 7, 0,
                            &mr, nullptr),
                  0);
        uint64_t mine[2] = {reinterpret_cast<uint64_t>(target.data()), fi_mr_key(mr)}, theirs[2];
        set_ops_flags(p.ep, FI_TRANSMIT | FI_COMPLETION);  // for the swap
        set_ops_flags(p.ep, FI_RECV | FI_COMPLETION);
        ASSERT_TRUE(p.swap_with_peer(mine, theirs, sizeof theirs));
        set_ops_flags(p.ep, FI_TRANSMIT);
        set_ops_flags(p.ep, FI_RECV);
        fi_cq_tagged_entry ce;
        fi_cq_err_entry err{};
        if (p.rank == 0) {
          char x[16] = "written";
          int ctx[3];
          ASSERT_EQ(fi_write(p.ep, x, 16, nullptr, p.addr[1], theirs[0], theirs[1] ^ 0x5a5a, &ctx[0]), 0);
          ASSERT_EQ(p.wait_cq(&ce, &err), -FI_EAVAIL);
          EXPECT_NE(err.err, 0);
          EXPECT_EQ(err.op_context, &ctx[0]);
          EXPECT_EQ(err.flags, FI_RMA | FI_WRITE);
          ASSERT_EQ(fi_read(p.ep, x, 16, nullptr, p.addr[1], theirs[0], theirs[1] ^ 0x5a5a, &ctx[1]), 0);
          ASSERT_EQ(p.wait_cq(&ce, &err), -FI_EAVAIL);
          EXPECT_NE(err.err, 0);
          EXPECT_EQ(err.op_context, &ctx[1]);
          EXPECT_EQ(err.flags, FI_RMA | FI_READ);
          // A good write: no entry.
          ASSERT_EQ(fi_write(p.ep, x, 16, nullptr, p.addr[1], theirs[0], theirs[1], &ctx[2]), 0);
          std::vector<char> big(64, 'b');
          ASSERT_EQ(fi_send(p.ep, big.data(), big.size(), nullptr, p.addr[1], nullptr), 0);
          p.barrier();  // the receiver saw both
          EXPECT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN);
        } else {
          char small[16];
          int ctx;
          ASSERT_EQ(fi_recv(p.ep, small, sizeof small, nullptr, FI_ADDR_UNSPEC, &ctx), 0);
          ASSERT_EQ(p.wait_cq(&ce, &err), -FI_EAVAIL);
          EXPECT_EQ(err.err, FI_ETRUNC);
          EXPECT_EQ(err.op_context, &ctx);
          EXPECT_EQ(err.len, sizeof small);
          EXPECT_EQ(err.olen, 64 - sizeof small);
          EXPECT_TRUE(progress_until(p.cq, [&] { return std::atomic_ref<unsigned char>(target[0]).load() == 'w'; }))
              << "the good write landed";
          EXPECT_STREQ(reinterpret_cast<char*>(target.data()), "written");
          p.barrier();
        }
        p.barrier();
        EXPECT_EQ(fi_close(&mr->fid), 0);
      },
      opt);
}

// The state letter of process `pid` in /proc (R, S, T for stopped, ...).
char proc_state(pid_t pid) {
  char path[64], buf[512] = {};
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = fopen(path, "r");
  if (!f) return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  const char* close_paren = strrchr(buf, ')');
  return close_paren && close_paren + 2 < buf + n ? close_paren[2] : '?';
}

// "For reliable endpoints, a transmit complete occurs when the request has
// reached the target endpoint"; delivery complete when it was processed
// there. With the receiving process stopped (SIGSTOP) neither can happen: a
// send asking for either, at every size and with FI_INJECT too (per
// operation and as the default op_flags), completes only once the receiver
// runs again (SIGCONT), and the data arrives whole. (A kernel's TCP
// acknowledgement would not do: a stopped process's kernel acknowledges
// whatever fits its socket buffer.)
TEST_P(semantics, StoppedReceiverHoldsTransmitAndDeliveryCompletion) {
  struct send_case {
    uint64_t flags;
    size_t size;
    bool by_default;  // through FI_SETOPSFLAG and fi_send, not fi_sendmsg
  };
  std::vector<send_case> cases;
  for (uint64_t level : {uint64_t{FI_TRANSMIT_COMPLETE}, uint64_t{FI_DELIVERY_COMPLETE}}) {
    for (size_t size : {size_t{8}, size_t{3000}, size_t{70000}}) cases.push_back({level, size, false});
    cases.push_back({level | FI_INJECT, 8, false});
    cases.push_back({level | FI_INJECT, 3000, true});
  }
  mp_run(2, [&cases](mp_peer& p) {
    pid_t mine = getpid(), theirs = 0;
    ASSERT_TRUE(p.swap_with_peer(&mine, &theirs, sizeof mine));
    fi_cq_tagged_entry ce;
    fi_cq_err_entry err{};
    if (p.rank == 1) {
      std::vector<std::vector<unsigned char>> in(cases.size());
      for (size_t i = 0; i < cases.size(); ++i) {
        in[i].assign(cases[i].size, 0);
        ASSERT_EQ(fi_trecv(p.ep, in[i].data(), in[i].size(), nullptr, FI_ADDR_UNSPEC, 0x70 + i, 0, nullptr), 0);
      }
      p.barrier();
      for (size_t i = 0; i < cases.size(); ++i) ASSERT_EQ(p.wait_cq(&ce, &err, 30000), 1) << fi_strerror(err.err);
      for (size_t i = 0; i < cases.size(); ++i) {
        std::vector<unsigned char> want(cases[i].size);
        weft_test::fill(want, static_cast<unsigned>(i));
        EXPECT_TRUE(in[i] == want) << "message " << i;
      }
      p.barrier();
      return;
    }
    p.barrier();
    struct resume {  // a failed check must not leave the receiver stopped
      pid_t pid;
      ~resume() { kill(pid, SIGCONT); }
    } resume_at_end{theirs};
    for (size_t i = 0; i < cases.size(); ++i) {
      const send_case& sc = cases[i];
      SCOPED_TRACE(testing::Message() << "size " << sc.size << " flags 0x" << std::hex << sc.flags
                                      << (sc.by_default ? " as op_flags" : ""));
      std::vector<unsigned char> buf(sc.size);
      weft_test::fill(buf, static_cast<unsigned>(i));
      ASSERT_EQ(kill(theirs, SIGSTOP), 0);
      for (int k = 0; k < 2000 && proc_state(theirs) != 'T'; ++k) usleep(500);
      ASSERT_EQ(proc_state(theirs), 'T');
      if (sc.by_default) {
        set_ops_flags(p.ep, FI_TRANSMIT | sc.flags);
        ASSERT_EQ(fi_tsend(p.ep, buf.data(), buf.size(), nullptr, p.addr[1], 0x70 + i, &buf), 0);
        set_ops_flags(p.ep, FI_TRANSMIT);
      } else {
        iovec iov{buf.data(), buf.size()};
        fi_msg_tagged m{&iov, nullptr, 1, p.addr[1], 0x70 + i, 0, &buf, 0};
        ASSERT_EQ(fi_tsendmsg(p.ep, &m, sc.flags | FI_COMPLETION), 0);
      }
      if (sc.flags & FI_INJECT) std::fill(buf.begin(), buf.end(), 0xee);  // ours again at once
      timespec t0, now;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      do {
        ASSERT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN) << "completed while the receiver is stopped";
        clock_gettime(CLOCK_MONOTONIC, &now);
      } while ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 100);
      ASSERT_EQ(kill(theirs, SIGCONT), 0);
      ASSERT_EQ(p.wait_cq(&ce, &err), 1) << fi_strerror(err.err);
      EXPECT_EQ(ce.op_context, &buf);
    }
    p.barrier();
  });
}

// The completion levels cost what they promise: inject complete (and no
// level) completes when the data left the application, without waiting
// for the receiver to take it; transmit complete waits for that.
TEST_P(semantics, InjectCompleteDoesNotWaitForTheReceiver) {
  mp_run(2, [](mp_peer& p) {
    pid_t mine = getpid(), theirs = 0;
    ASSERT_TRUE(p.swap_with_peer(&mine, &theirs, sizeof mine));
    fi_cq_tagged_entry ce;
    fi_cq_err_entry err{};
    uint64_t v = 0;
    if (p.rank == 1) {
      ASSERT_EQ(fi_trecv(p.ep, &v, sizeof v, nullptr, FI_ADDR_UNSPEC, 9, 0, nullptr), 0);
      p.barrier();
      ASSERT_EQ(p.wait_cq(&ce, &err, 30000), 1) << fi_strerror(err.err);
      EXPECT_EQ(v, 99u);
      p.barrier();
      return;
    }
    p.barrier();
    ASSERT_EQ(kill(theirs, SIGSTOP), 0);
    for (int k = 0; k < 2000 && proc_state(theirs) != 'T'; ++k) usleep(500);
    v = 99;
    iovec iov{&v, sizeof v};
    fi_msg_tagged m{&iov, nullptr, 1, p.addr[1], 9, 0, &v, 0};
    ASSERT_EQ(fi_tsendmsg(p.ep, &m, FI_INJECT_COMPLETE | FI_COMPLETION), 0);
    const int r = p.wait_cq(&ce, &err, 5000);
    kill(theirs, SIGCONT);
    ASSERT_EQ(r, 1) << "an inject-complete send waited for a stopped receiver: " << fi_strerror(err.err);
    p.barrier();
  });
}

WEFT_MP_SUITE(semantics);

}  // namespace
