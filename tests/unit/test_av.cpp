// SPDX-License-Identifier: BSD-3-Clause
// Address vectors (man fi_av) through the public API, on every provider, plus
// white-box checks of the provider-facing interface (src/util/av.hpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

// fixture.hpp's TearDown has `if (x) EXPECT_EQ(...)`, which gtest's macro
// turns into a dangling-else warning (an error here); until it gets braces:
#pragma GCC diagnostic ignored "-Wdangling-else"
#include "fixture.hpp"
#include "util/av.hpp"
#include "util/domain.hpp"

namespace {

using weft_test::domain_test;

class av_test : public domain_test {
protected:
  void TearDown() override {
    for (fid_av* a : avs_) {
      EXPECT_EQ(fi_close(&a->fid), 0);
    }
    if (eq_) {
      EXPECT_EQ(fi_close(&eq_->fid), 0);
    }
    domain_test::TearDown();
  }

  uint32_t format() const { return weft::domain::of(domain)->addr_format; }
  bool is_str() const { return format() == FI_ADDR_STR; }
  // The linked provider's addresses are strings that carry a tcp address.
  bool is_lnx() const { return !strcmp(GetParam(), "lnx"); }

  // Address number i in this provider's format: raw bytes (with the NUL for
  // FI_ADDR_STR).
  std::string make_addr(unsigned i) const {
    if (is_lnx()) {
      std::string s = "fi_lnx://;;127.0.0." + std::to_string(1 + i / 1000) + ":" + std::to_string(5000 + i % 1000);
      s.push_back('\0');
      return s;
    }
    if (is_str()) {
      std::string s = "fi_shm://peer" + std::to_string(i);
      s.push_back('\0');
      return s;
    }
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(uint16_t(5000 + i % 1000));
    sin.sin_addr.s_addr = htonl(0x7f000001u + i / 1000);
    return std::string(reinterpret_cast<const char*>(&sin), sizeof sin);
  }
  // An address this provider's AV must refuse.
  std::string bad_addr() const {
    if (is_str()) return std::string("not-a-shm-name\0", 15);
    sockaddr_in sin{};
    sin.sin_family = AF_UNIX;
    return std::string(reinterpret_cast<const char*>(&sin), sizeof sin);
  }
  // Packed buffer for fi_av_insert (FI_ADDR_STR: strings one after another).
  static std::string pack(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v) s += a;
    return s;
  }
  std::vector<std::string> range(unsigned first, unsigned n) const {
    std::vector<std::string> v;
    for (unsigned i = 0; i < n; ++i) v.push_back(make_addr(first + i));
    return v;
  }

  fid_av* open(fi_av_type type = FI_AV_TABLE, uint64_t flags = 0, int rx_bits = 0, size_t count = 0) {
    fi_av_attr attr{};
    attr.type = type;
    attr.flags = flags;
    attr.rx_ctx_bits = rx_bits;
    attr.count = count;
    fid_av* a = nullptr;
    EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), 0);
    if (a) avs_.push_back(a);
    return a;
  }
  void close(fid_av* a) {
    std::erase(avs_, a);
    EXPECT_EQ(fi_close(&a->fid), 0);
  }

  std::string lookup(fid_av* a, fi_addr_t fa) {
    char buf[256];
    size_t len = sizeof buf;
    int rc = fi_av_lookup(a, fa, buf, &len);
    if (rc) return "error " + std::to_string(rc);
    return std::string(buf, len);
  }
  std::string straddr(fid_av* a, const std::string& raw) {
    char buf[256];
    size_t len = sizeof buf;
    const char* s = fi_av_straddr(a, raw.data(), buf, &len);
    return s ? std::string(s) : "(null)";
  }

  // Opens an EQ, or skips the test while the EQ is not implemented.
  fid_eq* open_eq() {
    fi_eq_attr attr{};
    attr.size = 64;
    attr.wait_obj = FI_WAIT_NONE;
    int rc = fi_eq_open(fabric, &attr, &eq_, nullptr);
    if (rc == -FI_ENOSYS) return nullptr;
    EXPECT_EQ(rc, 0);
    return eq_;
  }

  std::vector<fid_av*> avs_;
  fid_eq* eq_ = nullptr;
};

// ------------------------------------------------------------------ open

TEST_P(av_test, OpenTypes) {
  weft::domain* d = weft::domain::of(domain);
  for (fi_av_type t : {FI_AV_TABLE, FI_AV_MAP, FI_AV_UNSPEC}) {
    fi_av_attr attr{};
    attr.type = t;
    fid_av* a = nullptr;
    ASSERT_EQ(fi_av_open(domain, &attr, &a, this), 0);
    EXPECT_EQ(a->fid.fclass, size_t(FI_CLASS_AV));
    EXPECT_EQ(a->fid.context, this);
    EXPECT_EQ(attr.type, t == FI_AV_UNSPEC ? FI_AV_TABLE : t);  // UNSPEC: the provider's choice, TABLE
    EXPECT_EQ(weft::av::of(a)->type(), attr.type);
    EXPECT_TRUE(d->users_.busy());
    EXPECT_EQ(fi_close(&domain->fid), -FI_EBUSY);  // the AV holds the domain
    EXPECT_EQ(fi_close(&a->fid), 0);
  }
  EXPECT_FALSE(d->users_.busy());
}

// A domain opened with domain_attr->av_type fixes the AV type.
TEST_P(av_test, DomainAvTypeRules) {
  fi_info* i = fi_dupinfo(info);
  ASSERT_NE(i, nullptr);
  i->domain_attr->av_type = FI_AV_MAP;
  fid_domain* d = nullptr;
  ASSERT_EQ(fi_domain(fabric, i, &d, nullptr), 0);
  fi_freeinfo(i);
  fi_av_attr attr{};
  fid_av* a = nullptr;
  ASSERT_EQ(fi_av_open(d, &attr, &a, nullptr), 0);
  EXPECT_EQ(attr.type, FI_AV_MAP);  // UNSPEC: the domain's type
  EXPECT_EQ(fi_close(&a->fid), 0);
  attr.type = FI_AV_TABLE;
  EXPECT_EQ(fi_av_open(d, &attr, &a, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_close(&d->fid), 0);
}

TEST_P(av_test, OpenBadArguments) {
  fi_av_attr attr{};
  fid_av* a = nullptr;
  EXPECT_EQ(fi_av_open(domain, nullptr, &a, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_open(domain, &attr, nullptr, nullptr), -FI_EINVAL);
  int bad_type = 42;  // not an fi_av_type: stored as raw bytes
  std::memcpy(&attr.type, &bad_type, sizeof bad_type);
  EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), -FI_EINVAL);
  attr = {};
  attr.flags = FI_SEND;
  EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), -FI_EBADFLAGS);
  attr = {};
  attr.rx_ctx_bits = -1;
  EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), -FI_EINVAL);
  attr.rx_ctx_bits = 64;
  EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), -FI_EINVAL);
  attr = {};
  attr.flags = FI_READ;  // read-only needs a name
  EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), -FI_EINVAL);
  attr.name = "";
  EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), -FI_EINVAL);
  std::string missing = "weft-test-missing-" + std::to_string(getpid());
  attr.name = missing.c_str();
  EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), -FI_ENOENT);
  attr = {};
  attr.name = missing.c_str();
  attr.count = SIZE_MAX;
  EXPECT_EQ(fi_av_open(domain, &attr, &a, nullptr), -FI_EINVAL);
  EXPECT_EQ(a, nullptr);  // never set on failure
  EXPECT_FALSE(weft::domain::of(domain)->users_.busy());
  // A huge count on a private AV is only a hint.
  attr = {};
  attr.count = SIZE_MAX;
  ASSERT_EQ(fi_av_open(domain, &attr, &a, nullptr), 0);
  EXPECT_EQ(fi_close(&a->fid), 0);
}

TEST_P(av_test, OpenFlagsAccepted) {
  fid_av* a = open(FI_AV_TABLE, FI_SYMMETRIC);
  ASSERT_NE(a, nullptr);
  auto addrs = range(0, 2);
  std::string buf = pack(addrs);
  fi_addr_t fa[2];
  EXPECT_EQ(fi_av_insert(a, buf.data(), 1, fa, FI_MORE, nullptr), 1);  // FI_MORE is a hint
  EXPECT_EQ(fi_av_insert(a, buf.data() + addrs[0].size(), 1, fa + 1, 0, nullptr), 1);
  EXPECT_EQ(fa[0], 0u);
  EXPECT_EQ(fa[1], 1u);
}

// ---------------------------------------------------------------- insert

TEST_P(av_test, TableIndicesAreSequentialAcrossCalls) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  auto addrs = range(0, 5);
  std::string first = pack({addrs[0], addrs[1], addrs[2]});
  std::string second = pack({addrs[3], addrs[4]});
  fi_addr_t fa[3] = {99, 99, 99};
  ASSERT_EQ(fi_av_insert(a, first.data(), 3, fa, 0, nullptr), 3);
  EXPECT_EQ(fa[0], 0u);
  EXPECT_EQ(fa[1], 1u);
  EXPECT_EQ(fa[2], 2u);
  ASSERT_EQ(fi_av_insert(a, second.data(), 2, nullptr, 0, nullptr), 2);  // fi_addr may be NULL for TABLE
  for (unsigned i = 0; i < 5; ++i) EXPECT_EQ(lookup(a, i), addrs[i]) << i;
  EXPECT_EQ(fi_av_insert(a, first.data(), 0, fa, 0, nullptr), 0);  // zero addresses
}

TEST_P(av_test, MapAddressesLookUp) {
  fid_av* a = open(FI_AV_MAP);
  ASSERT_NE(a, nullptr);
  auto addrs = range(10, 4);
  std::string buf = pack(addrs);
  fi_addr_t fa[4];
  ASSERT_EQ(fi_av_insert(a, buf.data(), 4, fa, 0, nullptr), 4);
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_NE(fa[i], FI_ADDR_NOTAVAIL);
    for (unsigned j = 0; j < i; ++j) EXPECT_NE(fa[i], fa[j]);
    EXPECT_EQ(lookup(a, fa[i]), addrs[i]);
  }
}

TEST_P(av_test, SyncFailuresAreReportedPerAddress) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  std::string buf = pack({make_addr(0), bad_addr(), make_addr(1)});
  fi_addr_t fa[3];
  int err[3] = {-1, -1, -1};
  ASSERT_EQ(fi_av_insert(a, buf.data(), 3, fa, FI_SYNC_ERR, err), 2);
  EXPECT_EQ(fa[0], 0u);
  EXPECT_EQ(fa[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(fa[2], 1u);
  EXPECT_EQ(err[0], 0);
  EXPECT_EQ(err[1], FI_EINVAL);
  EXPECT_EQ(err[2], 0);
  // Without FI_SYNC_ERR the count and fi_addr tell the same story.
  ASSERT_EQ(fi_av_insert(a, buf.data(), 3, fa, 0, nullptr), 2);
  EXPECT_EQ(fa[1], FI_ADDR_NOTAVAIL);
}

TEST_P(av_test, InsertBadArguments) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  std::string buf = make_addr(0);
  fi_addr_t fa[1];
  int err[1];
  EXPECT_EQ(fi_av_insert(a, buf.data(), SIZE_MAX, fa, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insert(a, buf.data(), 1, fa, FI_SEND, nullptr), -FI_EBADFLAGS);
  EXPECT_EQ(fi_av_insert(a, buf.data(), 1, fa, FI_SYNC_ERR, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insert(a, buf.data(), 1, nullptr, FI_AV_USER_ID, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsvc(a, nullptr, nullptr, fa, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsvc(a, "x", "1", fa, FI_SEND, err), -FI_EBADFLAGS);
  EXPECT_EQ(fi_av_insertsym(a, nullptr, 1, "1", 1, fa, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsym(a, "h1", 1, nullptr, 1, fa, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsym(a, "h1", SIZE_MAX, "1", SIZE_MAX, fa, 0, nullptr), -FI_EINVAL);
  // Nothing was inserted by any of those.
  EXPECT_EQ(fi_av_insert(a, buf.data(), 1, fa, 0, nullptr), 1);
  EXPECT_EQ(fa[0], 0u);
}

// The same address in two entries: the reverse lookup (FI_SOURCE, directed
// receives) names one of them while either is left, whichever is removed
// first.
TEST_P(av_test, DuplicateAddressFoundWhileOneEntryIsLeft) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  const std::string x = make_addr(1), y = make_addr(2);
  fi_addr_t fa[3];
  ASSERT_EQ(fi_av_insert(a, x.data(), 1, &fa[0], 0, nullptr), 1);
  ASSERT_EQ(fi_av_insert(a, y.data(), 1, &fa[1], 0, nullptr), 1);
  ASSERT_EQ(fi_av_insert(a, x.data(), 1, &fa[2], 0, nullptr), 1);
  weft::av* w = weft::av::from(&a->fid);
  EXPECT_EQ(w->find(x.data(), x.size()), fa[0]) << "the first inserted";
  ASSERT_EQ(fi_av_remove(a, &fa[0], 1, 0), 0);
  EXPECT_EQ(w->find(x.data(), x.size()), fa[2]) << "the other entry still holds it";
  fi_addr_t again = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(a, x.data(), 1, &again, 0, nullptr), 1);
  const fi_addr_t found = w->find(x.data(), x.size());
  EXPECT_TRUE(found == again || found == fa[2]) << found;
  ASSERT_EQ(fi_av_remove(a, &fa[2], 1, 0), 0);
  EXPECT_EQ(w->find(x.data(), x.size()), again);
  ASSERT_EQ(fi_av_remove(a, &again, 1, 0), 0);
  EXPECT_EQ(w->find(x.data(), x.size()), FI_ADDR_NOTAVAIL);
  EXPECT_EQ(w->find(y.data(), y.size()), fa[1]);
}

// "A NULL value for an address may be used to indicate that an entry should
// be associated with 'any' address": fi_av_insert(NULL, count) makes count
// such entries, of no bytes; they are removed like others, and a reverse
// lookup never lands on one.
TEST_P(av_test, NullAddressInsertsAnyEntries) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  std::string buf = make_addr(0);
  fi_addr_t fa[3];
  ASSERT_EQ(fi_av_insert(a, nullptr, 2, fa, 0, nullptr), 2);
  ASSERT_EQ(fi_av_insert(a, buf.data(), 1, fa + 2, 0, nullptr), 1);
  EXPECT_EQ(fa[0], 0u);
  EXPECT_EQ(fa[1], 1u);
  EXPECT_EQ(fa[2], 2u);
  char out[256];
  size_t len = sizeof out;
  ASSERT_EQ(fi_av_lookup(a, fa[1], out, &len), 0);
  EXPECT_EQ(len, 0u) << "an 'any' entry holds no address";
  len = sizeof out;
  ASSERT_EQ(fi_av_lookup(a, fa[2], out, &len), 0);
  EXPECT_EQ(std::string(out, len), buf);
  weft::av* w = weft::av::from(&a->fid);
  EXPECT_EQ(w->find(buf.data(), buf.size()), fa[2]);
  EXPECT_EQ(w->find("", 0), FI_ADDR_NOTAVAIL);
  int err[1] = {-1};
  fi_addr_t more;
  ASSERT_EQ(fi_av_insert(a, nullptr, 1, &more, FI_SYNC_ERR, err), 1);
  EXPECT_EQ(err[0], 0);
  EXPECT_EQ(more, 3u);
  EXPECT_EQ(fi_av_remove(a, fa, 2, 0), 0);
  len = sizeof out;
  EXPECT_EQ(fi_av_lookup(a, fa[0], out, &len), -FI_EINVAL);
}

TEST_P(av_test, UserIdIsRecorded) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  std::string buf = pack(range(0, 2));
  fi_addr_t fa[2] = {0x1234, 0x5678};
  ASSERT_EQ(fi_av_insert(a, buf.data(), 2, fa, FI_AV_USER_ID, nullptr), 2);
  EXPECT_EQ(fa[0], 0u);  // the output is still the fi_addr_t
  EXPECT_EQ(fa[1], 1u);
  weft::av* w = weft::av::of(a);
  EXPECT_EQ(w->user_id(0), 0x1234u);
  EXPECT_EQ(w->user_id(1), 0x5678u);
  ASSERT_EQ(fi_av_insert(a, make_addr(7).data(), 1, fa, 0, nullptr), 1);
  EXPECT_EQ(w->user_id(fa[0]), fa[0]);  // without FI_AV_USER_ID: the fi_addr_t itself
  EXPECT_EQ(w->user_id(FI_ADDR_NOTAVAIL), FI_ADDR_NOTAVAIL);
}

// ---------------------------------------------------------------- remove

TEST_P(av_test, RemoveAndReuseLowestIndex) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  auto addrs = range(0, 4);
  std::string buf = pack(addrs);
  fi_addr_t fa[4];
  ASSERT_EQ(fi_av_insert(a, buf.data(), 4, fa, 0, nullptr), 4);
  weft::av* w = weft::av::of(a);
  uint32_t gen = w->generation(1);
  fi_addr_t rm[2] = {3, 1};
  ASSERT_EQ(fi_av_remove(a, rm, 2, 0), 0);
  size_t len = 64;
  char tmp[64];
  EXPECT_EQ(fi_av_lookup(a, 1, tmp, &len), -FI_EINVAL);
  EXPECT_EQ(fi_av_remove(a, rm, 1, 0), -FI_EINVAL);  // already removed
  // The lowest free index is reused first.
  std::string again = make_addr(9);
  fi_addr_t f;
  ASSERT_EQ(fi_av_insert(a, again.data(), 1, &f, 0, nullptr), 1);
  EXPECT_EQ(f, 1u);
  EXPECT_EQ(lookup(a, 1), again);
  EXPECT_NE(w->generation(1), gen);
  ASSERT_EQ(fi_av_insert(a, again.data(), 1, &f, 0, nullptr), 1);
  EXPECT_EQ(f, 3u);
  ASSERT_EQ(fi_av_insert(a, again.data(), 1, &f, 0, nullptr), 1);
  EXPECT_EQ(f, 4u);
  // Re-insert after remove of the same address.
  fi_addr_t zero = 0;
  ASSERT_EQ(fi_av_remove(a, &zero, 1, 0), 0);
  ASSERT_EQ(fi_av_insert(a, addrs[0].data(), 1, &f, 0, nullptr), 1);
  EXPECT_EQ(lookup(a, f), addrs[0]);
}

TEST_P(av_test, RemoveBadArguments) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  std::string buf = pack(range(0, 2));
  ASSERT_EQ(fi_av_insert(a, buf.data(), 2, nullptr, 0, nullptr), 2);
  fi_addr_t fa[2] = {0, 1000};
  EXPECT_EQ(fi_av_remove(a, fa, 2, 0), -FI_EINVAL);  // one is out of range: nothing removed
  EXPECT_EQ(lookup(a, 0), make_addr(0));
  EXPECT_EQ(fi_av_remove(a, fa, 1, FI_MORE), -FI_EBADFLAGS);
  EXPECT_EQ(fi_av_remove(a, nullptr, 1, 0), -FI_EINVAL);
  EXPECT_EQ(fi_av_remove(a, fa, 0, 0), 0);
  fi_addr_t na = FI_ADDR_NOTAVAIL;
  EXPECT_EQ(fi_av_remove(a, &na, 1, 0), -FI_EINVAL);
  fa[1] = 1;
  EXPECT_EQ(fi_av_remove(a, fa, 2, 0), 0);
}

// ---------------------------------------------------------------- lookup

TEST_P(av_test, LookupTruncatesAndReportsFullSize) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  std::string addr = make_addr(3);
  fi_addr_t fa;
  ASSERT_EQ(fi_av_insert(a, addr.data(), 1, &fa, 0, nullptr), 1);
  char buf[64];
  std::memset(buf, 0x5a, sizeof buf);
  size_t len = 4;
  ASSERT_EQ(fi_av_lookup(a, fa, buf, &len), 0);
  EXPECT_EQ(len, addr.size());
  EXPECT_EQ(std::memcmp(buf, addr.data(), 4), 0);
  EXPECT_EQ(buf[4], 0x5a);  // nothing past the caller's size
  len = 0;
  EXPECT_EQ(fi_av_lookup(a, fa, nullptr, &len), 0);  // size query
  EXPECT_EQ(len, addr.size());
  len = sizeof buf;
  EXPECT_EQ(fi_av_lookup(a, fa, buf, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_lookup(a, fa, nullptr, &len), -FI_EINVAL);
  EXPECT_EQ(fi_av_lookup(a, FI_ADDR_NOTAVAIL, buf, &len), -FI_EINVAL);
  EXPECT_EQ(fi_av_lookup(a, fa + 1, buf, &len), -FI_EINVAL);
  EXPECT_EQ(fi_av_lookup(a, uint64_t{1} << 40, buf, &len), -FI_EINVAL);
}

// --------------------------------------------------------------- straddr

TEST_P(av_test, Straddr) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  std::string addr = make_addr(0);  // not inserted: straddr does not need it to be
  std::string want = is_lnx()   ? "fi_lnx://;;127.0.0.1:5000"
                     : is_str() ? "fi_shm://peer0"
                                : "fi_sockaddr_in://127.0.0.1:5000";
  EXPECT_EQ(straddr(a, addr), want);
  // Truncation: NUL-terminated within len, *len = size needed.
  char buf[8];
  size_t len = sizeof buf;
  EXPECT_EQ(fi_av_straddr(a, addr.data(), buf, &len), buf);
  EXPECT_EQ(len, want.size() + 1);
  EXPECT_EQ(std::string(buf), want.substr(0, 7));
  len = 0;
  EXPECT_EQ(fi_av_straddr(a, addr.data(), nullptr, &len), nullptr);
  EXPECT_EQ(len, want.size() + 1);
  EXPECT_EQ(fi_av_straddr(a, addr.data(), buf, nullptr), nullptr);
  EXPECT_EQ(fi_av_straddr(a, nullptr, buf, &len), nullptr);
}

// ------------------------------------------------------------ rx_ctx_bits

TEST_P(av_test, RxAddrWithContextBits) {
  fid_av* a = open(FI_AV_TABLE, 0, 4);
  ASSERT_NE(a, nullptr);
  weft::av* w = weft::av::of(a);
  EXPECT_EQ(w->rx_ctx_bits(), 4);
  std::string buf = pack(range(0, 3));
  fi_addr_t fa[3];
  ASSERT_EQ(fi_av_insert(a, buf.data(), 3, fa, 0, nullptr), 3);
  for (int rx = 0; rx < 16; ++rx) {
    fi_addr_t t = fi_rx_addr(fa[2], rx, 4);
    EXPECT_EQ(w->index(t), fa[2]);
    EXPECT_EQ(w->rx_index(t), uint64_t(rx));
    EXPECT_EQ(lookup(a, t), make_addr(2));
  }
  fid_av* plain = open();
  EXPECT_EQ(weft::av::of(plain)->rx_ctx_bits(), 0);
  EXPECT_EQ(weft::av::of(plain)->rx_index(5), 0u);
}

// ------------------------------------------------------------- insertsvc

TEST_P(av_test, Insertsvc) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  fi_addr_t fa = 77;
  if (is_lnx()) {  // node and service name a tcp address; a host name is resolved
    ASSERT_EQ(fi_av_insertsvc(a, "127.0.0.1", "42", &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), std::string("fi_lnx://127.0.0.1:42\0", 22));
    ASSERT_EQ(fi_av_insertsvc(a, "localhost", "43", &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), std::string("fi_lnx://localhost:43\0", 22));
    EXPECT_EQ(fi_av_insertsvc(a, "127.0.0.1", nullptr, &fa, 0, nullptr), 0);  // no port: no tcp address
    EXPECT_EQ(fa, FI_ADDR_NOTAVAIL);
    ASSERT_EQ(fi_av_insertsvc(a, "fi_lnx://;;127.0.0.1:44", nullptr, &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), std::string("fi_lnx://;;127.0.0.1:44\0", 24));
    EXPECT_EQ(fi_av_insertsvc(a, "fi_lnx://;;127.0.0.1:44", "1", &fa, 0, nullptr), -FI_EINVAL);
    EXPECT_EQ(fi_av_insertsvc(a, "no.such.host.invalid", "1", &fa, 0, nullptr), 0);
  } else if (is_str()) {
    ASSERT_EQ(fi_av_insertsvc(a, "node7", "42", &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), std::string("fi_shm://node7:42\0", 18));
    ASSERT_EQ(fi_av_insertsvc(a, "node8", nullptr, &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), std::string("fi_shm://node8\0", 15));
    ASSERT_EQ(fi_av_insertsvc(a, "fi_shm://formatted", nullptr, &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), std::string("fi_shm://formatted\0", 19));
    EXPECT_EQ(fi_av_insertsvc(a, "fi_shm://formatted", "1", &fa, 0, nullptr), -FI_EINVAL);
    // Too long for a slot: the address fails, the call does not.
    std::string longname(100, 'x');
    EXPECT_EQ(fi_av_insertsvc(a, longname.c_str(), "1", &fa, 0, nullptr), 0);
    EXPECT_EQ(fa, FI_ADDR_NOTAVAIL);
  } else {
    ASSERT_EQ(fi_av_insertsvc(a, "127.0.0.1", "5000", &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), make_addr(0));
    ASSERT_EQ(fi_av_insertsvc(a, "localhost", "5001", &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), make_addr(1));
    ASSERT_EQ(fi_av_insertsvc(a, "fi_sockaddr_in://127.0.0.1:5002", nullptr, &fa, 0, nullptr), 1);
    EXPECT_EQ(lookup(a, fa), make_addr(2));
    EXPECT_EQ(fi_av_insertsvc(a, "fi_sockaddr_in://127.0.0.1:5002", "1", &fa, 0, nullptr), -FI_EINVAL);
    int err = 0;
    EXPECT_EQ(fi_av_insertsvc(a, "127.0.0.1", "http", &fa, FI_SYNC_ERR, &err), 0);  // ports only
    EXPECT_EQ(fa, FI_ADDR_NOTAVAIL);
    EXPECT_NE(err, 0);
    EXPECT_EQ(fi_av_insertsvc(a, "fi_sockaddr_in://garbage", nullptr, &fa, 0, nullptr), 0);
  }
}

// The example of man fi_av, fi_av_insertsym: node "10.1.1.1", nodecnt 2,
// service "5000", svccnt 2 inserts exactly 10.1.1.1:5000, 10.1.1.1:5001,
// 10.1.1.2:5000, 10.1.1.2:5001, in that order; with node "host10":
// host10:5000, host10:5001, host11:5000, host11:5001.
TEST_P(av_test, InsertsymManPageExample) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  fi_addr_t fa[4];
  std::vector<std::string> want;
  if (is_lnx()) {
    ASSERT_EQ(fi_av_insertsym(a, "10.1.1.1", 2, "5000", 2, fa, 0, nullptr), 4);
    want = {"fi_lnx://10.1.1.1:5000", "fi_lnx://10.1.1.1:5001", "fi_lnx://10.1.1.2:5000",
            "fi_lnx://10.1.1.2:5001"};
  } else if (is_str()) {
    ASSERT_EQ(fi_av_insertsym(a, "host10", 2, "5000", 2, fa, 0, nullptr), 4);
    want = {"fi_shm://host10:5000", "fi_shm://host10:5001", "fi_shm://host11:5000", "fi_shm://host11:5001"};
  } else {
    ASSERT_EQ(fi_av_insertsym(a, "10.1.1.1", 2, "5000", 2, fa, 0, nullptr), 4);
    want = {"fi_sockaddr_in://10.1.1.1:5000", "fi_sockaddr_in://10.1.1.1:5001",
            "fi_sockaddr_in://10.1.1.2:5000", "fi_sockaddr_in://10.1.1.2:5001"};
  }
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(fa[i], i);
    std::string raw = lookup(a, fa[i]);
    EXPECT_EQ(straddr(a, raw), want[i]) << i;
  }
}

TEST_P(av_test, InsertsymRanges) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  fi_addr_t fa[4];
  EXPECT_EQ(fi_av_insertsym(a, "host", 2, "5000", 1, fa, 0, nullptr), -FI_EINVAL);  // no numeric suffix
  EXPECT_EQ(fi_av_insertsym(a, "10.0.0.1", 1, "svc", 2, fa, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsym(a, "10.0.0.1", 0, "5000", 2, fa, 0, nullptr), 0);
  EXPECT_EQ(fi_av_insertsym(a, "10.0.0.1", 2, "5000", 0, fa, 0, nullptr), 0);
  if (!is_str() || is_lnx()) {
    ASSERT_EQ(fi_av_insertsym(a, "10.0.0.255", 2, "65535", 1, fa, 0, nullptr), 2);
    EXPECT_EQ(straddr(a, lookup(a, fa[1])), is_lnx() ? "fi_lnx://10.0.1.0:65535" : "fi_sockaddr_in://10.0.1.0:65535");
    EXPECT_EQ(fi_av_insertsym(a, "10.0.0.1", 1, "65535", 2, fa, 0, nullptr), 1);  // port 65536 fails
    EXPECT_EQ(fa[1], FI_ADDR_NOTAVAIL);
  } else {
    ASSERT_EQ(fi_av_insertsym(a, "n09", 2, "1", 1, fa, 0, nullptr), 2);
    EXPECT_EQ(straddr(a, lookup(a, fa[1])), "fi_shm://n10:1");
  }
}

// ------------------------------------------------------------- FI_EVENT

TEST_P(av_test, BindChecks) {
  fid_av* a = open(FI_AV_TABLE, FI_EVENT);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(fi_av_bind(a, &domain->fid, 0), -FI_EINVAL);  // not an EQ
  EXPECT_EQ(fi_av_bind(a, nullptr, 0), -FI_EINVAL);
  std::string buf = make_addr(0);
  fi_addr_t fa;
  EXPECT_EQ(fi_av_insert(a, buf.data(), 1, &fa, 0, nullptr), -FI_ENOEQ);
  EXPECT_EQ(fi_av_insertsvc(a, "10.0.0.1", "1", &fa, 0, nullptr), -FI_ENOEQ);
  EXPECT_EQ(fi_av_insertsym(a, "10.0.0.1", 1, "1", 1, &fa, 0, nullptr), -FI_ENOEQ);
}

TEST_P(av_test, EventInsertReportsThroughEq) {
  fid_av* a = open(FI_AV_TABLE, FI_EVENT);
  ASSERT_NE(a, nullptr);
  fid_eq* eq = open_eq();
  if (!eq) GTEST_SKIP() << "fi_eq_open returns -FI_ENOSYS: EQ not implemented yet";
  EXPECT_EQ(fi_av_bind(a, &eq->fid, 1), -FI_EBADFLAGS);
  ASSERT_EQ(fi_av_bind(a, &eq->fid, 0), 0);
  EXPECT_EQ(fi_av_bind(a, &eq->fid, 0), -FI_EBUSY);  // one EQ per AV
  EXPECT_EQ(fi_close(&eq->fid), -FI_EBUSY);          // the AV holds it

  std::string buf = pack({make_addr(0), bad_addr(), make_addr(1)});
  fi_addr_t fa[3];
  int ctx = 0;
  int err[3];
  EXPECT_EQ(fi_av_insert(a, buf.data(), 3, fa, FI_SYNC_ERR, err), -FI_EINVAL);  // sync only
  ASSERT_EQ(fi_av_insert(a, buf.data(), 3, fa, 0, &ctx), 0);
  EXPECT_EQ(fa[0], 0u);
  EXPECT_EQ(fa[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(fa[2], 1u);

  uint32_t event = 0;
  fi_eq_entry entry{};
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), -FI_EAVAIL);
  fi_eq_err_entry e{};
  ASSERT_EQ(fi_eq_readerr(eq, &e, 0), ssize_t(sizeof e));
  EXPECT_EQ(e.fid, &a->fid);
  EXPECT_EQ(e.context, &ctx);
  EXPECT_EQ(e.data, 1u);  // index of the failed address
  EXPECT_EQ(e.err, FI_EINVAL);
  ASSERT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), ssize_t(sizeof entry));
  EXPECT_EQ(event, uint32_t(FI_AV_COMPLETE));
  EXPECT_EQ(entry.fid, &a->fid);
  EXPECT_EQ(entry.context, &ctx);
  EXPECT_EQ(entry.data, 2u);  // inserted
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), -FI_EAGAIN);

  // Every insert call completes once, even when every address fails or there are none.
  std::string bad = bad_addr();
  ASSERT_EQ(fi_av_insert(a, bad.data(), 1, fa, 0, &ctx), 0);
  ASSERT_EQ(fi_eq_readerr(eq, &e, 0), ssize_t(sizeof e));
  EXPECT_EQ(e.data, 0u);
  ASSERT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), ssize_t(sizeof entry));
  EXPECT_EQ(entry.data, 0u);
  ASSERT_EQ(fi_av_insertsvc(a, is_str() && !is_lnx() ? "n" : "127.0.0.1", "7", fa, 0, &ctx), 0);
  ASSERT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), ssize_t(sizeof entry));
  EXPECT_EQ(event, uint32_t(FI_AV_COMPLETE));
  EXPECT_EQ(entry.data, 1u);
  EXPECT_EQ(fa[0], 2u);

  close(a);  // drops the EQ reference; TearDown closes the EQ
}

// Closing an FI_EVENT AV leaves the events its inserts queued in the EQ:
// each insert's completion (and error entries) carries the application's
// context, which the application still waits for. The EQ is free to close
// once the AV is gone.
TEST_P(av_test, EventsStayQueuedWhenTheAvCloses) {
  fid_av* a = open(FI_AV_TABLE, FI_EVENT);
  ASSERT_NE(a, nullptr);
  fid_eq* eq = open_eq();
  ASSERT_NE(eq, nullptr);
  ASSERT_EQ(fi_av_bind(a, &eq->fid, 0), 0);
  std::string good = make_addr(0), bad = bad_addr();
  fi_addr_t fa[1];
  int ctx1 = 0, ctx2 = 0;
  ASSERT_EQ(fi_av_insert(a, good.data(), 1, fa, 0, &ctx1), 0);
  ASSERT_EQ(fi_av_insert(a, bad.data(), 1, fa, 0, &ctx2), 0);
  const fid* gone = &a->fid;
  close(a);
  uint32_t event = 0;
  fi_eq_entry entry{};
  ASSERT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), ssize_t(sizeof entry));
  EXPECT_EQ(event, uint32_t(FI_AV_COMPLETE));
  EXPECT_EQ(entry.fid, gone);
  EXPECT_EQ(entry.context, &ctx1);
  EXPECT_EQ(entry.data, 1u);
  fi_eq_err_entry e{};
  ASSERT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), -FI_EAVAIL);
  ASSERT_EQ(fi_eq_readerr(eq, &e, 0), ssize_t(sizeof e));
  EXPECT_EQ(e.context, &ctx2);
  EXPECT_EQ(e.err, FI_EINVAL);
  ASSERT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), ssize_t(sizeof entry));
  EXPECT_EQ(entry.context, &ctx2);
  EXPECT_EQ(entry.data, 0u);
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof entry, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&eq->fid), 0) << "the closed AV no longer holds it";
  eq_ = nullptr;
}

// ep_per_node is a hint (man fi_av): any value opens an AV that works the
// same, private or named.
TEST_P(av_test, EpPerNodeIsAHint) {
  for (size_t per_node : {size_t{0}, size_t{1}, size_t{16}, size_t{1} << 20}) {
    SCOPED_TRACE(per_node);
    fi_av_attr attr{};
    attr.type = FI_AV_TABLE;
    attr.count = 8;
    attr.ep_per_node = per_node;
    fid_av* a = nullptr;
    ASSERT_EQ(fi_av_open(domain, &attr, &a, nullptr), 0);
    std::string buf = pack(range(0, 3));
    fi_addr_t fa[3];
    ASSERT_EQ(fi_av_insert(a, buf.data(), 3, fa, 0, nullptr), 3);
    for (unsigned i = 0; i < 3; ++i) EXPECT_EQ(lookup(a, fa[i]), make_addr(i));
    EXPECT_EQ(fi_close(&a->fid), 0);
  }
}

// map_addr matters to named AVs only: a private AV leaves it as given and
// hands out the same indices from 0, whatever it says.
TEST_P(av_test, MapAddrWithoutANameIsIgnored) {
  for (fi_av_type type : {FI_AV_TABLE, FI_AV_MAP}) {
    SCOPED_TRACE(type);
    fi_av_attr attr{};
    attr.type = type;
    void* hint = reinterpret_cast<void*>(uintptr_t{0x7f0000000000});
    attr.map_addr = hint;
    fid_av* a = nullptr;
    ASSERT_EQ(fi_av_open(domain, &attr, &a, nullptr), 0);
    EXPECT_EQ(attr.map_addr, hint) << "left as given";
    std::string buf = pack(range(0, 2));
    fi_addr_t fa[2];
    ASSERT_EQ(fi_av_insert(a, buf.data(), 2, fa, 0, nullptr), 2);
    EXPECT_EQ(fa[0], 0u);
    EXPECT_EQ(fa[1], 1u);
    EXPECT_EQ(lookup(a, fa[1]), make_addr(1));
    EXPECT_EQ(fi_close(&a->fid), 0);
  }
}

// ------------------------------------------------------------ users/busy

TEST_P(av_test, CloseIsBusyWhileAnEndpointHoldsIt) {
  fi_av_attr attr{};
  fid_av* a = nullptr;
  ASSERT_EQ(fi_av_open(domain, &attr, &a, nullptr), 0);
  weft::av* w = weft::av::from(&a->fid);  // what fi_ep_bind(ep, &av->fid) does
  ASSERT_EQ(w, weft::av::of(a));
  EXPECT_EQ(weft::av::from(&domain->fid), nullptr);
  EXPECT_EQ(weft::av::from(nullptr), nullptr);
  w->add_user();
  EXPECT_EQ(fi_close(&a->fid), -FI_EBUSY);
  EXPECT_EQ(w->user_count(), 1);
  w->drop_user();
  EXPECT_EQ(fi_close(&a->fid), 0);
}

// -------------------------------------------------- provider data path

TEST_P(av_test, DataPathLookupAndReverseFind) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  auto addrs = range(0, 3);
  std::string buf = pack(addrs);
  ASSERT_EQ(fi_av_insert(a, buf.data(), 3, nullptr, 0, nullptr), 3);
  const weft::av* w = weft::av::of(a);
  for (unsigned i = 0; i < 3; ++i) {
    size_t len = 0;
    const void* p = w->lookup(i, &len);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(std::string(static_cast<const char*>(p), len), addrs[i]);
    EXPECT_EQ(w->find(addrs[i].data(), addrs[i].size()), i);
  }
  EXPECT_EQ(w->lookup(3), nullptr);
  EXPECT_EQ(w->lookup(FI_ADDR_NOTAVAIL), nullptr);
  std::string other = make_addr(50);
  EXPECT_EQ(w->find(other.data(), other.size()), FI_ADDR_NOTAVAIL);
  fi_addr_t one = 1;
  ASSERT_EQ(fi_av_remove(a, &one, 1, 0), 0);
  EXPECT_EQ(w->lookup(1), nullptr);
  EXPECT_EQ(w->find(addrs[1].data(), addrs[1].size()), FI_ADDR_NOTAVAIL);
}

// Many addresses: several storage chunks, while a reader thread looks up
// entry 0 the whole time (chunks never move).
TEST_P(av_test, GrowsWhileReadersLookUp) {
  fid_av* a = open();
  ASSERT_NE(a, nullptr);
  const unsigned n = 5000;
  auto addrs = range(0, n);
  std::string buf = pack(addrs);
  ASSERT_EQ(fi_av_insert(a, buf.data(), 1, nullptr, 0, nullptr), 1);
  const weft::av* w = weft::av::of(a);
  std::atomic<bool> stop{false}, bad{false};
  std::atomic<unsigned long> reads{0};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      size_t len = 0;
      const void* p = w->lookup(0, &len);
      if (!p || len != addrs[0].size() || std::memcmp(p, addrs[0].data(), len) != 0) {
        bad = true;
        break;
      }
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  });
  while (reads.load() == 0 && !bad.load()) std::this_thread::yield();  // reader is running
  const char* rest = buf.data() + addrs[0].size();
  fi_addr_t last = 0;
  for (unsigned i = 1; i < n; ++i) {
    ASSERT_EQ(fi_av_insert(a, rest, 1, &last, 0, nullptr), 1);
    rest += addrs[i].size();
  }
  stop = true;
  reader.join();
  EXPECT_EQ(last, n - 1);
  EXPECT_FALSE(bad.load());
  for (unsigned i = 0; i < n; i += 97) EXPECT_EQ(lookup(a, i), addrs[i]) << i;
  EXPECT_EQ(lookup(a, n - 1), addrs[n - 1]);
}

// ------------------------------------------------------------ named AVs

class named_av_test : public av_test {
protected:
  void SetUp() override {
    av_test::SetUp();
    // Its AV entries decide each peer's path in this process only.
    if (is_lnx()) GTEST_SKIP() << "the linked provider offers no named AVs (-FI_ENOSYS)";
    name_ = "weft-test-" + std::to_string(getpid()) + "-" + GetParam() + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name_.begin(), name_.end(), '/', '_');
  }
  int open_named(fid_av** a, uint64_t flags, size_t count = 16, void* map_addr = nullptr,
                 void** used = nullptr) {
    fi_av_attr attr{};
    attr.type = FI_AV_MAP;
    attr.name = name_.c_str();
    attr.flags = flags;
    attr.count = count;
    attr.map_addr = map_addr;
    int rc = fi_av_open(domain, &attr, a, nullptr);
    if (used) *used = attr.map_addr;
    return rc;
  }
  std::string shm_path() const {
    return "/dev/shm/weft-av-" + std::to_string(geteuid()) + "-" + GetParam() + "-" + name_;
  }
  std::string name_;
};

TEST_P(named_av_test, SharedWithinProcessAndRemovedByLastClose) {
  fid_av* w = nullptr;
  void* base = nullptr;
  ASSERT_EQ(open_named(&w, 0, 16, nullptr, &base), 0);
  EXPECT_NE(base, nullptr);  // map_addr 0: the address used comes back
  struct stat st;
  ASSERT_EQ(stat(shm_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());

  auto addrs = range(0, 3);
  std::string buf = pack(addrs);
  fi_addr_t fa[3];
  ASSERT_EQ(fi_av_insert(w, buf.data(), 3, fa, 0, nullptr), 3);

  fid_av* r = nullptr;
  ASSERT_EQ(open_named(&r, FI_READ, 0, base), 0);
  for (unsigned i = 0; i < 3; ++i) EXPECT_EQ(lookup(r, fa[i]), addrs[i]);
  EXPECT_EQ(fi_av_insert(r, buf.data(), 1, fa, 0, nullptr), -FI_EACCES);
  EXPECT_EQ(fi_av_remove(r, fa, 1, 0), -FI_EACCES);
  EXPECT_EQ(weft::av::of(r)->find(addrs[2].data(), addrs[2].size()), fa[2]);
  // Removal through one handle shows through the other.
  ASSERT_EQ(fi_av_remove(w, fa + 1, 1, 0), 0);
  size_t len = 64;
  char tmp[64];
  EXPECT_EQ(fi_av_lookup(r, fa[1], tmp, &len), -FI_EINVAL);

  EXPECT_EQ(fi_close(&w->fid), 0);
  EXPECT_EQ(lookup(r, fa[0]), addrs[0]);  // still open here
  EXPECT_EQ(fi_close(&r->fid), 0);
  EXPECT_NE(access(shm_path().c_str(), F_OK), 0);
  fid_av* again = nullptr;
  EXPECT_EQ(open_named(&again, FI_READ), -FI_ENOENT);
}

TEST_P(named_av_test, FullTableFailsPerAddress) {
  fid_av* a = nullptr;
  ASSERT_EQ(open_named(&a, 0, 2), 0);
  std::string buf = pack(range(0, 3));
  fi_addr_t fa[3];
  int err[3];
  EXPECT_EQ(fi_av_insert(a, buf.data(), 3, fa, FI_SYNC_ERR, err), 2);
  EXPECT_EQ(fa[2], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(err[2], FI_ENOSPC);
  EXPECT_EQ(fi_close(&a->fid), 0);
}

// Another process opens the AV by name and sees the same fi_addr_t for the
// same addresses; what it inserts is seen by the creator.
TEST_P(named_av_test, SameFiAddrInAnotherProcess) {
  fid_av* a = nullptr;
  ASSERT_EQ(open_named(&a, 0, 64), 0);
  auto addrs = range(0, 4);
  std::string buf = pack({addrs[0], addrs[1], addrs[2]});
  fi_addr_t fa[3];
  ASSERT_EQ(fi_av_insert(a, buf.data(), 3, fa, 0, nullptr), 3);

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: no gtest assertions; the exit code says what went wrong.
    fid_av* r = nullptr;
    if (open_named(&r, FI_READ, 0) != 0) _exit(10);
    for (unsigned i = 0; i < 3; ++i) {
      char out[128];
      size_t len = sizeof out;
      if (fi_av_lookup(r, fa[i], out, &len) != 0) _exit(11);
      if (std::string(out, len) != addrs[i]) _exit(12);
      if (weft::av::of(r)->find(addrs[i].data(), addrs[i].size()) != fa[i]) _exit(13);
    }
    if (fi_av_insert(r, addrs[3].data(), 1, nullptr, 0, nullptr) != -FI_EACCES) _exit(14);
    fid_av* w = nullptr;
    if (open_named(&w, 0) != 0) _exit(15);
    fi_addr_t mine = FI_ADDR_NOTAVAIL;
    if (fi_av_insert(w, addrs[3].data(), 1, &mine, 0, nullptr) != 1 || mine != 3) _exit(16);
    if (fi_close(&w->fid) != 0 || fi_close(&r->fid) != 0) _exit(17);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(lookup(a, 3), addrs[3]);  // inserted by the child
  EXPECT_EQ(fi_close(&a->fid), 0);
  EXPECT_NE(access(shm_path().c_str(), F_OK), 0);
}

// A region left by processes that died without closing it is stale.
TEST_P(named_av_test, StaleRegionOfDeadProcess) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    fid_av* a = nullptr;
    if (open_named(&a, 0) != 0) _exit(10);
    std::string addr = make_addr(0);
    if (fi_av_insert(a, addr.data(), 1, nullptr, 0, nullptr) != 1) _exit(11);
    _exit(0);  // no fi_close
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  ASSERT_EQ(access(shm_path().c_str(), F_OK), 0);
  fid_av* a = nullptr;
  EXPECT_EQ(open_named(&a, FI_READ), -FI_ENOENT);  // stale counts as missing
  ASSERT_EQ(open_named(&a, 0), 0);                 // and is started afresh
  size_t len = 64;
  char tmp[64];
  EXPECT_EQ(fi_av_lookup(a, 0, tmp, &len), -FI_EINVAL);
  EXPECT_EQ(fi_close(&a->fid), 0);
  EXPECT_NE(access(shm_path().c_str(), F_OK), 0);
}

WEFT_ALL_PROVIDERS(av_test);
WEFT_ALL_PROVIDERS(named_av_test);

}  // namespace
