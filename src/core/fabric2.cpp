// SPDX-License-Identifier: BSD-3-Clause
// The libfabric series of the program that loaded weft, read from what its
// objects bind: a program built against 2.x headers needs fi_getinfo@FABRIC_1.8
// (or 1.9) of libfabric.so.1 (its ELF version needs, DT_VERNEED). fi_tostr
// uses it before the program has asked for any version.
#include "core/fabric2.hpp"

#include <elf.h>
#include <link.h>

#include <cstring>
#include <mutex>

namespace weft {

namespace {

// The newest FABRIC_1.x node one object needs of libfabric.so.1, as the API
// version that brought it (0: none of 1.7 ... 1.9).
uint32_t series_needed(const dl_phdr_info* obj) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < obj->dlpi_phnum; ++i)
    if (obj->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(obj->dlpi_addr + obj->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  // The loader relocates some of these entries in place and not others: an
  // address below the object's base is still an offset.
  auto at = [obj](ElfW(Addr) v) { return v < obj->dlpi_addr ? obj->dlpi_addr + v : v; };
  const char* strtab = nullptr;
  const ElfW(Verneed)* need = nullptr;
  ElfW(Xword) count = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(at(d->d_un.d_ptr));
    if (d->d_tag == DT_VERNEED) need = reinterpret_cast<const ElfW(Verneed)*>(at(d->d_un.d_ptr));
    if (d->d_tag == DT_VERNEEDNUM) count = d->d_un.d_val;
  }
  if (!strtab || !need) return 0;
  uint32_t newest = 0;
  for (ElfW(Xword) n = 0; n < count; ++n) {
    if (!strcmp(strtab + need->vn_file, "libfabric.so.1")) {
      auto* aux = reinterpret_cast<const ElfW(Vernaux)*>(reinterpret_cast<const char*>(need) + need->vn_aux);
      for (ElfW(Half) k = 0; k < need->vn_cnt; ++k) {
        const char* node = strtab + aux->vna_name;
        uint32_t v = !strcmp(node, "FABRIC_1.9")   ? FI_VERSION(2, 6)
                     : !strcmp(node, "FABRIC_1.8") ? FI_VERSION(2, 0)
                     : !strcmp(node, "FABRIC_1.7") ? FI_VERSION(1, 20)
                                                   : 0;
        if (v > newest) newest = v;
        if (!aux->vna_next) break;
        aux = reinterpret_cast<const ElfW(Vernaux)*>(reinterpret_cast<const char*>(aux) + aux->vna_next);
      }
    }
    if (!need->vn_next) break;
    need = reinterpret_cast<const ElfW(Verneed)*>(reinterpret_cast<const char*>(need) + need->vn_next);
  }
  return newest;
}

}  // namespace

uint32_t linked_api() {
  static uint32_t series = 0;
  static std::once_flag once;
  std::call_once(once, [] {
    dl_iterate_phdr(
        [](dl_phdr_info* obj, size_t, void* out) {
          uint32_t v = series_needed(obj);
          auto* s = static_cast<uint32_t*>(out);
          if (v > *s) *s = v;
          return 0;
        },
        &series);
  });
  return series;
}

}  // namespace weft
