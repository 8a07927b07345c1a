// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer entry for the tcp wire decoders (tcp_frame_target.cpp). Built by
// tests/fuzz/run.sh with Debian's clang (-fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>

int weft_fuzz_tcp_frame(const uint8_t* data, size_t size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return weft_fuzz_tcp_frame(data, size);
}
