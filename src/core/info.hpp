// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// fi_info allocation, duplication and release (newest layout), shared by the
// exported functions of every ABI version.
#include <rdma/fabric.h>

#include <memory>

namespace weft {

fi_info* info_alloc() noexcept;  // zeroed info with all attrs allocated
// A deep copy of one entry (next = NULL) whose domain attributes are the
// newest layout (core/fabric2.hpp): `domain_attr_size` bytes are read from
// the source's, its layout's size (an application's structure), the whole
// of one weft allocated by default.
fi_info* info_dup(const fi_info* info, size_t domain_attr_size = ~size_t{0}) noexcept;
void info_free(fi_info* info) noexcept;           // frees the whole list

struct info_deleter {
  void operator()(fi_info* i) const noexcept { info_free(i); }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

char* dup_cstr(const char* s);  // strdup that throws on ENOMEM, NULL-preserving

// fi_getinfo over the offered providers (getinfo.cpp); may throw.
int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
            fi_info** info);

}  // namespace weft
