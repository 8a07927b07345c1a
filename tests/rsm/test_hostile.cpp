// SPDX-License-Identifier: BSD-3-Clause
// A hostile importer: it speaks the control protocol itself over its own
// libfabric endpoint, obtains a read-only connection, then tries to write
// with the key it got, with guessed keys, past the segment, to forge and
// garble control messages, and to map the memory writable through the
// mapping socket. The exporter's memory must come out unchanged byte for
// byte, and the exporter must go on serving.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <fstream>
#include <random>

#include "harness.hpp"
#include "proto.hpp"
#include "raw_ep.hpp"

using namespace rsmt;
namespace proto = weft::rsm::proto;

namespace {

constexpr size_t seg_size = 64 * 1024;

// The hostile importer's endpoint: a plain one plus its control messages.
struct hostile_ep : raw_ep {
  // Receive buffers; incoming messages are queued while waiting for the
  // completion of our own operations.
  struct rxb {
    fi_context2 ctx;
    uint8_t data[proto::max_msg];
  };
  rxb rx[4];
  fi_context2 op_ctx;
  std::vector<std::vector<uint8_t>> inbox;
  void post_rx() {
    for (auto& b : rx) REQ_EQ(fi_recv(ep, b.data, sizeof b.data, nullptr, FI_ADDR_UNSPEC, &b.ctx), 0);
  }
  // One completion: 1 ours (*err set), 0 none yet.
  int poll_one(int* err) {
    fi_cq_msg_entry e;
    ssize_t n = fi_cq_read(cq, &e, 1);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry ee{};
      fi_cq_readerr(cq, &ee, 0);
      if (ee.op_context != &op_ctx) return 0;  // a receive cancelled
      *err = ee.err ? ee.err : FI_EIO;
      return 1;
    }
    if (n != 1) return 0;
    if (e.op_context == &op_ctx) {
      *err = 0;
      return 1;
    }
    for (auto& b : rx)
      if (e.op_context == &b.ctx) {
        inbox.emplace_back(b.data, b.data + e.len);
        REQ_EQ(fi_recv(ep, b.data, sizeof b.data, nullptr, FI_ADDR_UNSPEC, &b.ctx), 0);
      }
    return 0;
  }
  // Waits for our operation: 0, or the error's errno.
  int wait(int ms = 10000) {
    for (int i = 0; i < ms * 10; i++) {
      int err = 0;
      if (poll_one(&err)) return err;
      usleep(100);
    }
    return FI_ETIMEDOUT;
  }
  // The next control message that is not a ping.
  std::vector<uint8_t> receive() {
    for (int i = 0; i < 100000; i++) {
      while (!inbox.empty()) {
        std::vector<uint8_t> m = std::move(inbox.front());
        inbox.erase(inbox.begin());
        proto::reader rd(m.data(), m.size());
        uint16_t t;
        uint64_t snd;
        if (rd.header(&t, &snd) && t != proto::ping) return m;
      }
      int err;
      poll_one(&err);
      usleep(100);
    }
    fail(__FILE__, __LINE__, "no reply");
  }
};

struct entry {
  uint64_t instance = 0;
  uint32_t pid = 0;
  std::vector<uint8_t> addr;
};

entry read_registry(const char* prov, uint32_t node, uint32_t segid) {
  char name[16];
  snprintf(name, sizeof name, "%08x", segid);
  std::string path =
      std::string(getenv("WEFT_RSM_RUNDIR")) + "/" + prov + "/" + std::to_string(node) + "/" + name;
  std::ifstream f(path);
  std::string hex;
  unsigned long long inst, start;
  unsigned long pid;
  REQ(static_cast<bool>(f >> std::hex >> inst >> std::dec >> pid >> start >> hex));
  entry e;
  e.instance = inst;
  e.pid = static_cast<uint32_t>(pid);
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    e.addr.push_back(static_cast<uint8_t>(stoi(hex.substr(i, 2), nullptr, 16)));
  return e;
}

}  // namespace

RSM_CHILD(hostile_exporter) {
  auto ctl = open_ctl();
  auto* mem = static_cast<uint8_t*>(alloc_pages(seg_size, true));
  fill_pattern(mem, seg_size, 11);
  rsm_memseg_export_handle_t ex;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, mem, seg_size, 0), RSM_SUCCESS);
  // Nodes 1 and 2 (the importer's, whichever it is) may read, nobody write.
  rsmapi_access_entry_t ro[] = {{1, 0444}, {2, 0444}};
  rsm_memseg_id_t id = 0;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, ro, 2), RSM_SUCCESS);
  sh->u32[0] = id;
  sh->u32[3] = local_node();
  set_step(0, 1);
  wait_step(1, 1);
  REQ(check_pattern(mem, seg_size, 11));  // not one byte changed
  // Still serving: a well-behaved read-only importer of our own.
  rsm_memseg_import_handle_t im;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), id, RSM_PERM_READ, &im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_set_mode(im, RSM_BARRIER_MODE_EXPLICIT), RSM_SUCCESS);
  uint8_t buf[256];
  REQ_EQ(rsm_memseg_import_get(im, 1024, buf, sizeof buf), RSM_SUCCESS);
  REQ(memcmp(buf, mem + 1024, sizeof buf) == 0);
  REQ_EQ(rsm_memseg_import_disconnect(im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_export_destroy(ex), RSM_SUCCESS);
  set_step(2, 1);
  return 0;
}

RSM_CHILD(hostile_importer) {
  const char* prov = ctl_name();
  bool tcp = !strcmp(prov, "tcp");
  if (lib() == "system" && !tcp)
    skip(
        "Debian's shm provider (1.17) does not check keys or access flags on RMA (its cross-memory-attach "
        "path "
        "skips the registration), so no exporter can stop a hostile importer there; weft's shm and "
        "tcp;ofi_rxm do");
  wait_step(0, 1);
  uint32_t node = local_node();
  entry e = read_registry(prov, sh->u32[3], sh->u32[0]);
  hostile_ep r;
  const char* bind_ip = tcp ? getenv("RSMT_NODE_IP") : nullptr;
  r.open(prov, tcp ? (bind_ip ? bind_ip : "127.0.0.1") : nullptr,
         FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE);
  fi_addr_t fa;
  REQ_EQ(fi_av_insert(r.av, e.addr.data(), 1, &fa, 0, nullptr), 1);
  uint64_t me = 0x5eed5eed5eed5eedull;
  r.post_rx();
  // Sends one message; true if it left. (Over tcp the exporter's side drops
  // the connection of an importer that wrote where it may not, so later
  // sends of the hostile one may fail: that is fine too.)
  auto send = [&](std::vector<uint8_t> bytes) {
    ssize_t s;
    int err = 0;
    do s = fi_send(r.ep, bytes.data(), bytes.size(), nullptr, fa, &r.op_ctx);
    while (s == -FI_EAGAIN && (r.poll_one(&err), true));
    return s == 0 && r.wait() == 0;
  };
  auto connect = [&](uint32_t perm, uint64_t import_id, std::vector<uint8_t>* rep) {
    proto::writer w(proto::connect_req, me);
    w.u64(import_id).u64(0x70c3).u32(sh->u32[0]).u32(perm).u32(node);
    w.u32(geteuid())
        .u32(getegid())
        .u32(static_cast<uint32_t>(getpid()))
        .u8(0)
        .bytes(r.addr.data(), r.addr.size());
    REQ(send(std::move(w.out())));
    *rep = r.receive();
  };
  // Asking for write is refused: the key of a writable registration never leaves.
  std::vector<uint8_t> rep;
  connect(RSM_PERM_RDWR, 1, &rep);
  {
    proto::reader rd(rep.data(), rep.size());
    uint16_t t;
    uint64_t snd;
    REQ(rd.header(&t, &snd));
    REQ_EQ(t, proto::connect_rep);
    rd.u64();
    REQ_EQ(rd.u32(), RSMERR_PERM_DENIED);
    rd.u64();
    rd.u64();
    rd.u64();
    rd.u64();
    REQ_EQ(rd.u64(), 0u);  // no key
  }
  connect(RSM_PERM_READ, 2, &rep);
  proto::reader rd(rep.data(), rep.size());
  uint16_t t;
  uint64_t snd;
  REQ(rd.header(&t, &snd));
  rd.u64();
  REQ_EQ(rd.u32(), RSM_SUCCESS);
  uint64_t conn_id = rd.u64(), conn_token = rd.u64(), size = rd.u64(), base = rd.u64(), key = rd.u64();
  REQ_EQ(size, seg_size);
  REQ(rd.ok());
  // The read key reads.
  std::vector<uint8_t> buf(4096);
  REQ_EQ(fi_read(r.ep, buf.data(), 4096, nullptr, fa, base + 4096, key, &r.op_ctx), 0);
  REQ_EQ(r.wait(), 0);
  std::vector<uint8_t> want(seg_size);
  fill_pattern(want.data(), seg_size, 11);
  REQ(memcmp(buf.data(), want.data() + 4096, 4096) == 0);
  // Writing with it, or with guesses, changes nothing.
  memset(buf.data(), 0x66, buf.size());
  std::mt19937_64 rng(42);
  std::vector<uint64_t> keys = {key, key ^ 1, key + 1, key - 1, 0, ~0ull, key << 1};
  for (int i = 0; i < 16; i++) keys.push_back(rng());
  for (uint64_t k : keys) {
    iovec iov{buf.data(), 64};
    fi_rma_iov riov{base, 64, k};
    fi_msg_rma m{&iov, nullptr, 1, fa, &riov, 1, &r.op_ctx, 0};
    ssize_t s = fi_writemsg(r.ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    if (s == 0) r.wait(2000);  // an error (or, on tcp, a dropped connection): either way nothing lands
  }
  // Past the end of the segment with the real key: refused, no crash.
  if (!tcp) {
    REQ_EQ(fi_read(r.ep, buf.data(), 4096, nullptr, fa, base + seg_size - 64, key, &r.op_ctx), 0);
    REQ(r.wait() != 0);
  }
  // Garbage and forged control messages.
  for (int i = 0; i < 50; i++) {
    std::vector<uint8_t> junk(rng() % 200);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    if (i % 2 && junk.size() >= 16) {  // a valid header over junk
      proto::writer w(static_cast<uint16_t>(1 + rng() % 10), me);
      memcpy(junk.data(), w.out().data(), 16);
    }
    if (!junk.empty()) send(junk);
  }
  proto::writer forged(proto::disconnect, me);
  forged.u64(conn_id).u64(conn_token ^ 1);
  send(std::move(forged.out()));
  if (!tcp) {
    // Our read-only connection survived all that.
    REQ_EQ(fi_read(r.ep, buf.data(), 64, nullptr, fa, base, key, &r.op_ctx), 0);
    REQ_EQ(r.wait(), 0);
    REQ(memcmp(buf.data(), want.data(), 64) == 0);
    // The mapping socket: a wrong token gets nothing; the right one a
    // read-only descriptor, which cannot be mapped writable.
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/m%u-%016llx", getenv("WEFT_RSM_RUNDIR"), e.pid,
             static_cast<unsigned long long>(e.instance));
    for (int attempt = 0; attempt < 2; attempt++) {
      int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      REQ_EQ(::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
      proto::writer mw(proto::map_req, me);
      mw.u64(conn_id).u64(attempt == 0 ? conn_token ^ 0xff : conn_token);
      REQ_EQ(::send(s, mw.out().data(), mw.out().size(), 0), static_cast<ssize_t>(mw.out().size()));
      uint8_t mb[64];
      alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))];
      iovec iov{mb, sizeof mb};
      msghdr mh{};
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = ctrl;
      mh.msg_controllen = sizeof ctrl;
      ssize_t n = recvmsg(s, &mh, 0);
      REQ(n >= 20);
      proto::reader mr(mb, static_cast<size_t>(n));
      REQ(mr.header(&t, &snd));
      uint32_t status = mr.u32();
      cmsghdr* cm = CMSG_FIRSTHDR(&mh);
      if (attempt == 0) {
        REQ_EQ(status, RSMERR_SEG_NOT_CONNECTED);
        REQ(cm == nullptr);
      } else {
        REQ_EQ(status, RSM_SUCCESS);
        REQ(cm != nullptr);
        int fd;
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        REQ_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
        uint64_t off = mr.u64();
        void* w = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(off));
        REQ(w == MAP_FAILED);
        REQ_EQ(errno, EACCES);
        REQ_EQ(fcntl(fd, F_SETFL, O_RDWR), 0);  // access modes cannot be changed
        REQ_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
        close(fd);
      }
      close(s);
    }
  }
  set_step(1, 1);
  wait_step(2, 1);
  r.close_all();
  return 0;
}

TEST(RsmHostile, ReadOnlyImporterCannotWrite) {
  new_shared();
  RUN_ACTORS(60, spawn("hostile_exporter"), spawn("hostile_importer"));
}
