// SPDX-License-Identifier: BSD-3-Clause
// shm-peers-mem: the shared memory one shm endpoint uses as senders appear.
//
//   usage: shm-peers-mem N [N...]     (e.g. 2 256 1024)
//
// For each N: a receiver opens one RDM endpoint of provider "shm", N forked
// senders (each with its own endpoint) send it one 8-byte tagged message and
// then stay alive until the receiver has counted every message; the program
// prints how many arrived, and the size of the receiver's shared region(s):
// the memfds among the receiver's fds (weft) and the files that appeared
// under /dev/shm when the receiver enabled its endpoint (libfabric's shm),
// their length (st_size) and the pages actually allocated (st_blocks).
//
// Written on the public fi_* API only and linked to libfabric.so.1 by
// SONAME, like weft-perf: Debian's libfabric by default, weft's with
// LD_LIBRARY_PATH=build/lib. A sender exits 2 when it cannot open its
// endpoint, 3 when fi_av_insert fails, 4 when its send fails, 5 when its
// completion is an error or does not come. Senders that cannot send (-FI_EAGAIN for 20 s,
// or an error) are counted as failed. The receiver progresses from its
// first fork on and waits at most 60 s from then for the messages (the time
// printed runs from the first fork to the last message), then 30 s for the
// senders to exit (then kills them).
// Each count runs in a child process: a receiver that crashes is reported
// as such, and the senders it leaves behind are killed and their files
// removed.
#include <dirent.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plain_ep.hpp"  // tests/unit
#include "tool_util.h"

namespace {

std::set<std::string> dev_shm_files() {
  std::set<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* de = readdir(d))
      if (de->d_name[0] != '.') out.insert(std::string("/dev/shm/") + de->d_name);
    closedir(d);
  }
  return out;
}

struct object_size {
  std::string what;
  long long bytes = 0, allocated = 0;
};

// The receiver's shared objects: its memfds, and the /dev/shm files that
// are new since `before` and carry its name (`name`: its fi_getname).
std::vector<object_size> shared_objects(const std::set<std::string>& before, const std::string& name) {
  std::vector<object_size> out;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* de = readdir(d)) {
      if (de->d_name[0] == '.') continue;
      char link[512];
      const std::string fdpath = std::string("/proc/self/fd/") + de->d_name;
      const char* path = fdpath.c_str();
      ssize_t n = readlink(path, link, sizeof link - 1);
      if (n <= 0) continue;
      link[n] = 0;
      if (strncmp(link, "/memfd:", 7) != 0) continue;
      struct stat st;
      if (stat(path, &st) != 0) continue;
      out.push_back({link, static_cast<long long>(st.st_size), static_cast<long long>(st.st_blocks) * 512});
    }
    closedir(d);
  }
  for (const std::string& f : dev_shm_files()) {
    if (before.count(f) || name.find(f.substr(strlen("/dev/shm/"))) == std::string::npos) continue;
    struct stat st;
    if (stat(f.c_str(), &st) != 0) continue;
    out.push_back({f, static_cast<long long>(st.st_size), static_cast<long long>(st.st_blocks) * 512});
  }
  return out;
}

// One sender; it closes its endpoint whatever happened (libfabric's shm
// leaves its /dev/shm file behind otherwise).
int send_one(plain::endpoint& o, const std::vector<char>& rx_name, int index, int release) {
  fi_addr_t to;
  if (fi_av_insert(o.av, rx_name.data(), 1, &to, 0, nullptr) != 1) return 3;
  uint64_t payload = 0x5eed0000ULL + static_cast<uint64_t>(index);
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (ssize_t r = o.tsend(&payload, sizeof payload, to, static_cast<uint64_t>(index), t0, 20)) {
    if (index % 128 == 0) fprintf(stderr, "sender %d: fi_tsend: %s\n", index, fi_strerror(static_cast<int>(-r)));
    return 4;
  }
  if (!o.wait_completions(1, t0, 20, "sender")) return 5;
  pollfd pfd{release, POLLIN, 0};
  (void)poll(&pfd, 1, 40000);
  return 0;
}

int sender(const std::vector<char>& rx_name, int index, int release) {
  plain::endpoint o;
  const int rc = o.open("shm", FI_TAGGED) ? send_one(o, rx_name, index, release) : 2;
  o.close();
  return rc;
}

void run(int n) {
  const std::set<std::string> before = dev_shm_files();
  plain::endpoint o;
  if (!o.open("shm", FI_TAGGED)) {
    printf("%d: cannot open the receiver\n", n);
    return;
  }
  std::vector<char> name(256, 0);
  size_t len = name.size();
  if (fi_getname(&o.ep->fid, name.data(), &len) != 0) {
    printf("%d: fi_getname failed\n", n);
    return;
  }
  const std::vector<object_size> at_start = shared_objects(before, name.data());
  int release[2];
  if (pipe(release) != 0) return;
  std::vector<uint64_t> bufs(64);
  for (auto& b : bufs) fi_trecv(o.ep, &b, sizeof b, nullptr, FI_ADDR_UNSPEC, 0, ~0ULL, &b);
  int got = 0, bad = 0, errors = 0;
  // One look at the CQ: a message counted (and its receive posted again),
  // an error counted, or nothing. False when nothing came.
  auto take_one = [&]() {
    fi_cq_tagged_entry ce;
    ssize_t r = fi_cq_read(o.cq, &ce, 1);
    if (r == -FI_EAGAIN) return false;
    if (r != 1) {
      fi_cq_err_entry err{};
      fi_cq_readerr(o.cq, &err, 0);
      ++errors;
      return true;
    }
    auto* b = static_cast<uint64_t*>(ce.op_context);
    if (*b != 0x5eed0000ULL + ce.tag) ++bad;
    ++got;
    fi_trecv(o.ep, b, sizeof *b, nullptr, FI_ADDR_UNSPEC, 0, ~0ULL, b);
    return true;
  };
  std::vector<pid_t> kids;
  fflush(stdout);
  // The receiver progresses between forks: forking 1,024 senders while
  // they start takes ~20 s on 2 CPUs, as long as a sender tries before it
  // gives up, and a receiver that only watched then would make the count
  // measure the fork loop.
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      close(release[1]);
      // exit, not _exit: libfabric's shm removes its /dev/shm files when
      // the provider is unloaded.
      exit(sender(name, i, release[0]));
    }
    if (pid > 0) kids.push_back(pid);
    while (take_one()) {
    }
  }
  close(release[0]);
  while (got + errors < n && plain::seconds_since(t0) < 60) take_one();
  const double took = plain::seconds_since(t0);
  const std::vector<object_size> at_end = shared_objects(before, name.data());
  close(release[1]);
  int failed = 0;
  std::map<std::string, int> how;  // why senders failed
  timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  for (pid_t k : kids) {
    const int status = plain::reap(k, t1, 30);  // then killed: a sender stuck in libfabric
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    ++failed;
    how[WIFSIGNALED(status) ? std::string("signal ") + strsignal(WTERMSIG(status))
                            : "exit " + std::to_string(WEXITSTATUS(status))]++;
  }
  printf("receiver %s\n", name.data());
  printf("%d senders: %d messages arrived (%d with wrong data, %d error entries), %d senders failed, %.2f s\n", n,
         got, bad, errors, failed, took);
  for (const auto& [why, count] : how) printf("  %d senders failed: %s\n", count, why.c_str());
  for (const object_size& s : at_start) printf("  enabled:    %-60s %10lld bytes, %10lld allocated\n", s.what.c_str(), s.bytes, s.allocated);
  for (const object_size& s : at_end) printf("  after them: %-60s %10lld bytes, %10lld allocated\n", s.what.c_str(), s.bytes, s.allocated);
  o.close();
}

// Our children (orphaned senders come to us: we are their subreaper).
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  const pid_t self = getpid();
  if (DIR* d = opendir("/proc")) {
    while (dirent* de = readdir(d)) {
      const pid_t pid = atoi(de->d_name);
      if (pid <= 0) continue;
      const std::string stat_path = std::string("/proc/") + de->d_name + "/stat";
      FILE* f = fopen(stat_path.c_str(), "r");
      if (!f) continue;
      char buf[512] = {};
      const size_t got = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      const char* paren = got ? strrchr(buf, ')') : nullptr;
      int ppid = 0;
      char state = 0;
      if (paren && sscanf(paren + 1, " %c %d", &state, &ppid) == 2 && ppid == self) out.push_back(pid);
    }
    closedir(d);
  }
  return out;
}

// libfabric's shm names its files "<pid>:<domain>:<endpoint>".
void remove_files_of(pid_t pid) {
  const std::string prefix = std::to_string(pid) + ":";
  for (const std::string& f : dev_shm_files())
    if (f.compare(strlen("/dev/shm/"), prefix.size(), prefix) == 0) unlink(f.c_str());
}

// Runs one count in a child: a receiver that crashes (libfabric's shm does
// with more than 256 senders) is reported, and the senders it leaves behind
// are killed and their /dev/shm files (named "<pid>:...") removed.
void supervise(int n) {
  fflush(stdout);
  const pid_t receiver = fork();
  if (receiver == 0) {
    run(n);
    fflush(stdout);
    _exit(0);
  }
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const int status = plain::reap(receiver, t0, 150);
  if (WIFSIGNALED(status)) {
    printf("%d senders: the receiver died: %s\n", n, strsignal(WTERMSIG(status)));
    remove_files_of(receiver);
  } else if (WEXITSTATUS(status) != 0) {  // libfabric's own SIGSEGV handler exits
    printf("%d senders: the receiver failed (exit status %d; a crash report above?)\n", n, WEXITSTATUS(status));
    remove_files_of(receiver);
  }
  int killed = 0;
  for (pid_t k : children()) {
    kill(k, SIGKILL);
    waitpid(k, nullptr, 0);
    ++killed;
    remove_files_of(k);
  }
  if (killed) printf("  %d senders left behind, killed\n", killed);
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  static const char usage[] =
      "usage: shm-peers-mem N [N...]      (e.g. 2 256 1024)\n"
      "For each N, N forked senders each send one 8-byte tagged message to one shm\n"
      "endpoint; prints how many arrived and the shared memory of the receiver's\n"
      "region(s) (length and pages allocated). Over Debian's libfabric by default,\n"
      "over weft with LD_LIBRARY_PATH=build/lib.\n";
  if (tool_help_asked(argc, argv)) tool_help(usage);
  if (argc < 2) tool_usage_error("shm-peers-mem", "give at least one count of senders");
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  for (int i = 1; i < argc; ++i) {
    long n = 0;
    if (!tool_parse_long(argv[i], 1, 100000, &n))
      tool_usage_error("shm-peers-mem", "N must be a number of senders (1 to 100000), not '%s'", argv[i]);
  }
  for (int i = 1; i < argc; ++i) supervise(atoi(argv[i]));
  return 0;
}
