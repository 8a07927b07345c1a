// SPDX-License-Identifier: BSD-3-Clause
// The table of settings (core/params.hpp) and its checks where a value is
// read: a value that does not parse, is out of range or names nothing is said
// once on stderr whatever FI_LOG_LEVEL says (the variable, the value, what is
// accepted), and the default is used or the call that depends on it fails.
// Each test uses values of its own: a value is said once per process.
#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "core/params.hpp"
#include "core/provider.hpp"

namespace {

using testing::internal::CaptureStderr;
using testing::internal::GetCapturedStderr;

struct env_var {
  const char* name;
  env_var(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~env_var() { unsetenv(name); }
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int getinfo_for(const char* prov, fi_info** info) {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup(prov);
  int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, info);
  fi_freeinfo(hints);
  return ret;
}

TEST(Settings, EveryRowIsWhole) {
  auto check = [](const char* prov, const weft::param_spec& p) {
    SCOPED_TRACE(weft::param_env_name(prov, p.name));
    EXPECT_TRUE(p.help && *p.help);
    const std::string help = weft::param_help(p);
    EXPECT_NE(help.find("(default " + weft::param_default(p) + "; " + weft::param_accepted(p) + ")"),
              std::string::npos)
        << help;
    if (p.type == FI_PARAM_INT || p.type == FI_PARAM_SIZE_T) {
      EXPECT_LT(p.min, p.max) << "a number has a range";
      EXPECT_GE(p.def, p.min);
      EXPECT_LE(p.def, p.max);
    }
    if (p.type == FI_PARAM_BOOL) {
      EXPECT_TRUE(p.def == 0 || p.def == 1);
    }
    if (p.type == FI_PARAM_STRING) {
      EXPECT_TRUE(p.dflt) << "a string's default is said";
      EXPECT_TRUE(p.choices || p.accepts) << "a string says what it accepts";
    }
    EXPECT_EQ(weft::param_find(prov, p.name), &p);
  };
  for (const weft::param_spec& p : weft::param_core_rows()) check(nullptr, p);
  for (const weft::provider* prov : weft::providers())
    for (const weft::param_spec& p : prov->params()) check(prov->name(), p);
  EXPECT_EQ(weft::param_find("shm", "no_such_knob"), nullptr);
  EXPECT_EQ(weft::param_find("nosuch", "inject_size"), nullptr);
}

TEST(Settings, IntegerNotANumberIsSaidOnceAndTheDefaultUsed) {
  env_var v("FI_SHM_INJECT_SIZE", "abc");
  CaptureStderr();
  EXPECT_FALSE(weft::param_int("shm", "inject_size").has_value());
  EXPECT_EQ(weft::param_int_or_default("shm", "inject_size"), 4096);
  const std::string err = GetCapturedStderr();
  EXPECT_EQ(
      count(err, "FI_SHM_INJECT_SIZE=abc: not an integer (accepted: 0 to 4096); the default, 4096, is used"),
      1u)
      << err;
  EXPECT_NE(err.find("<warn>"), std::string::npos) << "libfabric's log format, at the default level";
}

TEST(Settings, IntegerOutOfRangeThroughGetinfo) {
  env_var v("FI_SHM_INJECT_SIZE", "99999");
  CaptureStderr();
  for (int i = 0; i < 2; ++i) {
    fi_info* info = nullptr;
    ASSERT_EQ(getinfo_for("shm", &info), 0);
    EXPECT_EQ(info->tx_attr->inject_size, 4096u);
    fi_freeinfo(info);
  }
  const std::string err = GetCapturedStderr();
  EXPECT_EQ(
      count(err, "FI_SHM_INJECT_SIZE=99999: out of range (accepted: 0 to 4096); the default, 4096, is used"),
      1u)
      << err;
}

TEST(Settings, IntegerInRangeIsTakenSilently) {
  env_var v("FI_SHM_INJECT_SIZE", "512");
  CaptureStderr();
  EXPECT_EQ(weft::param_int("shm", "inject_size"), 512);
  fi_info* info = nullptr;
  ASSERT_EQ(getinfo_for("shm", &info), 0);
  EXPECT_EQ(info->tx_attr->inject_size, 512u);
  fi_freeinfo(info);
  EXPECT_EQ(GetCapturedStderr(), "");
}

TEST(Settings, EmptyIsUnset) {
  env_var v("FI_TCP_KEEPALIVE_S", "");
  CaptureStderr();
  EXPECT_FALSE(weft::param_int("tcp", "keepalive_s").has_value());
  EXPECT_EQ(weft::param_int_or_default("tcp", "keepalive_s"), 10);
  EXPECT_EQ(GetCapturedStderr(), "");
}

TEST(Settings, BooleanNotABoolean) {
  env_var v("FI_SHM_MAP_MR", "maybe");
  CaptureStderr();
  EXPECT_FALSE(weft::param_bool("shm", "map_mr").has_value());
  EXPECT_TRUE(weft::param_bool_or_default("shm", "map_mr"));
  const std::string err = GetCapturedStderr();
  EXPECT_NE(
      err.find("FI_SHM_MAP_MR=maybe: not a boolean (accepted: a boolean: 1, 0, yes, no, true, false, on, "
               "off); the default, 1, is used"),
      std::string::npos)
      << err;
  env_var off("FI_SHM_SPLIT_COPY", "off");
  EXPECT_EQ(weft::param_bool("shm", "split_copy"), false);
}

TEST(Settings, UdpMtuOutOfRange) {
  env_var v("FI_UDP_MTU", "100");
  CaptureStderr();
  EXPECT_EQ(weft::param_int_or_default("udp", "mtu"), 1500);
  const std::string err = GetCapturedStderr();
  EXPECT_NE(err.find("FI_UDP_MTU=100: out of range (accepted: 576 to 65535); the default, 1500, is used"),
            std::string::npos)
      << err;
}

// FI_TCP_IFACE naming no interface: tcp offers nothing, and lnx with it;
// one line says so at the default level, and fi_getinfo's explanation (at
// warn) names the setting, not FI_PROVIDER.
TEST(Settings, TcpIfaceNamingNothingRemovesTcpAndLnxSayingSo) {
  weft::provider* tcp = weft::find_provider("tcp");
  weft::provider* lnx = weft::find_provider("lnx");
  ASSERT_TRUE(tcp && lnx);
  {
    env_var v("FI_TCP_IFACE", "nosuch0");
    CaptureStderr();
    fi_info* info = nullptr;
    EXPECT_EQ(getinfo_for("tcp", &info), -FI_ENODATA);
    EXPECT_EQ(getinfo_for("lnx", &info), -FI_ENODATA);
    const std::string err = GetCapturedStderr();
    EXPECT_EQ(count(err, "FI_TCP_IFACE=nosuch0: no interface 'nosuch0' is up with an address (accepted: "),
              1u)
        << err;
    EXPECT_NE(err.find("); provider tcp offers nothing, nor lnx, made of it"), std::string::npos) << err;
    EXPECT_NE(err.find("'lo'"), std::string::npos) << "the interfaces there are: " << err;
    EXPECT_EQ(err.find("FI_PROVIDER"), std::string::npos) << err;
    EXPECT_EQ(tcp->nothing_offered(), "FI_TCP_IFACE=nosuch0 names no interface that is up with an address");
    EXPECT_EQ(
        lnx->nothing_offered(),
        "its part tcp offers nothing: FI_TCP_IFACE=nosuch0 names no interface that is up with an address");
  }
  // Unset: both offer again, and nothing is said of them.
  EXPECT_FALSE(tcp->templates()->empty());
  EXPECT_EQ(tcp->nothing_offered(), "");
  lnx->templates();
  EXPECT_EQ(lnx->nothing_offered(), "");
}

TEST(Settings, LnxLinksNotOffered) {
  env_var v("FI_LNX_PROV_LINKS", "shm+udp");
  CaptureStderr();
  fi_info* info = nullptr;
  EXPECT_EQ(getinfo_for("lnx", &info), -FI_ENODATA);
  const std::string err = GetCapturedStderr();
  EXPECT_NE(
      err.find("FI_LNX_PROV_LINKS=shm+udp: not a known value (accepted: one of shm+tcp); the linked provider "
               "offers nothing"),
      std::string::npos)
      << err;
  EXPECT_EQ(weft::find_provider("lnx")->nothing_offered(),
            "FI_LNX_PROV_LINKS names another link set than shm+tcp");
}

TEST(Settings, ProviderNamingNothing) {
  env_var v("FI_PROVIDER", "shmm");
  CaptureStderr();
  for (int i = 0; i < 2; ++i) {
    fi_info* info = nullptr;
    EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &info), -FI_ENODATA);
  }
  const std::string err = GetCapturedStderr();
  EXPECT_EQ(
      count(err,
            "FI_PROVIDER=shmm: no provider is named 'shmm' (accepted: lnx, shm, tcp, udp, comma separated; "
            "^ first excludes them); fi_getinfo offers no provider"),
      1u)
      << err;
}

TEST(Settings, ProviderListWithOneWrongName) {
  env_var v("FI_PROVIDER", "^shm,nosuch1");
  CaptureStderr();
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &info), 0);
  for (fi_info* i = info; i; i = i->next) EXPECT_STRNE(i->fabric_attr->prov_name, "shm");
  fi_freeinfo(info);
  const std::string err = GetCapturedStderr();
  EXPECT_NE(err.find("FI_PROVIDER=^shm,nosuch1: no provider is named 'nosuch1'"), std::string::npos) << err;
  EXPECT_NE(err.find("; the name is ignored"), std::string::npos) << err;
}

// In a plugin, FI_PROVIDER is the host's: names of its own providers are not
// weft's to question.
TEST(Settings, ProviderInAPluginIsTheHosts) {
  weft::set_name_prefix("weft_");
  env_var v("FI_PROVIDER", "weft_shm,verbs");
  CaptureStderr();
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &info), 0);
  fi_freeinfo(info);
  weft::set_name_prefix("");
  EXPECT_EQ(GetCapturedStderr().find("FI_PROVIDER="), std::string::npos);
}

TEST(Settings, ReportOncePerValue) {
  CaptureStderr();
  for (const char* value : {"a", "b", "a", "b"})
    weft::param_report("tcp", "iface", value, "a problem", "what is accepted", "what follows");
  const std::string err = GetCapturedStderr();
  EXPECT_EQ(count(err, "FI_TCP_IFACE=a: a problem (accepted: what is accepted); what follows"), 1u) << err;
  EXPECT_EQ(count(err, "FI_TCP_IFACE=b: a problem"), 1u) << err;
}

}  // namespace
