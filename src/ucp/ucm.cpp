// SPDX-License-Identifier: BSD-3-Clause
// libucm.so.0: the memory-event interface that Open MPI's common UCX code
// calls (ucm_set_external_event, ucm_test_events, ucm_test_external_events,
// ucm_vm_munmap). UCX installs hooks on mmap/munmap/brk to keep its
// registration cache coherent; weft's face keeps no registration cache, so it
// installs no hooks: native events are not available (ucm_test_events says
// so), and events the application reports itself (external events: Open MPI
// reports unmaps from its own memory hooks) are delivered to the handlers
// registered here.
#include <ucm/api/ucm.h>

#include <algorithm>
#include <mutex>
#include <vector>

#define UCM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
struct handler {
  int events;
  int priority;
  ucm_event_callback_t cb;
  void* arg;
};
std::mutex g_lock;
std::vector<handler> g_handlers;
int g_external = 0;

void dispatch(ucm_event_type_t type, void* addr, size_t len) {
  std::vector<handler> hs;
  {
    std::lock_guard l(g_lock);
    if (!(g_external & type)) return;
    hs = g_handlers;
  }
  ucm_event_t ev{};
  ev.vm_mapped.address = addr;
  ev.vm_mapped.size = len;
  for (auto& h : hs)
    if (h.events & type) h.cb(type, &ev, h.arg);
}
}  // namespace

UCM_EXPORT void ucm_set_global_opts(const ucm_global_config_t*) {}

UCM_EXPORT ucs_status_t ucm_set_event_handler(int events, int priority, ucm_event_callback_t cb, void* arg) {
  if (!cb || !events) return UCS_ERR_INVALID_PARAM;
  std::lock_guard l(g_lock);
  handler h{events & ~(UCM_EVENT_FLAG_NO_INSTALL | UCM_EVENT_FLAG_EXISTING_ALLOC), priority, cb, arg};
  auto it = std::find_if(g_handlers.begin(), g_handlers.end(),
                         [&](const handler& x) { return x.priority > priority; });
  g_handlers.insert(it, h);
  return UCS_OK;
}

UCM_EXPORT void ucm_unset_event_handler(int events, ucm_event_callback_t cb, void* arg) {
  std::lock_guard l(g_lock);
  for (auto it = g_handlers.begin(); it != g_handlers.end();) {
    if (it->cb == cb && it->arg == arg) {
      it->events &= ~events;
      if (!it->events) {
        it = g_handlers.erase(it);
        continue;
      }
    }
    ++it;
  }
}

UCM_EXPORT void ucm_set_external_event(int events) {
  std::lock_guard l(g_lock);
  g_external |= events;
}

UCM_EXPORT void ucm_unset_external_event(int events) {
  std::lock_guard l(g_lock);
  g_external &= ~events;
}

// Native events need hooks, which weft does not install.
UCM_EXPORT ucs_status_t ucm_test_events(int events) {
  std::lock_guard l(g_lock);
  return (events & ~g_external) ? UCS_ERR_UNSUPPORTED : UCS_OK;
}

UCM_EXPORT ucs_status_t ucm_test_external_events(int events) {
  std::lock_guard l(g_lock);
  return (events & ~g_external) ? UCS_ERR_UNSUPPORTED : UCS_OK;
}

UCM_EXPORT void ucm_vm_mmap(void* addr, size_t length) {
  dispatch(UCM_EVENT_VM_MAPPED, addr, length);
}

UCM_EXPORT void ucm_vm_munmap(void* addr, size_t length) {
  dispatch(UCM_EVENT_VM_UNMAPPED, addr, length);
}
