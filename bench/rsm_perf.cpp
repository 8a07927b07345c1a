// SPDX-License-Identifier: BSD-3-Clause
// rsm-perf: the RSM face's costs beside the fi_* operations it issues, in
// one run. A target process exports an RSM segment and, for the baseline,
// registers the same kind of memory on a plain libfabric endpoint opened with
// the very attributes libweft_rsm uses for its data path (RDM, FI_THREAD_DOMAIN,
// FI_MR_VIRT_ADDR|PROV_KEY|ALLOCATED); the initiator times, round after
// round and alternately:
//   fi_writemsg(FI_DELIVERY_COMPLETE) + its completion  vs  rsm_memseg_import_put
//   fi_read + its completion                             vs  rsm_memseg_import_get
// at 8 bytes (latency of one synchronous operation) and 1 MiB (bandwidth),
// and load/store through an rsm_memseg_import_map'ed segment. Both sides of
// each pair move the same bytes to the same kind of memory; the ratio is
// RSM time over fi_* time (1.00 = no cost added). Usage: docs/rsm.md.
#include <dlfcn.h>
#include <getopt.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rsmapi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tool_util.h"

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace {

struct options {
  std::string ctl = "shm";
  std::string mem = "heap";  // target memory: heap (private) or memfd (shareable)
  int rounds = 5;
  int lat_iters = 100000;
  int bw_iters = 1000;
  double time = 0.25;  // seconds at most per measurement
  int cpu_initiator = 0, cpu_target = 1;
  bool check = false;
  bool pin = true;
  bool busy_target = false;
};
options opt;

constexpr size_t big = 1 << 20;
constexpr size_t seg_size = 2 * big;

// Shared between the two processes (an anonymous shared mapping made before fork).
struct shared {
  std::atomic<int> ready{0}, done{0};
  std::atomic<int> failed{0};
  uint32_t segid = 0;
  uint64_t raw_key = 0, raw_base = 0;
  size_t raw_addr_len = 0;
  uint8_t raw_addr[512];
};
shared* sh;

// The completion level libweft_rsm asks for on puts (WEFT_RSM_COMPLETION).
uint64_t put_completion() {
  const char* v = getenv("WEFT_RSM_COMPLETION");
  return v && !strcmp(v, "transmit") ? FI_TRANSMIT_COMPLETE : FI_DELIVERY_COMPLETE;
}

double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

// err: an RSMERR_* code (> 0), a -FI_E* code (< 0), or -1 after a system
// call (errno tells).
[[noreturn]] void die(const char* what, int err) {
  if (err == -1 && errno)
    fprintf(stderr, "rsm-perf: %s: %s\n", what, strerror(errno));
  else if (err < 0)
    fprintf(stderr, "rsm-perf: %s: %s: %s\n", what, tool_fi_errname(err), fi_strerror(-err));
  else
    fprintf(stderr, "rsm-perf: %s: %s: %s\n", what, rsm_errname(err) ? rsm_errname(err) : "RSMERR_?",
            rsm_strerror(err));
  if (sh) sh->failed = 1;
  exit(1);
}

void pin_to(int cpu) {
  if (!opt.pin || (sysconf(_SC_NPROCESSORS_ONLN) < 2 && cpu != 0)) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

void* alloc_mem(size_t len, bool shareable) {
  void* p;
  if (shareable) {
    int fd = memfd_create("rsm-perf", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(len))) die("memfd", -1);
    p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  } else {
    p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  if (p == MAP_FAILED) die("mmap", -1);
  memset(p, 0x11, len);
  return p;
}

// ---------------------------------------------------------------- the plain libfabric side
// The attributes libweft_rsm's data path asks for (src/rsm/controller.cpp).
struct raw {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* mr = nullptr;
  fi_context2 ctx;

  // target: progressed like the RSM service endpoint (a CQ with a wait fd);
  // otherwise an initiator like the RSM data endpoint (no wait object).
  void open(bool target) {
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->fabric_attr->prov_name = strdup(opt.ctl.c_str());
    bool tcp = opt.ctl == "tcp";
    int r = fi_getinfo(FI_VERSION(1, 11), tcp ? "127.0.0.1" : nullptr, nullptr, tcp ? FI_SOURCE : 0, hints,
                       &info);
    fi_freeinfo(hints);
    if (r) die("fi_getinfo", r);
    if ((r = fi_fabric(info->fabric_attr, &fabric, nullptr))) die("fi_fabric", r);
    if ((r = fi_domain(fabric, info, &domain, nullptr))) die("fi_domain", r);
    fi_av_attr aa{};
    if ((r = fi_av_open(domain, &aa, &av, nullptr))) die("fi_av_open", r);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    ca.wait_obj = target ? FI_WAIT_FD : FI_WAIT_NONE;
    if (fi_cq_open(domain, &ca, &cq, nullptr)) {
      ca.wait_obj = FI_WAIT_NONE;
      if ((r = fi_cq_open(domain, &ca, &cq, nullptr))) die("fi_cq_open", r);
    }
    if ((r = fi_endpoint(domain, info, &ep, nullptr))) die("fi_endpoint", r);
    if ((r = fi_ep_bind(ep, &av->fid, 0))) die("fi_ep_bind", r);
    if ((r = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV))) die("fi_ep_bind", r);
    if ((r = fi_enable(ep))) die("fi_enable", r);
  }
  void close() {
    if (mr) fi_close(&mr->fid);
    fi_close(&ep->fid);
    fi_close(&cq->fid);
    fi_close(&av->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
  }
  // One operation and its completion, as libweft_rsm issues it.
  void op(bool write, void* buf, size_t len, fi_addr_t fa, uint64_t addr, uint64_t key) {
    ssize_t r;
    for (;;) {
      if (write) {
        iovec iov{buf, len};
        void* desc = nullptr;
        fi_rma_iov riov{addr, len, key};
        fi_msg_rma msg{&iov, &desc, 1, fa, &riov, 1, &ctx, 0};
        r = fi_writemsg(ep, &msg, FI_COMPLETION | put_completion());
      } else {
        r = fi_read(ep, buf, len, nullptr, fa, addr, key, &ctx);
      }
      if (r != -FI_EAGAIN) break;
      fi_cq_read(cq, nullptr, 0);
    }
    if (r) die("fi_writemsg/fi_read", static_cast<int>(r));
    fi_cq_entry e;
    for (;;) {
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) return;
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        die("completion", -err.err);
      }
    }
  }
};

// ---------------------------------------------------------------- target
int target() {
  pin_to(opt.cpu_target);
  bool shareable = opt.mem == "memfd";
  // The RSM side.
  rsmapi_controller_handle_t ctl;
  if (int r = rsm_get_controller(const_cast<char*>(opt.ctl.c_str()), &ctl)) die("rsm_get_controller", r);
  void* seg = alloc_mem(seg_size, shareable);
  rsm_memseg_export_handle_t ex;
  if (int r = rsm_memseg_export_create(ctl, &ex, seg, seg_size, 0)) die("rsm_memseg_export_create", r);
  rsm_memseg_id_t id = 0;
  if (int r = rsm_memseg_export_publish(ex, &id, nullptr, 0)) die("rsm_memseg_export_publish", r);
  // The plain side: the same kind of memory, registered for remote access.
  raw t;
  t.open(true);
  void* mem = alloc_mem(seg_size, shareable);
  uint64_t key = t.info->domain_attr->mr_mode & FI_MR_PROV_KEY ? 0 : 0x5eedull;
  if (int r = fi_mr_reg(t.domain, mem, seg_size, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, key, 0, &t.mr, nullptr))
    die("fi_mr_reg", r);
  sh->segid = id;
  sh->raw_key = fi_mr_key(t.mr);
  sh->raw_base = t.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? reinterpret_cast<uint64_t>(mem) : 0;
  sh->raw_addr_len = sizeof sh->raw_addr;
  if (int r = fi_getname(&t.ep->fid, sh->raw_addr, &sh->raw_addr_len)) die("fi_getname", r);
  sh->ready = 1;
  // Progress the plain endpoint the way libweft_rsm's service thread
  // progresses the RSM segment's (src/rsm/service.cpp): keep reading the CQ
  // for a while after activity, otherwise sleep on its wait fd where the
  // provider signals one (tcp) or for a millisecond. Same target conditions
  // on both sides; --busy-target makes this side poll without pause instead.
  int wait_fd = -1;
  if (opt.ctl == "tcp") fi_control(&t.cq->fid, FI_GETWAIT, &wait_fd);
  double last = now_s();
  while (!sh->done) {
    fi_cq_entry e;
    if (fi_cq_read(t.cq, &e, 1) != -FI_EAGAIN) last = now_s();
    if (opt.busy_target || now_s() - last < 100e-6) continue;
    fid* f = &t.cq->fid;
    if (wait_fd >= 0 && fi_trywait(t.fabric, &f, 1) == 0) {
      pollfd pf{wait_fd, POLLIN, 0};
      if (poll(&pf, 1, 20) > 0) last = now_s();
    } else if (wait_fd < 0) {
      pollfd none{-1, 0, 0};
      poll(&none, 1, 1);
    }
  }
  t.close();
  rsm_memseg_export_destroy(ex);
  rsm_release_controller(ctl);
  return 0;
}

// ---------------------------------------------------------------- initiator
struct result {
  std::vector<double> raw, rsm;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int initiator(pid_t child) {
  pin_to(opt.cpu_initiator);
  double t_wait = now_s();
  while (!sh->ready) {
    if (sh->failed || now_s() - t_wait > 30) die("the target did not come up", -1);
    usleep(1000);
  }
  rsmapi_controller_handle_t ctl;
  if (int r = rsm_get_controller(const_cast<char*>(opt.ctl.c_str()), &ctl)) die("rsm_get_controller", r);
  rsm_memseg_import_handle_t im;
  if (int r = rsm_memseg_import_connect(ctl, 1, sh->segid, RSM_PERM_RDWR, &im))
    die("rsm_memseg_import_connect", r);
  rsmapi_barrier_t bar;
  if (int r = rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, &bar))
    die("rsm_memseg_import_init_barrier", r);
  raw t;
  t.open(false);
  fi_addr_t fa;
  if (fi_av_insert(t.av, sh->raw_addr, 1, &fa, 0, nullptr) != 1) die("fi_av_insert", -1);
  void* buf = alloc_mem(big, false);
  void* back = alloc_mem(big, false);
  void* mapped = nullptr;
  bool can_map = rsm_memseg_import_map(im, &mapped, RSM_MAP_NONE, RSM_PERM_RDWR, 0, seg_size) == RSM_SUCCESS;

  const char* names[] = {"put 8 B latency (us)", "get 8 B latency (us)", "put 1 MiB bandwidth (MB/s)",
                         "get 1 MiB bandwidth (MB/s)"};
  result res[4];
  std::vector<double> st8, ld8, cpy_to, cpy_from;
  for (int round = 0; round < opt.rounds; round++) {
    for (int m = 0; m < 4; m++) {
      bool write = m % 2 == 0;
      size_t len = m < 2 ? 8 : big;
      int iters = m < 2 ? opt.lat_iters : opt.bw_iters;
      // Plain libfabric first, then RSM, then compare. Each runs `iters`
      // operations or for opt.time seconds, whichever ends first (a provider
      // whose target must progress each operation is slow), looking at the
      // clock every 16 operations on both sides alike.
      auto run = [&](auto&& one) {
        for (int i = 0; i < std::max(1, iters / 20); i++) one(0);  // warm up
        double t0 = now_s(), el = 0;
        int n = 0;
        while (n < iters) {
          for (int k = 0; k < 16 && n < iters; k++, n++) one(n);
          if ((el = now_s() - t0) > opt.time) break;
        }
        return std::pair<double, int>(now_s() - t0, n);
      };
      auto [raw_s, raw_n] =
          run([&](int i) { t.op(write, buf, len, fa, sh->raw_base + (i & 1) * len, sh->raw_key); });
      auto [rsm_s, rsm_n] = run([&](int i) {
        off_t off = static_cast<off_t>((i & 1) * len);
        int r = write ? rsm_memseg_import_put(im, off, buf, len) : rsm_memseg_import_get(im, off, buf, len);
        if (r) die("rsm_memseg_import_put/get", r);
      });
      if (m < 2) {
        res[m].raw.push_back(raw_s / raw_n * 1e6);
        res[m].rsm.push_back(rsm_s / rsm_n * 1e6);
      } else {
        res[m].raw.push_back(static_cast<double>(len) * raw_n / raw_s / 1e6);
        res[m].rsm.push_back(static_cast<double>(len) * rsm_n / rsm_s / 1e6);
      }
    }
    if (can_map) {
      // Load/store through the mapping.
      auto* p = static_cast<volatile uint64_t*>(mapped);
      double t0 = now_s();
      for (int i = 0; i < opt.lat_iters; i++) p[(i & 7) * 8] = static_cast<uint64_t>(i);
      st8.push_back((now_s() - t0) / opt.lat_iters * 1e9);
      uint64_t sink = 0;
      t0 = now_s();
      for (int i = 0; i < opt.lat_iters; i++) sink += p[(i & 7) * 8];
      ld8.push_back((now_s() - t0) / opt.lat_iters * 1e9);
      (void)sink;
      t0 = now_s();
      for (int i = 0; i < opt.bw_iters; i++) memcpy(mapped, buf, big);
      cpy_to.push_back(static_cast<double>(big) * opt.bw_iters / (now_s() - t0) / 1e6);
      t0 = now_s();
      for (int i = 0; i < opt.bw_iters; i++) memcpy(back, mapped, big);
      cpy_from.push_back(static_cast<double>(big) * opt.bw_iters / (now_s() - t0) / 1e6);
    }
  }
  if (opt.check) {
    // The bytes arrive: a pattern through put, back through get and the map.
    auto* b = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < big; i++) b[i] = static_cast<uint8_t>(i * 7 + 3);
    if (int r = rsm_memseg_import_put(im, 4096, buf, big)) die("check put", r);
    memset(back, 0, big);
    if (int r = rsm_memseg_import_get(im, 4096, back, big)) die("check get", r);
    if (memcmp(buf, back, big)) die("check: get returned other bytes", -1);
    if (can_map && memcmp(static_cast<char*>(mapped) + 4096, buf, big))
      die("check: the mapping shows other bytes", -1);
  }

  Dl_info dl{};
  dladdr(reinterpret_cast<void*>(&fi_version), &dl);
  printf(
      "rsm-perf: libfabric %s (%u.%u), controller %s, target memory %s, %d rounds, puts %s-complete, "
      "plain target %s\n",
      dl.dli_fname ? dl.dli_fname : "?", FI_MAJOR(fi_version()), FI_MINOR(fi_version()), opt.ctl.c_str(),
      opt.mem.c_str(), opt.rounds, put_completion() == FI_DELIVERY_COMPLETE ? "delivery" : "transmit",
      opt.busy_target ? "polling without pause" : "progressed like the RSM one");
  printf("%-30s %12s %12s %10s   %s\n", "metric", "fi_*", "RSM", "RSM cost", "cost per round");
  for (int m = 0; m < 4; m++) {
    std::vector<double> ratio;
    for (size_t r = 0; r < res[m].raw.size(); r++)
      ratio.push_back(m < 2 ? res[m].rsm[r] / res[m].raw[r] : res[m].raw[r] / res[m].rsm[r]);
    std::string per;
    for (double x : ratio) per += std::to_string(x).substr(0, 4) + " ";
    printf("%-30s %12.3f %12.3f %10.3f   %s\n", names[m], median(res[m].raw), median(res[m].rsm),
           median(ratio), per.c_str());
  }
  if (can_map) {
    printf("%-30s %12s %12.1f\n", "map store 8 B (ns)", "-", median(st8));
    printf("%-30s %12s %12.1f\n", "map load 8 B (ns)", "-", median(ld8));
    printf("%-30s %12s %12.0f\n", "map memcpy to 1 MiB (MB/s)", "-", median(cpy_to));
    printf("%-30s %12s %12.0f\n", "map memcpy from 1 MiB (MB/s)", "-", median(cpy_from));
  } else {
    printf("%-30s not mappable (target memory %s, or another node)\n", "map", opt.mem.c_str());
  }
  printf("RSM cost = RSM time / fi_* time for the same bytes (latency ratio; inverse bandwidth ratio)\n");
  fflush(stdout);
  if (can_map) rsm_memseg_import_unmap(im);
  rsm_memseg_import_destroy_barrier(&bar);
  rsm_memseg_import_disconnect(im);
  t.close();
  rsm_release_controller(ctl);
  sh->done = 1;
  int st = 0;
  waitpid(child, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

const char usage_text[] =
    "usage: rsm-perf [--ctl shm|tcp] [--mem heap|memfd] [--rounds N] [--lat-iters N] [--bw-iters N]\n"
    "                [--time S] [--check] [--no-pin] [--cpus A,B] [--busy-target]\n"
    "RSM's put/get/map beside the fi_* operations underneath, in two processes on this host\n"
    "(docs/rsm.md). Run with LD_LIBRARY_PATH=build/lib (weft's libfabric) or build/lib/rsm-only\n"
    "(Debian's).\n"
    "  --ctl shm|tcp      the RSM controller, i.e. the libfabric provider (default shm)\n"
    "  --mem heap|memfd   the target's memory: private heap or a shareable memfd (default heap)\n"
    "  --rounds N         alternating rounds; medians are printed (default 5)\n"
    "  --lat-iters N      operations per 8-byte latency measurement (default 100000)\n"
    "  --bw-iters N       operations per 1 MiB bandwidth measurement (default 1000)\n"
    "  --time S           at most S seconds per measurement (default 0.25)\n"
    "  --check            verify the data moved\n"
    "  --no-pin           do not pin the two processes to CPUs\n"
    "  --cpus A,B         the initiator's and the target's CPU (default 0,1)\n"
    "  --busy-target      the target spins in its progress loop instead of sleeping\n"
    "  -h, --help         this text\n";

[[noreturn]] void usage_error(const char* fmt, const char* arg) {
  tool_usage_error("rsm-perf", fmt, arg);
}

// A whole positive number, or the one-line usage error.
int positive(const char* opt_name, const char* arg) {
  long v;
  if (!tool_parse_long(arg, 1, 1 << 30, &v)) usage_error("%s takes a positive number", opt_name);
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  static option longopts[] = {{"ctl", required_argument, nullptr, 'c'},
                              {"mem", required_argument, nullptr, 'm'},
                              {"rounds", required_argument, nullptr, 'r'},
                              {"lat-iters", required_argument, nullptr, 'l'},
                              {"bw-iters", required_argument, nullptr, 'b'},
                              {"check", no_argument, nullptr, 'k'},
                              {"no-pin", no_argument, nullptr, 'p'},
                              {"busy-target", no_argument, nullptr, 't'},
                              {"cpus", required_argument, nullptr, 'u'},
                              {"time", required_argument, nullptr, 'T'},
                              {"help", no_argument, nullptr, 'h'},
                              {nullptr, 0, nullptr, 0}};
  int ch;
  opterr = 0;
  while ((ch = getopt_long(argc, argv, ":h", longopts, nullptr)) != -1) {
    switch (ch) {
      case 'c':
        opt.ctl = optarg;
        break;
      case 'm':
        opt.mem = optarg;
        break;
      case 'r':
        opt.rounds = positive("--rounds", optarg);
        break;
      case 'l':
        opt.lat_iters = std::max(10, positive("--lat-iters", optarg));
        break;
      case 'b':
        opt.bw_iters = std::max(10, positive("--bw-iters", optarg));
        break;
      case 'k':
        opt.check = true;
        break;
      case 'p':
        opt.pin = false;
        break;
      case 't':
        opt.busy_target = true;
        break;
      case 'T': {
        char* end = nullptr;
        opt.time = strtod(optarg, &end);
        if (*end || !(opt.time > 0)) usage_error("--time takes a positive number of seconds, not '%s'", optarg);
        opt.time = std::max(0.001, opt.time);
        break;
      }
      case 'u':
        if (sscanf(optarg, "%d,%d", &opt.cpu_initiator, &opt.cpu_target) != 2)
          usage_error("--cpus takes two CPU numbers, e.g. 0,1 (not '%s')", optarg);
        break;
      case 'h':
        tool_help(usage_text);
      case ':':
        usage_error("option %s needs an argument", argv[optind - 1]);
      default:
        usage_error("unknown option %s", argv[optind - 1]);
    }
  }
  if (optind < argc) usage_error("unexpected argument '%s'", argv[optind]);
  if (opt.ctl != "shm" && opt.ctl != "tcp") usage_error("--ctl takes shm or tcp, not '%s'", opt.ctl.c_str());
  if (opt.mem != "heap" && opt.mem != "memfd") usage_error("--mem takes heap or memfd, not '%s'", opt.mem.c_str());
  void* p = mmap(nullptr, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die("mmap", -1);
  sh = new (p) shared;
  pid_t pid = fork();
  if (pid < 0) die("fork", -1);
  if (pid == 0) _exit(target());
  int rc = initiator(pid);
  return rc;
}
