// SPDX-License-Identifier: BSD-3-Clause
// Segment discovery. A published segment is one file,
// <run_dir>/<provider>/<node>/<segment id in hex>, naming the process and the
// service address that answer connects for it. Creating the file with link(2)
// is what makes a segment id unique on its node (RSMERR_SEGID_IN_USE); an
// entry whose process is gone (pid and start time no longer match) is stale
// and removed by whoever finds it.
//
// On one node a lookup reads the file. Another node is asked through its
// directory: a TCP port on the node's address from the node table, held by
// the service thread of one process on that node that has something
// published there (the first to bind it; another takes over within a
// fraction of a second if it goes) and answered from that node's files. So
// nothing is ever started by hand.
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.hpp"
#include "rsm.hpp"

namespace weft::rsm {
namespace {

// Creates dir (mode 0700) if missing; refuses one that another user could
// have planted (not ours, not a directory, or open to others).
bool ensure_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
    RSM_LOG("registry directory %s is not a private directory of this user", dir.c_str());
    return false;
  }
  return true;
}

bool ensure_path(const std::string& prov, rsm_node_id_t node) {
  const std::string& root = cfg().run_dir;
  return ensure_dir(root) && ensure_dir(root + "/" + prov) && ensure_dir(registry_dir(prov, node));
}

std::string entry_path(const std::string& prov, rsm_node_id_t node, rsm_memseg_id_t segid) {
  char name[16];
  snprintf(name, sizeof name, "%08x", segid);
  return registry_dir(prov, node) + "/" + name;
}

std::string to_hex(const std::vector<uint8_t>& b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s.push_back(digits[x >> 4]);
    s.push_back(digits[x & 15]);
  }
  return s;
}

bool from_hex(const std::string& s, std::vector<uint8_t>* out) {
  if (s.size() % 2 || s.size() / 2 > proto::max_addr) return false;
  out->clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    auto nib = [](char ch) -> int {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      return -1;
    };
    int hi = nib(s[i]), lo = nib(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return true;
}

bool read_entry(const std::string& path, reg_entry* e) {
  std::string text;
  if (!read_file(path, &text)) return false;
  std::vector<std::string> w = split_words(text);
  if (w.size() != 4) return false;
  char *end1 = nullptr, *end2 = nullptr, *end3 = nullptr;
  e->instance = strtoull(w[0].c_str(), &end1, 16);
  unsigned long pid = strtoul(w[1].c_str(), &end2, 10);
  e->start_time = strtoull(w[2].c_str(), &end3, 10);
  if (*end1 || *end2 || *end3 || pid > UINT32_MAX) return false;
  e->pid = static_cast<uint32_t>(pid);
  return from_hex(w[3], &e->addr);
}

bool owner_alive(const reg_entry& e) {
  if (e.pid == 0) return false;
  if (kill(static_cast<pid_t>(e.pid), 0) != 0 && errno == ESRCH) return false;
  uint64_t st = process_start_time(e.pid);
  return st != 0 && st == e.start_time;
}

// Entry exists and its owner is gone: remove it so the id can be reused.
bool remove_if_stale(const std::string& path) {
  reg_entry old;
  if (read_entry(path, &old) && owner_alive(old)) return false;
  unlink(path.c_str());
  return true;
}

}  // namespace

uint64_t process_start_time(uint32_t pid) noexcept {
  char path[64];
  snprintf(path, sizeof path, "/proc/%u/stat", pid);
  FILE* f = fopen(path, "re");
  if (!f) return 0;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return 0;
  // A zombie has exited: it publishes nothing any more.
  if (p[2] == 'Z' || p[2] == 'X') return 0;
  // Fields after the command: state is field 3, starttime field 22.
  int field = 2;
  for (char* s = p + 1; *s; s++) {
    if (*s == ' ') {
      field++;
      if (field == 22) return strtoull(s + 1, nullptr, 10);
    }
  }
  return 0;
}

std::string registry_dir(const std::string& prov, rsm_node_id_t node) {
  return cfg().run_dir + "/" + prov + "/" + std::to_string(node);
}

std::string map_socket_path(uint32_t pid, uint64_t instance) {
  char name[64];
  snprintf(name, sizeof name, "/m%u-%016llx", pid, static_cast<unsigned long long>(instance));
  return cfg().run_dir + name;
}

namespace {

// Removes what processes that died without unpublishing left in a node's
// registry (a bounded number per call).
void collect_stale(const std::string& dir) {
  dir_ptr d{opendir(dir.c_str())};
  if (!d) return;
  int budget = 256;
  while (dirent* de = readdir(d.get())) {
    if (de->d_name[0] == '.') continue;  // ".", "..", files being written
    if (budget-- == 0) break;
    remove_if_stale(dir + "/" + de->d_name);
  }
}

}  // namespace

void registry_collect_sockets() noexcept {
  // Mapping sockets are named m<pid>-<instance>: those of dead processes go.
  try {
    dir_ptr d{opendir(cfg().run_dir.c_str())};
    if (!d) return;
    while (dirent* de = readdir(d.get())) {
      unsigned pid = 0;
      if (de->d_name[0] != 'm' || sscanf(de->d_name + 1, "%u-", &pid) != 1 || pid == 0) continue;
      if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        unlink((cfg().run_dir + "/" + de->d_name).c_str());
    }
  } catch (...) {
    // Nothing collected this time.
  }
}

int registry_publish(controller* c, rsm_memseg_id_t* segid, const reg_entry& e) {
  if (!ensure_path(c->prov, c->node)) return RSMERR_INSUFFICIENT_RESOURCES;
  std::string dir = registry_dir(c->prov, c->node);
  collect_stale(dir);
  char tmpname[64];
  snprintf(tmpname, sizeof tmpname, "/.tmp-%016llx", static_cast<unsigned long long>(random64()));
  std::string tmp = dir + tmpname;
  char head[96];
  snprintf(head, sizeof head, "%llx %u %llu ", static_cast<unsigned long long>(e.instance), e.pid,
           static_cast<unsigned long long>(e.start_time));
  std::string content = std::string(head) + to_hex(e.addr) + "\n";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return RSMERR_INSUFFICIENT_RESOURCES;
  bool written = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  close(fd);
  if (!written) {
    unlink(tmp.c_str());
    return RSMERR_INSUFFICIENT_RESOURCES;
  }
  int result = RSMERR_SEGID_IN_USE;
  if (*segid != 0) {
    std::string path = entry_path(c->prov, c->node, *segid);
    for (int attempt = 0; attempt < 2; attempt++) {
      if (link(tmp.c_str(), path.c_str()) == 0) {
        result = RSM_SUCCESS;
        break;
      }
      if (errno != EEXIST || !remove_if_stale(path)) break;
    }
  } else {
    // System ids: the lowest free one from RSM_SYSTEM_ID_BASE up, starting
    // where this process last found one.
    static std::atomic<uint32_t> hint{RSM_SYSTEM_ID_BASE};
    uint32_t id = std::max<uint32_t>(hint.load(), RSM_SYSTEM_ID_BASE);
    for (uint32_t tries = 0; tries < (1u << 20);
         tries++, id = id == UINT32_MAX ? RSM_SYSTEM_ID_BASE : id + 1) {
      std::string path = entry_path(c->prov, c->node, id);
      if (link(tmp.c_str(), path.c_str()) == 0 ||
          (errno == EEXIST && remove_if_stale(path) && link(tmp.c_str(), path.c_str()) == 0)) {
        *segid = id;
        hint.store(id + 1);
        result = RSM_SUCCESS;
        break;
      }
      if (errno != EEXIST) {
        result = RSMERR_INSUFFICIENT_RESOURCES;
        break;
      }
    }
  }
  unlink(tmp.c_str());
  return result;
}

void registry_unpublish(controller* c, rsm_memseg_id_t segid) noexcept {
  std::string path = entry_path(c->prov, c->node, segid);
  reg_entry e;
  if (read_entry(path, &e) && e.instance == c->instance) unlink(path.c_str());
}

int registry_lookup_local(const std::string& prov, rsm_node_id_t node, rsm_memseg_id_t segid,
                          reg_entry* out) {
  std::string path = entry_path(prov, node, segid);
  if (!read_entry(path, out)) return RSMERR_SEG_NOT_PUBLISHED;
  if (!owner_alive(*out)) {
    unlink(path.c_str());
    return RSMERR_SEG_NOT_PUBLISHED;
  }
  return RSM_SUCCESS;
}

namespace {

// Writes or reads all of buf on a non-blocking socket before the deadline.
bool sock_io(int fd, void* buf, size_t len, bool send_it, const deadline& d) {
  char* p = static_cast<char*>(buf);
  while (len) {
    ssize_t n = send_it ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return false;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    pollfd pf{fd, static_cast<short>(send_it ? POLLOUT : POLLIN), 0};
    int ms = d.remaining_ms();
    if (ms == 0 || poll(&pf, 1, ms) <= 0) return false;
  }
  return true;
}

// One question to a node's directory. Returns RSM_SUCCESS, SEG_NOT_PUBLISHED,
// or -ECONNREFUSED / -ETIMEDOUT-like negatives for the caller's retry policy.
int ask_directory(const node_entry& n, const std::string& prov, rsm_memseg_id_t segid, const deadline& d,
                  reg_entry* out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -EMFILE;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = n.ipv4;
  sa.sin_port = htons(n.port);
  int result = -ETIMEDOUT;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) {
      result = -errno;
      close(fd);
      return result;
    }
    pollfd pf{fd, POLLOUT, 0};
    int ms = d.remaining_ms();
    if (poll(&pf, 1, ms < 0 ? 1000 : std::min(ms, 1000)) != 1) {
      close(fd);
      return -ETIMEDOUT;
    }
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
      close(fd);
      return -err;
    }
  }
  proto::writer w(proto::lookup);
  w.u32(n.id).u32(segid).fixed(prov.c_str(), proto::prov_len);
  std::vector<uint8_t>& req = w.out();
  uint8_t rep[16 + 4 + 8 + 4 + 2 + proto::max_addr];
  size_t got = 0;
  if (sock_io(fd, req.data(), req.size(), true, d)) {
    // The reply is as long as its address says: read the fixed part, then the rest.
    const size_t fixed_part = 16 + 4 + 8 + 4 + 2;
    if (sock_io(fd, rep, fixed_part, false, d)) {
      size_t alen = rep[fixed_part - 2] | static_cast<size_t>(rep[fixed_part - 1]) << 8;
      if (alen <= proto::max_addr && (alen == 0 || sock_io(fd, rep + fixed_part, alen, false, d)))
        got = fixed_part + alen;
    }
  }
  close(fd);
  if (!got) return -ETIMEDOUT;
  proto::reader r(rep, got);
  uint16_t t;
  uint64_t sender;
  if (!r.header(&t, &sender) || t != proto::lookup_rep) return -EPROTO;
  uint32_t status = r.u32();
  out->instance = r.u64();
  out->pid = r.u32();
  if (!r.bytes(&out->addr, proto::max_addr) || !r.ok()) return -EPROTO;
  if (status != RSM_SUCCESS) return RSMERR_SEG_NOT_PUBLISHED;
  return out->addr.empty() || out->instance == 0 ? -EPROTO : RSM_SUCCESS;
}

}  // namespace

int registry_lookup(controller* c, rsm_node_id_t node, rsm_memseg_id_t segid, const deadline& d,
                    reg_entry* out) {
  if (node == c->node) return registry_lookup_local(c->prov, node, segid, out);
  if (!c->tcp) return RSMERR_REMOTE_NODE_UNREACHABLE;  // shm reaches this node only
  const node_entry* n = cfg().find(node);
  if (!n) return RSMERR_REMOTE_NODE_UNREACHABLE;
  // A refused connection means the node is up and nobody there holds the
  // directory (nothing is published), except for the moment one holder
  // hands over to the next: retry for a short while only.
  uint64_t refused_since = 0;
  for (;;) {
    int r = ask_directory(*n, c->prov, segid, d, out);
    if (r == RSM_SUCCESS || r == RSMERR_SEG_NOT_PUBLISHED) return r;
    if (r == -ECONNREFUSED) {
      if (!refused_since) refused_since = now_ms();
      if (now_ms() - refused_since >= 500) return RSMERR_SEG_NOT_PUBLISHED;
    }
    if (d.expired()) return RSMERR_REMOTE_NODE_UNREACHABLE;
    usleep(50 * 1000);
  }
}

}  // namespace weft::rsm
