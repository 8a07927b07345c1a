// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Wire formats of the RSM face. Three channels:
//  - control messages between controllers' service endpoints (fi_send/fi_recv
//    on the provider itself): connect, disconnect, abort, rebind, signals,
//    liveness pings;
//  - the directory (a TCP port per node) that maps a segment id to the
//    service address of the process that published it;
//  - the mapping socket (a Unix socket per process) that hands an importer on
//    the same node a file descriptor for the segment's memory.
// Every field is little-endian whatever the host; every message from a peer
// is read through a bounds-checked reader, so a short or hostile message is
// dropped, never trusted.
#include <cstdint>
#include <cstring>
#include <vector>

namespace weft::rsm::proto {

constexpr uint32_t magic = 0x4d535257;  // "WRSM"
constexpr uint16_t version = 1;
constexpr size_t max_msg = 1024;  // control message buffer
constexpr size_t max_addr = 512;  // a provider address
constexpr size_t prov_len = 16;   // provider name in a directory request

enum type : uint16_t {
  // control messages
  connect_req = 1,
  connect_rep = 2,
  disconnect = 3,
  abort = 4,
  rebind = 5,
  rebind_ack = 6,
  signal_to_export = 7,
  signal_to_import = 8,
  ping = 9,
  pong = 10,
  // directory
  lookup = 100,
  lookup_rep = 101,
  // mapping socket
  map_req = 200,
  map_rep = 201,
  map_push = 202,
};

class writer {
public:
  explicit writer(uint16_t t, uint64_t sender = 0) {
    u32(magic);
    u16(version);
    u16(t);
    u64(sender);
  }
  writer& u8(uint8_t v) {
    b_.push_back(v);
    return *this;
  }
  writer& u16(uint16_t v) { return le(v, 2); }
  writer& u32(uint32_t v) { return le(v, 4); }
  writer& u64(uint64_t v) { return le(v, 8); }
  writer& bytes(const void* p, size_t n) {
    u16(static_cast<uint16_t>(n));
    const uint8_t* s = static_cast<const uint8_t*>(p);
    b_.insert(b_.end(), s, s + n);
    return *this;
  }
  writer& fixed(const char* s, size_t n) {  // NUL-padded
    size_t l = strnlen(s, n);
    b_.insert(b_.end(), s, s + l);
    b_.insert(b_.end(), n - l, 0);
    return *this;
  }
  std::vector<uint8_t>& out() { return b_; }

private:
  writer& le(uint64_t v, int n) {
    for (int i = 0; i < n; i++) b_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> b_;
};

class reader {
public:
  reader(const void* p, size_t n) : p_(static_cast<const uint8_t*>(p)), n_(n) {}
  // Reads the common header; false if it is not ours.
  bool header(uint16_t* t, uint64_t* sender) {
    uint32_t m = u32();
    uint16_t v = u16();
    *t = u16();
    *sender = u64();
    return ok_ && m == magic && v == version;
  }
  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  bool bytes(std::vector<uint8_t>* out, size_t max) {
    size_t n = u16();
    if (!ok_ || n > max || n > n_) return ok_ = false;
    out->assign(p_, p_ + n);
    p_ += n;
    n_ -= n;
    return true;
  }
  bool fixed(char* dst, size_t n) {  // NUL-terminates in dst[n]
    if (n > n_) return ok_ = false;
    memcpy(dst, p_, n);
    dst[n] = 0;
    p_ += n;
    n_ -= n;
    return true;
  }
  bool ok() const { return ok_; }

private:
  uint64_t le(int n) {
    if (static_cast<size_t>(n) > n_) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += n;
    n_ -= n;
    return v;
  }
  const uint8_t* p_;
  size_t n_;
  bool ok_ = true;
};

}  // namespace weft::rsm::proto
