// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What a transport learnt about a peer at first contact that an application
// must hear in words: "the peer at fi_sockaddr_in://10.0.0.2:9228 does not
// speak weft's protocol (...): is it running another libfabric?". A job that
// mixes weft with another libfabric otherwise shows only a reset connection
// or a send that never stops returning -FI_EAGAIN.
//
//  * An error entry carries the text through its prov_errno: peer_note()
//    files the text once and returns a code (peer_note_base and up), and
//    fi_cq_strerror / fi_eq_strerror give the text back for it (whatever
//    err_data the application passes). The same text gets the same code.
//  * The log says it once per key (a peer's address and the cause), even
//    when FI_LOG_LEVEL is unset: a process that a foreign peer reached has
//    no operation of its own to fail, and this line is all its user learns.
//    FI_LOG_LEVEL set, the usual rules apply (warn level, subsystem
//    ep_ctrl, FI_LOG_PROV).
//
// Both are bounded (notes_max texts, keys_max keys per process: a hostile
// peer cannot grow them), thread-safe, and meant for connection setup or a
// peer's first lookup: never the data path.
#include <string>
#include <string_view>

namespace weft {

inline constexpr int peer_note_base = 0x57460000;  // "WF": above every errno and FI_E* code
inline constexpr int peer_notes_max = 256;
inline constexpr int peer_note_keys_max = 256;

// The prov_errno for `text`: a code fi_cq_strerror turns back into it, or
// `fallback` when the table is full or memory is short.
int peer_note(std::string_view text, int fallback) noexcept;

// The sentence that names such a peer: "the peer at AT does not speak
// weft's protocol (WHAT): is it running another libfabric?", or, when it
// speaks weft's protocol of another version (other_version), "... weft's
// protocol version OURS (WHAT): is it running another release of weft?".
// Throws bad_alloc.
std::string peer_foreign_text(std::string_view at, std::string_view what, bool other_version, unsigned ours);

// The text of a code from peer_note(), or nullptr for any other value.
const char* peer_note_text(int prov_errno) noexcept;

// Writes `text` to the log (provider `prov`, level warn) unless `key` was
// logged before; see above for when it shows. True when it was written.
bool peer_note_log(const char* prov, std::string_view key, std::string_view text) noexcept;

}  // namespace weft
