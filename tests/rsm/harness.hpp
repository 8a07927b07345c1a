// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Multi-process tests of the RSM face. A test (a GoogleTest case in the
// parent) starts its actors as fresh processes: this very binary, exec'd
// with "--rsm-child <name>", so each actor parses its own environment and
// opens its own controllers (nothing is inherited from the test process).
// Actors coordinate through one shared page (steps, segment ids, values)
// and report through their exit status: 0 passed, 77 skipped (with the
// reason in the shared page), anything else failed (with a message on
// stderr). Every wait is bounded; the parent kills actors that overrun.
#include <rsmapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

namespace rsmt {

struct shared_page {
  std::atomic<int> step[32];
  std::atomic<uint32_t> u32[32];
  std::atomic<uint64_t> u64[32];
  std::atomic<int> skip;
  char text[1024];
};
extern shared_page* sh;
extern std::string self_exe;

using child_fn = int (*)(int argc, char** argv);
struct child_reg {
  child_reg(const char* name, child_fn f);
};
#define RSM_CHILD(name)                                     \
  static int child_##name(int argc, char** argv);           \
  static ::rsmt::child_reg reg_##name(#name, child_##name); \
  static int child_##name([[maybe_unused]] int argc, [[maybe_unused]] char** argv)

// ---- in the test (parent)
void new_shared();  // a fresh shared page for this test
pid_t spawn(const std::string& name, const std::vector<std::string>& args = {},
            const std::vector<std::string>& env = {}, const std::vector<std::string>& prefix = {});
// Waits for every actor; kills what still runs at the deadline. Returns
// 0 (all passed), 77 (one skipped: reason in sh->text) or 1 (why in *why).
int wait_all(std::vector<pid_t>& pids, int timeout_s, std::string* why);
// After killing an actor: removes what it could not (Debian's shm provider
// leaves a region file, /dev/shm/<pid>:*, for each endpoint of a killed
// process; weft's removes those of dead processes itself).
void forget_killed(pid_t pid);
// Runs actors to completion and turns the outcome into the test's result.
#define RUN_ACTORS(timeout_s, ...)                       \
  do {                                                   \
    std::vector<pid_t> pids_{__VA_ARGS__};               \
    std::string why_;                                    \
    int rc_ = ::rsmt::wait_all(pids_, timeout_s, &why_); \
    if (rc_ == 77) GTEST_SKIP() << ::rsmt::sh->text;     \
    ASSERT_EQ(rc_, 0) << why_;                           \
  } while (0)
// Which libfabric the test runs over: "weft" or "system" (Debian's).
std::string lib();

// ---- in actors
[[noreturn]] void fail(const char* file, int line, const std::string& what);
[[noreturn]] void skip(const std::string& why);
#define REQ(cond)                                         \
  do {                                                    \
    if (!(cond)) ::rsmt::fail(__FILE__, __LINE__, #cond); \
  } while (0)
#define REQ_EQ(a, b)                                                                                   \
  do {                                                                                                 \
    long long a_ = static_cast<long long>(a), b_ = static_cast<long long>(b);                          \
    if (a_ != b_)                                                                                      \
      ::rsmt::fail(__FILE__, __LINE__,                                                                 \
                   std::string(#a " == " #b ": ") + std::to_string(a_) + " != " + std::to_string(b_)); \
  } while (0)
// Waits (bounded) until step i reaches at least v.
void wait_step(int i, int v, int timeout_ms = 20000);
inline void set_step(int i, int v) {
  sh->step[i].store(v);
}
// Page-aligned memory: private (heap-like) or shared (a memfd, mappable by
// importers on this node).
void* alloc_pages(size_t len, bool shareable);
rsmapi_controller_handle_t open_ctl(const char* name = nullptr);  // default: $RSMT_CTL or "shm"
const char* ctl_name();
uint32_t local_node();  // from the topology
void fill_pattern(void* p, size_t n, uint32_t seed);
// Creates and publishes (system id) a segment of `size` bytes filled with
// pattern `seed`; the id goes to sh->u32[slot].
rsm_memseg_export_handle_t export_one(rsmapi_controller_handle_t ctl, void** mem, size_t size, uint32_t seed,
                                      int slot, rsmapi_access_entry_t* acl = nullptr, uint_t nacl = 0,
                                      bool shareable = false, uint_t flags = 0);
bool check_pattern(const void* p, size_t n, uint32_t seed);
// Waits for step 0, connects read/write to the segment whose id is in
// sh->u32[0] on this node and initialises a barrier on it.
rsm_memseg_import_handle_t import_first(rsmapi_controller_handle_t ctl, rsmapi_barrier_t* bar);

}  // namespace rsmt
