// SPDX-License-Identifier: BSD-3-Clause
// Configuration from the environment: the cluster node table (which node id
// lives at which address), this process's node id, the registry directory,
// time bounds and limits; and rsm_get_segmentid_range's reserved-range file.
// Everything has a default, so one host needs no configuration at all.
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rsm.hpp"
#include "settings.hpp"

namespace weft::rsm {
namespace {

// An integer setting, checked against its row (settings.hpp): the value, or
// the row's default (`host_default` where it depends on the host) with a
// line saying why.
long env_long(const char* name, long host_default = 0) {
  const setting& row = *find_setting(name);
  const long dflt =
      isdigit(static_cast<unsigned char>(row.dflt[0])) ? strtol(row.dflt, nullptr, 10) : host_default;
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  errno = 0;
  long x = strtol(v, &end, 0);
  if (end == v || *end || errno == ERANGE || x < row.min || x > row.max) {
    report_setting(name, v, end == v || *end ? "not an integer" : "out of range");
    return dflt;
  }
  return x;
}

// A setting with choices: the index of its value among them, or -1 when unset
// or not one of them (said: the default is used).
int env_choice(const char* name) {
  const setting& row = *find_setting(name);
  const char* v = getenv(name);
  if (!v || !*v) return -1;
  std::string choices = row.accepts;  // "a, b"
  for (char& ch : choices)
    if (ch == ',') ch = ' ';
  const std::vector<std::string> each = split_words(choices);
  for (size_t i = 0; i < each.size(); ++i)
    if (each[i] == v) return static_cast<int>(i);
  report_setting(name, v, "not a known value");
  return -1;
}

bool resolve_ipv4(const std::string& host, uint32_t* out) {
  in_addr a;
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) {
    *out = a.s_addr;
    return true;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
  *out = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(res);
  return true;
}

// "id=host[:port]" entries separated by blanks, commas or newlines; '#'
// starts a comment that runs to the end of the line.
bool parse_table(const std::string& text, uint16_t port, std::vector<node_entry>* out, std::string* err) {
  std::string clean;
  bool comment = false;
  for (char ch : text) {
    if (ch == '#') comment = true;
    if (ch == '\n') comment = false;
    if (comment) continue;
    clean.push_back(ch == ',' || ch == ';' ? ' ' : ch);
  }
  for (const std::string& tok : split_words(clean)) {
    size_t eq = tok.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == tok.size()) {
      *err = "node table entry '" + tok + "' is not id=host[:port]";
      return false;
    }
    char* end = nullptr;
    std::string id_text = tok.substr(0, eq);  // end points into it
    unsigned long id = strtoul(id_text.c_str(), &end, 0);
    if (*end || id == 0 || id > UINT32_MAX) {
      *err = "node table entry '" + tok + "': bad node id";
      return false;
    }
    node_entry e;
    e.id = static_cast<rsm_node_id_t>(id);
    std::string host = tok.substr(eq + 1);
    e.port = port;
    size_t colon = host.rfind(':');
    if (colon != std::string::npos) {
      std::string port_text = host.substr(colon + 1);
      unsigned long p = strtoul(port_text.c_str(), &end, 10);
      if (*end || p == 0 || p > 65535) {
        *err = "node table entry '" + tok + "': bad port";
        return false;
      }
      e.port = static_cast<uint16_t>(p);
      host.resize(colon);
    }
    e.host = host;
    if (!resolve_ipv4(host, &e.ipv4)) {
      *err = "node table entry '" + tok + "': cannot resolve " + host;
      return false;
    }
    for (const node_entry& o : *out)
      if (o.id == e.id) {
        *err = "node table names node " + std::to_string(e.id) + " twice";
        return false;
      }
    out->push_back(e);
  }
  return true;
}

bool local_ipv4(uint32_t a) {
  if ((ntohl(a) >> 24) == 127) return true;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (ifaddrs* i = ifs; i && !found; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == a)
      found = true;
  freeifaddrs(ifs);
  return found;
}

config load() {
  config c;
  uint16_t port = static_cast<uint16_t>(env_long("WEFT_RSM_PORT"));
  std::string text, source = "WEFT_RSM_NODES";
  if (const char* v = getenv("WEFT_RSM_NODES"); v && *v) {
    text = v;
    c.table_given = true;
  } else {
    const char* path = getenv("WEFT_RSM_CONFIG");
    bool named = path && *path;
    if (!named) path = "/etc/weft/rsm.conf";
    source = std::string("WEFT_RSM_CONFIG=") + path;
    if (read_file(path, &text)) {
      c.table_given = true;
    } else if (named) {
      c.error = RSMERR_BAD_CONF;
      c.error_text = std::string("WEFT_RSM_CONFIG=") + path + ": cannot read it";
    }
  }
  if (c.table_given && !parse_table(text, port, &c.nodes, &c.error_text)) {
    c.error = RSMERR_BAD_CONF;
    c.error_text = source + ": " + c.error_text;
  }
  if (c.nodes.empty()) {
    // One host, no configuration: this host is node 1, reachable on loopback.
    node_entry e;
    e.id = 1;
    e.host = "127.0.0.1";
    e.ipv4 = htonl(INADDR_LOOPBACK);
    e.port = port;
    c.nodes.push_back(e);
  }
  if (const char* v = getenv("WEFT_RSM_NODE_ID"); v && *v) {
    char* end = nullptr;
    unsigned long id = strtoul(v, &end, 0);
    if (*end || end == v || id == 0 || id > UINT32_MAX) {
      c.error = RSMERR_BAD_CONF;
      c.error_text = std::string("WEFT_RSM_NODE_ID=") + v +
                     ": not a node id (accepted: " + accepted(*find_setting("WEFT_RSM_NODE_ID")) + ")";
    } else {
      c.local_node = static_cast<rsm_node_id_t>(id);
    }
  } else {
    c.local_known = false;
    for (const node_entry& e : c.nodes)
      if (local_ipv4(e.ipv4)) {
        c.local_node = e.id;
        c.local_known = true;
        break;
      }
    if (!c.local_known) c.local_node = 1;
  }
  if (const char* v = getenv("WEFT_RSM_RUNDIR"); v && *v) {
    c.run_dir = v;
  } else {
    struct stat st;
    std::string base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    c.run_dir = base + "/weft-rsm-" + std::to_string(getuid());
  }
  c.timeout_ms = static_cast<int>(env_long("WEFT_RSM_TIMEOUT_MS"));
  c.connect_timeout_ms = static_cast<int>(env_long("WEFT_RSM_CONNECT_TIMEOUT_MS"));
  c.liveness_ms = static_cast<int>(env_long("WEFT_RSM_LIVENESS_MS"));
  c.ack_timeout_ms = static_cast<int>(env_long("WEFT_RSM_ACK_TIMEOUT_MS"));
  c.spin_us = static_cast<int>(env_long("WEFT_RSM_SPIN_US"));
  if (env_choice("WEFT_RSM_COMPLETION") == 1)
    c.put_completion = FI_TRANSMIT_COMPLETE;  // faster where the target must progress; see docs/rsm.md
  // Announce another byte order than the CPU's: how the tests exercise the
  // swapping a mixed-endian pair of nodes needs.
  const int order = env_choice("WEFT_RSM_BYTE_ORDER");
  c.big_endian = order < 0 ? __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ : order == 0;
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  size_t phys = pages > 0 && psz > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(psz) : (1ull << 34);
  c.max_segment_size = static_cast<size_t>(env_long("WEFT_RSM_MAX_SEGMENT_SIZE", static_cast<long>(phys)));
  c.tot_export_size = static_cast<size_t>(env_long("WEFT_RSM_TOTAL_EXPORT_SIZE", static_cast<long>(phys)));
  c.tot_map_size = phys;
  c.max_export_segments = static_cast<unsigned long>(env_long("WEFT_RSM_MAX_EXPORT_SEGMENTS"));
  c.max_import_segments = static_cast<unsigned long>(env_long("WEFT_RSM_MAX_IMPORT_SEGMENTS"));
  // A bad node table or node id fails rsm_get_controller (RSMERR_BAD_CONF):
  // said here, whatever WEFT_RSM_LOG says.
  if (c.error) log("%s; rsm_get_controller fails with RSMERR_BAD_CONF", c.error_text.c_str());
  return c;
}

}  // namespace

const node_entry* config::find(rsm_node_id_t id) const noexcept {
  for (const node_entry& e : nodes)
    if (e.id == id) return &e;
  return nullptr;
}

const config& cfg() {
  // Never destroyed: the library's at-exit cleanup still reads it after
  // function-local statics would have gone.
  static const config* c = new config(load());
  return *c;
}

}  // namespace weft::rsm

using namespace weft::rsm;

// Solaris's /etc/rsm/rsm.segmentid format: "reserved <appid> <base, hex>
// <length, decimal>" per line, '#' comments. The file is
// $WEFT_RSM_SEGMENTID_FILE, else /etc/weft/rsm.segmentid, else
// /etc/rsm/rsm.segmentid.
RSM_API int rsm_get_segmentid_range(const char* appid, rsm_memseg_id_t* baseid, uint32_t* length) {
  return guard([&]() -> int {
    if (!appid || !baseid || !length) return RSMERR_BAD_ADDR;
    const char* env = getenv("WEFT_RSM_SEGMENTID_FILE");
    std::string text;
    bool found = env && *env ? read_file(env, &text)
                             : read_file("/etc/weft/rsm.segmentid", &text) ||
                                   read_file("/etc/rsm/rsm.segmentid", &text);
    if (!found && env && *env)
      report_setting("WEFT_RSM_SEGMENTID_FILE", env, "cannot read it",
                     "rsm_get_segmentid_range fails with RSMERR_BAD_CONF");
    if (!found) return RSMERR_BAD_CONF;
    size_t at = 0;
    while (at < text.size()) {
      size_t nl = text.find('\n', at);
      std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      at = nl == std::string::npos ? text.size() : nl + 1;
      size_t hash = line.find('#');
      if (hash != std::string::npos) line.resize(hash);
      std::vector<std::string> field = split_words(line);
      if (field.empty()) continue;
      if (field.size() != 4 || strcasecmp(field[0].c_str(), "reserved") != 0) return RSMERR_BAD_CONF;
      if (strcasecmp(field[1].c_str(), appid) != 0) continue;
      char* end = nullptr;
      unsigned long long base = strtoull(field[2].c_str(), &end, 16);
      if (*end) return RSMERR_BAD_CONF;
      unsigned long long len = strtoull(field[3].c_str(), &end, 10);
      if (*end || len == 0 || len > UINT32_MAX) return RSMERR_BAD_CONF;
      // A reserved range must lie in the application range, where publish
      // will accept its ids.
      if (base < RSM_APP_ID_BASE || base + len - 1 > RSM_APP_ID_END) return RSMERR_BAD_CONF;
      *baseid = static_cast<rsm_memseg_id_t>(base);
      *length = static_cast<uint32_t>(len);
      return RSM_SUCCESS;
    }
    return RSMERR_BAD_APPID;
  });
}
