// SPDX-License-Identifier: BSD-3-Clause
#include "util/peer_note.hpp"

#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/log.hpp"

namespace weft {

namespace {

struct notes {
  std::mutex m;
  std::deque<std::string> texts;  // a deque: the strings never move, strerror hands them out
  std::unordered_set<std::string> keys;
};

notes& table() {
  static notes* n = new notes;  // never destroyed: a CQ may be read in an atexit handler
  return *n;
}

}  // namespace

int peer_note(std::string_view text, int fallback) noexcept {
  try {
    notes& n = table();
    std::lock_guard l(n.m);
    for (size_t i = 0; i < n.texts.size(); ++i)
      if (n.texts[i] == text) return peer_note_base + static_cast<int>(i);
    if (n.texts.size() >= static_cast<size_t>(peer_notes_max)) return fallback;
    n.texts.emplace_back(text);
    return peer_note_base + static_cast<int>(n.texts.size() - 1);
  } catch (...) {
    return fallback;
  }
}

std::string peer_foreign_text(std::string_view at, std::string_view what, bool other_version, unsigned ours) {
  std::string t = "the peer at ";
  t.append(at).append(" does not speak weft's protocol");
  if (other_version) t.append(" version ").append(std::to_string(ours));
  t.append(" (").append(what).append("): is it running another ");
  t.append(other_version ? "release of weft?" : "libfabric?");
  return t;
}

const char* peer_note_text(int prov_errno) noexcept {
  if (prov_errno < peer_note_base || prov_errno >= peer_note_base + peer_notes_max) return nullptr;
  notes& n = table();
  std::lock_guard l(n.m);
  const size_t i = static_cast<size_t>(prov_errno - peer_note_base);
  return i < n.texts.size() ? n.texts[i].c_str() : nullptr;
}

bool peer_note_log(const char* prov, std::string_view key, std::string_view text) noexcept {
  if (log_level_given() && !log_enabled(FI_LOG_WARN, FI_LOG_EP_CTRL, prov)) return false;
  try {
    notes& n = table();
    {
      std::lock_guard l(n.m);
      if (n.keys.size() >= static_cast<size_t>(peer_note_keys_max) || !n.keys.emplace(key).second) return false;
    }
    log_write(FI_LOG_WARN, FI_LOG_EP_CTRL, prov, __func__, __LINE__, "%.*s", static_cast<int>(text.size()),
              text.data());
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace weft
