// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The RSM face's table of settings: every WEFT_RSM_* variable libweft_rsm
// reads (config.cpp, util.cpp), its kind, its default and what it accepts.
// Each value is checked against its row where it is read, a value not taken
// is said once on stderr (report_setting), and tests/install/variables.sh
// checks the man pages against the rows. Header only, with no dependency: the
// listing program includes it.
#include <climits>
#include <cstring>
#include <string>

namespace weft::rsm {

struct setting {
  const char* name;
  const char* kind;     // integer, choice, boolean, path or text
  const char* dflt;     // a number for an integer, unless it depends on the host ("physical memory")
  const char* accepts;  // in words (an integer: nullptr, its range says it)
  long long min, max;   // integer: the range
};

// What a row accepts, in words: an integer's range ("10 to 3600000").
inline std::string accepted(const setting& s) {
  if (s.accepts) return s.accepts;
  return s.max == LONG_MAX ? "at least " + std::to_string(s.min)
                           : std::to_string(s.min) + " to " + std::to_string(s.max);
}

inline constexpr setting settings[] = {
    {"WEFT_RSM_NODES", "text", "none: this host is node 1",
     "id=host[:port] entries separated by blanks or commas", 0, 0},
    {"WEFT_RSM_CONFIG", "path", "/etc/weft/rsm.conf", "a readable file in the syntax of WEFT_RSM_NODES", 0,
     0},
    {"WEFT_RSM_NODE_ID", "integer", "the entry whose address is this host's", nullptr, 1, 4294967295},
    {"WEFT_RSM_PORT", "integer", "7389", nullptr, 1, 65535},
    {"WEFT_RSM_RUNDIR", "path", "/dev/shm/weft-rsm-<uid>", "a folder this user may create or own", 0, 0},
    {"WEFT_RSM_TIMEOUT_MS", "integer", "10000", nullptr, 10, 3600000},
    {"WEFT_RSM_CONNECT_TIMEOUT_MS", "integer", "5000", nullptr, 10, 3600000},
    {"WEFT_RSM_LIVENESS_MS", "integer", "5000", nullptr, 100, 3600000},
    {"WEFT_RSM_ACK_TIMEOUT_MS", "integer", "2000", nullptr, 10, 3600000},
    {"WEFT_RSM_SPIN_US", "integer", "100", nullptr, 0, 1000000},
    {"WEFT_RSM_COMPLETION", "choice", "delivery", "delivery, transmit", 0, 0},
    {"WEFT_RSM_BYTE_ORDER", "choice", "the CPU's", "big, little", 0, 0},
    {"WEFT_RSM_MAX_SEGMENT_SIZE", "integer", "physical memory", nullptr, 1, LONG_MAX},
    {"WEFT_RSM_TOTAL_EXPORT_SIZE", "integer", "physical memory", nullptr, 1, LONG_MAX},
    {"WEFT_RSM_MAX_EXPORT_SEGMENTS", "integer", "1024", nullptr, 1, 1 << 20},
    {"WEFT_RSM_MAX_IMPORT_SEGMENTS", "integer", "1024", nullptr, 1, 1 << 20},
    {"WEFT_RSM_SEGMENTID_FILE", "path", "/etc/weft/rsm.segmentid, else /etc/rsm/rsm.segmentid",
     "a readable file of reserved ranges", 0, 0},
    {"WEFT_RSM_LOG", "boolean", "0", "1 or 0", 0, 1},
};

inline const setting* find_setting(const char* name) noexcept {
  for (const setting& s : settings)
    if (!strcmp(name, s.name)) return &s;
  return nullptr;
}

}  // namespace weft::rsm
