// SPDX-License-Identifier: BSD-3-Clause
// weft_plugin_tests runs the multi-process suites (tests/unit) over weft's
// providers as plugins of Debian's libfabric. First: that it really does.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <rdma/fabric.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "../unit/fixture.hpp"

namespace {

std::string maps() {
  std::ifstream f("/proc/self/maps");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(loaded, ProvidersServedByDebiansLibfabric) {
  for (const char* own : {"shm", "tcp"}) {
    EXPECT_TRUE(weft_test::offered(weft_test::prov_name(own))) << weft_test::prov_name(own);
    // The host's own provider of that name is still there, beside weft's.
    EXPECT_TRUE(weft_test::offered(own)) << own;
  }
  Dl_info where{};
  ASSERT_NE(dladdr(dlsym(RTLD_DEFAULT, "fi_getinfo"), &where), 0);
  char* loaded = realpath(where.dli_fname, nullptr);
  char* debians = realpath("/usr/lib/x86_64-linux-gnu/libfabric.so.1", nullptr);
  ASSERT_TRUE(loaded && debians);
  EXPECT_STREQ(loaded, debians) << "fi_getinfo is not Debian's";
  free(loaded);
  free(debians);
  const std::string m = maps();
  EXPECT_NE(m.find("/libweft_shm-fi.so"), std::string::npos);
  EXPECT_NE(m.find("/libweft_tcp-fi.so"), std::string::npos);
  // The plugins add nothing to the process's symbol space (plugin.map).
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "fi_prov_ini"), nullptr);
}

}  // namespace
