// SPDX-License-Identifier: BSD-3-Clause
// The names applications know weft's providers by (core/provider.hpp): the
// provider's own in weft's libfabric.so.1, behind "weft_" in a plugin of
// another libfabric (src/plugin), for names and variables alike.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>

#include "core/params.hpp"
#include "core/provider.hpp"

namespace {

struct prefixed {
  explicit prefixed(const char* p) { weft::set_name_prefix(p); }
  ~prefixed() { weft::set_name_prefix(""); }
};

TEST(ProviderNames, OwnNamesInWeftsLibrary) {
  EXPECT_TRUE(weft::names_provider("shm", "shm"));
  EXPECT_TRUE(weft::names_provider("TCP", "tcp"));
  EXPECT_FALSE(weft::names_provider("weft_shm", "shm"));
  EXPECT_FALSE(weft::names_provider("sh", "shm"));
  EXPECT_FALSE(weft::names_provider("shmx", "shm"));
  EXPECT_FALSE(weft::names_provider(nullptr, "shm"));
  EXPECT_EQ(weft::param_env_name("shm", "inject_size"), "FI_SHM_INJECT_SIZE");
  EXPECT_EQ(weft::param_env_name(nullptr, "provider"), "FI_PROVIDER");
  ASSERT_NE(weft::find_provider("shm"), nullptr);
  EXPECT_EQ(weft::find_provider("weft_shm"), nullptr);
}

TEST(ProviderNames, PrefixedInAPlugin) {
  prefixed p("weft_");
  EXPECT_TRUE(weft::names_provider("weft_shm", "shm"));
  EXPECT_TRUE(weft::names_provider("WEFT_TCP", "tcp"));
  EXPECT_FALSE(weft::names_provider("shm", "shm")) << "the host's own shm is not weft's";
  EXPECT_FALSE(weft::names_provider("weft_", "shm"));
  EXPECT_FALSE(weft::names_provider("weft_shmx", "shm"));
  EXPECT_EQ(weft::param_env_name("shm", "inject_size"), "FI_WEFT_SHM_INJECT_SIZE");
  EXPECT_EQ(weft::param_env_name(nullptr, "provider"), "FI_PROVIDER") << "core variables keep their names";
  setenv("FI_SHM_INJECT_SIZE", "8", 1);
  setenv("FI_WEFT_SHM_INJECT_SIZE", "16", 1);
  EXPECT_EQ(weft::param_int("shm", "inject_size"), 16);
  unsetenv("FI_WEFT_SHM_INJECT_SIZE");
  EXPECT_FALSE(weft::param_int("shm", "inject_size").has_value()) << "the host shm's variable is not read";
  unsetenv("FI_SHM_INJECT_SIZE");
  weft::provider* shm = weft::find_provider("weft_shm");
  ASSERT_NE(shm, nullptr);
  EXPECT_STREQ(shm->name(), "shm") << "addresses and wire keep the transport's own name";
  EXPECT_EQ(weft::find_provider("shm"), nullptr);
}

}  // namespace
