// SPDX-License-Identifier: BSD-3-Clause
// RSMERR_INSUFFICIENT_MEM: this program replaces operator new so that the
// n-th allocation of the test's thread fails, for n = 0, 1, 2, ... through
// whole sequences of calls. Every call must then answer RSM_SUCCESS or
// RSMERR_INSUFFICIENT_MEM (never crash, never leave a handle half made),
// and everything must still work once allocations succeed again.
#include <rsmapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>
#include <new>
#include <vector>

namespace {
thread_local long fail_in = -1;  // allocations of this thread before one fails
thread_local long failed = 0;
uintptr_t rsm_lo = 0, rsm_hi = 0;

// The address range of libweft_rsm's code: by default only allocations made
// there fail (RSMT_NOMEM_ANY=1 fails the libfabric's too, weft's included).
void find_rsm() {
  FILE* f = fopen("/proc/self/maps", "re");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    unsigned long s, e;
    if (strstr(line, "libweft_rsm.so") && sscanf(line, "%lx-%lx", &s, &e) == 2) {
      if (!rsm_lo || s < rsm_lo) rsm_lo = s;
      if (e > rsm_hi) rsm_hi = e;
    }
  }
  if (f) fclose(f);
}

bool targeted(void* caller) {
  static const bool any = getenv("RSMT_NOMEM_ANY") != nullptr;
  auto a = reinterpret_cast<uintptr_t>(caller);
  return any || (a >= rsm_lo && a < rsm_hi);
}

void* allocate(size_t n, void* caller) {
  if (fail_in >= 0 && targeted(caller) && fail_in-- == 0) {
    failed++;
    throw std::bad_alloc();
  }
  void* p = malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

__attribute__((noinline)) void* operator new(size_t n) {
  return allocate(n, __builtin_return_address(0));
}
__attribute__((noinline)) void* operator new[](size_t n) {
  return allocate(n, __builtin_return_address(0));
}
__attribute__((noinline)) void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, __builtin_return_address(0));
  } catch (...) {
    return nullptr;
  }
}
__attribute__((noinline)) void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, __builtin_return_address(0));
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  free(p);
}
void operator delete[](void* p) noexcept {
  free(p);
}
void operator delete(void* p, size_t) noexcept {
  free(p);
}
void operator delete[](void* p, size_t) noexcept {
  free(p);
}

static int errors = 0;
#define CHECK(cond)                                              \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
      errors++;                                                  \
    }                                                            \
  } while (0)

// A call under allocation failure answers success or INSUFFICIENT_MEM only.
static bool ok_or_nomem(int r, const char* what, long n) {
  if (r != RSM_SUCCESS && r != RSMERR_INSUFFICIENT_MEM) {
    fprintf(stderr, "%s with allocation %ld failing: %d\n", what, n, r);
    errors++;
  }
  return r == RSM_SUCCESS;
}

int main() {
  find_rsm();
  if (!rsm_hi) {
    fprintf(stderr, "libweft_rsm is not mapped\n");
    return 1;
  }
  const size_t len = 8192;
  void* mem = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memset(mem, 0x5a, len);
  long saw_nomem = 0, injected = 0;
  // The controller itself (first open builds the fabric and a thread).
  rsmapi_controller_handle_t ctl = nullptr;
  for (long n = 0;; n++) {
    fail_in = n;
    failed = 0;
    int r = rsm_get_controller(const_cast<char*>("shm"), &ctl);
    fail_in = -1;
    ok_or_nomem(r, "rsm_get_controller", n);
    if (r == RSM_SUCCESS && failed == 0) break;
    if (r == RSMERR_INSUFFICIENT_MEM) saw_nomem++;
    injected += failed;
    if (r == RSM_SUCCESS) rsm_release_controller(ctl);
    if (n > 2000) break;
  }
  CHECK(saw_nomem > 0);
  CHECK(ctl != nullptr);
  // Export, publish, connect, transfer, barrier, poll fd, local handle,
  // topology: the whole session, with each allocation failing in turn.
  saw_nomem = 0;
  for (long n = 0; n < 5000; n++) {
    rsm_memseg_export_handle_t ex = nullptr;
    rsm_memseg_import_handle_t im = nullptr;
    rsm_localmemory_handle_t lh = nullptr;
    rsm_topology_t* topo = nullptr;
    rsmapi_barrier_t bar{};
    pollfd pfd;
    rsm_memseg_id_t id = 0;
    bool bar_made = false, pfd_held = false, published = false;
    fail_in = n;
    failed = 0;
    bool good =
        ok_or_nomem(rsm_memseg_export_create(ctl, &ex, mem, len, 0), "export_create", n) &&
        ok_or_nomem(rsm_memseg_export_publish(ex, &id, nullptr, 0), "publish", n) && (published = true) &&
        ok_or_nomem(rsm_memseg_import_connect(ctl, 1, id, RSM_PERM_RDWR, &im), "connect", n) &&
        ok_or_nomem(rsm_memseg_import_init_barrier(im, RSM_BAR_DEFAULT, &bar), "init_barrier", n) &&
        (bar_made = true) && ok_or_nomem(rsm_memseg_import_put(im, 0, mem, 64), "put", n) &&
        ok_or_nomem(rsm_memseg_get_pollfd(im, &pfd), "get_pollfd", n) && (pfd_held = true) &&
        ok_or_nomem(rsm_intr_signal_post(im, 0), "signal_post", n) &&
        ok_or_nomem(rsm_create_localmemory_handle(ctl, &lh, static_cast<caddr_t>(mem), len), "localmem", n) &&
        ok_or_nomem(rsm_get_interconnect_topology(&topo), "topology", n) &&
        ok_or_nomem(rsm_memseg_export_republish(ex, nullptr, 0), "republish", n);
    long hit = failed;
    injected += hit;
    fail_in = -1;
    if (!good) saw_nomem++;
    // Clean up (allocations work again) whatever was made.
    if (topo) rsm_free_interconnect_topology(topo);
    if (lh) CHECK(rsm_free_localmemory_handle(ctl, lh) == RSM_SUCCESS);
    if (pfd_held) CHECK(rsm_memseg_release_pollfd(im) == RSM_SUCCESS);
    if (bar_made) CHECK(rsm_memseg_import_destroy_barrier(&bar) == RSM_SUCCESS);
    if (im) CHECK(rsm_memseg_import_disconnect(im) == RSM_SUCCESS);
    if (published) CHECK(rsm_memseg_export_unpublish(ex) == RSM_SUCCESS);
    if (ex) CHECK(rsm_memseg_export_destroy(ex) == RSM_SUCCESS);
    if (good && hit == 0) break;  // the whole session ran without a failure left to inject
  }
  CHECK(saw_nomem > 0);
  CHECK(rsm_release_controller(ctl) == RSM_SUCCESS);
  printf("%s: %ld allocation failures injected, %d error(s)\n", errors ? "FAILED" : "passed", injected,
         errors);
  return errors ? 1 : 0;
}
