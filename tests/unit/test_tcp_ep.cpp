// SPDX-License-Identifier: BSD-3-Clause
// The tcp provider through the public API: FI_EP_MSG connection management
// (man fi_cm: passive endpoints, connect/accept/reject with private data,
// FI_CONNECTED, FI_SHUTDOWN, getname/getpeer, a port where nobody listens),
// auth_key as a shared secret, the FD wait object, and an RDM endpoint that
// keeps serving a proper peer after a raw socket sent it garbage.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <memory>
#include <vector>

#include "fixture.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

fi_info* tcp_info(fi_ep_type type, const char* node = "127.0.0.1", const char* service = nullptr,
                  uint64_t flags = FI_SOURCE, const std::string& key = "") {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup(weft_test::prov_name("tcp"));
  hints->ep_attr->type = type;
  hints->caps = FI_MSG | FI_TAGGED;
  hints->addr_format = FI_SOCKADDR_IN;
  if (!key.empty()) {
    hints->domain_attr->auth_key = static_cast<uint8_t*>(malloc(key.size()));
    memcpy(hints->domain_attr->auth_key, key.data(), key.size());
    hints->domain_attr->auth_key_size = key.size();
  }
  fi_info* info = nullptr;
  int ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, &info);
  fi_freeinfo(hints);
  return ret == 0 ? info : nullptr;
}

struct side {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_eq* eq = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  fid_pep* pep = nullptr;

  explicit side(fi_info* i) : info(i) {
    if (!info) return;
    EXPECT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    EXPECT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    fi_eq_attr ea{};
    ea.wait_obj = FI_WAIT_UNSPEC;
    EXPECT_EQ(fi_eq_open(fabric, &ea, &eq, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.wait_obj = FI_WAIT_FD;
    EXPECT_EQ(fi_cq_open(domain, &ca, &cq, nullptr), 0);
  }
  ~side() {
    for (fid* f : {ep ? &ep->fid : nullptr, pep ? &pep->fid : nullptr, cq ? &cq->fid : nullptr,
                   eq ? &eq->fid : nullptr, domain ? &domain->fid : nullptr, fabric ? &fabric->fid : nullptr})
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
    fi_freeinfo(info);
  }
  // An endpoint from `i`, bound to this side's EQ and CQ, enabled (or
  // left for fi_connect / fi_accept to enable).
  void open_ep(fi_info* i, bool enable = true) {
    ASSERT_EQ(fi_endpoint(domain, i, &ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep, &eq->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    if (enable) {
      ASSERT_EQ(fi_enable(ep), 0);
    }
  }
};

// `len` bytes `from` sends over its connection land in `in` at `to`: true
// when `to`'s receive completed (both sides progress).
bool send_and_receive(side& from, side& to, const void* out, void* in, size_t len) {
  if (fi_recv(to.ep, in, len, nullptr, 0, nullptr) || fi_send(from.ep, out, len, nullptr, 0, nullptr)) return false;
  fi_cq_tagged_entry ce;
  for (int i = 0; i < 2000000; ++i) {
    if (fi_cq_read(to.cq, &ce, 1) == 1) return true;
    (void)fi_cq_read(from.cq, &ce, 0);
  }
  return false;
}

// Reads the next event from either EQ (both sides progress), within 5 s.
// Returns the event, or -FI_EAVAIL with *err filled, or -FI_ETIMEDOUT.
int next_event(fid_eq* eq, fid_eq* other, std::vector<unsigned char>& buf, fi_eq_err_entry* err = nullptr) {
  buf.assign(sizeof(fi_eq_cm_entry) + 512, 0);
  auto start = clock_type::now();
  while (clock_type::now() - start < std::chrono::seconds(5)) {
    uint32_t event = 0;
    ssize_t n = fi_eq_read(eq, &event, buf.data(), buf.size(), 0);
    if (n >= 0) {
      buf.resize(static_cast<size_t>(n));
      return static_cast<int>(event);
    }
    if (n == -FI_EAVAIL) {
      fi_eq_err_entry e{};
      EXPECT_GT(fi_eq_readerr(eq, &e, 0), 0);
      if (err) *err = e;
      return -FI_EAVAIL;
    }
    if (other) {
      uint32_t ev2;
      std::vector<unsigned char> scratch(sizeof(fi_eq_cm_entry) + 512);
      (void)fi_eq_read(other, &ev2, scratch.data(), scratch.size(), FI_PEEK);
    }
  }
  return -FI_ETIMEDOUT;
}

sockaddr_in name_of(fid_t f) {
  sockaddr_in a{};
  size_t len = sizeof a;
  EXPECT_EQ(fi_getname(f, &a, &len), 0);
  EXPECT_EQ(len, sizeof a);
  return a;
}

// A passive endpoint of `s`, bound to its EQ and listening: its address.
sockaddr_in listen_on(side& s) {
  EXPECT_EQ(fi_passive_ep(s.fabric, s.info, &s.pep, nullptr), 0);
  if (!s.pep) return {};
  EXPECT_EQ(fi_pep_bind(s.pep, &s.eq->fid, 0), 0);
  EXPECT_EQ(fi_listen(s.pep), 0);
  return name_of(&s.pep->fid);
}

// cli's endpoint connects to `at` (no data); srv's EQ raises the request:
// its fi_info (the caller frees it), or nullptr.
fi_info* connect_request(side& srv, side& cli, const sockaddr_in& at) {
  EXPECT_EQ(fi_connect(cli.ep, &at, nullptr, 0), 0);
  std::vector<unsigned char> ev;
  if (next_event(srv.eq, cli.eq, ev) != static_cast<int>(FI_CONNREQ)) return nullptr;
  return reinterpret_cast<fi_eq_cm_entry*>(ev.data())->info;
}

TEST(TcpCm, ConnectAcceptDataShutdown) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG, "127.0.0.1", nullptr, FI_SOURCE));
  ASSERT_NE(srv.info, nullptr);
  ASSERT_NE(cli.info, nullptr);
  ASSERT_EQ(fi_passive_ep(srv.fabric, srv.info, &srv.pep, nullptr), 0);
  EXPECT_EQ(fi_listen(srv.pep), -FI_ENOEQ);  // no EQ bound yet
  ASSERT_EQ(fi_pep_bind(srv.pep, &srv.eq->fid, 0), 0);
  ASSERT_EQ(fi_listen(srv.pep), 0);
  sockaddr_in listen_at = name_of(&srv.pep->fid);
  EXPECT_NE(listen_at.sin_port, 0) << "an ephemeral port, told by fi_getname";
  size_t opt = 0, optlen = sizeof opt;
  cli.open_ep(cli.info);
  ASSERT_EQ(fi_getopt(&cli.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &opt, &optlen), 0);
  EXPECT_EQ(opt, 256u);
  const char hello[] = "connect-data";
  ASSERT_EQ(fi_connect(cli.ep, &listen_at, hello, sizeof hello), 0);
  EXPECT_EQ(fi_connect(cli.ep, &listen_at, nullptr, 0), -FI_EISCONN);
  // FI_CONNREQ with an fi_info whose handle is the request, and the data.
  std::vector<unsigned char> ev;
  ASSERT_EQ(next_event(srv.eq, cli.eq, ev), static_cast<int>(FI_CONNREQ));
  auto* req = reinterpret_cast<fi_eq_cm_entry*>(ev.data());
  ASSERT_EQ(ev.size(), sizeof(fi_eq_cm_entry) + sizeof hello);
  EXPECT_EQ(req->fid, &srv.pep->fid);
  ASSERT_NE(req->info, nullptr);
  ASSERT_NE(req->info->handle, nullptr);
  EXPECT_EQ(memcmp(req->data, hello, sizeof hello), 0);
  fi_info* accept_info = req->info;
  side acc(fi_dupinfo(srv.info));
  acc.open_ep(accept_info);
  const char welcome[] = "accept-data";
  ASSERT_EQ(fi_accept(acc.ep, welcome, sizeof welcome), 0);
  fi_freeinfo(accept_info);
  ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_CONNECTED));
  ASSERT_EQ(next_event(cli.eq, acc.eq, ev), static_cast<int>(FI_CONNECTED));
  ASSERT_EQ(ev.size(), sizeof(fi_eq_cm_entry) + sizeof welcome);
  EXPECT_EQ(memcmp(reinterpret_cast<fi_eq_cm_entry*>(ev.data())->data, welcome, sizeof welcome), 0);
  // Names: the client's peer is the acceptor's local address, and back.
  sockaddr_in peer{}, local{};
  size_t len = sizeof peer;
  ASSERT_EQ(fi_getpeer(cli.ep, &peer, &len), 0);
  EXPECT_EQ(peer.sin_port, listen_at.sin_port);
  local = name_of(&cli.ep->fid);
  len = sizeof peer;
  ASSERT_EQ(fi_getpeer(acc.ep, &peer, &len), 0);
  EXPECT_EQ(peer.sin_port, local.sin_port);
  // Data both ways over the connection.
  char in[32] = {}, out[] = "over msg";
  ASSERT_EQ(fi_recv(acc.ep, in, sizeof in, nullptr, 0, in), 0);
  ASSERT_EQ(fi_send(cli.ep, out, sizeof out, nullptr, 0, out), 0);
  fi_cq_tagged_entry ce;
  auto wait_cq = [&](fid_cq* cq) {
    for (int i = 0; i < 2000000; ++i)
      if (fi_cq_read(cq, &ce, 1) == 1) return true;
    return false;
  };
  ASSERT_TRUE(wait_cq(acc.cq));
  EXPECT_STREQ(in, "over msg");
  ASSERT_TRUE(wait_cq(cli.cq));
  // An orderly shutdown: FI_SHUTDOWN on the peer.
  ASSERT_EQ(fi_shutdown(cli.ep, 0), 0);
  ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_SHUTDOWN));
  EXPECT_EQ(reinterpret_cast<fi_eq_cm_entry*>(ev.data())->fid, &acc.ep->fid);
  EXPECT_EQ(fi_send(cli.ep, out, sizeof out, nullptr, 0, out), -FI_ENOTCONN);
}

// fi_connect and fi_accept enable an endpoint the application did not
// (what UCX's and other clients rely on): connected, data flows.
TEST(TcpCm, ConnectAndAcceptEnableImplicitly) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG));
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  cli.open_ep(cli.info, false);
  fi_info* accept_info = connect_request(srv, cli, at);
  ASSERT_NE(accept_info, nullptr);
  std::vector<unsigned char> ev;
  side acc(fi_dupinfo(srv.info));
  acc.open_ep(accept_info, false);
  ASSERT_EQ(fi_accept(acc.ep, nullptr, 0), 0);
  fi_freeinfo(accept_info);
  ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_CONNECTED));
  ASSERT_EQ(next_event(cli.eq, acc.eq, ev), static_cast<int>(FI_CONNECTED));
  EXPECT_EQ(fi_enable(cli.ep), 0);  // already enabled: nothing to do
  uint64_t in = 0, out = 0x1122334455667788ULL;
  ASSERT_TRUE(send_and_receive(cli, acc, &out, &in, sizeof in));
  EXPECT_EQ(in, out);
}

// A client that closes its endpoint and connects again at once (a new
// endpoint on the same domain, the listener and the first acceptor still
// open) is heard: a second FI_CONNREQ, then a second connection.
TEST(TcpCm, ConnectAgainRightAfterClose) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG));
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  std::vector<std::unique_ptr<side>> accepted;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    cli.open_ep(cli.info, false);
    ASSERT_EQ(fi_connect(cli.ep, &at, nullptr, 0), 0);
    std::vector<unsigned char> ev;
    ASSERT_EQ(next_event(srv.eq, cli.eq, ev), static_cast<int>(FI_CONNREQ));
    fi_info* accept_info = reinterpret_cast<fi_eq_cm_entry*>(ev.data())->info;
    accepted.push_back(std::make_unique<side>(fi_dupinfo(srv.info)));
    side& acc = *accepted.back();
    acc.open_ep(accept_info, false);
    ASSERT_EQ(fi_accept(acc.ep, nullptr, 0), 0);
    fi_freeinfo(accept_info);
    ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_CONNECTED));
    ASSERT_EQ(next_event(cli.eq, acc.eq, ev), static_cast<int>(FI_CONNECTED));
    ASSERT_EQ(fi_close(&cli.ep->fid), 0);
    cli.ep = nullptr;
  }
}

// Closing an endpoint or a passive endpoint drops the events about it still
// queued in its EQ (libfabric does the same): an application that maps
// events to objects by fid never gets one for a closed object, whose address
// a new endpoint may already have.
TEST(TcpCm, ClosingDropsItsQueuedEvents) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG));
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  // An error entry for the client (its connection refused), left unread.
  cli.open_ep(cli.info);
  fi_info* req = connect_request(srv, cli, at);
  ASSERT_NE(req, nullptr);
  std::vector<unsigned char> ev;
  ASSERT_EQ(fi_reject(srv.pep, req->handle, nullptr, 0), 0);
  fi_freeinfo(req);
  uint32_t event;
  fi_cq_tagged_entry ce;
  auto t0 = clock_type::now();
  while (fi_eq_read(cli.eq, &event, nullptr, 0, FI_PEEK) != -FI_EAVAIL && clock_type::now() - t0 < std::chrono::seconds(5))
    (void)fi_cq_read(cli.cq, &ce, 0);
  ASSERT_EQ(fi_eq_read(cli.eq, &event, nullptr, 0, FI_PEEK), -FI_EAVAIL);
  ASSERT_EQ(fi_close(&cli.ep->fid), 0);
  cli.ep = nullptr;
  EXPECT_EQ(fi_eq_read(cli.eq, &event, nullptr, 0, 0), -FI_EAGAIN) << "an event about a closed endpoint";
  // A connection request nobody read when its listener closes: dropped (its
  // fi_info freed: the leak checker sees to that).
  side cli2(tcp_info(FI_EP_MSG));
  cli2.open_ep(cli2.info);
  ASSERT_EQ(fi_connect(cli2.ep, &at, nullptr, 0), 0);
  t0 = clock_type::now();
  while (fi_eq_read(srv.eq, &event, nullptr, 0, FI_PEEK) == -FI_EAGAIN && clock_type::now() - t0 < std::chrono::seconds(5))
    (void)fi_eq_read(cli2.eq, &event, nullptr, 0, FI_PEEK);
  std::vector<unsigned char> peek(sizeof(fi_eq_cm_entry) + 512);
  ASSERT_GT(fi_eq_read(srv.eq, &event, peek.data(), peek.size(), FI_PEEK), 0);
  ASSERT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
  ASSERT_EQ(fi_close(&srv.pep->fid), 0);
  srv.pep = nullptr;
  EXPECT_EQ(fi_eq_read(srv.eq, &event, peek.data(), peek.size(), 0), -FI_EAGAIN);
}

// A service without a node (FI_SOURCE) is the wildcard address, as
// getaddrinfo's AI_PASSIVE says: a passive endpoint listens on every
// interface (a peer reaches it at any of them); an RDM endpoint bound there
// tells peers an address they can use, with the port asked for.
TEST(TcpCm, ServiceAloneListensEverywhere) {
  const std::string port = std::to_string(weft_test::free_port());
  side srv(tcp_info(FI_EP_MSG, nullptr, port.c_str(), FI_SOURCE)), cli(tcp_info(FI_EP_MSG));
  ASSERT_NE(srv.info, nullptr);
  ASSERT_EQ(srv.info->src_addrlen, sizeof(sockaddr_in));
  auto* src = static_cast<sockaddr_in*>(srv.info->src_addr);
  EXPECT_EQ(src->sin_addr.s_addr, htonl(INADDR_ANY));
  EXPECT_EQ(std::to_string(ntohs(src->sin_port)), port);
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(at.sin_addr.s_addr, htonl(INADDR_ANY));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cli.open_ep(cli.info);
  fi_info* req = connect_request(srv, cli, at);
  ASSERT_NE(req, nullptr);
  std::vector<unsigned char> ev;
  EXPECT_EQ(fi_reject(srv.pep, req->handle, nullptr, 0), 0);
  fi_freeinfo(req);
  // RDM: bound to the wildcard, named by a reachable address.
  const std::string port2 = std::to_string(weft_test::free_port());
  side rdm(tcp_info(FI_EP_RDM, nullptr, port2.c_str(), FI_SOURCE));
  ASSERT_NE(rdm.info, nullptr);
  fid_av* av = nullptr;
  fi_av_attr aa{};
  ASSERT_EQ(fi_av_open(rdm.domain, &aa, &av, nullptr), 0);
  ASSERT_EQ(fi_endpoint(rdm.domain, rdm.info, &rdm.ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(rdm.ep, &av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(rdm.ep, &rdm.cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_enable(rdm.ep), 0);
  sockaddr_in named = name_of(&rdm.ep->fid);
  EXPECT_NE(named.sin_addr.s_addr, htonl(INADDR_ANY));
  EXPECT_EQ(std::to_string(ntohs(named.sin_port)), port2);
  EXPECT_EQ(fi_close(&rdm.ep->fid), 0);
  rdm.ep = nullptr;
  EXPECT_EQ(fi_close(&av->fid), 0);
}

TEST(TcpCm, RejectCarriesItsData) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG));
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  cli.open_ep(cli.info);
  ASSERT_EQ(fi_connect(cli.ep, &at, "x", 1), 0);
  std::vector<unsigned char> ev;
  ASSERT_EQ(next_event(srv.eq, cli.eq, ev), static_cast<int>(FI_CONNREQ));
  auto* req = reinterpret_cast<fi_eq_cm_entry*>(ev.data());
  const char no[] = "go away";
  EXPECT_EQ(fi_reject(srv.pep, nullptr, no, sizeof no), -FI_EINVAL);
  ASSERT_EQ(fi_reject(srv.pep, req->info->handle, no, sizeof no), 0);
  fi_freeinfo(req->info);
  fi_eq_err_entry err{};
  ASSERT_EQ(next_event(cli.eq, srv.eq, ev, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ECONNREFUSED);
  EXPECT_EQ(err.fid, &cli.ep->fid);
  ASSERT_EQ(err.err_data_size, sizeof no);
  EXPECT_EQ(memcmp(err.err_data, no, sizeof no), 0);
}

TEST(TcpCm, ConnectWhereNobodyListensIsAnErrorEvent) {
  side cli(tcp_info(FI_EP_MSG));
  cli.open_ep(cli.info);
  // A port just released: nobody listens there.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al), 0);
  close(fd);
  ASSERT_EQ(fi_connect(cli.ep, &a, nullptr, 0), 0);
  std::vector<unsigned char> ev;
  fi_eq_err_entry err{};
  auto t0 = clock_type::now();
  ASSERT_EQ(next_event(cli.eq, nullptr, ev, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ECONNREFUSED);
  EXPECT_LT(clock_type::now() - t0, std::chrono::seconds(2)) << "an error event, never a hang";
}

// A MSG endpoint bound to a shared transmit and a shared receive context
// (man fi_endpoint: FI_SHARED_CONTEXT) enables, connects and moves data; the
// receives posted to the shared context take the messages of its endpoint.
TEST(TcpCm, SharedContextsOnMsgEndpoints) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG)), acc(tcp_info(FI_EP_MSG));
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  struct shared {
    fid_stx* stx = nullptr;
    fid_ep* srx = nullptr;
  } sc[2];
  side* sides[2] = {&cli, &acc};
  auto open_shared = [&](int i, fi_info* info) {
    side& s = *sides[i];
    ASSERT_EQ(fi_stx_context(s.domain, nullptr, &sc[i].stx, nullptr), 0);
    ASSERT_EQ(fi_srx_context(s.domain, nullptr, &sc[i].srx, nullptr), 0);
    ASSERT_EQ(fi_endpoint(s.domain, info, &s.ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &sc[i].stx->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &sc[i].srx->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &s.eq->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(s.ep), 0);
  };
  open_shared(0, cli.info);
  fi_info* req = connect_request(srv, cli, at);
  ASSERT_NE(req, nullptr);
  std::vector<unsigned char> ev;
  open_shared(1, req);
  fi_freeinfo(req);
  ASSERT_EQ(fi_accept(acc.ep, nullptr, 0), 0);
  ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_CONNECTED));
  ASSERT_EQ(next_event(cli.eq, acc.eq, ev), static_cast<int>(FI_CONNECTED));
  // Both ways: the receive is posted to the receiver's shared context.
  for (int to = 0; to < 2; ++to) {
    SCOPED_TRACE(to);
    side &rx = *sides[to], &tx = *sides[1 - to];
    std::vector<char> in(1000, 0), out(1000);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7 + to);
    ASSERT_EQ(fi_recv(sc[to].srx, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, &in), 0);
    ASSERT_EQ(fi_send(tx.ep, out.data(), out.size(), nullptr, 0, &out), 0);
    fi_cq_tagged_entry ce{};
    bool got_rx = false, got_tx = false;
    for (auto t0 = clock_type::now(); !(got_rx && got_tx) && clock_type::now() - t0 < std::chrono::seconds(5);) {
      if (!got_rx && fi_cq_read(rx.cq, &ce, 1) == 1) {
        got_rx = true;
        EXPECT_EQ(ce.op_context, &in);
        EXPECT_EQ(ce.len, out.size());
      }
      if (!got_tx && fi_cq_read(tx.cq, &ce, 1) == 1) {
        got_tx = true;
        EXPECT_EQ(ce.op_context, &out);
      }
    }
    EXPECT_TRUE(got_rx && got_tx);
    EXPECT_EQ(in, out);
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_close(&sides[i]->ep->fid), 0);
    sides[i]->ep = nullptr;
    EXPECT_EQ(fi_close(&sc[i].srx->fid), 0);
    EXPECT_EQ(fi_close(&sc[i].stx->fid), 0);
  }
}

// "Passive and connection-oriented endpoints must be bound to an event
// queue", before they are enabled: fi_enable, fi_connect and fi_accept of an
// endpoint without one refuse (-FI_ENOEQ) and change nothing, so the EQ can
// still be bound and the connection made.
TEST(TcpCm, NoEventQueueIsRefusedBeforeAnythingChanges) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG)), acc(tcp_info(FI_EP_MSG));
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(fi_endpoint(cli.domain, cli.info, &cli.ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(cli.ep, &cli.cq->fid, FI_TRANSMIT | FI_RECV), 0);
  EXPECT_EQ(fi_enable(cli.ep), -FI_ENOEQ);
  EXPECT_EQ(fi_connect(cli.ep, &at, nullptr, 0), -FI_ENOEQ);
  ASSERT_EQ(fi_ep_bind(cli.ep, &cli.eq->fid, 0), 0) << "the refused calls enabled nothing";
  fi_info* req = connect_request(srv, cli, at);
  ASSERT_NE(req, nullptr);
  std::vector<unsigned char> ev;
  ASSERT_EQ(fi_endpoint(acc.domain, req, &acc.ep, nullptr), 0);
  fi_freeinfo(req);
  ASSERT_EQ(fi_ep_bind(acc.ep, &acc.cq->fid, FI_TRANSMIT | FI_RECV), 0);
  EXPECT_EQ(fi_accept(acc.ep, nullptr, 0), -FI_ENOEQ);
  ASSERT_EQ(fi_ep_bind(acc.ep, &acc.eq->fid, 0), 0);
  ASSERT_EQ(fi_accept(acc.ep, nullptr, 0), 0);
  ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_CONNECTED));
  ASSERT_EQ(next_event(cli.eq, acc.eq, ev), static_cast<int>(FI_CONNECTED));
  uint32_t in = 0, out = 0xfeedbeef;
  ASSERT_EQ(fi_recv(acc.ep, &in, sizeof in, nullptr, 0, nullptr), 0);
  ASSERT_EQ(fi_send(cli.ep, &out, sizeof out, nullptr, 0, nullptr), 0);
  fi_cq_tagged_entry ce;
  bool got = false;
  for (auto t0 = clock_type::now(); !got && clock_type::now() - t0 < std::chrono::seconds(5);) {
    got = fi_cq_read(acc.cq, &ce, 1) == 1;
    (void)fi_cq_read(cli.cq, &ce, 0);
  }
  ASSERT_TRUE(got);
  EXPECT_EQ(in, out);
}

// Receives posted to an enabled MSG endpoint before fi_connect / fi_accept
// wait for the connection and take its first messages, sent at once.
TEST(TcpCm, ReceivesPostedBeforeTheConnection) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG)), acc(tcp_info(FI_EP_MSG));
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  cli.open_ep(cli.info);
  char cli_in[2][16] = {}, acc_in[2][16] = {};
  for (auto& b : cli_in) ASSERT_EQ(fi_recv(cli.ep, b, sizeof b, nullptr, 0, b), 0);
  fi_info* req = connect_request(srv, cli, at);
  ASSERT_NE(req, nullptr);
  std::vector<unsigned char> ev;
  acc.open_ep(req);
  fi_freeinfo(req);
  for (auto& b : acc_in) ASSERT_EQ(fi_recv(acc.ep, b, sizeof b, nullptr, 0, b), 0);
  ASSERT_EQ(fi_accept(acc.ep, nullptr, 0), 0);
  ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_CONNECTED));
  ASSERT_EQ(next_event(cli.eq, acc.eq, ev), static_cast<int>(FI_CONNECTED));
  const char* words[2] = {"first", "second"};
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_send(acc.ep, words[i], strlen(words[i]) + 1, nullptr, 0, nullptr), 0);
    ASSERT_EQ(fi_send(cli.ep, words[i], strlen(words[i]) + 1, nullptr, 0, nullptr), 0);
  }
  int got_cli = 0, got_acc = 0, sent = 0;
  fi_cq_tagged_entry ce;
  for (auto t0 = clock_type::now(); (got_cli < 2 || got_acc < 2 || sent < 4) &&
                                    clock_type::now() - t0 < std::chrono::seconds(5);) {
    for (side* s : {&cli, &acc})
      while (fi_cq_read(s->cq, &ce, 1) == 1) {
        if (ce.flags & FI_SEND) {
          ++sent;
          continue;
        }
        auto* b = static_cast<char(*)[16]>(ce.op_context);
        const int i = s == &cli ? got_cli++ : got_acc++;
        EXPECT_EQ(ce.len, strlen(words[i]) + 1);
        EXPECT_EQ(static_cast<void*>(b), static_cast<void*>(s == &cli ? cli_in[i] : acc_in[i]));
        EXPECT_STREQ(*b, words[i]) << "in posting order";
      }
  }
  EXPECT_EQ(got_cli, 2);
  EXPECT_EQ(got_acc, 2);
  EXPECT_EQ(sent, 4);
}

// An MSG endpoint connects from its source address (src_addr in the info):
// the acceptor sees the connection come from there.
TEST(TcpCm, ConnectFromTheSourceAddress) {
  side srv(tcp_info(FI_EP_MSG)), acc(tcp_info(FI_EP_MSG));
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup(weft_test::prov_name("tcp"));
  hints->ep_attr->type = FI_EP_MSG;
  hints->caps = FI_MSG;
  hints->addr_format = FI_SOCKADDR_IN;
  auto* from = static_cast<sockaddr_in*>(calloc(1, sizeof(sockaddr_in)));
  from->sin_family = AF_INET;
  from->sin_addr.s_addr = htonl(0x7f000003);  // 127.0.0.3: loopback, not the default
  hints->src_addr = from;
  hints->src_addrlen = sizeof *from;
  fi_info* ci = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "1", 0, hints, &ci), 0);
  fi_freeinfo(hints);
  side cli(ci);
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  cli.open_ep(cli.info);
  fi_info* req = connect_request(srv, cli, at);
  ASSERT_NE(req, nullptr);
  std::vector<unsigned char> ev;
  ASSERT_EQ(req->dest_addrlen, sizeof(sockaddr_in));
  EXPECT_EQ(static_cast<sockaddr_in*>(req->dest_addr)->sin_addr.s_addr, htonl(0x7f000003));
  acc.open_ep(req);
  fi_freeinfo(req);
  ASSERT_EQ(fi_accept(acc.ep, nullptr, 0), 0);
  ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_CONNECTED));
  ASSERT_EQ(next_event(cli.eq, acc.eq, ev), static_cast<int>(FI_CONNECTED));
  sockaddr_in peer{};
  size_t len = sizeof peer;
  ASSERT_EQ(fi_getpeer(acc.ep, &peer, &len), 0);
  EXPECT_EQ(peer.sin_addr.s_addr, htonl(0x7f000003));
  EXPECT_EQ(name_of(&cli.ep->fid).sin_addr.s_addr, htonl(0x7f000003));
}

// fi_endpoint(3): an active endpoint whose fi_info names a passive endpoint
// as its handle takes over that endpoint's address. fi_setname reserves it
// (a port the kernel chooses when none is given, as bind(2) does);
// fi_getinfo copies a passive endpoint in hints->handle to its answers
// (fi_getinfo(3)); the endpoint's fi_getname names that address before and
// after it connects, the connection comes from it, and it stays the
// endpoint's after the passive endpoint closes. (fabtests' fi_msg_sockets:
// "address changed after fi_endpoint": the endpoint had kept the info's
// src_addr, port 0.)
TEST(TcpCm, EndpointTakesOverThePassiveEndpointsAddress) {
  side srv(tcp_info(FI_EP_MSG)), cli(tcp_info(FI_EP_MSG)), acc(tcp_info(FI_EP_MSG));
  ASSERT_NE(cli.info, nullptr);
  sockaddr_in at = listen_on(srv);
  ASSERT_FALSE(HasFailure());
  // A passive endpoint opened without an address, then named.
  fi_info* pi = fi_dupinfo(cli.info);
  free(pi->src_addr);
  pi->src_addr = nullptr;
  pi->src_addrlen = 0;
  fid_pep* pep = nullptr;
  ASSERT_EQ(fi_passive_ep(cli.fabric, pi, &pep, nullptr), 0);
  fi_freeinfo(pi);
  sockaddr_in want{};
  want.sin_family = AF_INET;
  want.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(fi_setname(&pep->fid, &want, sizeof want), 0);
  const sockaddr_in reserved = name_of(&pep->fid);
  EXPECT_NE(reserved.sin_port, 0) << "fi_setname without a port reserves one";
  EXPECT_EQ(reserved.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
  // Toward the server, the passive endpoint as the hints' handle.
  fi_info* hints = fi_dupinfo(cli.info);
  free(hints->src_addr);
  hints->src_addr = nullptr;
  hints->src_addrlen = 0;
  hints->handle = &pep->fid;
  const std::string port = std::to_string(ntohs(at.sin_port));
  fi_info* ci = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port.c_str(), 0, hints, &ci), 0);
  hints->handle = nullptr;
  fi_freeinfo(hints);
  for (fi_info* i = ci; i; i = i->next) EXPECT_EQ(i->handle, &pep->fid);
  cli.open_ep(ci, false);
  ASSERT_FALSE(HasFailure());
  sockaddr_in name = name_of(&cli.ep->fid);
  EXPECT_EQ(name.sin_port, reserved.sin_port) << "fi_endpoint took the passive endpoint's address";
  EXPECT_EQ(name.sin_addr.s_addr, reserved.sin_addr.s_addr);
  // Taken over: not again, and the passive endpoint no longer listens or is named.
  fid_ep* second = nullptr;
  EXPECT_EQ(fi_endpoint(cli.domain, ci, &second, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_setname(&pep->fid, &want, sizeof want), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_listen(pep), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_close(&pep->fid), 0);
  ASSERT_EQ(fi_enable(cli.ep), 0);
  EXPECT_EQ(name_of(&cli.ep->fid).sin_port, reserved.sin_port);
  ASSERT_EQ(fi_connect(cli.ep, &at, nullptr, 0), 0);
  std::vector<unsigned char> ev;
  ASSERT_EQ(next_event(srv.eq, cli.eq, ev), static_cast<int>(FI_CONNREQ));
  fi_info* req = reinterpret_cast<fi_eq_cm_entry*>(ev.data())->info;
  ASSERT_EQ(req->dest_addrlen, sizeof(sockaddr_in));
  EXPECT_EQ(static_cast<sockaddr_in*>(req->dest_addr)->sin_port, reserved.sin_port) << "it comes from there";
  acc.open_ep(req);
  fi_freeinfo(req);
  ASSERT_EQ(fi_accept(acc.ep, nullptr, 0), 0);
  ASSERT_EQ(next_event(acc.eq, cli.eq, ev), static_cast<int>(FI_CONNECTED));
  ASSERT_EQ(next_event(cli.eq, acc.eq, ev), static_cast<int>(FI_CONNECTED));
  name = name_of(&cli.ep->fid);
  EXPECT_EQ(name.sin_port, reserved.sin_port);
  EXPECT_EQ(name.sin_addr.s_addr, reserved.sin_addr.s_addr);
  sockaddr_in peer{};
  size_t len = sizeof peer;
  ASSERT_EQ(fi_getpeer(acc.ep, &peer, &len), 0);
  EXPECT_EQ(peer.sin_port, reserved.sin_port);
  char in[40] = {}, out[40];
  for (size_t i = 0; i < sizeof out; ++i) out[i] = static_cast<char>(i * 7 + 1);
  ASSERT_TRUE(send_and_receive(cli, acc, out, in, sizeof in));
  EXPECT_EQ(memcmp(in, out, sizeof out), 0);
  fi_freeinfo(ci);
}

TEST(TcpCm, BadArguments) {
  side cli(tcp_info(FI_EP_MSG));
  ASSERT_EQ(fi_endpoint(cli.domain, cli.info, &cli.ep, nullptr), 0);
  sockaddr_in a{};
  EXPECT_EQ(fi_connect(cli.ep, &a, nullptr, 0), -FI_EINVAL);  // no address family
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(fi_connect(cli.ep, &a, nullptr, 0), -FI_ENOCQ);  // enabling it fails: nothing bound
  ASSERT_EQ(fi_ep_bind(cli.ep, &cli.eq->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(cli.ep, &cli.cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_enable(cli.ep), 0);
  std::vector<char> big(300);
  EXPECT_EQ(fi_connect(cli.ep, nullptr, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_connect(cli.ep, &a, big.data(), big.size()), -FI_EINVAL);  // over FI_OPT_CM_DATA_SIZE
  EXPECT_EQ(fi_accept(cli.ep, nullptr, 0), -FI_EINVAL);                   // nothing to accept
  EXPECT_EQ(fi_shutdown(cli.ep, 0), -FI_ENOTCONN);
  size_t len = sizeof a;
  EXPECT_EQ(fi_getpeer(cli.ep, &a, &len), -FI_ENOTCONN);
  char b[8];
  EXPECT_EQ(fi_send(cli.ep, b, sizeof b, nullptr, 0, nullptr), -FI_ENOTCONN);
}

// auth_key is a shared secret: a peer without it is refused when it connects.
TEST(TcpAuth, PeerWithoutTheKeyIsRefused) {
  for (const char* client_key : {"secret", "wrong", ""}) {
    SCOPED_TRACE(client_key);
    side srv(tcp_info(FI_EP_MSG, "127.0.0.1", nullptr, FI_SOURCE, "secret"));
    side cli(tcp_info(FI_EP_MSG, "127.0.0.1", nullptr, FI_SOURCE, client_key));
    ASSERT_NE(srv.info, nullptr);
    ASSERT_EQ(srv.info->domain_attr->auth_key_size, 6u);
    ASSERT_EQ(fi_passive_ep(srv.fabric, srv.info, &srv.pep, nullptr), 0);
    ASSERT_EQ(fi_pep_bind(srv.pep, &srv.eq->fid, 0), 0);
    ASSERT_EQ(fi_listen(srv.pep), 0);
    sockaddr_in at = name_of(&srv.pep->fid);
    cli.open_ep(cli.info);
    ASSERT_EQ(fi_connect(cli.ep, &at, nullptr, 0), 0);
    std::vector<unsigned char> ev;
    fi_eq_err_entry err{};
    if (!strcmp(client_key, "secret")) {
      ASSERT_EQ(next_event(srv.eq, cli.eq, ev), static_cast<int>(FI_CONNREQ));
      fi_freeinfo(reinterpret_cast<fi_eq_cm_entry*>(ev.data())->info);
    } else {
      // The listener never hears of it; the connector gets an error event.
      ASSERT_EQ(next_event(cli.eq, srv.eq, ev, &err), -FI_EAVAIL);
      EXPECT_NE(err.err, 0);
      uint32_t event;
      std::vector<unsigned char> buf(256);
      EXPECT_EQ(fi_eq_read(srv.eq, &event, buf.data(), buf.size(), 0), -FI_EAGAIN);
    }
  }
}

// An RDM endpoint whose listener gets garbage, a truncated handshake and an
// oversized length from raw sockets keeps serving a proper peer.
TEST(TcpHostile, RawGarbageThenAProperPeer) {
  side a(tcp_info(FI_EP_RDM)), b(tcp_info(FI_EP_RDM));
  fid_av *av_a = nullptr, *av_b = nullptr;
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  ASSERT_EQ(fi_av_open(a.domain, &aa, &av_a, nullptr), 0);
  ASSERT_EQ(fi_av_open(b.domain, &aa, &av_b, nullptr), 0);
  for (auto [s, av] : {std::pair{&a, av_a}, std::pair{&b, av_b}}) {
    ASSERT_EQ(fi_endpoint(s->domain, s->info, &s->ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(s->ep, &av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(s->ep), 0);
  }
  sockaddr_in at = name_of(&a.ep->fid);
  fi_cq_tagged_entry ce;
  auto attack = [&](const void* bytes, size_t n) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
    EXPECT_EQ(send(fd, bytes, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
    for (int i = 0; i < 2000; ++i) fi_cq_read(a.cq, &ce, 0);  // a progresses meanwhile
    close(fd);
  };
  std::vector<unsigned char> garbage(4096);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<unsigned char>(i * 37 + 11);
  attack(garbage.data(), garbage.size());
  const unsigned char truncated[] = {'w', 'e', 'f', 't', '-', 't', 'c', 'p', 1, 0, 1};
  attack(truncated, sizeof truncated);
  unsigned char oversized[16] = {'w', 'e', 'f', 't', '-', 't', 'c', 'p', 1, 0, 1, 0, 0xff, 0xff, 0xff, 0x7f};
  attack(oversized, sizeof oversized);
  // A proper peer is still served.
  fi_addr_t to_a, to_b;
  sockaddr_in bname = name_of(&b.ep->fid);
  ASSERT_EQ(fi_av_insert(av_b, &at, 1, &to_a, 0, nullptr), 1);
  ASSERT_EQ(fi_av_insert(av_a, &bname, 1, &to_b, 0, nullptr), 1);
  uint64_t in = 0, out = 0x1122334455667788ULL;
  ASSERT_EQ(fi_trecv(a.ep, &in, sizeof in, nullptr, FI_ADDR_UNSPEC, 9, 0, nullptr), 0);
  ASSERT_EQ(fi_tsend(b.ep, &out, sizeof out, nullptr, to_a, 9, nullptr), 0);
  bool got_a = false, got_b = false;
  for (int i = 0; i < 5000000 && !(got_a && got_b); ++i) {
    if (fi_cq_read(a.cq, &ce, 1) == 1) got_a = true;
    if (fi_cq_read(b.cq, &ce, 1) == 1) got_b = true;
  }
  EXPECT_TRUE(got_a && got_b);
  EXPECT_EQ(in, out);
  for (side* s : {&a, &b}) {
    EXPECT_EQ(fi_close(&s->ep->fid), 0);
    s->ep = nullptr;
  }
  EXPECT_EQ(fi_close(&av_a->fid), 0);
  EXPECT_EQ(fi_close(&av_b->fid), 0);
}

// The CQ's FD wait object sleeps in poll(2) until data arrives on a socket.
TEST(TcpWait, CqFdWakesOnArrival) {
  side a(tcp_info(FI_EP_RDM)), b(tcp_info(FI_EP_RDM));
  fid_av *av_a = nullptr, *av_b = nullptr;
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  ASSERT_EQ(fi_av_open(a.domain, &aa, &av_a, nullptr), 0);
  ASSERT_EQ(fi_av_open(b.domain, &aa, &av_b, nullptr), 0);
  for (auto [s, av] : {std::pair{&a, av_a}, std::pair{&b, av_b}}) {
    ASSERT_EQ(fi_endpoint(s->domain, s->info, &s->ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(s->ep, &av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(s->ep), 0);
  }
  sockaddr_in at = name_of(&a.ep->fid);
  fi_addr_t to_a;
  ASSERT_EQ(fi_av_insert(av_b, &at, 1, &to_a, 0, nullptr), 1);
  int fd = -1;
  ASSERT_EQ(fi_control(&a.cq->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  uint64_t in = 0, out = 42;
  ASSERT_EQ(fi_trecv(a.ep, &in, sizeof in, nullptr, FI_ADDR_UNSPEC, 1, 0, nullptr), 0);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fi_cq_tagged_entry ce;
    ASSERT_EQ(fi_tsend(b.ep, &out, sizeof out, nullptr, to_a, 1, nullptr), 0);
    for (int i = 0; i < 2000000; ++i)
      if (fi_cq_read(b.cq, &ce, 1) == 1) break;
  });
  fi_cq_tagged_entry ce;
  bool got = false;
  auto t0 = clock_type::now();
  while (!got && clock_type::now() - t0 < std::chrono::seconds(5)) {
    fid* fids[] = {&a.cq->fid};
    if (fi_trywait(a.fabric, fids, 1) == 0) {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, 1000);  // sleeps until the socket (or the CQ) wakes it
    }
    got = fi_cq_read(a.cq, &ce, 1) == 1;
  }
  sender.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(in, out);
  // fi_cq_sread sleeps too, and returns with the entry.
  ASSERT_EQ(fi_trecv(a.ep, &in, sizeof in, nullptr, FI_ADDR_UNSPEC, 2, 0, nullptr), 0);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    uint64_t v = 7;
    fi_cq_tagged_entry e2;
    ASSERT_EQ(fi_tsend(b.ep, &v, sizeof v, nullptr, to_a, 2, nullptr), 0);
    for (int i = 0; i < 2000000; ++i)
      if (fi_cq_read(b.cq, &e2, 1) == 1) break;
  });
  EXPECT_EQ(fi_cq_sread(a.cq, &ce, 1, nullptr, 5000), 1);
  late.join();
  EXPECT_EQ(in, 7u);
  for (side* s : {&a, &b}) {
    EXPECT_EQ(fi_close(&s->ep->fid), 0);
    s->ep = nullptr;
  }
  EXPECT_EQ(fi_close(&av_a->fid), 0);
  EXPECT_EQ(fi_close(&av_b->fid), 0);
}

}  // namespace

namespace {

// 1,024 peers on one RDM endpoint: each opens its connection on first use,
// descriptors are raised towards the hard limit as needed, every message
// arrives with its source.
TEST(TcpScale, ThousandPeersOnOneEndpoint) {
  constexpr int n = 1024;
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < 6 * n + 200)
    GTEST_SKIP() << "hard RLIMIT_NOFILE " << lim.rlim_max << " is too low for " << n << " peers";
  side rx(tcp_info(FI_EP_RDM)), tx(tcp_info(FI_EP_RDM));
  fi_av_attr aa{};
  aa.type = FI_AV_TABLE;
  fid_av *rx_av = nullptr, *tx_av = nullptr;
  ASSERT_EQ(fi_av_open(rx.domain, &aa, &rx_av, nullptr), 0);
  ASSERT_EQ(fi_av_open(tx.domain, &aa, &tx_av, nullptr), 0);
  ASSERT_EQ(fi_endpoint(rx.domain, rx.info, &rx.ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(rx.ep, &rx_av->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(rx.ep, &rx.cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_enable(rx.ep), 0);
  sockaddr_in at = name_of(&rx.ep->fid);
  fi_addr_t to_rx;
  ASSERT_EQ(fi_av_insert(tx_av, &at, 1, &to_rx, 0, nullptr), 1);
  std::vector<fid_ep*> senders(n, nullptr);
  std::vector<fid_cq*> cqs(n, nullptr);
  std::vector<sockaddr_in> names(n);
  for (int i = 0; i < n; ++i) {
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    ASSERT_EQ(fi_cq_open(tx.domain, &ca, &cqs[i], nullptr), 0) << i;
    ASSERT_EQ(fi_endpoint(tx.domain, tx.info, &senders[i], nullptr), 0) << i;
    ASSERT_EQ(fi_ep_bind(senders[i], &tx_av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(senders[i], &cqs[i]->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(senders[i]), 0) << i;
    names[i] = name_of(&senders[i]->fid);
  }
  std::vector<fi_addr_t> src(n);
  ASSERT_EQ(fi_av_insert(rx_av, names.data(), n, src.data(), 0, nullptr), n);
  std::vector<uint64_t> in(n, ~0ULL), out(n);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(fi_trecv(rx.ep, &in[i], sizeof(uint64_t), nullptr, FI_ADDR_UNSPEC, static_cast<uint64_t>(i), 0,
                       &in[i]),
              0);
  for (int i = 0; i < n; ++i) {
    out[i] = 1000000 + i;
    ASSERT_EQ(fi_tsend(senders[i], &out[i], sizeof(uint64_t), nullptr, to_rx, static_cast<uint64_t>(i), nullptr),
              0)
        << i;
  }
  int got = 0, sent = 0;
  std::vector<bool> done(n, false);
  auto t0 = clock_type::now();
  while ((got < n || sent < n) && clock_type::now() - t0 < std::chrono::seconds(60)) {
    fi_cq_tagged_entry ce;
    fi_addr_t from;
    while (fi_cq_readfrom(rx.cq, &ce, 1, &from) == 1) {
      const int i = static_cast<int>(ce.tag);
      EXPECT_EQ(from, src[i]) << "the sender's AV index, though it opened the connection";
      ++got;
    }
    for (int i = 0; i < n; ++i) {
      if (done[i]) continue;
      fi_cq_entry e;
      ssize_t r = fi_cq_read(cqs[i], &e, 1);
      if (r == 1) {
        done[i] = true;
        ++sent;
      } else if (r == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cqs[i], &err, 0);
        ADD_FAILURE() << "sender " << i << ": " << fi_strerror(err.err);
        done[i] = true;
      }
    }
  }
  EXPECT_EQ(got, n);
  EXPECT_EQ(sent, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(in[i], 1000000u + i) << i;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(fi_close(&senders[i]->fid), 0);
    EXPECT_EQ(fi_close(&cqs[i]->fid), 0);
  }
  EXPECT_EQ(fi_close(&rx.ep->fid), 0);
  rx.ep = nullptr;
  EXPECT_EQ(fi_close(&rx_av->fid), 0);
  EXPECT_EQ(fi_close(&tx_av->fid), 0);
}

}  // namespace
