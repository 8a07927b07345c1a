// SPDX-License-Identifier: BSD-3-Clause
// A peer that does not speak weft's protocol is named at first contact
// (docs/tcp-protocol.md and docs/shm-protocol.md, "A peer that speaks
// another protocol"), through the public API: the operations aimed at it
// end at once in error entries whose fi_cq_strerror / fi_eq_strerror text
// says where it is and what it is. The peers here are imitations (a raw
// socket that behaves as libfabric's tcp provider, a /dev/shm file laid out
// as libfabric's shm region, a weft region of another version);
// tests/compat/mixed_peer.sh meets the real libfabric 1.17.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "plain_ep.hpp"
#include "prov/shm/shm.hpp"
#include "util/peer_note.hpp"

namespace {

constexpr double bound_s = 10;  // every wait here; an error entry comes within milliseconds

// A listening socket that behaves as libfabric's tcp provider does when a
// weft hello reaches it: it reads the 32 bytes of its own header and
// closes (the rest of the hello unread: the connector sees a reset).
struct foreign_listener {
  int fd = -1;
  sockaddr_in addr{};
  int accepted = 0;
  foreign_listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd, 8), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  }
  ~foreign_listener() { close(fd); }
  // One round: a waiting connection is accepted, read (32 bytes, waiting
  // for them a little) and closed.
  void serve() {
    const int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    ++accepted;
    timeval tv{1, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    unsigned char head[32];
    size_t got = 0;
    while (got < sizeof head) {
      const ssize_t r = recv(c, head + got, sizeof head - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    close(c);
  }
  std::string url() const {
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
    return "fi_sockaddr_in://" + std::string(ip) + ":" + std::to_string(ntohs(addr.sin_port));
  }
};

timespec now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

// Reads the error entry of the endpoint's one operation, calling `between`
// while it waits. False when none came within the bound.
template <class F>
bool read_error(plain::endpoint& e, fi_cq_err_entry& err, F between) {
  const timespec t0 = now();
  while (plain::seconds_since(t0) < bound_s) {
    fi_cq_tagged_entry ce;
    const ssize_t r = fi_cq_read(e.cq, &ce, 1);
    if (r == -FI_EAVAIL) return fi_cq_readerr(e.cq, &err, 0) == 1;
    EXPECT_EQ(r, -FI_EAGAIN) << "a completion for an operation to a foreign peer";
    if (r != -FI_EAGAIN) return false;
    between();
    usleep(1000);
  }
  return false;
}

// fi_cq_strerror's text for an entry, both ways it is called.
std::string cq_text(fid_cq* cq, const fi_cq_err_entry& err) {
  char buf[512];
  const char* a = fi_cq_strerror(cq, err.prov_errno, err.err_data, buf, sizeof buf);
  const char* b = fi_cq_strerror(cq, err.prov_errno, nullptr, nullptr, 0);
  EXPECT_STREQ(a, b ? b : "");
  return a ? a : "";
}

fi_addr_t insert(plain::endpoint& e, const void* addr) {
  fi_addr_t a = FI_ADDR_NOTAVAIL;
  EXPECT_EQ(fi_av_insert(e.av, addr, 1, &a, 0, nullptr), 1);
  return a;
}

TEST(ForeignPeer, TcpRdmSendsEndInANamedErrorEntry) {
  foreign_listener l;
  plain::endpoint e;
  ASSERT_TRUE(e.open("tcp", FI_TAGGED, "127.0.0.1"));
  const fi_addr_t to = insert(e, &l.addr);
  const std::string expect = "the peer at " + l.url() +
                             " does not speak weft's protocol (it closed the connection on weft's hello without an "
                             "answer, as libfabric's tcp provider does): is it running another libfabric?";
  int first_code = 0;
  for (int round = 0; round < 2; ++round) {  // each send tries again, and is named the same way
    char msg[8] = "hello";
    ASSERT_EQ(fi_tsend(e.ep, msg, sizeof msg, nullptr, to, 1, msg), 0);
    fi_cq_err_entry err{};
    ASSERT_TRUE(read_error(e, err, [&] { l.serve(); })) << "no error entry within " << bound_s << " s";
    EXPECT_EQ(err.err, EPROTO);
    EXPECT_EQ(err.op_context, msg);
    EXPECT_GE(err.prov_errno, weft::peer_note_base);
    EXPECT_EQ(cq_text(e.cq, err), expect);
    if (round == 0) first_code = err.prov_errno;
    EXPECT_EQ(err.prov_errno, first_code);
  }
  EXPECT_EQ(l.accepted, 2);
  EXPECT_TRUE(e.close());
}

TEST(ForeignPeer, TcpMsgConnectEndsInANamedEqErrorEntry) {
  foreign_listener l;
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("tcp");
  hints->ep_attr->type = FI_EP_MSG;
  hints->caps = FI_MSG;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", nullptr, FI_SOURCE, hints, &info), 0);
  fi_freeinfo(hints);
  fid_fabric* fabric;
  fid_domain* domain;
  fid_eq* eq;
  fid_cq* cq;
  fid_ep* ep;
  fi_eq_attr ea{};
  ea.wait_obj = FI_WAIT_UNSPEC;
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_MSG;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_eq_open(fabric, &ea, &eq, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  ASSERT_EQ(fi_cq_open(domain, &ca, &cq, nullptr), 0);
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  ASSERT_EQ(fi_ep_bind(ep, &eq->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  ASSERT_EQ(fi_connect(ep, &l.addr, nullptr, 0), 0);
  const timespec t0 = now();
  uint32_t event;
  fi_eq_cm_entry cm;
  ssize_t r = -FI_EAGAIN;
  while (r == -FI_EAGAIN && plain::seconds_since(t0) < bound_s) {
    r = fi_eq_read(eq, &event, &cm, sizeof cm, 0);
    l.serve();
    usleep(1000);
  }
  ASSERT_EQ(r, -FI_EAVAIL) << "no error entry within " << bound_s << " s";
  fi_eq_err_entry err{};
  ASSERT_GT(fi_eq_readerr(eq, &err, 0), 0);
  EXPECT_EQ(err.err, EPROTO);
  EXPECT_EQ(err.fid, &ep->fid);
  char buf[512];
  const char* text = fi_eq_strerror(eq, err.prov_errno, err.err_data, buf, sizeof buf);
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(std::string(text), "the peer at " + l.url() +
                                   " does not speak weft's protocol (it closed the connection on weft's hello without "
                                   "an answer, as libfabric's tcp provider does): is it running another libfabric?");
  for (fid* f : {&ep->fid, &cq->fid, &domain->fid, &eq->fid, &fabric->fid}) EXPECT_EQ(fi_close(f), 0);
  fi_freeinfo(info);
}

// An shm address whose name no weft endpoint holds is "not there yet"
// (-FI_EAGAIN), unless /dev/shm holds a region of libfabric's shm provider
// by that name whose process lives: then the send ends at once, named.
TEST(ForeignPeer, ShmRegionOfLibfabricIsNamed) {
  const std::string name = "wforeign_" + std::to_string(getpid()) + ":0:0";
  const std::string path = "/dev/shm/" + name;
  auto lay_out = [&](int32_t pid) {
    // libfabric's smr_region starts: uint8_t version, resv; uint16_t flags; int pid.
    unsigned char head[64] = {4, 0, 1, 0};
    memcpy(head + 4, &pid, sizeof pid);
    const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, head, sizeof head), static_cast<ssize_t>(sizeof head));
    close(fd);
  };
  plain::endpoint e;
  ASSERT_TRUE(e.open("shm", FI_TAGGED));
  const std::string addr = "fi_shm://" + name;
  const fi_addr_t to = insert(e, addr.c_str());
  char msg[8] = "hello";

  // Left behind by a process that is gone: not there yet, as before.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  lay_out(child);
  EXPECT_EQ(fi_tsend(e.ep, msg, sizeof msg, nullptr, to, 1, msg), -FI_EAGAIN);

  lay_out(getpid());
  ASSERT_EQ(fi_tsend(e.ep, msg, sizeof msg, nullptr, to, 1, msg), 0);
  fi_cq_err_entry err{};
  ASSERT_TRUE(read_error(e, err, [] {}));
  unlink(path.c_str());
  EXPECT_EQ(err.err, EPROTO);
  EXPECT_EQ(err.op_context, msg);
  EXPECT_EQ(cq_text(e.cq, err), "the peer at " + addr + " does not speak weft's protocol (" + path +
                                    " is a region of libfabric's shm provider, version 4, of process " +
                                    std::to_string(getpid()) + "): is it running another libfabric?");
  // Known now: the next send ends the same way without looking again.
  ASSERT_EQ(fi_tsend(e.ep, msg, sizeof msg, nullptr, to, 1, msg), 0);
  fi_cq_err_entry again{};
  ASSERT_TRUE(read_error(e, again, [] {}));
  EXPECT_EQ(again.prov_errno, err.prov_errno);
  EXPECT_TRUE(e.close());
}

// weft's own region, of another protocol version: named with both versions.
TEST(ForeignPeer, ShmRegionOfAnotherVersionIsNamed) {
  namespace shm = weft::shm;
  const std::string name = "wversion_" + std::to_string(getpid()) + ":0";
  const std::string label = shm::region_label(name);
  const int mfd = memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(mfd, 0);
  ASSERT_EQ(ftruncate(mfd, static_cast<off_t>(shm::region_size)), 0);
  ASSERT_EQ(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  void* m = mmap(nullptr, shm::region_size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* h = static_cast<shm::region_hdr*>(m);
  h->magic = shm::region_magic;
  h->version = shm::proto_version + 1;
  h->pid = getpid();
  // The name, claimed as weft claims it: an abstract socket of that label.
  const int sfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path + 1, label.data(), std::min(label.size(), sizeof sa.sun_path - 2));
  const socklen_t slen =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + std::min(label.size(), sizeof sa.sun_path - 2));
  ASSERT_EQ(bind(sfd, reinterpret_cast<sockaddr*>(&sa), slen), 0);
  ASSERT_EQ(listen(sfd, 8), 0);

  plain::endpoint e;
  ASSERT_TRUE(e.open("shm", FI_TAGGED));
  const std::string addr = "fi_shm://" + name;
  const fi_addr_t to = insert(e, addr.c_str());
  char msg[8] = "hello";
  ASSERT_EQ(fi_tsend(e.ep, msg, sizeof msg, nullptr, to, 1, msg), 0);
  fi_cq_err_entry err{};
  ASSERT_TRUE(read_error(e, err, [] {}));
  EXPECT_EQ(err.err, FI_ENOPROTOOPT);
  EXPECT_EQ(cq_text(e.cq, err), "the peer at " + addr + " does not speak weft's protocol version " +
                                    std::to_string(shm::proto_version) + " (its region is weft's shm protocol version " +
                                    std::to_string(shm::proto_version + 1) + "): is it running another release of weft?");
  EXPECT_TRUE(e.close());
  close(sfd);
  munmap(m, shm::region_size);
  close(mfd);
}

TEST(PeerNote, SameWordsSameCodeAndNothingElse) {
  const int a = weft::peer_note("peer note test: one", -1);
  const int b = weft::peer_note("peer note test: two", -1);
  ASSERT_GE(a, weft::peer_note_base);
  ASSERT_GE(b, weft::peer_note_base);
  EXPECT_NE(a, b);
  EXPECT_EQ(weft::peer_note("peer note test: one", -1), a);
  EXPECT_STREQ(weft::peer_note_text(a), "peer note test: one");
  EXPECT_EQ(weft::peer_note_text(FI_EIO), nullptr);
  EXPECT_EQ(weft::peer_note_text(-FI_EIO), nullptr);
  EXPECT_EQ(weft::peer_note_text(weft::peer_note_base + weft::peer_notes_max), nullptr);
  // The log says a key once (shown by default: FI_LOG_LEVEL unset).
  if (getenv("FI_LOG_LEVEL")) GTEST_SKIP() << "FI_LOG_LEVEL is set";
  EXPECT_TRUE(weft::peer_note_log("core", "peer note test key", "peer note test: logged once"));
  EXPECT_FALSE(weft::peer_note_log("core", "peer note test key", "peer note test: logged once"));
}

}  // namespace
