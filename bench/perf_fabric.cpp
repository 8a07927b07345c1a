// SPDX-License-Identifier: BSD-3-Clause
#include "perf_fabric.hpp"
#include "tool_util.h"

#include <rdma/fi_errno.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft_perf {

namespace {

constexpr uint64_t data_tag = 0x5746'0001;
constexpr uint64_t ack_tag = 0x5746'0002;
constexpr uint64_t ack_len = 8;
constexpr size_t page = 4096;
// Streaming tests keep up to `window` messages in distinct slots, but never
// more than this much memory per direction (4 MiB x 16 still fills a pipe).
constexpr size_t area_cap = size_t(64) << 20;
constexpr unsigned side_initiator = 0x00;
constexpr unsigned side_responder = 0xA5;

const std::vector<test_desc> tests = {
    {"msg_lat", family::msg, true, "1:4M"},
    {"msg_bw", family::msg, false, "1:4M"},
    {"tagged_lat", family::tagged, true, "1:4M"},
    {"tagged_bw", family::tagged, false, "1:4M"},
    {"rate", family::msg, false, "8"},
    {"write_lat", family::write, true, "1:4M"},
    {"write_bw", family::write, false, "1:4M"},
    {"read_lat", family::read, true, "1:4M"},
    {"read_bw", family::read, false, "1:4M"},
    {"atomic_lat", family::atomic, true, "8"},
    {"atomic_rate", family::atomic, false, "8"},
    {"barrier_lat", family::coll, true, "8"},
    {"allreduce_lat", family::coll, true, "8"},
    {"allreduce_bw", family::coll, true, "1M"},
};

// An error by name and text: "FI_ENODATA: No data available".
std::string fi_errtext(ssize_t rc) {
  const int e = int(rc < 0 ? -rc : rc);
  return std::string(tool_fi_errname(e)) + ": " + fi_strerror(e);
}

std::string fi_err(const char* what, ssize_t rc) {
  return std::string(what) + ": " + fi_errtext(rc);
}

void check_rc(ssize_t rc, const char* what) {
  if (rc != 0) [[unlikely]]
    fail(fi_err(what, rc));
}

// Byte j of message `seq` from `side`: differs between consecutive messages
// at every offset, and between the two directions.
inline uint8_t pattern_byte(uint64_t seq, uint64_t j, unsigned side) {
  return uint8_t((seq * 0x9D) + (j * 31) + (j >> 8) * 7) ^ uint8_t(side);
}

void fill_pattern(uint8_t* p, uint64_t n, uint64_t seq, unsigned side) {
  for (uint64_t j = 0; j < n; ++j) p[j] = pattern_byte(seq, j, side);
}

void verify_pattern(const uint8_t* p, uint64_t n, uint64_t seq, unsigned side, const char* what) {
  for (uint64_t j = 0; j < n; ++j) {
    uint8_t want = pattern_byte(seq, j, side);
    if (p[j] != want) [[unlikely]] {
      char buf[200];
      snprintf(buf, sizeof buf,
               "--check: %s data mismatch in operation %llu of %llu bytes at offset %llu: "
               "expected 0x%02x, got 0x%02x",
               what, (unsigned long long)seq, (unsigned long long)n, (unsigned long long)j, want, p[j]);
      fail(buf);
    }
  }
}

inline uint64_t mix(uint64_t seq, uint64_t j) {
  uint64_t z = (seq + 1) * 0x9E3779B97F4A7C15ull ^ (j * 0xBF58476D1CE4E5B9ull);
  return z ^ (z >> 31);
}

inline uint64_t atomic_seed(uint64_t j) {
  return 0x5EED'0000'0000'0000ull + j * 0x1000193;
}

double g_watchdog_s = 0;
const char* g_watchdog_what = "";

void watchdog_fired(int) {
  char msg[800];
  const char* why = last_failure();
  int n = snprintf(msg, sizeof msg, "%s%s%sweft-perf: error: %s did not return within %.0f s\n",
                   *why ? "weft-perf: error: " : "", why, *why ? "\n" : "", g_watchdog_what, g_watchdog_s);
  if (write(2, msg, size_t(n)) < 0) {}
  _exit(1);
}

void arm_watchdog(double s, const char* what) {
  static bool installed = false;
  g_watchdog_what = what;
  if (!installed) {
    struct sigaction sa {};
    sa.sa_handler = watchdog_fired;
    sigaction(SIGALRM, &sa, nullptr);
    installed = true;
  }
  g_watchdog_s = s;
  itimerval it{};
  it.it_value.tv_sec = time_t(s);
  it.it_value.tv_usec = suseconds_t((s - double(time_t(s))) * 1e6);
  setitimer(ITIMER_REAL, &it, nullptr);
}

// Keeps the latest `cap` samples: statistics over a million operations are
// plenty, and -n 1e9 must not allocate gigabytes.
constexpr uint64_t sample_cap = 1u << 20;

struct sample_sink {
  std::vector<double>& v;
  size_t i = 0;
  sample_sink(std::vector<double>& out, uint64_t n) : v(out) {
    v.assign(size_t(std::min(n, sample_cap)), 0.0);
  }
  void add(double us) {
    v[i] = us;
    if (++i == v.size()) i = 0;
  }
};

}  // namespace

const std::vector<test_desc>& all_tests() {
  return tests;
}

const test_desc* find_test(const std::string& name) {
  for (auto& t : tests)
    if (name == t.name) return &t;
  return nullptr;
}

fabric_session::fabric_session(const wire_config& cfg, ctl_channel& ctl, bool initiator, std::string src_node)
    : cfg_(cfg), ctl_(ctl), initiator_(initiator), src_node_(std::move(src_node)) {
  if (cfg_.test >= tests.size()) fail("unknown test in configuration");
  test_ = &tests[cfg_.test];
  if (cfg_.window == 0) cfg_.window = 1;
}

fabric_session::~fabric_session() {
  // Debian's libfabric 1.17 (tcp;ofi_rxm) was seen spinning forever in
  // fi_close of an endpoint that ran allreduces of 64 KiB and more: bounded.
  if (mc_) arm_watchdog(3, "fi_close after collectives (a provider bug)");
  if (mc_) fi_close(&mc_->fid);
  if (set_) fi_close(&set_->fid);
  if (mr_) fi_close(&mr_->fid);
  if (ep_) fi_close(&ep_->fid);
  if (pep_) fi_close(&pep_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (av_) fi_close(&av_->fid);
  if (eq_) fi_close(&eq_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (mc_) arm_watchdog(0, "");
  if (info_) fi_freeinfo(info_);
  if (memfd_ >= 0) {
    munmap(region_, region_len_);
    close(memfd_);
  } else {
    std::free(region_);
  }
}

// ------------------------------------------------------------------ set-up

fi_info* fabric_session::make_hints() const {
  fi_info* h = fi_allocinfo();
  if (!h) fail("fi_allocinfo failed");
  switch (test_->fam) {
    case family::msg:
      h->caps = FI_MSG;
      break;
    case family::tagged:
      h->caps = FI_TAGGED;
      break;
    case family::write:
    case family::read:
      h->caps = FI_RMA;
      break;
    case family::atomic:
      h->caps = FI_ATOMIC;
      break;
    case family::coll:
      h->caps = FI_COLLECTIVE | FI_TAGGED | FI_MSG;
      break;
  }
  // We give every operation its own fi_context2, so both modes are fine.
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = cfg_.ep_msg ? FI_EP_MSG : FI_EP_RDM;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  if (cfg_.prov[0]) h->fabric_attr->prov_name = strdup(cfg_.prov);
  if (cfg_.domain[0]) h->domain_attr->name = strdup(cfg_.domain);
  // --check maps the i-th posted receive to the i-th message sent.
  if (cfg_.check && (test_->fam == family::msg || test_->fam == family::tagged)) {
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
  }
  return h;
}

fi_info* fabric_session::get_info(fi_info* hints) {
  fi_info* info = nullptr;
  int rc = -FI_ENODATA;
  if (!src_node_.empty())
    rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), src_node_.c_str(), nullptr, FI_SOURCE,
                    hints, &info);
  if (rc != 0)
    rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints, &info);
  if (rc != 0) {
    char* caps = fi_tostr(&hints->caps, FI_TYPE_CAPS);
    std::string msg = "no provider '" + std::string(cfg_.prov[0] ? cfg_.prov : "(any)") + "' offers " + caps +
                      " on " + (cfg_.ep_msg ? "FI_EP_MSG" : "FI_EP_RDM");
    if (cfg_.check && (test_->fam == family::msg || test_->fam == family::tagged))
      msg += " with FI_ORDER_SAS (needed by --check)";
    fail(msg + " (fi_getinfo: " + fi_errtext(rc) + ")");
  }
  return info;
}

void fabric_session::open_common(fi_info* info) {
  inject_size_ = info->tx_attr ? info->tx_attr->inject_size : 0;
  mr_mode_ = info->domain_attr ? info->domain_attr->mr_mode : 0;
  if (mr_mode_ & FI_MR_RAW) fail("provider needs raw memory keys (FI_MR_RAW): not supported");

  fi_cq_attr cq_attr{};
  cq_attr.size = 4 * size_t(cfg_.window) + 256;
  cq_attr.format = FI_CQ_FORMAT_MSG;
  cq_attr.wait_obj = cfg_.cq_wait ? FI_WAIT_UNSPEC : FI_WAIT_NONE;
  check_rc(fi_cq_open(domain_, &cq_attr, &cq_, nullptr), "fi_cq_open");

  if (test_->fam == family::atomic) {
    fi_atomic_attr aa{};
    int rc = cfg_.cswap ? fi_query_atomic(domain_, FI_UINT64, FI_CSWAP, &aa, FI_COMPARE_ATOMIC)
                        : fi_query_atomic(domain_, FI_UINT64, FI_SUM, &aa, FI_FETCH_ATOMIC);
    if (rc != 0)
      fail(std::string("provider does not support ") + (cfg_.cswap ? "compare-swap" : "fetch-add") +
           " on FI_UINT64 (" + fi_errtext(rc) + ")");
    max_atomic_count_ = aa.count;
  }

  // --completion: every transmit operation's default completion level.
  if (cfg_.completion && info->tx_attr) info->tx_attr->op_flags |= completion_levels[cfg_.completion].op_flags;
  check_rc(fi_endpoint(domain_, info, &ep_, nullptr), "fi_endpoint");
  if (av_) check_rc(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
  if (eq_) check_rc(fi_ep_bind(ep_, &eq_->fid, 0), "fi_ep_bind(eq)");
  check_rc(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
  check_rc(fi_enable(ep_), "fi_enable");
}

void fabric_session::open_rdm() {
  fi_info* hints = make_hints();
  try {
    info_ = get_info(hints);
  } catch (...) {
    fi_freeinfo(hints);
    throw;
  }
  fi_freeinfo(hints);
  check_rc(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  check_rc(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
  fi_av_attr av_attr{};
  // Collectives: an AV set by range needs FI_AV_TABLE (man fi_av_set).
  av_attr.type = test_->fam == family::coll ? FI_AV_TABLE : FI_AV_UNSPEC;
  av_attr.count = 4;
  check_rc(fi_av_open(domain_, &av_attr, &av_, nullptr), "fi_av_open");
  if (test_->fam == family::coll) {  // fi_join_collective completes there
    fi_eq_attr eq_attr{};
    eq_attr.wait_obj = FI_WAIT_UNSPEC;
    check_rc(fi_eq_open(fabric_, &eq_attr, &eq_, nullptr), "fi_eq_open");
  }
  open_common(info_);

  std::vector<uint8_t> name(1024);
  size_t len = name.size();
  check_rc(fi_getname(&ep_->fid, name.data(), &len), "fi_getname");
  std::vector<uint8_t> peer;
  if (initiator_) {
    ctl_.expect(ctl_type::addr, &peer);
    ctl_.send(ctl_type::addr, 0, 0, 0, name.data(), uint32_t(len));
  } else {
    ctl_.send(ctl_type::addr, 0, 0, 0, name.data(), uint32_t(len));
    ctl_.expect(ctl_type::addr, &peer);
  }
  if (test_->fam == family::coll) {
    // Both sides' AVs hold the initiator at index 0 and the responder at 1,
    // and the group is that range: the form every libfabric takes
    // (Debian's utility collectives build a set from the AV's own order).
    const uint8_t* order[2] = {initiator_ ? name.data() : peer.data(), initiator_ ? peer.data() : name.data()};
    fi_addr_t at[2] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
    for (int i = 0; i < 2; ++i) {
      int n = fi_av_insert(av_, order[i], 1, &at[i], 0, nullptr);
      if (n != 1) fail(fi_err("fi_av_insert", n < 0 ? n : -FI_EINVAL));
    }
    peer_ = at[initiator_ ? 1 : 0];
    fi_av_set_attr sa{};
    sa.count = 2;
    sa.start_addr = at[0];
    sa.end_addr = at[1];
    sa.stride = at[1] - at[0];
    check_rc(fi_av_set(av_, &sa, &set_, nullptr), "fi_av_set");
    return;
  }
  int n = fi_av_insert(av_, peer.data(), 1, &peer_, 0, nullptr);
  if (n != 1) fail(fi_err("fi_av_insert of the peer's address", n < 0 ? n : -FI_EINVAL));
}

// fi_join_collective, its FI_JOIN_COMPLETE read from the EQ while the CQ is
// polled (some providers progress the join only there).
void fabric_session::join_group() {
  fi_addr_t set_addr;
  check_rc(fi_av_set_addr(set_, &set_addr), "fi_av_set_addr");
  check_rc(fi_join_collective(ep_, set_addr, set_, 0, &mc_, this), "fi_join_collective");
  const double deadline = now_s() + std::max(cfg_.timeout_s, 10.0);
  for (;;) {
    uint32_t ev = 0;
    fi_eq_entry entry{};
    ssize_t n = fi_eq_read(eq_, &ev, &entry, sizeof entry, 0);
    if (n == -FI_EAVAIL) {
      fi_eq_err_entry ee{};
      fi_eq_readerr(eq_, &ee, 0);
      fail(std::string("fi_join_collective: ") + fi_errtext(ee.err));
    }
    if (n > 0 && ev == FI_JOIN_COMPLETE) break;
    if (n < 0 && n != -FI_EAGAIN) fail(fi_err("fi_eq_read", n));
    progress();
    if (now_s() > deadline) fail("fi_join_collective: no FI_JOIN_COMPLETE (peer stuck or dead?)");
  }
  coll_addr_ = fi_mc_addr(mc_);
}

void fabric_session::wait_cm_event(uint32_t want, fi_eq_cm_entry* out) {
  double deadline = now_s() + std::max(cfg_.timeout_s, 10.0);
  for (;;) {
    uint32_t event = 0;
    fi_eq_cm_entry entry{};
    ssize_t rc = fi_eq_read(eq_, &event, &entry, sizeof entry, 0);
    if (rc > 0) {
      if (event != want)
        fail("unexpected connection event " + std::to_string(event) + " (wanted " + std::to_string(want) +
             ")");
      if (out) *out = entry;
      return;
    }
    if (rc == -FI_EAVAIL) {
      fi_eq_err_entry err{};
      fi_eq_readerr(eq_, &err, 0);
      char buf[256] = "";
      const char* prov = fi_eq_strerror(eq_, err.prov_errno, err.err_data, buf, sizeof buf);
      fail(std::string("connection failed: ") + fi_errtext(err.err) + " (" + (prov ? prov : "") + ")");
    }
    if (rc != -FI_EAGAIN) fail(fi_err("fi_eq_read", rc));
    if (ctl_.readable()) {
      ctl_.recv();  // throws on EOF or a peer error
      fail("control protocol error while connecting");
    }
    if (now_s() > deadline) fail("timed out waiting for the connection to be established");
    usleep(1000);
  }
}

void fabric_session::open_msg() {
  fi_eq_attr eq_attr{};
  eq_attr.size = 16;
  eq_attr.wait_obj = FI_WAIT_UNSPEC;
  fi_info* hints = make_hints();
  if (initiator_) {
    std::vector<uint8_t> name;
    ctl_msg m = ctl_.expect(ctl_type::addr, &name);
    hints->addr_format = uint32_t(m.a);
    hints->dest_addr = std::malloc(name.size());
    std::memcpy(hints->dest_addr, name.data(), name.size());
    hints->dest_addrlen = name.size();
    std::string saved = src_node_;
    src_node_.clear();  // the destination decides the route
    try {
      info_ = get_info(hints);
    } catch (...) {
      fi_freeinfo(hints);
      throw;
    }
    src_node_ = saved;
    fi_freeinfo(hints);
    check_rc(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    check_rc(fi_eq_open(fabric_, &eq_attr, &eq_, nullptr), "fi_eq_open");
    check_rc(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    open_common(info_);
    check_rc(fi_connect(ep_, info_->dest_addr, nullptr, 0), "fi_connect");
    wait_cm_event(FI_CONNECTED, nullptr);
  } else {
    fi_info* pinfo = nullptr;
    try {
      pinfo = get_info(hints);
    } catch (...) {
      fi_freeinfo(hints);
      throw;
    }
    fi_freeinfo(hints);
    info_ = pinfo;
    check_rc(fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
    check_rc(fi_eq_open(fabric_, &eq_attr, &eq_, nullptr), "fi_eq_open");
    check_rc(fi_passive_ep(fabric_, info_, &pep_, nullptr), "fi_passive_ep");
    check_rc(fi_pep_bind(pep_, &eq_->fid, 0), "fi_pep_bind");
    check_rc(fi_listen(pep_), "fi_listen");
    std::vector<uint8_t> name(1024);
    size_t len = name.size();
    check_rc(fi_getname(&pep_->fid, name.data(), &len), "fi_getname(pep)");
    ctl_.send(ctl_type::addr, info_->addr_format, 0, 0, name.data(), uint32_t(len));
    fi_eq_cm_entry req{};
    wait_cm_event(FI_CONNREQ, &req);
    fi_freeinfo(info_);
    info_ = req.info;  // describes the connection we accept
    check_rc(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
    open_common(info_);
    check_rc(fi_accept(ep_, nullptr, 0), "fi_accept");
    wait_cm_event(FI_CONNECTED, nullptr);
  }
  peer_ = 0;  // connected endpoints ignore the destination
}

void fabric_session::register_memory() {
  uint64_t max_size = std::max<uint64_t>(cfg_.max_size, 8);
  area_len_ = std::max<size_t>(max_size, std::min<size_t>(size_t(cfg_.window) * max_size, area_cap));
  area_len_ = (area_len_ + page - 1) / page * page;
  atomic_cap_ = test_->fam == family::atomic ? std::max<uint64_t>(1, max_size / 8) : 0;
  size_t atomic_bytes = 8 * atomic_cap_ * (1 + 3 * size_t(cfg_.window));
  region_len_ = 2 * area_len_ + 2 * 64 + atomic_bytes;
  region_len_ = (region_len_ + page - 1) / page * page;
  if (cfg_.mem == 1) {
    // Shared memory the application could hand to other processes; sealed
    // against shrinking, so a peer that maps it can never fault.
    memfd_ = memfd_create("weft-perf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd_ < 0 || ftruncate(memfd_, off_t(region_len_)) != 0 ||
        fcntl(memfd_, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
      fail(std::string("--mem memfd: ") + std::strerror(errno));
    void* p = mmap(nullptr, region_len_, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
    if (p == MAP_FAILED) fail(std::string("--mem memfd: mmap: ") + std::strerror(errno));
    region_ = static_cast<uint8_t*>(p);
  } else {
    region_ = static_cast<uint8_t*>(std::aligned_alloc(page, region_len_));
  }
  if (!region_) fail("out of memory for " + std::to_string(region_len_) + " bytes of buffers");
  std::memset(region_, 0, region_len_);  // touch every page before timing
  tx_area_ = region_;
  rx_area_ = region_ + area_len_;
  ack_tx_ = rx_area_ + area_len_;
  ack_rx_ = ack_tx_ + 64;
  atomic_target_ = reinterpret_cast<uint64_t*>(ack_rx_ + 64);
  operand_ = atomic_target_ + atomic_cap_;
  compare_ = operand_ + atomic_cap_ * cfg_.window;
  result_ = compare_ + atomic_cap_ * cfg_.window;

  // ping-pong alternates two receive contexts whatever the window
  size_t nctx = std::max<size_t>(cfg_.window, 2);
  tx_ctx_.assign(nctx, fi_context2{});
  rx_ctx_.assign(nctx, fi_context2{});
  rx_len_.assign(nctx, 0);

  bool remote = test_->fam == family::write || test_->fam == family::read || test_->fam == family::atomic;
  uint64_t key = 0;
  if ((mr_mode_ & FI_MR_LOCAL) || remote) {
    uint64_t access = remote ? (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE) : (FI_SEND | FI_RECV);
    uint64_t requested = initiator_ ? 0x5746'0a01 : 0x5746'0b02;
    check_rc(fi_mr_reg(domain_, region_, region_len_, access, 0, requested, 0, &mr_, nullptr), "fi_mr_reg");
    if (mr_mode_ & FI_MR_ENDPOINT) {
      check_rc(fi_mr_bind(mr_, &ep_->fid, 0), "fi_mr_bind");
      check_rc(fi_mr_enable(mr_), "fi_mr_enable");
    }
    desc_ = fi_mr_desc(mr_);
    key = fi_mr_key(mr_);
    if (key == FI_KEY_NOTAVAIL) fail("fi_mr_key: key not available (raw keys unsupported)");
  }
  // FI_MR_VIRT_ADDR: the peer addresses our buffers by virtual address;
  // otherwise by offset from the start of the registration.
  local_base_ = (mr_mode_ & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(region_) : 0;
  ctl_.send(ctl_type::mr, local_base_, key, region_len_);
  ctl_msg m = ctl_.expect(ctl_type::mr);
  if (m.c != region_len_) fail("peer's buffer layout differs (different weft-perf versions?)");
  remote_base_ = m.a;
  remote_key_ = m.b;
}

void fabric_session::setup() {
  if (cfg_.ep_msg && test_->fam == family::coll) fail("collective tests need an RDM endpoint (-e rdm)");
  if (cfg_.ep_msg)
    open_msg();
  else
    open_rdm();
  register_memory();
  if (test_->fam == family::coll) join_group();
}

std::string fabric_session::describe() const {
  std::string s = "provider ";
  s += info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : "?";
  s += ", fabric ";
  s += info_->fabric_attr->name ? info_->fabric_attr->name : "?";
  s += ", domain ";
  s += info_->domain_attr->name ? info_->domain_attr->name : "?";
  s += cfg_.ep_msg ? ", ep msg" : ", ep rdm";
  s += ", inject ";
  s += cfg_.inject ? "<= " + std::to_string(inject_size_) + " B" : "off";
  s += ", window " + std::to_string(cfg_.window);
  s += cfg_.cq_wait ? ", cq wait" : ", cq spin";
  s += cfg_.mem == 1 ? ", mem memfd" : ", mem heap";
  if (cfg_.reuse) s += ", one buffer (--reuse)";
  if (cfg_.completion) s += std::string(", completion ") + completion_levels[cfg_.completion].name;
  uint64_t mm = mr_mode_;
  s += ", mr_mode [";
  s += mm ? fi_tostr(&mm, FI_TYPE_MR_MODE) : "";
  s += "]";
  if (test_->fam == family::atomic) s += cfg_.cswap ? ", op cswap" : ", op fadd";
  if (cfg_.check) s += ", --check";
  return s;
}

uint64_t fabric_session::window_at(uint64_t size) const {
  if (test_->latency) return 1;
  if (test_->fam == family::atomic) return cfg_.window;
  uint64_t slots = std::max<uint64_t>(1, area_len_ / std::max<uint64_t>(size, 1));
  return std::min<uint64_t>(cfg_.window, slots);
}

uint64_t fabric_session::remote(const uint8_t* local) const {
  return remote_base_ + uint64_t(local - region_);
}

// ------------------------------------------------------------------ data path

[[gnu::cold]] void fabric_session::report_cq_error() {
  fi_cq_err_entry err{};
  ssize_t rc = fi_cq_readerr(cq_, &err, 0);
  if (rc < 0) fail(fi_err("fi_cq_readerr", rc));
  char buf[256] = "";
  const char* prov = fi_cq_strerror(cq_, err.prov_errno, err.err_data, buf, sizeof buf);
  fail(std::string("completion error: ") + fi_errtext(err.err) + " (" + (prov ? prov : "") + ")");
}

int fabric_session::progress(bool may_block) {
  fi_cq_msg_entry e[16];
  ssize_t n;
  if (may_block && cfg_.cq_wait) [[unlikely]] {
    // Some providers' fi_cq_sread ignores its timeout when nothing
    // arrives; a watchdog keeps that from becoming a hang.
    arm_watchdog(cfg_.timeout_s + 1, "fi_cq_sread (peer dead, or the provider ignores the timeout)");
    n = fi_cq_sread(cq_, e, 16, nullptr, 10);
    arm_watchdog(0, "");
  } else {
    n = fi_cq_read(cq_, e, 16);
  }
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      auto* ctx = static_cast<fi_context2*>(e[i].op_context);
      if (ctx == &ack_rx_ctx_) {
        ++ack_rx_done_;
      } else if (ctx >= rx_ctx_.data() && ctx < rx_ctx_.data() + rx_ctx_.size()) {
        rx_len_[size_t(ctx - rx_ctx_.data())] = e[i].len;
        ++rx_done_;
      } else {
        ++tx_done_;
      }
    }
    return int(n);
  }
  if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT) return 0;
  if (n == -FI_EAVAIL) report_cq_error();
  fail(fi_err(cfg_.cq_wait ? "fi_cq_sread" : "fi_cq_read", n));
}

void fabric_session::check_peer() {
  // EOF or the peer's error message throws; anything else waits for the
  // phase's next expect(), which checks its type.
  if (ctl_.readable()) ctl_.hold_next();
}

// Called on every empty poll: every 256 polls looks at the clock, every 20 ms
// at the control socket, and gives up after the timeout.
inline void fabric_session::idle(idle_state& st, const char* what) {
  if (!cfg_.cq_wait && (++st.spins & 255) != 0) [[likely]]
    return;
  idle_check(st, what);
}

void fabric_session::idle_check(idle_state& st, const char* what) {
  double t = now_s();
  if (st.since == 0) st.since = t;
  if (t - last_check_ > 0.02) {
    last_check_ = t;
    check_peer();
  }
  if (t - st.since > cfg_.timeout_s)
    fail("timed out: no completion for " + std::to_string(int(cfg_.timeout_s)) + " s while waiting for " +
         what + " (peer stuck or dead?)");
}

template <class Done>
void fabric_session::wait_for(Done done, const char* what) {
  idle_state st;
  while (!done()) {
    if (progress(true) > 0)
      st.since = 0;
    else
      idle(st, what);
  }
}

// The latency loops' poll: one entry per fi_cq_read, as a hand-written
// ping-pong does. Returns the number of completions consumed (0 or 1).
inline int fabric_session::poll_one() {
  fi_cq_msg_entry e;
  ssize_t n = fi_cq_read(cq_, &e, 1);
  if (n == 1) [[likely]] {
    auto* ctx = static_cast<fi_context2*>(e.op_context);
    if (ctx >= rx_ctx_.data() && ctx < rx_ctx_.data() + rx_ctx_.size()) {
      rx_len_[size_t(ctx - rx_ctx_.data())] = e.len;
      ++rx_done_;
    } else if (ctx == &ack_rx_ctx_) {
      ++ack_rx_done_;
    } else {
      ++tx_done_;
    }
    return 1;
  }
  if (n == -FI_EAGAIN) [[likely]]
    return 0;
  if (n == -FI_EAVAIL) report_cq_error();
  fail(fi_err("fi_cq_read", n));
}

template <class Done>
inline void fabric_session::spin_until(Done done, const char* what) {
  if (cfg_.cq_wait) [[unlikely]] {
    wait_for(done, what);
    return;
  }
  idle_state st;
  while (!done()) {
    if (poll_one())
      st.since = 0;
    else
      idle(st, what);
  }
}

// One attempt to post a send: 0, -FI_EAGAIN or an error.
inline ssize_t fabric_session::try_send(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack, bool inj) {
  uint64_t tag = ack ? ack_tag : data_tag;
  if (test_->fam == family::tagged)
    return inj ? fi_tinject(ep_, buf, len, peer_, tag) : fi_tsend(ep_, buf, len, desc_, peer_, tag, ctx);
  return inj ? fi_inject(ep_, buf, len, peer_) : fi_send(ep_, buf, len, desc_, peer_, ctx);
}

inline ssize_t fabric_session::try_recv(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack) {
  if (test_->fam == family::tagged)
    return fi_trecv(ep_, buf, len, desc_, FI_ADDR_UNSPEC, ack ? ack_tag : data_tag, 0, ctx);
  return fi_recv(ep_, buf, len, desc_, FI_ADDR_UNSPEC, ctx);
}

// The first attempt is inline (the common case); a full queue goes to the
// out-of-line retry loop, which makes progress while it waits for room.
inline void fabric_session::post_send(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack) {
  bool inj = cfg_.inject && len <= inject_size_;
  ssize_t rc = try_send(buf, len, ctx, ack, inj);
  if (rc != 0) [[unlikely]] {
    retry_send(buf, len, ctx, ack, inj, rc);
    return;
  }
  if (inj) ++tx_done_;  // count it as complete: no completion will come
}

void fabric_session::retry_send(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack, bool inj,
                                ssize_t rc) {
  bool tagged = test_->fam == family::tagged;
  idle_state st;
  for (;;) {
    if (rc == 0) {
      if (inj) ++tx_done_;
      return;
    }
    if (rc != -FI_EAGAIN)
      fail(fi_err(tagged ? (inj ? "fi_tinject" : "fi_tsend") : (inj ? "fi_inject" : "fi_send"), rc));
    if (progress() > 0)
      st.since = 0;
    else
      idle(st, "room to send");
    rc = try_send(buf, len, ctx, ack, inj);
  }
}

inline void fabric_session::post_recv(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack) {
  ssize_t rc = try_recv(buf, len, ctx, ack);
  if (rc != 0) [[unlikely]]
    retry_recv(buf, len, ctx, ack, rc);
}

void fabric_session::retry_recv(uint8_t* buf, uint64_t len, fi_context2* ctx, bool ack, ssize_t rc) {
  bool tagged = test_->fam == family::tagged;
  idle_state st;
  for (;;) {
    if (rc == 0) return;
    if (rc != -FI_EAGAIN) fail(fi_err(tagged ? "fi_trecv" : "fi_recv", rc));
    if (progress() > 0)
      st.since = 0;
    else
      idle(st, "room to post a receive");
    rc = try_recv(buf, len, ctx, ack);
  }
}

void fabric_session::post_rma(uint64_t slot, uint64_t size) {
  idle_state st;
  for (;;) {
    ssize_t rc;
    if (test_->fam == family::write) {
      uint8_t* src = tx_slot(slot, size);
      uint64_t dst = remote(rx_slot(slot, size));
      if (cfg_.check) {
        // The responder inspects its memory right after our
        // completion, so ask for delivery, not just transmission.
        iovec iov{src, size};
        fi_rma_iov riov{dst, size, remote_key_};
        fi_msg_rma msg{};
        msg.msg_iov = &iov;
        msg.desc = &desc_;
        msg.iov_count = 1;
        msg.addr = peer_;
        msg.rma_iov = &riov;
        msg.rma_iov_count = 1;
        msg.context = &tx_ctx_[slot];
        rc = fi_writemsg(ep_, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
      } else {
        rc = fi_write(ep_, src, size, desc_, peer_, dst, remote_key_, &tx_ctx_[slot]);
      }
    } else {
      rc = fi_read(ep_, rx_slot(slot, size), size, desc_, peer_, remote(tx_slot(slot, size)), remote_key_,
                   &tx_ctx_[slot]);
    }
    if (rc == 0) [[likely]]
      return;
    if (rc != -FI_EAGAIN)
      fail(fi_err(test_->fam == family::write ? (cfg_.check ? "fi_writemsg" : "fi_write") : "fi_read", rc));
    if (progress() > 0)
      st.since = 0;
    else
      idle(st, "room to post an RMA operation");
  }
}

void fabric_session::post_atomic(uint64_t slot, uint64_t count) {
  uint64_t* op = operand_ + slot * atomic_cap_;
  uint64_t* cmp = compare_ + slot * atomic_cap_;
  uint64_t* res = result_ + slot * atomic_cap_;
  uint64_t dst = remote(reinterpret_cast<uint8_t*>(atomic_target_));
  idle_state st;
  for (;;) {
    ssize_t rc = cfg_.cswap ? fi_compare_atomic(ep_, op, count, desc_, cmp, desc_, res, desc_, peer_, dst,
                                                remote_key_, FI_UINT64, FI_CSWAP, &tx_ctx_[slot])
                            : fi_fetch_atomic(ep_, op, count, desc_, res, desc_, peer_, dst, remote_key_,
                                              FI_UINT64, FI_SUM, &tx_ctx_[slot]);
    if (rc == 0) [[likely]]
      return;
    if (rc != -FI_EAGAIN) fail(fi_err(cfg_.cswap ? "fi_compare_atomic" : "fi_fetch_atomic", rc));
    if (progress() > 0)
      st.since = 0;
    else
      idle(st, "room to post an atomic");
  }
}

// ------------------------------------------------------------------ tests

// Ping-pong, written like a hand-made loop: one fi_cq_read of one entry per
// poll, one clock read per round trip (consecutive round trips share their
// boundary timestamp; --check re-reads the clock after its fills and
// verifications so they stay outside the samples), and every receive posted
// off the critical path. Both sides keep two receives on the same buffer with
// alternating contexts: the responder posts the next-but-one receive right
// after its reply, and the initiator posts the next one while the reply is in
// flight. Two receives on one buffer are safe here because message k+1 cannot
// be sent before reply k was received (and checked).
// With fi_inject / fi_tinject nothing completes on the send side, so the
// only completion a ping-pong waits for is the next receive: the loops below
// are then nothing but inject, post the next receive, read one CQ entry and
// one TSC sample per round trip, as a hand-written ping-pong is. (The general
// loops' completion bookkeeping cost about 25 ns per message here, a fifth of
// what they measure.) A timeout still ends a wait on a silent peer.
// The lean initiator reads the clock right after each send, not between the
// reply's arrival and the next send: there the read's latency (the TSC and
// the sample's store, which the send's stores queue behind) delayed every
// send, 2-8 ns a round trip on the 2-vCPU VM, the benchmark's cost and not
// the library's. Consecutive samples are still one round trip apart.
// cacheline-pingpong and ucp-perf read their clocks at the same point.
bool fabric_session::lean_pingpong(uint64_t size) const {
  return !cfg_.check && !cfg_.cq_wait && cfg_.inject && size <= inject_size_;
}

inline void fabric_session::wait_rx_inject(const char* what) {
  fi_cq_msg_entry e;
  idle_state st;
  for (;;) {
    ssize_t n = fi_cq_read(cq_, &e, 1);
    if (n == 1) [[likely]]
      return;
    if (n != -FI_EAGAIN) [[unlikely]] {
      if (n == -FI_EAVAIL) report_cq_error();
      fail(fi_err("fi_cq_read", n));
    }
    idle(st, what);
  }
}

phase_result fabric_session::pingpong_initiator(uint64_t size, uint64_t iters) {
  if (lean_pingpong(size)) {
    phase_result r;
    sample_sink samples(r.samples_us, iters);
    uint8_t* tx = tx_slot(0, size);
    uint8_t* rx = rx_slot(0, size);
    post_recv(rx, size, &rx_ctx_[0], false);
    post_send(tx, size, nullptr, false);
    double total = 0, t0 = sample_s();
    for (uint64_t k = 0; k < iters; ++k) {
      if (k + 1 < iters) post_recv(rx, size, &rx_ctx_[(k + 1) & 1], false);
      wait_rx_inject("the reply");
      if (k + 1 < iters) post_send(tx, size, nullptr, false);
      double t1 = sample_s();  // after the send: see the comment above
      samples.add((t1 - t0) * 0.5e6);
      total += t1 - t0;
      t0 = t1;
    }
    rx_done_ = iters;
    r.total_s = total;
    r.ops = 2 * iters;  // one-way transfers
    r.iters = iters;
    return r;
  }
  phase_result r;
  sample_sink samples(r.samples_us, iters);
  uint8_t* tx = tx_slot(0, size);
  uint8_t* rx = rx_slot(0, size);
  const bool check = cfg_.check;
  post_recv(rx, size, &rx_ctx_[0], false);
  double total = 0;
  double t0 = sample_s();
  for (uint64_t k = 0; k < iters; ++k) {
    if (check) [[unlikely]] {
      fill_pattern(tx, size, k, side_initiator);
      t0 = sample_s();
    }
    post_send(tx, size, &tx_ctx_[0], false);
    if (k + 1 < iters) post_recv(rx, size, &rx_ctx_[(k + 1) & 1], false);
    spin_until([&] { return rx_done_ > k && tx_done_ > k; }, "the reply");
    double t1 = sample_s();
    samples.add((t1 - t0) * 0.5e6);
    total += t1 - t0;
    t0 = t1;
    if (check) [[unlikely]] {
      uint64_t got = rx_len_[k & 1];
      if (got != size)
        fail("--check: received " + std::to_string(got) + " bytes, expected " + std::to_string(size));
      verify_pattern(rx, size, k, side_responder, "received");
    }
  }
  r.total_s = total;
  r.ops = 2 * iters;  // one-way transfers
  r.iters = iters;
  return r;
}

// serve() has posted the receives for messages 0 and 1.
void fabric_session::pingpong_responder(uint64_t size, uint64_t iters) {
  if (lean_pingpong(size)) {
    uint8_t* tx = tx_slot(0, size);
    uint8_t* rx = rx_slot(0, size);
    for (uint64_t k = 0; k < iters; ++k) {
      wait_rx_inject("the next message");
      post_send(tx, size, nullptr, false);
      if (k + 2 < iters) post_recv(rx, size, &rx_ctx_[k & 1], false);
    }
    rx_done_ = iters;
    return;
  }
  uint8_t* tx = tx_slot(0, size);
  uint8_t* rx = rx_slot(0, size);
  const bool check = cfg_.check;
  for (uint64_t k = 0; k < iters; ++k) {
    // message k, and the completion of reply k-1 (its context is reused)
    spin_until([&] { return rx_done_ > k && tx_done_ >= k; }, "the next message");
    if (check) [[unlikely]] {
      uint64_t got = rx_len_[k & 1];
      if (got != size)
        fail("--check: received " + std::to_string(got) + " bytes, expected " + std::to_string(size));
      verify_pattern(rx, size, k, side_initiator, "received");
      fill_pattern(tx, size, k, side_responder);
    }
    post_send(tx, size, &tx_ctx_[0], false);
    if (k + 2 < iters) post_recv(rx, size, &rx_ctx_[k & 1], false);
  }
  spin_until([&] { return tx_done_ >= iters; }, "a send completion");
}

phase_result fabric_session::stream_initiator(uint64_t size, uint64_t iters, uint64_t w) {
  phase_result r;
  uint64_t batches = iters / w;
  sample_sink samples(r.samples_us, batches);
  double total = 0;
  for (uint64_t b = 0; b < batches; ++b) {
    post_recv(ack_rx_, ack_len, &ack_rx_ctx_, true);
    if (cfg_.check)
      for (uint64_t i = 0; i < w; ++i) fill_pattern(tx_slot(i, size), size, b * w + i, side_initiator);
    double t0 = sample_s();
    for (uint64_t i = 0; i < w; ++i) post_send(tx_slot(i, size), size, &tx_ctx_[i], false);
    uint64_t want_tx = (b + 1) * w;
    wait_for([&] { return tx_done_ >= want_tx && ack_rx_done_ > b; }, "the receiver's acknowledgement");
    double t1 = sample_s();
    samples.add((t1 - t0) * 1e6 / double(w));
    total += t1 - t0;
  }
  r.total_s = total;
  r.ops = batches * w;
  r.iters = r.ops;
  return r;
}

void fabric_session::stream_responder(uint64_t size, uint64_t iters, uint64_t w) {
  uint64_t batches = iters / w;
  for (uint64_t b = 0; b < batches; ++b) {
    uint64_t want = (b + 1) * w;
    wait_for([&] { return rx_done_ >= want; }, "data");
    if (cfg_.check)
      for (uint64_t i = 0; i < w; ++i) {
        if (rx_len_[i] != size)
          fail("--check: received " + std::to_string(rx_len_[i]) + " bytes, expected " +
               std::to_string(size));
        verify_pattern(rx_slot(i, size), size, b * w + i, side_initiator, "received");
      }
    if (b + 1 < batches)
      for (uint64_t i = 0; i < w; ++i) post_recv(rx_slot(i, size), size, &rx_ctx_[i], false);
    post_send(ack_tx_, ack_len, &ack_tx_ctx_, true);
    wait_for([&] { return tx_done_ > b; }, "an acknowledgement's send completion");
  }
}

phase_result fabric_session::rma_initiator(uint64_t size, uint64_t iters, uint64_t w) {
  phase_result r;
  uint64_t batches = iters / w;
  sample_sink samples(r.samples_us, batches);
  bool write = test_->fam == family::write;
  double total = 0;
  for (uint64_t b = 0; b < batches; ++b) {
    uint64_t base = b * w;
    if (cfg_.check) {
      if (write) {
        for (uint64_t i = 0; i < w; ++i) fill_pattern(tx_slot(i, size), size, base + i, side_initiator);
      } else {
        ctl_.send(ctl_type::fill, base, w, size);
        ctl_.expect(ctl_type::ack);
      }
    }
    double t0 = sample_s();
    for (uint64_t i = 0; i < w; ++i) post_rma(i, size);
    uint64_t want = (b + 1) * w;
    wait_for([&] { return tx_done_ >= want; }, write ? "RMA write completions" : "RMA read completions");
    double t1 = sample_s();
    samples.add((t1 - t0) * 1e6 / double(w));
    total += t1 - t0;
    if (cfg_.check) {
      if (write) {
        ctl_.send(ctl_type::verify, base, w, size);
        ctl_.expect(ctl_type::ack);
      } else {
        for (uint64_t i = 0; i < w; ++i)
          verify_pattern(rx_slot(i, size), size, base + i, side_responder, "read");
      }
    }
  }
  ctl_.send(ctl_type::end);
  ctl_.expect(ctl_type::done);
  r.total_s = total;
  r.ops = batches * w;
  r.iters = r.ops;
  return r;
}

phase_result fabric_session::atomic_initiator(uint64_t size, uint64_t iters, uint64_t w) {
  phase_result r;
  uint64_t count = size / 8;
  uint64_t batches = iters / w;
  sample_sink samples(r.samples_us, batches);
  std::vector<uint64_t> expect(count), got(w);
  for (uint64_t j = 0; j < count; ++j) expect[j] = atomic_seed(j);
  bool lat = test_->latency;
  double total = 0;
  for (uint64_t b = 0; b < batches; ++b) {
    for (uint64_t i = 0; i < w; ++i) {
      uint64_t seq = b * w + i;
      uint64_t* op = operand_ + i * atomic_cap_;
      uint64_t* cmp = compare_ + i * atomic_cap_;
      for (uint64_t j = 0; j < count; ++j) {
        if (cfg_.cswap) {
          cmp[j] = expect[j];
          op[j] = lat ? mix(seq, j) : expect[j];  // in flight together: keep the value
        } else {
          op[j] = lat ? (mix(seq, j) & 0xffff) + 1 : 1;
        }
      }
    }
    double t0 = sample_s();
    for (uint64_t i = 0; i < w; ++i) post_atomic(i, count);
    uint64_t want = (b + 1) * w;
    wait_for([&] { return tx_done_ >= want; }, "atomic completions");
    double t1 = sample_s();
    samples.add((t1 - t0) * 1e6 / double(w));
    total += t1 - t0;
    for (uint64_t j = 0; j < count; ++j) {
      if (cfg_.check) {
        for (uint64_t i = 0; i < w; ++i) got[i] = result_[i * atomic_cap_ + j];
        if (!cfg_.cswap && !lat) std::sort(got.begin(), got.end());
        for (uint64_t i = 0; i < w; ++i) {
          uint64_t want_v = (!cfg_.cswap && !lat) ? expect[j] + i : expect[j];
          if (got[i] != want_v) {
            char buf[200];
            snprintf(buf, sizeof buf,
                     "--check: atomic %s returned 0x%llx for element %llu of batch "
                     "%llu, expected 0x%llx",
                     cfg_.cswap ? "compare-swap" : "fetch-add", (unsigned long long)got[i],
                     (unsigned long long)j, (unsigned long long)b, (unsigned long long)want_v);
            fail(buf);
          }
        }
      }
      if (cfg_.cswap)
        expect[j] = operand_[j];  // slot 0 (lat: the new value; rate: unchanged)
      else
        expect[j] += lat ? operand_[j] : w;
    }
  }
  ctl_.send(ctl_type::end);
  ctl_msg done = ctl_.expect(ctl_type::done);
  if (cfg_.check) {
    uint64_t sum = 0, x = 0;
    for (uint64_t v : expect) {
      sum += v;
      x ^= v;
    }
    if (done.a != sum || done.b != x)
      fail("--check: the responder's atomic target does not hold the expected final value");
  }
  r.total_s = total;
  r.ops = batches * w;
  r.iters = r.ops;
  return r;
}

// RMA and atomic targets only make progress and answer check requests.
void fabric_session::passive_responder(uint64_t size) {
  (void)size;
  unsigned spins = 0;
  double last = 0;
  for (;;) {
    progress();
    if ((++spins & 63) != 0) continue;
    double t = now_s();
    if (t - last < 50e-6) continue;
    last = t;
    if (!ctl_.readable()) continue;
    ctl_msg m = ctl_.recv();
    switch (ctl_type(m.type)) {
      case ctl_type::fill:
        for (uint64_t i = 0; i < m.b; ++i) fill_pattern(tx_slot(i, m.c), m.c, m.a + i, side_responder);
        ctl_.send(ctl_type::ack);
        break;
      case ctl_type::verify:
        for (uint64_t i = 0; i < m.b; ++i)
          verify_pattern(rx_slot(i, m.c), m.c, m.a + i, side_initiator, "written");
        ctl_.send(ctl_type::ack);
        break;
      case ctl_type::end:
        return;
      default:
        fail("control protocol error: unexpected message " + std::to_string(m.type));
    }
  }
}

// Collectives: `iters` operations, one at a time, the same on both sides
// (each waits for its own completion). An allreduce sums size / 8 uint64;
// with --check operation k's inputs are k + j + side and every result
// element must be 2 (k + j) + 1.
phase_result fabric_session::coll_loop(uint64_t size, uint64_t iters) {
  phase_result r;
  sample_sink samples(r.samples_us, initiator_ ? iters : 0);
  const bool barrier = std::strcmp(test_->name, "barrier_lat") == 0;
  const uint64_t count = size / 8;
  auto* in = reinterpret_cast<uint64_t*>(tx_area_);
  auto* out = reinterpret_cast<uint64_t*>(rx_area_);
  const uint64_t side = initiator_ ? 0 : 1;
  double total = 0, t0 = sample_s();
  for (uint64_t k = 0; k < iters; ++k) {
    if (cfg_.check && !barrier) [[unlikely]] {
      for (uint64_t j = 0; j < count; ++j) in[j] = k + j + side;
      t0 = sample_s();
    }
    const uint64_t want = tx_done_ + 1;
    ssize_t rc;
    idle_state st;
    for (;;) {
      rc = barrier ? fi_barrier(ep_, coll_addr_, &tx_ctx_[0])
                   : fi_allreduce(ep_, in, count, desc_, out, desc_, coll_addr_, FI_UINT64, FI_SUM, 0, &tx_ctx_[0]);
      if (rc != -FI_EAGAIN) break;
      if (progress() == 0) idle(st, "room to start a collective");
    }
    if (rc) fail(fi_err(barrier ? "fi_barrier" : "fi_allreduce", rc));
    spin_until([&] { return tx_done_ >= want; }, "the collective's completion");
    const double t1 = sample_s();
    if (initiator_) samples.add((t1 - t0) * 1e6);
    total += t1 - t0;
    t0 = t1;
    if (cfg_.check && !barrier) [[unlikely]]
      for (uint64_t j = 0; j < count; ++j)
        if (out[j] != 2 * (k + j) + 1)
          fail("--check: allreduce element " + std::to_string(j) + " of operation " + std::to_string(k) + " is " +
               std::to_string(out[j]) + ", expected " + std::to_string(2 * (k + j) + 1));
  }
  r.total_s = total;
  r.ops = iters;
  r.iters = iters;
  return r;
}

phase_result fabric_session::run_phase(uint64_t size, uint64_t iters) {
  uint64_t w = window_at(size);
  iters = std::max<uint64_t>(1, (iters + w - 1) / w) * w;
  if (test_->fam == family::coll && size % 8 != 0) fail("collective sizes must be multiples of 8 (uint64)");
  if (test_->fam == family::atomic && (size % 8 != 0 || size / 8 > atomic_cap_))
    fail("atomic size must be a multiple of 8 within the buffers");
  if (size > area_len_) fail("size larger than the buffers");
  tx_done_ = rx_done_ = ack_rx_done_ = 0;
  ctl_.send(ctl_type::run, size, iters, w);
  ctl_.expect(ctl_type::ready);
  switch (test_->fam) {
    case family::msg:
    case family::tagged: {
      phase_result r = test_->latency ? pingpong_initiator(size, iters) : stream_initiator(size, iters, w);
      ctl_.expect(ctl_type::done);
      return r;
    }
    case family::write:
    case family::read:
      return rma_initiator(size, iters, w);
    case family::atomic:
      return atomic_initiator(size, iters, w);
    case family::coll: {
      phase_result r = coll_loop(size, iters);
      ctl_.expect(ctl_type::done);
      return r;
    }
  }
  fail("unreachable");
}

void fabric_session::finish() {
  ctl_.send(ctl_type::bye);
}

void fabric_session::serve() {
  for (;;) {
    ctl_msg m = ctl_.recv();
    if (m.type == uint32_t(ctl_type::bye)) return;
    if (m.type != uint32_t(ctl_type::run)) fail("control protocol error: expected run or bye");
    uint64_t size = m.a, iters = m.b, w = m.c;
    if (size == 0 || size > area_len_ || w == 0 || w > cfg_.window || iters % w != 0)
      fail("control protocol error: bad run parameters");
    tx_done_ = rx_done_ = ack_rx_done_ = 0;
    uint64_t sum = 0, x = 0;
    switch (test_->fam) {
      case family::msg:
      case family::tagged:
        if (test_->latency) {
          post_recv(rx_slot(0, size), size, &rx_ctx_[0], false);
          if (iters > 1) post_recv(rx_slot(0, size), size, &rx_ctx_[1], false);
          ctl_.send(ctl_type::ready);
          pingpong_responder(size, iters);
        } else {
          for (uint64_t i = 0; i < w; ++i) post_recv(rx_slot(i, size), size, &rx_ctx_[i], false);
          ctl_.send(ctl_type::ready);
          stream_responder(size, iters, w);
        }
        break;
      case family::write:
      case family::read:
        ctl_.send(ctl_type::ready);
        passive_responder(size);
        break;
      case family::atomic: {
        uint64_t count = size / 8;
        if (count > atomic_cap_) fail("control protocol error: atomic count too large");
        for (uint64_t j = 0; j < count; ++j) atomic_target_[j] = atomic_seed(j);
        ctl_.send(ctl_type::ready);
        passive_responder(size);
        for (uint64_t j = 0; j < count; ++j) {
          sum += atomic_target_[j];
          x ^= atomic_target_[j];
        }
        break;
      }
      case family::coll:
        ctl_.send(ctl_type::ready);
        coll_loop(size, iters);
        break;
    }
    ctl_.send(ctl_type::done, sum, x);
  }
}

}  // namespace weft_perf
