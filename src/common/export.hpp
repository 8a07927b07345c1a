// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The library is built with -fvisibility=hidden; only the functions of the
// libfabric ABI (listed in src/abi/libfabric.map) are exported.
#define WEFT_EXPORT extern "C" __attribute__((visibility("default")))
