// SPDX-License-Identifier: BSD-3-Clause
// The multi-process harness (see harness.hpp) and the tests' main().
#include "harness.hpp"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <map>

namespace rsmt {

shared_page* sh = nullptr;
std::string self_exe;
static int shared_fd = -1;

static std::map<std::string, child_fn>& children() {
  static std::map<std::string, child_fn> m;
  return m;
}

child_reg::child_reg(const char* name, child_fn f) {
  children()[name] = f;
}

std::string lib() {
  // Whichever libfabric.so.1 the loader picked: Debian's lives in /usr/lib
  // or /lib, weft's in its build folder.
  void* f = dlsym(RTLD_DEFAULT, "fi_version");
  Dl_info info{};
  if (!f || !dladdr(f, &info) || !info.dli_fname) return "unknown";
  std::string path = info.dli_fname;
  return path.rfind("/usr/lib", 0) == 0 || path.rfind("/lib", 0) == 0 ? "system" : "weft";
}

// Debian's shm (1.17) names its regions /dev/shm/<pid>:<n>:<n> and leaves
// them behind when a process dies without closing (other tests kill theirs,
// or exit through paths that do not close). A later process that gets the
// same pid then fails fi_enable with -FI_EBUSY. Removes the regions whose
// pid `gone` says no longer runs.
template <class F>
static void forget_regions(F gone) {
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* de = readdir(d)) {
      char* end = nullptr;
      const long pid = strtol(de->d_name, &end, 10);
      if (pid <= 0 || end == de->d_name || *end != ':') continue;
      if (gone(static_cast<pid_t>(pid))) unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
  }
}

// Before each test: the regions of every process that no longer exists.
static void forget_dead_regions() {
  forget_regions([](pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; });
}

void new_shared() {
  forget_dead_regions();
  if (sh) munmap(sh, sizeof(shared_page));
  if (shared_fd >= 0) close(shared_fd);
  shared_fd = memfd_create("rsmt", 0);  // inherited by the actors (no CLOEXEC)
  if (shared_fd < 0 || ftruncate(shared_fd, sizeof(shared_page)) != 0) abort();
  sh = static_cast<shared_page*>(
      mmap(nullptr, sizeof(shared_page), PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0));
  if (sh == MAP_FAILED) abort();
}

pid_t spawn(const std::string& name, const std::vector<std::string>& args,
            const std::vector<std::string>& env, const std::vector<std::string>& prefix) {
  if (!sh) new_shared();
  // Everything is built before fork(): the child only calls execve.
  std::vector<std::string> argv = prefix;
  argv.push_back(self_exe);
  argv.push_back("--rsm-child");
  argv.push_back(name);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> envs;
  for (char** e = environ; *e; e++) {
    std::string kv = *e;
    bool overridden = false;
    for (const std::string& x : env)
      if (kv.compare(0, kv.find('=') + 1, x, 0, x.find('=') + 1) == 0) overridden = true;
    if (!overridden) envs.push_back(kv);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  envs.push_back("RSMT_SHM_FD=" + std::to_string(shared_fd));
  std::vector<char*> av, ev;
  for (std::string& a : argv) av.push_back(a.data());
  av.push_back(nullptr);
  for (std::string& e : envs) ev.push_back(e.data());
  ev.push_back(nullptr);
  std::string path = av[0];
  if (path.find('/') == std::string::npos)
    for (const char* dir : {"/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"})
      if (access((std::string(dir) + path).c_str(), X_OK) == 0) {
        path = std::string(dir) + path;
        break;
      }
  pid_t pid = fork();
  if (pid == 0) {
    execve(path.c_str(), av.data(), ev.data());
    _exit(127);
  }
  return pid;
}

int wait_all(std::vector<pid_t>& pids, int timeout_s, std::string* why) {
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int result = 0;
  size_t left = pids.size();
  std::vector<bool> done(pids.size(), false);
  while (left) {
    for (size_t i = 0; i < pids.size(); i++) {
      if (done[i]) continue;
      int st = 0;
      pid_t r = waitpid(pids[i], &st, WNOHANG);
      if (r == 0) continue;
      done[i] = true;
      left--;
      int code = r < 0 ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (code == 77 && result == 0) result = 77;
      if (code != 0 && code != 77) {
        result = 1;
        *why += "actor " + std::to_string(i) + " (pid " + std::to_string(pids[i]) + ") exited with " +
                std::to_string(code) + "; ";
      }
    }
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec >= timeout_s) {
      for (size_t i = 0; i < pids.size(); i++)
        if (!done[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], nullptr, 0);
          forget_killed(pids[i]);
          *why += "actor " + std::to_string(i) + " overran " + std::to_string(timeout_s) + " s; ";
        }
      return 1;
    }
    usleep(2000);
  }
  return result;
}

void forget_killed(pid_t pid) {
  forget_regions([pid](pid_t p) { return p == pid; });
}

void fail(const char* file, int line, const std::string& what) {
  fprintf(stderr, "[actor %d] %s:%d: %s\n", static_cast<int>(getpid()), file, line, what.c_str());
  fflush(stderr);
  exit(1);  // not _exit: the library closes its endpoints (providers clean up) at exit
}

void skip(const std::string& why) {
  snprintf(sh->text, sizeof sh->text, "%s", why.c_str());
  sh->skip.store(1);
  exit(77);
}

void wait_step(int i, int v, int timeout_ms) {
  timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (sh->step[i].load() < v) {
    if (sh->skip.load()) exit(77);  // another actor found the test cannot run here
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > timeout_ms)
      fail(__FILE__, __LINE__,
           "timed out waiting for step " + std::to_string(i) + " to reach " + std::to_string(v));
    usleep(500);
  }
}

void* alloc_pages(size_t len, bool shareable) {
  void* p;
  if (shareable) {
    int fd = memfd_create("rsmt-seg", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(len)) != 0) fail(__FILE__, __LINE__, "memfd");
    p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    // The fd stays open: the library finds the memory's file through it.
  } else {
    p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  if (p == MAP_FAILED) fail(__FILE__, __LINE__, "mmap");
  memset(p, 0, len);
  return p;
}

const char* ctl_name() {
  const char* v = getenv("RSMT_CTL");
  return v && *v ? v : "shm";
}

rsmapi_controller_handle_t open_ctl(const char* name) {
  rsmapi_controller_handle_t c = nullptr;
  int r = rsm_get_controller(const_cast<char*>(name ? name : ctl_name()), &c);
  if (r) fail(__FILE__, __LINE__, std::string("rsm_get_controller: ") + std::to_string(r));
  return c;
}

uint32_t local_node() {
  rsm_topology_t* t = nullptr;
  if (rsm_get_interconnect_topology(&t)) fail(__FILE__, __LINE__, "topology");
  uint32_t n = t->topology_hdr.local_nodeid;
  rsm_free_interconnect_topology(t);
  return n;
}

void fill_pattern(void* p, size_t n, uint32_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b[i] = static_cast<uint8_t>(x);
  }
}

rsm_memseg_import_handle_t import_first(rsmapi_controller_handle_t ctl, rsmapi_barrier_t* bar) {
  wait_step(0, 1);
  rsm_memseg_import_handle_t im = nullptr;
  REQ_EQ(rsm_memseg_import_connect(ctl, local_node(), sh->u32[0], RSM_PERM_RDWR, &im), RSM_SUCCESS);
  REQ_EQ(rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, bar), RSM_SUCCESS);
  return im;
}

rsm_memseg_export_handle_t export_one(rsmapi_controller_handle_t ctl, void** mem, size_t size, uint32_t seed,
                                      int slot, rsmapi_access_entry_t* acl, uint_t nacl, bool shareable,
                                      uint_t flags) {
  *mem = alloc_pages(size, shareable);
  fill_pattern(*mem, size, seed);
  rsm_memseg_export_handle_t ex = nullptr;
  REQ_EQ(rsm_memseg_export_create(ctl, &ex, *mem, size, flags), RSM_SUCCESS);
  rsm_memseg_id_t id = 0;
  REQ_EQ(rsm_memseg_export_publish(ex, &id, acl, nacl), RSM_SUCCESS);
  REQ(id >= RSM_SYSTEM_ID_BASE);
  sh->u32[slot].store(id);
  return ex;
}

bool check_pattern(const void* p, size_t n, uint32_t seed) {
  std::vector<uint8_t> want(n);
  fill_pattern(want.data(), n, seed);
  return memcmp(p, want.data(), n) == 0;
}

}  // namespace rsmt

static std::string run_dir;

static int rm_entry(const char* path, const struct stat*, int, struct FTW*) {
  return remove(path);
}

int main(int argc, char** argv) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = 0;
    rsmt::self_exe = buf;
  }
  if (argc >= 3 && !strcmp(argv[1], "--rsm-child")) {
    const char* fd = getenv("RSMT_SHM_FD");
    if (!fd) return 2;
    rsmt::sh = static_cast<rsmt::shared_page*>(
        mmap(nullptr, sizeof(rsmt::shared_page), PROT_READ | PROT_WRITE, MAP_SHARED, atoi(fd), 0));
    if (rsmt::sh == MAP_FAILED) return 2;
    auto it = rsmt::children().find(argv[2]);
    if (it == rsmt::children().end()) {
      fprintf(stderr, "no actor named %s\n", argv[2]);
      return 2;
    }
    return it->second(argc - 3, argv + 3);
  }
  // Each test process gets its own registry, so parallel runs (weft and
  // Debian's libfabric, release and sanitizer builds) never meet.
  if (!getenv("WEFT_RSM_RUNDIR")) {
    char dir[] = "/dev/shm/weft-rsm-test-XXXXXX";
    if (mkdtemp(dir)) {
      run_dir = dir;
      setenv("WEFT_RSM_RUNDIR", dir, 1);
    }
  }
  testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  if (!run_dir.empty()) nftw(run_dir.c_str(), rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return rc;
}
