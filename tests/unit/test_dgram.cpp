// SPDX-License-Identifier: BSD-3-Clause
// Datagram endpoints (FI_EP_DGRAM): udp's and shm's, one suite per mode
// (udp on 127.0.0.1, shm, and udp with every rank on a host of its own when
// tests/netns runs it), plus what only udp has: multicast groups, and
// datagrams from the network that are not weft's.
//
// On loopback (and on the namespaces' clean link) no datagram is lost, so
// every test expects every message; each receive is posted before its
// message leaves (a barrier between), except where the test is about
// messages that arrive first.
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/fi_cm.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>

#include "fixture.hpp"
#include "prov/udp/udp.hpp"
#include "spawn.hpp"

namespace {

using weft_test::fill;
using weft_test::mp_mode;
using weft_test::mp_options;
using weft_test::mp_peer;
using weft_test::mp_run;

const mp_mode dgram_all[] = {
    {"udp", "udp", nullptr, false},
    {"shm", "shm", nullptr, false},
    {"udp_hosts", "udp", "FI_UDP_IFACE=eth0", false},
};
std::vector<mp_mode> dgram_modes() {
  std::vector<mp_mode> out;
  const bool hosts = getenv("WEFT_NS_1") != nullptr;
  for (const mp_mode& m : dgram_all)
    if (weft_test::offered(m.prov) && weft_test::is_hosts_mode(m) == hosts) out.push_back(m);
  return out;
}

bool is_udp() {
  return !strcmp(weft_test::current_mode().prov, "udp");
}

mp_options dgram_opts(uint64_t caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV) {
  mp_options o;
  o.ep_type = FI_EP_DGRAM;
  o.caps = caps;
  return o;
}

// What each provider's datagram can carry: udp 1500 (the default MTU) less
// IPv4 (20), UDP (8) and weft's (24) headers; shm one queue cell.
size_t expected_max() {
  return is_udp() ? 1448 : 4096;
}

using dgram = weft_test::mp_test;

// ---------------------------------------------------------------- messages
// Every way to send a message, sizes from 0 to max_msg_size, with and
// without CQ data: each arrives whole (the bytes after it untouched), with
// its flags, its data and its sender (FI_SOURCE).
TEST_P(dgram, MessagesDataAndSource) {
  mp_run(2, [](mp_peer& p) {
    const size_t max = p.info->ep_attr->max_msg_size;
    ASSERT_EQ(max, expected_max());
    struct msg {
      size_t size;
      bool data;
      uint64_t value;  // CQ data, or (without) the size names it
    };
    const std::vector<msg> msgs = {{0, true, 100},  {1, true, 101},   {17, true, 102}, {300, true, 103},
                                   {max, true, 104}, {300 * 3 + 1, true, 105}, {8, true, 106},
                                   {20, false, 0},   {max - 1, false, 0}};
    if (p.rank == 1) {
      std::vector<std::vector<unsigned char>> bufs(msgs.size(), std::vector<unsigned char>(max + 64, 0xee));
      for (size_t i = 0; i < msgs.size(); ++i)
        ASSERT_EQ(fi_recv(p.ep, bufs[i].data(), bufs[i].size(), nullptr, FI_ADDR_UNSPEC, &bufs[i]), 0);
      p.barrier();
      std::vector<bool> seen(msgs.size());
      for (size_t k = 0; k < msgs.size(); ++k) {
        fi_cq_tagged_entry ce;
        fi_addr_t src = FI_ADDR_NOTAVAIL;
        ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1) << "message " << k;
        size_t i = 0;
        while (i < msgs.size() && (seen[i] || (msgs[i].data ? !(ce.flags & FI_REMOTE_CQ_DATA) ||
                                                                  ce.data != msgs[i].value
                                                            : (ce.flags & FI_REMOTE_CQ_DATA) ||
                                                                  ce.len != msgs[i].size)))
          ++i;
        ASSERT_LT(i, msgs.size()) << "an unknown message: len " << ce.len << " data " << ce.data;
        seen[i] = true;
        const msg& m = msgs[i];
        EXPECT_EQ(ce.len, m.size);
        EXPECT_EQ(ce.flags & (FI_RECV | FI_MSG | FI_TAGGED), uint64_t{FI_RECV | FI_MSG});
        EXPECT_EQ(src, p.addr[0]) << "FI_SOURCE";
        auto& b = *static_cast<std::vector<unsigned char>*>(ce.op_context);
        std::vector<unsigned char> want(m.size);
        fill(want, static_cast<unsigned>(m.size + m.value));
        if (m.size) {
          EXPECT_EQ(memcmp(b.data(), want.data(), m.size), 0) << "message of " << m.size << " bytes";
        }
        for (size_t j = m.size; j < b.size(); ++j) ASSERT_EQ(b[j], 0xee) << "written past the message, byte " << j;
      }
    } else {
      p.barrier();
      int completions = 0;
      for (const msg& m : msgs) {
        std::vector<unsigned char> out(m.size);
        fill(out, static_cast<unsigned>(m.size + m.value));
        ssize_t r;
        if (m.size == 300 * 3 + 1) {  // three pieces and a byte, with fi_sendmsg
          iovec iov[4] = {{out.data(), 300}, {out.data() + 300, 300}, {out.data() + 600, 300}, {out.data() + 900, 1}};
          fi_msg fm{iov, nullptr, 4, p.addr[1], &completions, m.value};
          r = fi_sendmsg(p.ep, &fm, FI_REMOTE_CQ_DATA | FI_COMPLETION);
          ++completions;
        } else if (m.size == 8) {
          r = fi_injectdata(p.ep, out.data(), m.size, m.value, p.addr[1]);
        } else if (m.size == 20) {
          r = fi_inject(p.ep, out.data(), m.size, p.addr[1]);
        } else if (!m.data) {
          r = fi_send(p.ep, out.data(), m.size, nullptr, p.addr[1], &completions);
          ++completions;
        } else {
          r = fi_senddata(p.ep, out.data(), m.size, nullptr, m.value, p.addr[1], &completions);
          ++completions;
        }
        ASSERT_EQ(r, 0) << "sending " << m.size << " bytes";
      }
      // A send completes once the datagram left (udp) or sits in the
      // receiver's queue (shm); injects complete nothing.
      for (int i = 0; i < completions; ++i) {
        fi_cq_tagged_entry ce;
        ASSERT_EQ(p.wait_cq(&ce), 1);
        EXPECT_EQ(ce.flags, uint64_t{FI_SEND | FI_MSG});
        EXPECT_EQ(ce.op_context, &completions);
      }
      fi_cq_tagged_entry extra;
      EXPECT_EQ(fi_cq_read(p.cq, &extra, 1), -FI_EAGAIN);
    }
    p.barrier();
  }, dgram_opts());
}

// Tagged messages match by tag under the ignore bits, and never a receive
// for untagged messages (nor the reverse).
TEST_P(dgram, TaggedMatching) {
  mp_run(2, [](mp_peer& p) {
    if (p.rank == 1) {
      char a[64] = {}, b[64] = {}, c[64] = {}, m[64] = {};
      ASSERT_EQ(fi_trecv(p.ep, a, sizeof a, nullptr, FI_ADDR_UNSPEC, 0x10, 0, a), 0);
      ASSERT_EQ(fi_trecv(p.ep, b, sizeof b, nullptr, FI_ADDR_UNSPEC, 0x20, 0xf, b), 0);
      ASSERT_EQ(fi_recv(p.ep, m, sizeof m, nullptr, FI_ADDR_UNSPEC, m), 0);
      ASSERT_EQ(fi_trecv(p.ep, c, sizeof c, nullptr, FI_ADDR_UNSPEC, 0x30, 0, c), 0);
      p.barrier();
      std::map<void*, fi_cq_tagged_entry> got;
      for (int i = 0; i < 4; ++i) {
        fi_cq_tagged_entry ce;
        ASSERT_EQ(p.wait_cq(&ce), 1);
        got[ce.op_context] = ce;
      }
      ASSERT_EQ(got.size(), 4u);
      EXPECT_STREQ(b, "tag 0x25");
      EXPECT_EQ(got[b].tag, 0x25u);
      EXPECT_STREQ(c, "tag 0x30");
      EXPECT_EQ(got[c].flags & FI_REMOTE_CQ_DATA, uint64_t{FI_REMOTE_CQ_DATA});
      EXPECT_EQ(got[c].data, 77u);
      EXPECT_STREQ(a, "tag 0x10");
      EXPECT_EQ(got[a].flags & (FI_TAGGED | FI_RECV), uint64_t{FI_TAGGED | FI_RECV});
      EXPECT_STREQ(m, "untagged");
      EXPECT_EQ(got[m].flags & (FI_TAGGED | FI_MSG), uint64_t{FI_MSG});
    } else {
      p.barrier();
      ASSERT_EQ(fi_tinject(p.ep, "tag 0x25", 9, p.addr[1], 0x25), 0);
      ASSERT_EQ(fi_tsenddata(p.ep, "tag 0x30", 9, nullptr, 77, p.addr[1], 0x30, nullptr), 0);
      ASSERT_EQ(fi_inject(p.ep, "untagged", 9, p.addr[1]), 0);
      ASSERT_EQ(fi_tinject(p.ep, "tag 0x10", 9, p.addr[1], 0x10), 0);
      fi_cq_tagged_entry ce;
      ASSERT_EQ(p.wait_cq(&ce), 1);
      EXPECT_EQ(ce.flags, uint64_t{FI_SEND | FI_TAGGED});
    }
    p.barrier();
  }, dgram_opts());
}

// ---------------------------------------------------------------- limits
// A message larger than max_msg_size is refused by every send call, and
// nothing of it is sent or completed; max_msg_size itself goes. What a
// datagram endpoint cannot do is refused too.
TEST_P(dgram, OversizeRefused) {
  mp_run(1, [](mp_peer& p) {
    const size_t max = p.info->ep_attr->max_msg_size;
    ASSERT_EQ(max, expected_max());
    EXPECT_EQ(p.info->tx_attr->inject_size, max);
    std::vector<unsigned char> out(max + 1), in(max + 1, 0);
    fill(out, 5);
    const fi_addr_t self = p.addr[0];
    EXPECT_EQ(fi_send(p.ep, out.data(), max + 1, nullptr, self, nullptr), -FI_EMSGSIZE);
    EXPECT_EQ(fi_senddata(p.ep, out.data(), max + 1, nullptr, 1, self, nullptr), -FI_EMSGSIZE);
    EXPECT_EQ(fi_tsend(p.ep, out.data(), max + 1, nullptr, self, 1, nullptr), -FI_EMSGSIZE);
    iovec iov[2] = {{out.data(), max}, {out.data() + max, 1}};
    EXPECT_EQ(fi_sendv(p.ep, iov, nullptr, 2, self, nullptr), -FI_EMSGSIZE);
    fi_msg m{iov, nullptr, 2, self, nullptr, 0};
    EXPECT_EQ(fi_sendmsg(p.ep, &m, 0), -FI_EMSGSIZE);
    // An inject is bounded by inject_size (= max_msg_size) first.
    EXPECT_EQ(fi_inject(p.ep, out.data(), max + 1, self), -FI_EINVAL);
    // No RMA, no atomics on a datagram endpoint.
    EXPECT_EQ(fi_write(p.ep, out.data(), 8, nullptr, self, 0, 0, nullptr), -FI_ENOSYS);
    EXPECT_EQ(fi_atomic(p.ep, out.data(), 1, nullptr, self, 0, 0, FI_UINT64, FI_SUM, nullptr), -FI_ENOSYS);
    if (is_udp()) {
      // No completion can say a datagram was received: nothing answers.
      iovec one{out.data(), 8};
      fi_msg dm{&one, nullptr, 1, self, nullptr, 0};
      EXPECT_EQ(fi_sendmsg(p.ep, &dm, FI_DELIVERY_COMPLETE), -FI_EOPNOTSUPP);
    }
    fi_cq_tagged_entry ce;
    EXPECT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN) << "a refused send completed";
    // max_msg_size itself, to ourselves.
    ASSERT_EQ(fi_recv(p.ep, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, in.data()), 0);
    ASSERT_EQ(fi_send(p.ep, out.data(), max, nullptr, self, out.data()), 0);
    int sends = 0, recvs = 0;
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(p.wait_cq(&ce), 1);
      if (ce.flags & FI_SEND) {
        ++sends;
      } else {
        ++recvs;
        EXPECT_EQ(ce.len, max);
        EXPECT_EQ(memcmp(in.data(), out.data(), max), 0);
        EXPECT_EQ(in[max], 0);
      }
    }
    EXPECT_EQ(sends, 1);
    EXPECT_EQ(recvs, 1);
  }, dgram_opts());
}

// fi_getinfo: max_msg_size is a limit hints cannot raise; udp's follows
// FI_UDP_MTU.
TEST_P(dgram, GetinfoMaxMsgSize) {
  const char* prov = GetParam().prov;
  auto ask = [&](size_t max_msg) -> size_t {
    fi_info* h = fi_allocinfo();
    h->fabric_attr->prov_name = strdup(prov);
    h->ep_attr->type = FI_EP_DGRAM;
    h->ep_attr->max_msg_size = max_msg;
    fi_info* info = nullptr;
    const int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info);
    fi_freeinfo(h);
    const size_t got = ret ? 0 : info->ep_attr->max_msg_size;
    fi_freeinfo(info);
    return got;
  };
  EXPECT_EQ(ask(0), expected_max());
  EXPECT_EQ(ask(expected_max()), expected_max());
  EXPECT_EQ(ask(expected_max() + 1), 0u) << "offered more than one datagram carries";
  if (!is_udp()) return;
  setenv("FI_UDP_MTU", "9000", 1);  // jumbo frames
  EXPECT_EQ(ask(0), 9000u - 52);
  EXPECT_EQ(ask(8000), 8000u);
  setenv("FI_UDP_MTU", "100", 1);  // below IPv4's 576: ignored
  EXPECT_EQ(ask(0), 1448u);
  unsetenv("FI_UDP_MTU");
  EXPECT_EQ(ask(0), 1448u);
}

// ---------------------------------------------------------------- arrivals
// Messages that arrive before their receives wait (within the matcher's
// bounds) and fill a multi-receive buffer posted later; FI_SOURCE of a
// sender the AV no longer holds is FI_ADDR_NOTAVAIL.
TEST_P(dgram, EarlyArrivalsMultiRecvAndUnknownSource) {
  mp_run(2, [](mp_peer& p) {
    constexpr int n = 4;
    constexpr size_t len = 100;
    if (p.rank == 0) {
      for (int i = 0; i < n; ++i) {
        std::vector<unsigned char> out(len);
        fill(out, 40 + i);
        ASSERT_EQ(fi_injectdata(p.ep, out.data(), len, i, p.addr[1]), 0);
      }
      p.barrier();
      p.barrier();
      ASSERT_EQ(fi_inject(p.ep, "late", 5, p.addr[1]), 0);
      p.barrier();
      return;
    }
    p.barrier();  // all sent: progress now parks them as unexpected
    fi_cq_tagged_entry ce;
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(100))
      ASSERT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN);
    size_t min = len;
    ASSERT_EQ(fi_setopt(&p.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min), 0);
    std::vector<unsigned char> big(n * len + len / 2, 0xee);
    iovec iov{big.data(), big.size()};
    fi_msg m{&iov, nullptr, 1, FI_ADDR_UNSPEC, big.data(), 0};
    ASSERT_EQ(fi_recvmsg(p.ep, &m, FI_MULTI_RECV), 0);
    std::vector<bool> seen(n);
    for (int i = 0; i < n; ++i) {
      fi_addr_t src;
      ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1) << i;
      ASSERT_LT(ce.data, uint64_t{n});
      EXPECT_FALSE(seen[ce.data]);
      seen[ce.data] = true;
      EXPECT_EQ(ce.len, len);
      EXPECT_EQ(src, p.addr[0]);
      EXPECT_EQ(ce.buf, big.data() + i * len) << "packed in arrival order";
      std::vector<unsigned char> want(len);
      fill(want, 40 + static_cast<unsigned>(ce.data));
      EXPECT_EQ(memcmp(ce.buf, want.data(), len), 0);
      EXPECT_EQ(!!(ce.flags & FI_MULTI_RECV), i == n - 1) << "released when less than min_multi_recv is left";
    }
    // The sender leaves the AV: its next message has no source.
    ASSERT_EQ(fi_av_remove(p.av, &p.addr[0], 1, 0), 0);
    char late[8] = {};
    ASSERT_EQ(fi_recv(p.ep, late, sizeof late, nullptr, FI_ADDR_UNSPEC, late), 0);
    p.barrier();
    p.barrier();
    fi_addr_t src = 0;
    ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1);
    EXPECT_STREQ(late, "late");
    EXPECT_EQ(src, FI_ADDR_NOTAVAIL);
  }, dgram_opts());
}

// FI_DIRECTED_RECV: a receive for one sender does not take another's message.
TEST_P(dgram, DirectedReceives) {
  mp_run(3, [](mp_peer& p) {
    if (p.rank == 0) {
      char from2[16] = {}, from1[16] = {};
      ASSERT_EQ(fi_recv(p.ep, from2, sizeof from2, nullptr, p.addr[2], from2), 0);
      ASSERT_EQ(fi_recv(p.ep, from1, sizeof from1, nullptr, p.addr[1], from1), 0);
      p.barrier();
      p.barrier();  // rank 1 sent
      fi_cq_tagged_entry ce;
      ASSERT_EQ(p.wait_cq(&ce), 1);
      EXPECT_EQ(ce.op_context, from1);
      EXPECT_STREQ(from1, "rank 1");
      p.barrier();  // rank 2 sends
      ASSERT_EQ(p.wait_cq(&ce), 1);
      EXPECT_EQ(ce.op_context, from2);
      EXPECT_STREQ(from2, "rank 2");
    } else {
      p.barrier();
      if (p.rank == 1) {
        ASSERT_EQ(fi_inject(p.ep, "rank 1", 7, p.addr[0]), 0);
      }
      p.barrier();
      p.barrier();
      if (p.rank == 2) {
        ASSERT_EQ(fi_inject(p.ep, "rank 2", 7, p.addr[0]), 0);
      }
    }
    p.barrier();
  }, dgram_opts());
}

// An AV entry removed and its index given to another peer's address: the
// next datagram to that fi_addr_t goes to the new peer.
TEST_P(dgram, ReusedAvIndexReachesTheNewPeer) {
  mp_run(3, weft_test::send_to_reused_av_index, dgram_opts());
}

// The other way: a removed sender's datagrams have no source, and do not
// match a receive directed at the index its entry had, now another peer's.
TEST_P(dgram, ReusedAvIndexNamesTheNewSource) {
  mp_run(3, weft_test::source_of_reused_av_index, dgram_opts());
}

// ---------------------------------------------------------------- FD waits
// An application asleep in poll(2) on the CQ's fd wakes when a datagram
// comes, and the fd is quiet again once it is read.
TEST_P(dgram, FdWaitWakesOnArrival) {
  mp_options o = dgram_opts();
  o.cq_wait = FI_WAIT_FD;
  mp_run(2, [](mp_peer& p) {
    if (p.rank == 0) {
      p.barrier();
      usleep(200 * 1000);  // the receiver is asleep by now
      ASSERT_EQ(fi_injectdata(p.ep, "wake", 5, 9, p.addr[1]), 0);
      p.barrier();
      return;
    }
    int fd = -1;
    ASSERT_EQ(fi_control(&p.cq->fid, FI_GETWAIT, &fd), 0);
    char buf[16] = {};
    ASSERT_EQ(fi_recv(p.ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, buf), 0);
    fid* f = &p.cq->fid;
    ASSERT_EQ(fi_trywait(p.fabric, &f, 1), 0);
    p.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    pollfd pfd{fd, POLLIN, 0};
    ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "slept through the datagram";
    const auto slept = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(slept, std::chrono::milliseconds(100)) << "woke before anything came";
    fi_cq_tagged_entry ce;
    ASSERT_EQ(p.wait_cq(&ce), 1);
    EXPECT_STREQ(buf, "wake");
    EXPECT_EQ(ce.data, 9u);
    // Nothing more to come: trywait agrees and the fd stays quiet.
    ASSERT_EQ(fi_trywait(p.fabric, &f, 1), 0);
    EXPECT_EQ(poll(&pfd, 1, 100), 0);
    p.barrier();
  }, o);
}

// FI_PROGRESS_AUTO: the endpoint's thread reads the datagrams; a blocking
// read sleeps until their completions come.
TEST_P(dgram, AutoProgressAndSread) {
  mp_options o = dgram_opts();
  o.progress = FI_PROGRESS_AUTO;
  o.cq_wait = FI_WAIT_UNSPEC;
  mp_run(2, [](mp_peer& p) {
    constexpr int n = 20;
    if (p.rank == 0) {
      p.barrier();
      for (int i = 0; i < n; ++i) ASSERT_EQ(fi_injectdata(p.ep, &i, sizeof i, i, p.addr[1]), 0);
      p.barrier();
      return;
    }
    int in[n] = {};
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(fi_recv(p.ep, &in[i], sizeof in[i], nullptr, FI_ADDR_UNSPEC, &in[i]), 0);
    p.barrier();
    for (int i = 0; i < n; ++i) {
      fi_cq_tagged_entry ce;
      ASSERT_EQ(fi_cq_sread(p.cq, &ce, 1, nullptr, 5000), 1) << i;
      EXPECT_EQ(*static_cast<int*>(ce.op_context), static_cast<int>(ce.data));
    }
    p.barrier();
  }, o);
}

INSTANTIATE_TEST_SUITE_P(dgram, dgram, ::testing::ValuesIn(dgram_modes()),
                         [](const auto& p) { return std::string(p.param.name); });

// ---------------------------------------------------------------- udp only
using udp_mp = weft_test::mp_test;

sockaddr_in random_group() {
  std::random_device rd;
  sockaddr_in g{};
  g.sin_family = AF_INET;
  // 239.255/16: organization-local scope, never routed beyond it.
  g.sin_addr.s_addr = htonl(0xefff0000u | (rd() & 0xfeffu) | 1u);
  g.sin_port = htons(static_cast<uint16_t>(20000 + rd() % 40000));
  return g;
}

// fi_join on an IPv4 group: two receiving members and a sender; each
// member gets every message, flagged FI_MULTICAST, with its sender.
TEST_P(udp_mp, MulticastTwoReceivers) {
  const sockaddr_in group = random_group();
  mp_options o = dgram_opts(FI_MSG | FI_MULTICAST | FI_SOURCE);
  o.eq = true;
  mp_run(3, [&group](mp_peer& p) {
    constexpr int n = 3;
    int ctx = 0;
    fid_mc* mc = nullptr;
    ASSERT_EQ(fi_join(p.ep, &group, p.rank == 0 ? FI_SEND : FI_RECV, &mc, &ctx), 0);
    uint32_t event = 0;
    fi_eq_entry entry{};
    ASSERT_EQ(fi_eq_sread(p.eq, &event, &entry, sizeof entry, 5000, 0), static_cast<ssize_t>(sizeof entry));
    EXPECT_EQ(event, uint32_t{FI_JOIN_COMPLETE});
    EXPECT_EQ(entry.fid, &mc->fid);
    EXPECT_EQ(entry.context, &ctx);
    char bufs[n][32] = {};
    if (p.rank != 0) {
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(fi_recv(p.ep, bufs[i], sizeof bufs[i], nullptr, FI_ADDR_UNSPEC, bufs[i]), 0);
      }
    }
    p.barrier();
    if (p.rank == 0) {
      fid_mc* again = nullptr;
      EXPECT_EQ(fi_join(p.ep, &group, 0, &again, nullptr), -FI_EALREADY);
      sockaddr_in unicast = group;
      unicast.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      EXPECT_EQ(fi_join(p.ep, &unicast, 0, &again, nullptr), -FI_EINVAL) << "not a group";
      EXPECT_EQ(fi_join(p.ep, &group, FI_TAGGED, &again, nullptr), -FI_EBADFLAGS);
      for (int i = 0; i < n; ++i) {
        char out[32];
        snprintf(out, sizeof out, "to the group %d", i);
        iovec iov{out, strlen(out) + 1};
        fi_msg m{&iov, nullptr, 1, fi_mc_addr(mc), &ctx, static_cast<uint64_t>(i)};
        ASSERT_EQ(fi_sendmsg(p.ep, &m, FI_MULTICAST | FI_REMOTE_CQ_DATA), 0);
        fi_cq_tagged_entry ce;
        ASSERT_EQ(p.wait_cq(&ce), 1);
        EXPECT_EQ(ce.flags, uint64_t{FI_SEND | FI_MSG | FI_MULTICAST});
      }
      // FI_MULTICAST with an address that is no group of ours.
      iovec iov{bufs[0], 1};
      fi_msg bad{&iov, nullptr, 1, p.addr[1], nullptr, 0};
      EXPECT_EQ(fi_sendmsg(p.ep, &bad, FI_MULTICAST), -FI_EINVAL);
    } else {
      std::vector<bool> seen(n);
      for (int i = 0; i < n; ++i) {
        fi_cq_tagged_entry ce;
        fi_addr_t src = FI_ADDR_NOTAVAIL;
        ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1) << "rank " << p.rank << " message " << i;
        EXPECT_EQ(ce.flags, uint64_t{FI_RECV | FI_MSG | FI_MULTICAST | FI_REMOTE_CQ_DATA});
        ASSERT_LT(ce.data, uint64_t{n});
        EXPECT_FALSE(seen[ce.data]);
        seen[ce.data] = true;
        char want[32];
        snprintf(want, sizeof want, "to the group %d", static_cast<int>(ce.data));
        EXPECT_STREQ(static_cast<char*>(ce.op_context), want);
        EXPECT_EQ(src, p.addr[0]) << "the group's sender";
      }
    }
    p.barrier();
    if (p.rank == 2) {
      // An endpoint may close before its group (fi_endpoint(3) gives
      // -FI_EBUSY for a scalable endpoint's contexts only): it leaves the
      // group, whose fid_mc waits for its own fi_close.
      EXPECT_EQ(fi_close(&p.ep->fid), 0);
      p.ep = nullptr;
    }
    EXPECT_EQ(fi_close(&mc->fid), 0);
    // The group's socket is gone: nothing more arrives from it.
    EXPECT_EQ(fi_eq_read(p.eq, &event, &entry, sizeof entry, 0), -FI_EAGAIN);
  }, o);
}

// An endpoint receives the groups it joined, and no other: bound to every
// interface at a port, it does not get the datagrams of a group someone
// else on this host joined at that port (IP_MULTICAST_ALL off), and cannot
// join a group at its own port (another socket cannot bind it); a group at
// another port it joins delivers each datagram once.
TEST_P(udp_mp, MulticastOnlyJoinedGroups) {
  const sockaddr_in group = random_group();
  mp_options o = dgram_opts(FI_MSG | FI_MULTICAST);
  o.eq = true;
  mp_run(1, [&group](mp_peer& p) {
    fid_cq* cq = nullptr;
    fid_ep* ep = nullptr;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ASSERT_EQ(fi_cq_open(p.domain, &ca, &cq, nullptr), 0);
    ASSERT_EQ(fi_endpoint(p.domain, p.info, &ep, nullptr), 0);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = group.sin_port;
    ASSERT_EQ(fi_setname(&ep->fid, &any, sizeof any), 0);
    ASSERT_EQ(fi_ep_bind(ep, &p.av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_ep_bind(ep, &p.eq->fid, 0), 0);
    ASSERT_EQ(fi_enable(ep), 0);
    sockaddr_in name{};
    size_t len = sizeof name;
    ASSERT_EQ(fi_getname(&ep->fid, &name, &len), 0);
    EXPECT_NE(name.sin_addr.s_addr, htonl(INADDR_ANY)) << "peers are told an address they can reach";
    EXPECT_EQ(name.sin_port, group.sin_port);
    fid_mc* mc = nullptr;
    EXPECT_EQ(fi_join(ep, &group, FI_RECV, &mc, nullptr), -FI_EADDRINUSE) << "its own port";
    char in[2][16] = {};
    for (auto& b : in) ASSERT_EQ(fi_recv(ep, b, sizeof b, nullptr, FI_ADDR_UNSPEC, b), 0);
    // A plain socket joins the group on the endpoint's interface and sends
    // it a well-formed message at the endpoint's port.
    const int s = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(s, 0);
    ip_mreq mreq{group.sin_addr, name.sin_addr};
    ASSERT_EQ(setsockopt(s, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq), 0);
    ASSERT_EQ(setsockopt(s, IPPROTO_IP, IP_MULTICAST_IF, &name.sin_addr, sizeof name.sin_addr), 0);
    const weft::udp::header h = weft::udp::encode(false, 0, false, 0);
    unsigned char d[sizeof h + 6];
    memcpy(d, &h, sizeof h);
    memcpy(d + sizeof h, "group", 6);
    ASSERT_EQ(sendto(s, d, sizeof d, 0, reinterpret_cast<const sockaddr*>(&group), sizeof group),
              static_cast<ssize_t>(sizeof d));
    memcpy(d + sizeof h, "direc", 6);
    ASSERT_EQ(sendto(s, d, sizeof d, 0, reinterpret_cast<const sockaddr*>(&name), sizeof name),
              static_cast<ssize_t>(sizeof d));
    fi_cq_tagged_entry ce;
    auto collect = [&](std::vector<std::string>& got) {
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300))
        if (fi_cq_read(cq, &ce, 1) == 1 && (ce.flags & FI_RECV))
          got.push_back(std::string(static_cast<char*>(ce.op_context)) +
                        ((ce.flags & FI_MULTICAST) ? " (multicast)" : ""));
    };
    std::vector<std::string> got;
    collect(got);
    EXPECT_EQ(got, std::vector<std::string>{"direc"}) << "a group it did not join";
    close(s);
    // A group at another port: joined, each datagram once.
    sockaddr_in other = group;
    other.sin_port = htons(static_cast<uint16_t>(ntohs(group.sin_port) ^ 1));
    ASSERT_EQ(fi_join(ep, &other, 0, &mc, nullptr), 0);  // to send and to receive
    iovec iov{const_cast<char*>("once"), 5};
    fi_msg m{&iov, nullptr, 1, fi_mc_addr(mc), nullptr, 0};
    ASSERT_EQ(fi_sendmsg(ep, &m, FI_MULTICAST), 0);
    got.clear();
    collect(got);
    EXPECT_EQ(got, std::vector<std::string>{"once (multicast)"});
    EXPECT_EQ(fi_close(&mc->fid), 0);
    EXPECT_EQ(fi_close(&ep->fid), 0);
    EXPECT_EQ(fi_close(&cq->fid), 0);
  }, o);
}

// fi_join's refusals: an endpoint without FI_MULTICAST, without an EQ, or
// not enabled yet.
TEST_P(udp_mp, JoinRefusals) {
  const sockaddr_in group = random_group();
  mp_run(1, [&group](mp_peer& p) {
    fid_mc* mc = nullptr;
    EXPECT_EQ(fi_join(p.ep, &group, 0, &mc, nullptr), -FI_ENOEQ);
  }, dgram_opts(FI_MSG | FI_MULTICAST));
  mp_run(1, [&group](mp_peer& p) {
    fid_mc* mc = nullptr;
    EXPECT_EQ(fi_join(p.ep, &group, 0, &mc, nullptr), -FI_EOPNOTSUPP);
  }, dgram_opts(FI_MSG));
}

// Datagrams that are not weft's (or are, but malformed) are dropped unread:
// no completion, not a byte of the posted buffer touched; a well-formed
// one built by hand is received whole.
TEST_P(udp_mp, HostileDatagramsDropped) {
  mp_run(1, [](mp_peer& p) {
    sockaddr_in to{};
    size_t len = sizeof to;
    ASSERT_EQ(fi_getname(&p.ep->fid, &to, &len), 0);
    const int s = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(s, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr = to.sin_addr;
    ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&from), sizeof from), 0);
    std::vector<unsigned char> buf(2048, 0xee);
    char tbuf[64];
    memset(tbuf, 0xee, sizeof tbuf);
    ASSERT_EQ(fi_recv(p.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, buf.data()), 0);
    ASSERT_EQ(fi_trecv(p.ep, tbuf, sizeof tbuf, nullptr, FI_ADDR_UNSPEC, 0, ~0ull, tbuf), 0);
    auto send_raw = [&](const std::vector<unsigned char>& d) {
      ASSERT_EQ(sendto(s, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
                static_cast<ssize_t>(d.size()));
    };
    auto valid = [](uint8_t flags, size_t payload) {
      std::vector<unsigned char> d(24 + payload, 0x5a);
      memset(d.data(), 0, 24);
      d[0] = 'W';
      d[1] = 'D';
      d[2] = 1;
      d[3] = flags;
      return d;
    };
    std::vector<std::vector<unsigned char>> bad;
    bad.push_back({});                      // empty
    bad.push_back({'W', 'D', 1});           // shorter than a header
    bad.push_back(valid(0, 0));
    bad.back().resize(23);                  // one byte short
    bad.push_back(valid(0, 10));
    bad.back()[0] = 'X';                    // magic
    bad.push_back(valid(0, 10));
    bad.back()[2] = 2;                      // version
    bad.push_back(valid(0x04, 10));         // an unknown flag
    bad.push_back(valid(0x80, 10));
    bad.push_back(valid(0, 10));
    bad.back()[5] = 1;                      // reserved bits
    bad.push_back(valid(0, 10));
    bad.back()[9] = 1;                      // a tag without flag_tagged
    bad.push_back(valid(0, 10));
    bad.back()[23] = 1;                     // CQ data without flag_cq_data
    std::mt19937 rng(7);
    for (int i = 0; i < 200; ++i) {         // noise
      std::vector<unsigned char> d(rng() % 1500);
      for (auto& b : d) b = static_cast<unsigned char>(rng());
      if (d.size() > 1) d[0] = 'w';         // never weft's magic
      bad.push_back(d);
    }
    auto& e = weft::udp::ep::of(*weft::endpoint::of(p.ep));
    fi_cq_tagged_entry ce;
    for (auto& d : bad) {  // read as they come: the socket's buffer holds a hundred or so
      send_raw(d);
      ASSERT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN) << "a malformed datagram completed a receive";
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (e.malformed < bad.size() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
      ASSERT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN) << "a malformed datagram completed a receive";
    EXPECT_EQ(e.malformed, bad.size());
    for (unsigned char b : buf) ASSERT_EQ(b, 0xee);
    for (char b : tbuf) ASSERT_EQ(static_cast<unsigned char>(b), 0xee);
    // The largest UDP datagram there is (65507 bytes) to a buffer of 2 KiB:
    // received, truncated (FI_ETRUNC), nothing written past the buffer.
    auto huge = valid(0, 65507 - 24);
    send_raw(huge);
    fi_cq_err_entry err{};
    ASSERT_EQ(p.wait_cq(&ce, &err), -FI_EAVAIL);
    EXPECT_EQ(err.err, FI_ETRUNC);
    EXPECT_EQ(err.len, buf.size());
    EXPECT_EQ(err.olen, 65507u - 24 - buf.size());
    EXPECT_EQ(buf[0], 0x5a);
    EXPECT_EQ(buf.back(), 0x5a);
    // A tagged one, well formed, with data: received as sent.
    auto good = valid(0x03, 5);
    memcpy(good.data() + 8, "\x34\x12\0\0\0\0\0\0", 8);   // tag 0x1234, little-endian
    memcpy(good.data() + 16, "\x07\0\0\0\0\0\0\0", 8);    // data 7
    memcpy(good.data() + 24, "hello", 5);
    send_raw(good);
    fi_addr_t src = 0;
    ASSERT_EQ(p.wait_cq(&ce, nullptr, 10000, &src), 1);
    EXPECT_EQ(ce.op_context, tbuf);
    EXPECT_EQ(ce.tag, 0x1234u);
    EXPECT_EQ(ce.data, 7u);
    EXPECT_EQ(ce.len, 5u);
    EXPECT_EQ(memcmp(tbuf, "hello", 5), 0);
    EXPECT_EQ(static_cast<unsigned char>(tbuf[5]), 0xee);
    EXPECT_EQ(src, FI_ADDR_NOTAVAIL) << "a sender the AV does not hold";
    close(s);
  }, dgram_opts());
}

// Addresses: fi_setname before fi_enable, fi_getname after; two endpoints
// cannot take one port.
TEST_P(udp_mp, NamesAndPorts) {
  const int port = weft_test::free_port();
  mp_run(1, [port](mp_peer& p) {
    sockaddr_in own{};
    size_t len = sizeof own;
    ASSERT_EQ(fi_getname(&p.ep->fid, &own, &len), 0);
    EXPECT_EQ(len, sizeof own);
    EXPECT_EQ(own.sin_family, AF_INET);
    EXPECT_NE(own.sin_port, 0) << "the port the kernel chose";
    EXPECT_EQ(fi_setname(&p.ep->fid, &own, sizeof own), -FI_EOPBADSTATE);
    size_t small = 4;
    EXPECT_EQ(fi_getname(&p.ep->fid, &own, &small), -FI_ETOOSMALL);
    EXPECT_EQ(small, sizeof own);
    // Another endpoint, named before it is enabled.
    fid_ep* ep2 = nullptr;
    fid_cq* cq2 = nullptr;
    fi_cq_attr ca{};
    ASSERT_EQ(fi_cq_open(p.domain, &ca, &cq2, nullptr), 0);
    ASSERT_EQ(fi_endpoint(p.domain, p.info, &ep2, nullptr), 0);
    sockaddr_in want{};
    want.sin_family = AF_INET;
    want.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    want.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(fi_setname(&ep2->fid, &want, 3), -FI_EINVAL);
    ASSERT_EQ(fi_setname(&ep2->fid, &want, sizeof want), 0);
    ASSERT_EQ(fi_ep_bind(ep2, &p.av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep2, &cq2->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(ep2), 0);
    sockaddr_in got{};
    len = sizeof got;
    ASSERT_EQ(fi_getname(&ep2->fid, &got, &len), 0);
    EXPECT_EQ(memcmp(&got, &want, sizeof got), 0);
    // The same address again: taken.
    fid_ep* ep3 = nullptr;
    ASSERT_EQ(fi_endpoint(p.domain, p.info, &ep3, nullptr), 0);
    ASSERT_EQ(fi_setname(&ep3->fid, &want, sizeof want), 0);
    ASSERT_EQ(fi_ep_bind(ep3, &p.av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep3, &cq2->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_enable(ep3), -FI_EADDRINUSE);
    EXPECT_EQ(fi_close(&ep3->fid), 0);
    EXPECT_EQ(fi_close(&ep2->fid), 0);
    EXPECT_EQ(fi_close(&cq2->fid), 0);
  }, dgram_opts());
}

// The route's MTU bounds a datagram too: the sockets never fragment, so a
// message that fits max_msg_size but not the route (a link below FI_UDP_MTU:
// tests/netns/dgram_hosts.sh runs this over a 1280-byte one) is refused at
// the call (-FI_EMSGSIZE) and nothing leaves; what fits arrives whole.
TEST_P(udp_mp, RouteMtuRefusesRatherThanFragments) {
  mp_run(2, [](mp_peer& p) {
    const size_t max = p.info->ep_attr->max_msg_size;
    if (p.rank == 1) {
      std::vector<unsigned char> in(max + 1, 0xee);
      ASSERT_EQ(fi_recv(p.ep, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
      p.barrier();
      fi_cq_tagged_entry ce;
      ASSERT_EQ(p.wait_cq(&ce), 1);
      std::vector<unsigned char> want(ce.len);
      fill(want, 3);
      EXPECT_EQ(memcmp(in.data(), want.data(), ce.len), 0);
      EXPECT_EQ(in[ce.len], 0xee);
      p.barrier();
      EXPECT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN) << "a second message";
      return;
    }
    // The path MTU toward rank 1, as the kernel knows it.
    sockaddr_in to{};
    size_t len = sizeof to;
    ASSERT_EQ(fi_av_lookup(p.av, p.addr[1], &to, &len), 0);
    const int s = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    int mtu = 0;
    socklen_t ml = sizeof mtu;
    ASSERT_EQ(getsockopt(s, IPPROTO_IP, IP_MTU, &mtu, &ml), 0);
    close(s);
    const size_t fits = std::min(max, static_cast<size_t>(mtu) - 52);
    std::vector<unsigned char> out(max);
    fill(out, 3);
    p.barrier();
    if (fits < max) {
      EXPECT_EQ(fi_send(p.ep, out.data(), fits + 1, nullptr, p.addr[1], nullptr), -FI_EMSGSIZE)
          << "path MTU " << mtu;
    }
    ASSERT_EQ(fi_send(p.ep, out.data(), fits, nullptr, p.addr[1], nullptr), 0);
    fi_cq_tagged_entry ce;
    ASSERT_EQ(p.wait_cq(&ce), 1);
    EXPECT_EQ(fi_cq_read(p.cq, &ce, 1), -FI_EAGAIN);
    p.barrier();
  }, dgram_opts());
}

std::vector<mp_mode> udp_modes() {
  std::vector<mp_mode> out;
  for (const mp_mode& m : dgram_modes())
    if (!strcmp(m.prov, "udp")) out.push_back(m);
  return out;
}
INSTANTIATE_TEST_SUITE_P(dgram, udp_mp, ::testing::ValuesIn(udp_modes()),
                         [](const auto& p) { return std::string(p.param.name); });

// ---------------------------------------------------------------- shm only
// A datagram endpoint reassembles nothing: an RDM peer's large message
// (fragments or rendezvous) is refused back to it (FI_EMSGSIZE at the
// sender) and nothing arrives; its small messages do.
TEST(ShmDgram, LargeMessageFromRdmRefused) {
  mp_options o;
  o.prov = "shm";
  o.ep_type = FI_EP_DGRAM;
  o.caps = FI_MSG | FI_SOURCE;
  mp_run(2, [](mp_peer& p) {
    if (p.rank == 1) {
      std::vector<unsigned char> in(1 << 20, 0xee);
      ASSERT_EQ(fi_recv(p.ep, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, in.data()), 0);
      p.barrier();
      // Progress refuses the large ones meanwhile; the first completion is
      // the small message's.
      fi_cq_tagged_entry ce;
      ASSERT_EQ(p.wait_cq(&ce, nullptr, 20000), 1);
      EXPECT_EQ(ce.len, 64u) << "only the small message";
      EXPECT_EQ(in[0], 3);
      EXPECT_EQ(in[64], 0xee);
      p.barrier();
      return;
    }
    // Rank 0 talks to rank 1's datagram endpoint from an RDM endpoint.
    fi_info* h = fi_allocinfo();
    h->fabric_attr->prov_name = strdup("shm");
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG;
    fi_info* info = nullptr;
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
    fi_freeinfo(h);
    fid_ep* ep = nullptr;
    fid_cq* cq = nullptr;
    fid_av* av = nullptr;
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    fi_av_attr aa{};
    ASSERT_EQ(fi_cq_open(p.domain, &ca, &cq, nullptr), 0);
    ASSERT_EQ(fi_av_open(p.domain, &aa, &av, nullptr), 0);
    ASSERT_EQ(fi_endpoint(p.domain, info, &ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(ep), 0);
    char name[128] = {};
    size_t len = sizeof name;
    ASSERT_EQ(fi_av_lookup(p.av, p.addr[1], name, &len), 0);
    fi_addr_t to;
    ASSERT_EQ(fi_av_insert(av, name, 1, &to, 0, nullptr), 1);
    p.barrier();
    auto wait = [&](fi_cq_tagged_entry& ce) {
      ssize_t r;
      const auto t0 = std::chrono::steady_clock::now();
      while ((r = fi_cq_read(cq, &ce, 1)) == -FI_EAGAIN &&
             std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {}
      return r;
    };
    for (size_t size : {size_t{64} << 10, size_t{1} << 20}) {  // fragments, then a rendezvous
      std::vector<unsigned char> out(size, 1);
      ASSERT_EQ(fi_send(ep, out.data(), size, nullptr, to, out.data()), 0);
      fi_cq_tagged_entry ce;
      ASSERT_EQ(wait(ce), -FI_EAVAIL) << size;
      fi_cq_err_entry err{};
      ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
      EXPECT_EQ(err.err, FI_EMSGSIZE) << size;
      EXPECT_EQ(err.op_context, out.data());
    }
    std::vector<unsigned char> small(64, 3);
    ASSERT_EQ(fi_send(ep, small.data(), small.size(), nullptr, to, nullptr), 0);
    fi_cq_tagged_entry ce;
    EXPECT_EQ(wait(ce), 1);
    p.barrier();
    EXPECT_EQ(fi_close(&ep->fid), 0);
    EXPECT_EQ(fi_close(&av->fid), 0);
    EXPECT_EQ(fi_close(&cq->fid), 0);
    fi_freeinfo(info);
  }, o);
}

}  // namespace
