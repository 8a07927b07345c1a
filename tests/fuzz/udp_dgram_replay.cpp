// SPDX-License-Identifier: BSD-3-Clause
// Replays a corpus through the udp datagram decoder (udp_dgram_target.cpp):
// replay.hpp (tests/fuzz/corpus/udp_dgram in CI).
#include <cstdint>
#include <cstring>
#include <string>

#include "prov/udp/udp_proto.hpp"
#include "replay.hpp"

int weft_fuzz_udp_dgram(const uint8_t* data, size_t size);

namespace {

using weft_fuzz::bytes;

// Byte 0 shapes the receive; then the datagram.
bytes dgram(uint8_t shape, bool tagged, uint64_t tag, bool cq_data, uint64_t data, size_t payload) {
  const weft::udp::header h = weft::udp::encode(tagged, tag, cq_data, data);
  bytes b(1 + sizeof h);
  b[0] = shape;
  memcpy(b.data() + 1, &h, sizeof h);
  for (size_t i = 0; i < payload; ++i) b.push_back(static_cast<unsigned char>(i * 13 + 1));
  return b;
}

// Seeds: every kind of message, long and empty ones, and near misses (each
// valid but for one field).
weft_fuzz::seed_list seeds() {
  weft_fuzz::seed_list s;
  s.push_back({"msg", dgram(0x41, false, 0, false, 0, 40)});
  s.push_back({"empty", dgram(0x00, false, 0, false, 0, 0)});
  s.push_back({"tagged", dgram(0x7f, true, 0xfeedfacecafe, false, 0, 100)});
  s.push_back({"cq_data", dgram(0x13, false, 0, true, 0x0123456789abcdef, 7)});
  s.push_back({"tagged_cq_data", dgram(0xff, true, 1, true, 2, 300)});
  s.push_back({"long", dgram(0x26, false, 0, false, 0, 1448)});
  auto miss = [&](const char* name, size_t at, uint8_t value) {
    bytes b = dgram(0x35, false, 0, false, 0, 16);
    b[1 + at] = value;
    s.push_back({name, b});
  };
  miss("bad_magic", 0, 'w');
  miss("bad_version", 2, 2);
  miss("unknown_flag", 3, 0x04);
  miss("reserved", 6, 1);
  miss("tag_without_flag", 12, 1);
  miss("data_without_flag", 20, 1);
  bytes short_hdr = dgram(0x01, true, 5, false, 0, 0);
  short_hdr.pop_back();
  s.push_back({"short", short_hdr});
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  return weft_fuzz::replay_main(argc, argv, weft_fuzz_udp_dgram, seeds());
}
