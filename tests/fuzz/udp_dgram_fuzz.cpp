// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer entry for the udp datagram decoder (udp_dgram_target.cpp). Built
// by tests/fuzz/run.sh udp_dgram with Debian's clang.
#include <cstddef>
#include <cstdint>

int weft_fuzz_udp_dgram(const uint8_t* data, size_t size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return weft_fuzz_udp_dgram(data, size);
}
