// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Locks whose locking is a policy chosen once, at open.
#include <mutex>

namespace weft {

// A mutex whose locking is a policy chosen once, at open, from the domain's
// threading level: off where the application serialises access to the
// object (FI_THREAD_DOMAIN, FI_THREAD_COMPLETION, FI_THREAD_ENDPOINT) and no
// provider thread touches it, so the hot path takes no lock there.
template <class Mutex>
class policy_lock {
public:
  void set_locking(bool on) noexcept { on_ = on; }
  bool locking() const noexcept { return on_; }
  void lock() {
    if (on_) m_.lock();
  }
  void unlock() {
    if (on_) m_.unlock();
  }
  bool try_lock() { return on_ ? m_.try_lock() : true; }

private:
  Mutex m_;
  bool on_ = true;
};

using policy_mutex = policy_lock<std::mutex>;

}  // namespace weft
