// SPDX-License-Identifier: BSD-3-Clause
// weft-perf: latency, bandwidth and message rate over the public fi_* API.
//
// The same binary measures whichever libfabric.so.1 the dynamic loader picks
// (weft with LD_LIBRARY_PATH=build/lib, Debian's otherwise), and its first
// line of output says which file that was. See docs/weft-perf.md.
#include "perf_ctl.hpp"
#include "perf_fabric.hpp"
#include "tool_util.h"

#include <dlfcn.h>
#include <getopt.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace weft_perf;

namespace {

enum class run_mode { fork, server, client };
enum class out_format { table, csv, json };

struct cli {
  std::string prov = "shm";
  std::string domain;
  std::string src;
  std::string host;
  const test_desc* test = nullptr;
  std::vector<uint64_t> sizes;
  bool sizes_given = false;
  uint64_t iters = 0;
  uint32_t window = 64;
  uint16_t port = 47599;
  bool ep_msg = false;
  bool check = false;
  bool inject = true;
  bool memfd = false;
  bool reuse = false;
  uint32_t completion = 0;  // index into completion_levels
  bool cq_wait = false;
  bool cswap = false;
  bool pin = true;
  int cpu_a = -1, cpu_b = -1;
  double time_s = 0.2;
  double timeout_s = 5.0;
  run_mode mode = run_mode::fork;
  out_format fmt = out_format::table;
};

const char* usage_text =
    "usage: weft-perf [-p PROVIDER] [-e rdm|msg] [-t TEST] [-s SIZE | -s MIN:MAX]\n"
    "                 [-n ITERS] [-w WINDOW] [--check] [--csv | --json] [HOST]\n"
    "\n"
    "  no HOST, no --server   run both sides here: fork the peer, pin the two\n"
    "                         processes to different CPUs (the default)\n"
    "  --server               wait for one client on -P PORT, then serve it\n"
    "  HOST                   be the client of a weft-perf --server on HOST\n"
    "\n"
    "  -p PROVIDER      libfabric provider (default shm)\n"
    "  -d DOMAIN        domain name\n"
    "  -e rdm|msg       endpoint type (default rdm)\n"
    "  -t TEST          msg_lat msg_bw tagged_lat tagged_bw rate write_lat write_bw\n"
    "                   read_lat read_bw atomic_lat atomic_rate barrier_lat\n"
    "                   allreduce_lat allreduce_bw (default msg_lat)\n"
    "  -s SIZE|MIN:MAX  bytes, K/M suffixes; a range sweeps powers of two\n"
    "                   (default 1:4M; rate 8; atomics 8, a multiple of 8)\n"
    "  -n ITERS         operations per size (default: as many as fit --time)\n"
    "  -w WINDOW        operations in flight for *_bw, rate, atomic_rate (64)\n"
    "  -P PORT          control port for --server / HOST (default 47599)\n"
    "  --check          fill every buffer with a per-operation pattern and verify\n"
    "                   every byte received, written, read and every atomic result\n"
    "  --csv | --json   machine-readable output on stdout (notes go to stderr)\n"
    "  --cpus A[,B]     pin this process to CPU A and the forked peer to B\n"
    "                   (default: the first two CPUs allowed); --no-pin: don't\n"
    "  --no-inject      never use fi_inject (default: for sizes <= inject_size)\n"
    "  --mem heap|memfd buffers from the heap (default) or from a shared memfd\n"
    "                   sealed against shrinking (memory other processes can map)\n"
    "  --completion inject|transmit|delivery\n"
    "                   the sends' completion level (their default op_flags;\n"
    "                   fi_inject, which completes nothing, is then not used)\n"
    "  --reuse          every operation of a window uses the same buffer, as\n"
    "                   ucx_perftest does (default: one buffer per operation)\n"
    "  --cq spin|wait   busy-poll fi_cq_read (default) or block in fi_cq_sread\n"
    "  --op fadd|cswap  atomic operation on uint64 (default fadd)\n"
    "  --time SEC       target measuring time per size without -n (default 0.2)\n"
    "  --timeout SEC    give up when the peer is silent this long (default 5)\n"
    "  --src ADDR       fabric source address (default: 127.0.0.1 when forked)\n"
    "  -h, --help       this text\n";

[[noreturn]] void usage_error(const std::string& msg) {
  tool_usage_error("weft-perf", "%s", msg.c_str());
}

bool parse_u64(const std::string& s, uint64_t* out, bool suffixes) {
  if (s.empty() || !isdigit(static_cast<unsigned char>(s[0]))) return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (errno) return false;
  std::string rest(end);
  uint64_t mult = 1;
  if (suffixes && !rest.empty()) {
    char c = char(toupper(static_cast<unsigned char>(rest[0])));
    if (c == 'K')
      mult = 1ull << 10;
    else if (c == 'M')
      mult = 1ull << 20;
    else if (c == 'G')
      mult = 1ull << 30;
    else
      return false;
    rest.erase(0, 1);
    if (rest == "iB" || rest == "B" || rest == "ib" || rest == "b") rest.clear();
  }
  if (!rest.empty()) return false;
  if (v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

bool parse_sizes(const std::string& s, std::vector<uint64_t>* out) {
  constexpr uint64_t max_size = 1ull << 30;
  auto colon = s.find(':');
  uint64_t lo, hi;
  if (colon == std::string::npos) {
    if (!parse_u64(s, &lo, true) || lo == 0 || lo > max_size) return false;
    out->assign(1, lo);
    return true;
  }
  if (!parse_u64(s.substr(0, colon), &lo, true) || !parse_u64(s.substr(colon + 1), &hi, true)) return false;
  if (lo == 0 || hi < lo || hi > max_size) return false;
  out->clear();
  out->push_back(lo);
  for (uint64_t p = 1; p <= hi; p <<= 1)
    if (p > lo) out->push_back(p);
  if (out->back() != hi) out->push_back(hi);
  return true;
}

bool parse_double(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(s.c_str(), &end);
  if (errno || s.empty() || *end || !(v > 0) || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

cli parse_args(int argc, char** argv) {
  enum {
    o_check = 256,
    o_csv,
    o_json,
    o_server,
    o_fork,
    o_cpus,
    o_no_pin,
    o_no_inject,
    o_inject,
    o_cq,
    o_op,
    o_time,
    o_timeout,
    o_src,
    o_mem,
    o_reuse,
    o_completion
  };
  static const option longopts[] = {
      {"provider", required_argument, nullptr, 'p'},
      {"ep", required_argument, nullptr, 'e'},
      {"test", required_argument, nullptr, 't'},
      {"size", required_argument, nullptr, 's'},
      {"iters", required_argument, nullptr, 'n'},
      {"window", required_argument, nullptr, 'w'},
      {"port", required_argument, nullptr, 'P'},
      {"domain", required_argument, nullptr, 'd'},
      {"check", no_argument, nullptr, o_check},
      {"csv", no_argument, nullptr, o_csv},
      {"json", no_argument, nullptr, o_json},
      {"server", no_argument, nullptr, o_server},
      {"fork", no_argument, nullptr, o_fork},
      {"cpus", required_argument, nullptr, o_cpus},
      {"no-pin", no_argument, nullptr, o_no_pin},
      {"no-inject", no_argument, nullptr, o_no_inject},
      {"inject", required_argument, nullptr, o_inject},
      {"cq", required_argument, nullptr, o_cq},
      {"op", required_argument, nullptr, o_op},
      {"time", required_argument, nullptr, o_time},
      {"timeout", required_argument, nullptr, o_timeout},
      {"src", required_argument, nullptr, o_src},
      {"mem", required_argument, nullptr, o_mem},
      {"reuse", no_argument, nullptr, o_reuse},
      {"completion", required_argument, nullptr, o_completion},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  cli c;
  bool server = false, fork_flag = false, csv = false, json = false;
  std::string test_name = "msg_lat";
  opterr = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, ":p:e:t:s:n:w:P:d:h", longopts, nullptr)) != -1) {
    std::string arg = optarg ? optarg : "";
    uint64_t v = 0;
    switch (opt) {
      case 'p':
        c.prov = arg;
        break;
      case 'd':
        c.domain = arg;
        break;
      case 'e':
        if (arg == "rdm")
          c.ep_msg = false;
        else if (arg == "msg")
          c.ep_msg = true;
        else
          usage_error("-e takes rdm or msg, not '" + arg + "'");
        break;
      case 't':
        test_name = arg;
        break;
      case 's':
        if (!parse_sizes(arg, &c.sizes)) usage_error("bad size '" + arg + "' (e.g. 64, 4K, 1:4M)");
        c.sizes_given = true;
        break;
      case 'n':
        if (!parse_u64(arg, &c.iters, true) || c.iters == 0) usage_error("bad -n '" + arg + "'");
        break;
      case 'w':
        if (!parse_u64(arg, &v, true) || v == 0 || v > 65536) usage_error("bad -w '" + arg + "'");
        c.window = uint32_t(v);
        break;
      case 'P':
        if (!parse_u64(arg, &v, false) || v == 0 || v > 65535) usage_error("bad -P '" + arg + "'");
        c.port = uint16_t(v);
        break;
      case o_check:
        c.check = true;
        break;
      case o_csv:
        csv = true;
        break;
      case o_json:
        json = true;
        break;
      case o_server:
        server = true;
        break;
      case o_fork:
        fork_flag = true;
        break;
      case o_cpus: {
        auto comma = arg.find(',');
        uint64_t a = 0, b = 0;
        if (!parse_u64(arg.substr(0, comma), &a, false) || a > 4095 ||
            (comma != std::string::npos && (!parse_u64(arg.substr(comma + 1), &b, false) || b > 4095)))
          usage_error("bad --cpus '" + arg + "' (e.g. 0,1)");
        c.cpu_a = int(a);
        c.cpu_b = comma == std::string::npos ? -1 : int(b);
        break;
      }
      case o_no_pin:
        c.pin = false;
        break;
      case o_no_inject:
        c.inject = false;
        break;
      case o_inject:
        if (arg == "on")
          c.inject = true;
        else if (arg == "off")
          c.inject = false;
        else
          usage_error("--inject takes on or off");
        break;
      case o_reuse:
        c.reuse = true;
        break;
      case o_completion: {
        c.completion = 0;
        for (uint32_t i = 1; i < std::size(completion_levels); ++i)
          if (arg == completion_levels[i].name) c.completion = i;
        if (!c.completion) usage_error("--completion takes inject, transmit or delivery");
        break;
      }
      case o_mem:
        if (arg == "heap")
          c.memfd = false;
        else if (arg == "memfd")
          c.memfd = true;
        else
          usage_error("--mem takes heap or memfd");
        break;
      case o_cq:
        if (arg == "spin")
          c.cq_wait = false;
        else if (arg == "wait")
          c.cq_wait = true;
        else
          usage_error("--cq takes spin or wait");
        break;
      case o_op:
        if (arg == "fadd")
          c.cswap = false;
        else if (arg == "cswap")
          c.cswap = true;
        else
          usage_error("--op takes fadd or cswap");
        break;
      case o_time:
        if (!parse_double(arg, &c.time_s)) usage_error("bad --time '" + arg + "'");
        break;
      case o_timeout:
        if (!parse_double(arg, &c.timeout_s)) usage_error("bad --timeout '" + arg + "'");
        break;
      case o_src:
        c.src = arg;
        break;
      case 'h':
        tool_help(usage_text);
      case ':':
        usage_error(std::string("option ") + argv[optind - 1] + " needs an argument");
      default:
        usage_error(std::string("unknown option ") + (optind > 0 ? argv[optind - 1] : "?"));
    }
  }
  if (optind < argc) c.host = argv[optind++];
  if (optind < argc) usage_error(std::string("unexpected argument '") + argv[optind] + "'");
  if (csv && json) usage_error("--csv and --json exclude each other");
  if (c.reuse && c.check)
    usage_error(
        "--reuse and --check exclude each other (the operations of a window would overwrite one another)");
  c.fmt = csv ? out_format::csv : json ? out_format::json : out_format::table;
  c.test = find_test(test_name);
  if (!c.test) usage_error("unknown test '" + test_name + "'");
  if (int(server) + int(fork_flag) + int(!c.host.empty()) > 1)
    usage_error("choose one of --server, --fork and HOST");
  c.mode = server ? run_mode::server : !c.host.empty() ? run_mode::client : run_mode::fork;
  if (!c.sizes_given) parse_sizes(c.test->default_sizes, &c.sizes);
  if (c.test->fam == family::atomic || c.test->fam == family::coll) {
    std::vector<uint64_t> ok;
    for (uint64_t s : c.sizes)
      if (s >= 8 && s % 8 == 0) ok.push_back(s);
    if (ok.empty())
      usage_error(std::string(c.test->fam == family::atomic ? "atomic" : "collective") +
                  " tests need sizes that are multiples of 8 (uint64)");
    c.sizes = ok;
  }
  return c;
}

// ------------------------------------------------------------------ identity

std::string loaded_libfabric() {
  std::string path;
  if (void* h = dlopen("libfabric.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
    link_map* lm = nullptr;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) path = lm->l_name;
    dlclose(h);
  }
  if (path.empty()) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      auto pos = line.find('/');
      if (pos != std::string::npos && line.find("libfabric", pos) != std::string::npos) {
        path = line.substr(pos);
        break;
      }
    }
  }
  if (path.empty()) return "(unknown)";
  if (path[0] != '/') {
    // LD_LIBRARY_PATH=build/lib gives a relative name: make it absolute
    // without resolving the SONAME link (the name says what was asked for).
    auto slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    char buf[PATH_MAX];
    if (realpath(dir.c_str(), buf))
      path = std::string(buf) + path.substr(slash == std::string::npos ? 0 : slash);
  }
  return path;
}

// ------------------------------------------------------------------ CPUs

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
  return cpus;
}

void pin_to(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    fail("cannot pin to CPU " + std::to_string(cpu) + ": " + strerror(errno));
}

// ------------------------------------------------------------------ output

struct row {
  uint64_t size, iters;
  double med, p99, bw, rate;  // bw and rate from the median operation time
  double bw_mean, rate_mean;  // from the total time, like fi_pingpong
  double batched;             // the median of consecutive batches' means
};

// The median of the means of consecutive batches of samples (1,000 each,
// or a tenth of the samples when there are fewer than 10,000). One sample
// is one clock difference, and where the clock moves in steps (the TSC of
// some VMs: 10 ns) so does the samples' median; a batch's mean resolves
// below the step, and preemption spoils a batch, not the median.
double batched_median(const std::vector<double>& s) {
  if (s.empty()) return 0;
  const size_t batch = s.size() >= 10000 ? 1000 : std::max<size_t>(1, s.size() / 10);
  std::vector<double> means;
  for (size_t i = 0; i + batch <= s.size(); i += batch) {
    double sum = 0;
    for (size_t k = i; k < i + batch; ++k) sum += s[k];
    means.push_back(sum / double(batch));
  }
  size_t mid = means.size() / 2;
  std::nth_element(means.begin(), means.begin() + long(mid), means.end());
  return means[mid];
}

row summarize(uint64_t size, const phase_result& r) {
  row out{size, r.iters, 0, 0, 0, 0, 0, 0, batched_median(r.samples_us)};
  std::vector<double> s = r.samples_us;
  if (!s.empty()) {
    size_t mid = s.size() / 2;
    std::nth_element(s.begin(), s.begin() + long(mid), s.end());
    out.med = s[mid];
    if (s.size() % 2 == 0) {
      double lo = *std::max_element(s.begin(), s.begin() + long(mid));
      out.med = (out.med + lo) / 2;
    }
    size_t k = size_t(std::ceil(0.99 * double(s.size()))) - 1;
    std::nth_element(s.begin(), s.begin() + long(k), s.end());
    out.p99 = s[k];
  }
  // A busy-polling pair on a shared machine gets preempted now and then;
  // the median is what the transport does, the mean includes the scheduler.
  if (out.med > 0) {
    out.bw = double(size) / out.med;
    out.rate = 1.0 / out.med;
  }
  if (r.total_s > 0) {
    out.bw_mean = double(size) * double(r.ops) / r.total_s / 1e6;
    out.rate_mean = double(r.ops) / r.total_s / 1e6;
  }
  return out;
}

class printer {
public:
  explicit printer(out_format f) : fmt_(f) {}
  void header() {
    if (fmt_ == out_format::table)
      printf("%10s %12s %12s %12s %12s %11s\n", "size", "lat_us_med", "lat_us_p99", "bw_MBps", "rate_Mps",
             "iters");
    else if (fmt_ == out_format::csv)
      printf("size,lat_us_median,lat_us_p99,bw_MBps,rate_Mps,iters,bw_MBps_mean,rate_Mps_mean,lat_us_batched\n");
    else
      printf("[");
    fflush(stdout);
  }
  void add(const row& r) {
    if (fmt_ == out_format::table)
      printf("%10llu %12.2f %12.2f %12.1f %12.3f %11llu\n", (unsigned long long)r.size, r.med, r.p99, r.bw,
             r.rate, (unsigned long long)r.iters);
    else if (fmt_ == out_format::csv)
      printf("%llu,%.4f,%.4f,%.3f,%.6f,%llu,%.3f,%.6f,%.4f\n", (unsigned long long)r.size, r.med, r.p99, r.bw,
             r.rate, (unsigned long long)r.iters, r.bw_mean, r.rate_mean, r.batched);
    else
      printf(
          "%s\n  {\"size\": %llu, \"lat_us_median\": %.4f, \"lat_us_p99\": %.4f, "
          "\"bw_MBps\": %.3f, \"rate_Mps\": %.6f, \"iters\": %llu, "
          "\"bw_MBps_mean\": %.3f, \"rate_Mps_mean\": %.6f, \"lat_us_batched\": %.4f}",
          rows_ ? "," : "", (unsigned long long)r.size, r.med, r.p99, r.bw, r.rate,
          (unsigned long long)r.iters, r.bw_mean, r.rate_mean, r.batched);
    ++rows_;
    fflush(stdout);
  }
  void footer() {
    if (fmt_ == out_format::json) printf("\n]\n");
    fflush(stdout);
  }

private:
  out_format fmt_;
  int rows_ = 0;
};

FILE* note_stream(const cli& c) {
  return c.fmt == out_format::table ? stdout : stderr;
}

// ------------------------------------------------------------------ roles

wire_config make_config(const cli& c) {
  wire_config w{};
  std::memcpy(w.magic, "WEFTPRF1", 8);
  w.test = uint32_t(c.test - all_tests().data());
  w.ep_msg = c.ep_msg;
  w.check = c.check;
  w.inject = c.inject && !c.completion;  // fi_inject would complete nothing
  w.completion = c.completion;
  w.mem = c.memfd ? 1 : 0;
  w.reuse = c.reuse ? 1 : 0;
  w.cq_wait = c.cq_wait;
  w.cswap = c.cswap;
  w.window = c.window;
  w.max_size = c.sizes.empty() ? 8 : *std::max_element(c.sizes.begin(), c.sizes.end());
  w.timeout_s = c.timeout_s;
  snprintf(w.prov, sizeof w.prov, "%s", c.prov.c_str());
  snprintf(w.domain, sizeof w.domain, "%s", c.domain.c_str());
  return w;
}

uint64_t warmup_iters(const cli& c, uint64_t size, uint64_t w) {
  uint64_t n;
  if (c.iters)
    n = std::clamp<uint64_t>(c.iters / 10, 1, 1000);
  else
    n = std::clamp<uint64_t>((4ull << 20) / size, 8, 1000);
  if (!c.test->latency) n = std::max(n, 2 * w);
  return n;
}

int run_initiator(const cli& c, int fd, const char* cpus_note) {
  ctl_channel ctl(fd, c.timeout_s);
  try {
    wire_config cfg = make_config(c);
    ctl.send(ctl_type::hello, 0, 0, 0, &cfg, sizeof cfg);
    ctl.expect(ctl_type::hello_ack);
    fabric_session s(cfg, ctl, true, c.src);
    s.setup();
    FILE* note = note_stream(c);
    fprintf(note, "# test %s: %s, cpus %s\n", c.test->name, s.describe().c_str(), cpus_note);
    fflush(note);

    std::vector<uint64_t> sizes = c.sizes;
    if (c.test->fam == family::atomic && s.max_atomic_count()) {
      std::vector<uint64_t> ok;
      for (uint64_t z : sizes)
        if (z / 8 <= s.max_atomic_count()) ok.push_back(z);
      if (ok.size() != sizes.size())
        fprintf(stderr,
                "weft-perf: note: provider allows at most %llu uint64 per atomic; "
                "larger sizes skipped\n",
                (unsigned long long)s.max_atomic_count());
      if (ok.empty()) fail("no requested size fits the provider's atomic count");
      sizes = ok;
    }
    bool tty = isatty(2);
    printer out(c.fmt);
    out.header();
    for (size_t i = 0; i < sizes.size(); ++i) {
      uint64_t size = sizes[i];
      if (tty) {
        fprintf(stderr, "\r\033[K  %s %llu B (%zu/%zu)", c.test->name, (unsigned long long)size, i + 1,
                sizes.size());
        fflush(stderr);
      }
      uint64_t w = s.window_at(size);
      uint64_t warm = warmup_iters(c, size, w);
      phase_result wr = s.run_phase(size, warm);
      // Median time per iteration: a short warm-up's mean (let alone its
      // wall clock) is at the mercy of one preemption.
      row wrow = summarize(size, wr);
      double per_op = wrow.med * 1e-6 * double(wr.ops) / double(std::max<uint64_t>(wr.iters, 1));
      uint64_t n = c.iters;
      if (!n) {
        uint64_t lo = c.test->latency ? 10 : 4 * w;
        uint64_t hi = c.test->latency ? 2'000'000 : 20'000'000;
        double want = c.time_s / std::max(per_op, 1e-9);
        n = std::clamp<uint64_t>(uint64_t(std::min(want, 1e12)), lo, hi);
      }
      phase_result r = s.run_phase(size, n);
      if (tty) fprintf(stderr, "\r\033[K");
      out.add(summarize(size, r));
    }
    out.footer();
    s.finish();
    return 0;
  } catch (const perf_error& e) {
    if (isatty(2)) fprintf(stderr, "\r\033[K");
    ctl.send_error(e.what());
    fprintf(stderr, "weft-perf: error: %s\n", e.what());
    return 1;
  }
}

// quiet: in fork mode the initiator reports our errors (sent over the socket).
int run_responder(const cli& c, int fd, bool quiet) {
  ctl_channel ctl(fd, c.timeout_s);
  try {
    std::vector<uint8_t> payload;
    ctl.expect(ctl_type::hello, &payload);
    wire_config cfg{};
    if (payload.size() != sizeof cfg) fail("peer is a different weft-perf version");
    std::memcpy(&cfg, payload.data(), sizeof cfg);
    if (std::memcmp(cfg.magic, "WEFTPRF1", 8) != 0 || cfg.test >= all_tests().size())
      fail("peer is not a compatible weft-perf");
    ctl.set_timeout(cfg.timeout_s);
    cfg.timeout_s = std::max(cfg.timeout_s, 1.0);
    ctl.send(ctl_type::hello_ack);
    // Between phases the initiator may spend a while checking and printing.
    fabric_session s(cfg, ctl, false, c.src);
    s.setup();
    if (c.mode == run_mode::server)
      fprintf(stderr, "# serving %s: %s\n", all_tests()[cfg.test].name, s.describe().c_str());
    s.serve();
    return 0;
  } catch (const perf_error& e) {
    ctl.send_error(e.what());
    if (!quiet) fprintf(stderr, "weft-perf: error: %s\n", e.what());
    return 1;
  }
}

pid_t g_child = -1;

bool child_alive(void*) {
  if (g_child <= 0) return false;
  int st;
  return waitpid(g_child, &st, WNOHANG) == 0;
}

// Reaps the forked peer; kills it if it does not leave within a few seconds.
int reap_child(pid_t pid, bool kill_now) {
  if (kill_now) kill(pid, SIGTERM);
  double deadline = now_s() + 3;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(st)) return WEXITSTATUS(st);
      return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    if (r < 0) return 1;
    if (now_s() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return 137;
    }
    usleep(10 * 1000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  (void)weft_perf::sample_s();  // calibrate the sample clock before anything is timed

  signal(SIGPIPE, SIG_IGN);
  cli c = parse_args(argc, argv);

  FILE* note = note_stream(c);
  uint32_t v = fi_version();
  fprintf(note, "# libfabric: %s (api %u.%u)\n", loaded_libfabric().c_str(), FI_MAJOR(v), FI_MINOR(v));
  fflush(note);

  try {
    std::vector<int> cpus = allowed_cpus();
    if (c.mode == run_mode::fork) {
      int a = c.cpu_a, b = c.cpu_b;
      if (c.pin && a < 0 && cpus.size() >= 2) {
        a = cpus[0];
        b = cpus[1];
      }
      if (!c.pin) a = b = -1;
      std::string cpus_note =
          a < 0 ? "unpinned" : std::to_string(a) + "," + (b < 0 ? "-" : std::to_string(b));
      if (c.src.empty() && c.prov != "shm") c.src = "127.0.0.1";
      uint16_t port = 0;
      int lfd = ctl_listen("127.0.0.1", 0, &port);
      fflush(stdout);
      fflush(stderr);
      pid_t parent = getpid();
      pid_t pid = fork();
      if (pid < 0) fail(std::string("fork: ") + strerror(errno));
      if (pid == 0) {
        close(lfd);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        int rc = 1;
        try {
          pin_to(b);
          int fd = ctl_connect("127.0.0.1", port, 10);
          rc = run_responder(c, fd, true);
        } catch (const perf_error& e) {
          fprintf(stderr, "weft-perf (peer): error: %s\n", e.what());
        }
        fflush(stdout);
        exit(rc);
      }
      g_child = pid;
      int rc;
      try {
        pin_to(a);
        int fd = ctl_accept(lfd, 10, child_alive, nullptr);
        close(lfd);
        rc = run_initiator(c, fd, cpus_note.c_str());
      } catch (const perf_error& e) {
        fprintf(stderr, "weft-perf: error: %s\n", e.what());
        rc = 1;
      }
      int crc = reap_child(pid, rc != 0);
      if (rc == 0 && crc != 0) {
        fprintf(stderr, "weft-perf: error: the forked peer exited with status %d\n", crc);
        rc = 1;
      }
      return rc;
    }
    if (c.mode == run_mode::client) {
      if (c.pin) pin_to(c.cpu_a);
      int fd = ctl_connect(c.host, c.port, 10);
      std::string cpus_note = c.cpu_a < 0 ? "unpinned" : std::to_string(c.cpu_a);
      return run_initiator(c, fd, cpus_note.c_str());
    }
    if (c.pin) pin_to(c.cpu_a);
    uint16_t port = 0;
    int lfd = ctl_listen("0.0.0.0", c.port, &port);
    fprintf(stderr, "# weft-perf server: waiting for a client on port %u\n", unsigned(port));
    int fd = ctl_accept(lfd, 120);
    close(lfd);
    return run_responder(c, fd, false);
  } catch (const perf_error& e) {
    fprintf(stderr, "weft-perf: error: %s\n", e.what());
    return 1;
  }
}
