// SPDX-License-Identifier: BSD-3-Clause
// weft-perf control channel: a TCP socket beside the fabric that carries the
// run configuration, the fabric addresses, memory keys and the per-phase
// handshakes. It is also how a dead peer is noticed quickly: the kernel closes
// a killed process's socket, so EOF here turns a would-be hang into an error.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace weft_perf {

struct perf_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn, gnu::cold]] void fail(const std::string& msg);
// The message of the latest fail(), "" before any: a watchdog that ends the
// process while a failure unwinds (a provider's fi_close that never returns)
// prints it, so the reason is not lost with the exception.
const char* last_failure();

enum class ctl_type : uint32_t {
  hello = 1,  // initiator -> responder: payload = wire_config
  hello_ack,  // responder -> initiator
  addr,       // fabric address (payload), a = addr_format
  mr,         // a = base address or 0, b = key, c = length
  run,        // a = size, b = iterations, c = window
  ready,      // responder has posted its receives
  fill,       // check mode, read tests: a = first seq, b = count, c = size
  verify,     // check mode, write tests: a = first seq, b = count, c = size
  ack,        // reply to fill/verify
  end,        // initiator finished a phase of a passive (RMA/atomic) test
  done,       // responder finished a phase: a = target sum, b = target xor
  bye,        // initiator is done
  error,      // payload = message; the sender exits after sending it
};

// Fixed-size header, little-endian hosts only (both sides run this binary).
struct ctl_msg {
  uint32_t type = 0;
  uint32_t len = 0;  // payload bytes following the header
  uint64_t a = 0, b = 0, c = 0, d = 0;
};
static_assert(sizeof(ctl_msg) == 40);

class ctl_channel {
public:
  ctl_channel() = default;
  explicit ctl_channel(int fd, double timeout_s);
  ctl_channel(const ctl_channel&) = delete;
  ctl_channel& operator=(const ctl_channel&) = delete;
  ~ctl_channel();

  void send(ctl_type t, uint64_t a = 0, uint64_t b = 0, uint64_t c = 0, const void* payload = nullptr,
            uint32_t len = 0);
  // Blocks up to the timeout; throws on EOF, timeout, or an error message
  // from the peer (its text becomes ours).
  ctl_msg recv(std::vector<uint8_t>* payload = nullptr);
  ctl_msg expect(ctl_type t, std::vector<uint8_t>* payload = nullptr);
  // Non-blocking: true when a message (or EOF) is waiting.
  bool readable() const;
  // Reads the waiting message and keeps it for the next recv(): a peer that
  // finished its side of a phase may say so before our last completion shows
  // (its message overtook the fabric's). Throws on EOF or an error message,
  // and when a message is already held (the peer ran ahead by two).
  void hold_next();
  // Best effort, never throws: tell the peer why we are about to exit.
  void send_error(const std::string& msg) noexcept;
  int fd() const { return fd_; }
  void set_timeout(double s) { timeout_s_ = s; }

private:
  void read_exact(void* p, size_t n);
  int fd_ = -1;
  double timeout_s_ = 5.0;
  bool held_ = false;
  ctl_msg held_msg_;
  std::vector<uint8_t> held_body_;
};

// Listening socket on addr:port (port 0 = ephemeral). Returns fd, sets *bound.
int ctl_listen(const char* addr, uint16_t port, uint16_t* bound);
// Accepts one connection or throws after timeout_s. alive(), when given, is
// called while waiting and may throw (used to notice a dead forked child).
int ctl_accept(int lfd, double timeout_s, bool (*alive)(void*) = nullptr, void* arg = nullptr);
// Connects, retrying while the server is not up yet, up to timeout_s.
int ctl_connect(const std::string& host, uint16_t port, double timeout_s);

double now_s();
// A cheaper clock for per-operation samples: the TSC where it is invariant
// (x86_64 with constant_tsc), calibrated against CLOCK_MONOTONIC once;
// elsewhere CLOCK_MONOTONIC. Seconds, arbitrary origin.
// The first call calibrates (about 20 ms); call it once before timing.
double sample_s_slow();
#if defined(__x86_64__)
extern double g_sec_per_tick;  // > 0: TSC usable; < 0: CLOCK_MONOTONIC; 0: not calibrated
inline double sample_s() {
  double k = g_sec_per_tick;
  if (k > 0) [[likely]]
    return double(__builtin_ia32_rdtsc()) * k;
  return sample_s_slow();
}
#else
inline double sample_s() {
  return now_s();
}
#endif

}  // namespace weft_perf
