// SPDX-License-Identifier: BSD-3-Clause
// Memory registration: fi_mr_reg/regv/regattr, keys, descriptors, bind/enable,
// raw keys, refresh, through the public API on every provider; and white-box
// tests of the registration map (weft::mr_map) against a brute-force model.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

// fixture.hpp's `if (x) EXPECT_EQ(...)` trips -Wdangling-else (gtest's macro
// hides an else); until the fixture gets braces, silence it for the include.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-else"
#include "fixture.hpp"
#pragma GCC diagnostic pop
#include "util/domain.hpp"
#include "util/mr.hpp"
#include "util/util.hpp"

using namespace weft_test;

namespace {

constexpr uint64_t all_access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();

uint64_t addr_of(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}
void* ptr_at(uint64_t a) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(a));
}
fid_mr* const sentinel = reinterpret_cast<fid_mr*>(uintptr_t{0x5e47});

class MrTest : public domain_test {
protected:
  weft::domain& dom() { return *weft::domain::of(domain); }
  weft::mr_map& map() { return *dom().mrs; }
  // White-box: the mr_mode bits in force. Registration reads them at each
  // call, so a test can exercise every mode on every provider.
  void set_mode(uint64_t mode) { dom().mr_mode = mode; }
  size_t iov_limit() { return std::min(info->domain_attr->mr_iov_limit, weft::mr_iov_max); }

  fid_mr* reg(const void* buf, size_t len, uint64_t access = all_access, uint64_t key = 0,
              uint64_t offset = 0, uint64_t flags = 0) {
    fid_mr* mr = nullptr;
    EXPECT_EQ(fi_mr_reg(domain, buf, len, access, offset, key, flags, &mr, nullptr), 0);
    return mr;
  }
  int try_reg(const void* buf, size_t len, uint64_t access = all_access, uint64_t key = 0,
              uint64_t offset = 0, uint64_t flags = 0) {
    fid_mr* mr = sentinel;
    int ret = fi_mr_reg(domain, buf, len, access, offset, key, flags, &mr, nullptr);
    if (ret == 0) {
      EXPECT_EQ(fi_close(&mr->fid), 0);
    } else {
      EXPECT_EQ(mr, sentinel) << "output written on failure";
    }
    return ret;
  }
  int check(fid_mr* mr, uint64_t addr, size_t len, uint64_t access, void** p = nullptr) {
    return map().check(fi_mr_key(mr), addr, len, access, p);
  }
};

// ---------------------------------------------------------------- reg/regv/regattr

TEST_P(MrTest, RegDescKeyClose) {
  std::vector<char> buf(4096);
  int ctx = 0;
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(domain, buf.data(), buf.size(), all_access, 0, 0, 0, &mr, &ctx), 0);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->fid.fclass, size_t{FI_CLASS_MR});
  EXPECT_EQ(mr->fid.context, &ctx);
  EXPECT_NE(fi_mr_desc(mr), nullptr);
  EXPECT_NE(fi_mr_key(mr), FI_KEY_NOTAVAIL);
  EXPECT_EQ(map().size(), 1u);
  EXPECT_EQ(map().owner(fi_mr_desc(mr)), static_cast<void*>(mr));
  weft::mr_entry e{};
  ASSERT_TRUE(map().find(fi_mr_key(mr), &e));
  EXPECT_EQ(e.len, buf.size());
  EXPECT_EQ(e.iov_count, 1u);
  EXPECT_EQ(e.access, all_access);
  EXPECT_EQ(e.seg[0].addr, addr_of(buf.data()));
  const uint64_t key = fi_mr_key(mr);
  const uint64_t epoch = map().epoch();
  EXPECT_EQ(fi_close(&mr->fid), 0);
  EXPECT_EQ(map().size(), 0u);
  EXPECT_FALSE(map().find(key, &e));
  EXPECT_GT(map().epoch(), epoch);
}

TEST_P(MrTest, RegvAndRegattr) {
  const size_t n = iov_limit();
  ASSERT_GE(n, 1u);
  std::vector<std::vector<char>> bufs(n, std::vector<char>(256));
  std::vector<iovec> iov(n);
  for (size_t i = 0; i < n; ++i) iov[i] = {bufs[i].data(), 100 + i};
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_regv(domain, iov.data(), n, FI_REMOTE_READ, 0, 0, 0, &mr, nullptr), 0);
  weft::mr_entry e{};
  ASSERT_TRUE(map().find(fi_mr_key(mr), &e));
  EXPECT_EQ(e.iov_count, n);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(e.seg[i].addr, addr_of(bufs[i].data()));
    total += 100 + i;
  }
  EXPECT_EQ(e.len, total);
  EXPECT_EQ(fi_close(&mr->fid), 0);

  int ctx = 0;
  fi_mr_attr attr{};
  attr.mr_iov = iov.data();
  attr.iov_count = n;
  attr.access = FI_REMOTE_WRITE | FI_SEND;
  attr.context = &ctx;
  attr.iface = FI_HMEM_SYSTEM;
  mr = nullptr;
  ASSERT_EQ(fi_mr_regattr(domain, &attr, 0, &mr), 0);
  EXPECT_EQ(mr->fid.context, &ctx);
  ASSERT_TRUE(map().find(fi_mr_key(mr), &e));
  EXPECT_EQ(e.access, FI_REMOTE_WRITE | FI_SEND);
  EXPECT_EQ(e.len, total);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

// ---------------------------------------------------------------- keys

TEST_P(MrTest, ProviderKeysAreUnique) {
  set_mode(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY);
  std::vector<char> buf(512);
  std::vector<fid_mr*> mrs;
  std::set<uint64_t> keys;
  for (int i = 0; i < 100; ++i) {
    fid_mr* mr = reg(buf.data(), buf.size(), all_access, /*requested, ignored*/ 7);
    ASSERT_NE(mr, nullptr);
    EXPECT_NE(fi_mr_key(mr), FI_KEY_NOTAVAIL);
    keys.insert(fi_mr_key(mr));
    mrs.push_back(mr);
  }
  EXPECT_EQ(keys.size(), mrs.size());
  for (fid_mr* mr : mrs) EXPECT_EQ(check(mr, addr_of(buf.data()), buf.size(), FI_REMOTE_READ), 0);
  for (fid_mr* mr : mrs) EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(MrTest, RequestedKeys) {
  set_mode(FI_MR_VIRT_ADDR);
  std::vector<char> buf(512);
  fid_mr* a = reg(buf.data(), buf.size(), all_access, 42);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(fi_mr_key(a), 42u);
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 42), -FI_ENOKEY);
  fid_mr* b = reg(buf.data(), buf.size(), all_access, 0);  // key 0 is a key like any other
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(fi_mr_key(b), 0u);
  EXPECT_NE(fi_mr_desc(b), nullptr);
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, FI_KEY_NOTAVAIL), -FI_EKEYREJECTED);
  EXPECT_EQ(fi_close(&a->fid), 0);
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 42), 0);  // free again after close
  EXPECT_EQ(fi_close(&b->fid), 0);
}

TEST_P(MrTest, RequestedKeyMustFitKeySize) {
  // White-box: a domain with 2-byte keys. Replacing the map under a domain
  // whose parts share it (the linked provider's) would leave them the old one.
  if (!strcmp(GetParam(), "lnx")) GTEST_SKIP() << "its parts share the map this test replaces";
  set_mode(FI_MR_VIRT_ADDR);
  const size_t saved = info->domain_attr->mr_key_size;
  dom().info->domain_attr->mr_key_size = 2;
  weft::mr_map_destroy(dom());
  weft::mr_map_create(dom());
  std::vector<char> buf(64);
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 0x10000), -FI_EKEYREJECTED);
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 0xffff), 0);
  set_mode(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY);
  fid_mr* mr = reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  EXPECT_LE(fi_mr_key(mr), 0xffffu);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  dom().info->domain_attr->mr_key_size = saved;
  weft::mr_map_destroy(dom());
  weft::mr_map_create(dom());
}

// ---------------------------------------------------------------- map validation

TEST_P(MrTest, VirtAddrBounds) {
  set_mode(FI_MR_VIRT_ADDR);
  std::vector<char> buf(4096 + 2);
  char* p0 = buf.data() + 1;  // the bytes either side are not registered
  const size_t len = 4096;
  fid_mr* mr = reg(p0, len);
  ASSERT_NE(mr, nullptr);
  const uint64_t base = addr_of(p0);
  void* p = nullptr;
  EXPECT_EQ(check(mr, base, len, FI_REMOTE_WRITE, &p), 0);
  EXPECT_EQ(p, p0);
  EXPECT_EQ(check(mr, base + 100, 10, FI_REMOTE_READ, &p), 0);
  EXPECT_EQ(p, p0 + 100);
  // lower end
  EXPECT_EQ(check(mr, base - 1, 1, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, base - 1, 2, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, base - 1, 0, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, base, 1, FI_REMOTE_READ), 0);
  // upper end
  EXPECT_EQ(check(mr, base + len - 1, 1, FI_REMOTE_READ, &p), 0);
  EXPECT_EQ(p, p0 + len - 1);
  EXPECT_EQ(check(mr, base + len - 1, 2, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, base, len + 1, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, base + len, 0, FI_REMOTE_READ, &p), 0);
  EXPECT_EQ(p, p0 + len);
  EXPECT_EQ(check(mr, base + len, 1, FI_REMOTE_READ), -FI_EINVAL);
  // addr + len overflowing
  EXPECT_EQ(check(mr, base + 1, SIZE_MAX, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, u64_max, 2, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, base + len - 1, u64_max, FI_REMOTE_READ), -FI_EINVAL);
  // an offset-mode address is not a virtual address
  EXPECT_EQ(check(mr, 0, 1, FI_REMOTE_READ), -FI_EINVAL);
  // unknown key
  const uint64_t key = fi_mr_key(mr);
  EXPECT_EQ(map().check(key + 1, base, 1, FI_REMOTE_READ, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  EXPECT_EQ(map().check(key, base, 1, FI_REMOTE_READ, nullptr), -FI_EINVAL);  // closed
}

TEST_P(MrTest, OffsetModeBounds) {
  set_mode(0);
  std::vector<char> buf(4096);
  fid_mr* mr = reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  void* p = nullptr;
  EXPECT_EQ(check(mr, 0, 4096, FI_REMOTE_WRITE, &p), 0);
  EXPECT_EQ(p, buf.data());
  EXPECT_EQ(check(mr, 100, 1, FI_REMOTE_WRITE, &p), 0);
  EXPECT_EQ(p, buf.data() + 100);
  EXPECT_EQ(check(mr, 4095, 1, FI_REMOTE_WRITE), 0);
  EXPECT_EQ(check(mr, 4095, 2, FI_REMOTE_WRITE), -FI_EINVAL);
  EXPECT_EQ(check(mr, 4096, 1, FI_REMOTE_WRITE), -FI_EINVAL);
  EXPECT_EQ(check(mr, addr_of(buf.data()), 1, FI_REMOTE_WRITE),
            -FI_EINVAL);  // virtual addresses mean nothing
  EXPECT_EQ(check(mr, 1, u64_max, FI_REMOTE_WRITE), -FI_EINVAL);
  EXPECT_EQ(fi_close(&mr->fid), 0);

  // With an offset, peers address the region from `offset`.
  const uint64_t off = 1 << 20;
  mr = reg(buf.data(), buf.size(), all_access, 1, off);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(check(mr, off, 1, FI_REMOTE_READ, &p), 0);
  EXPECT_EQ(p, buf.data());
  EXPECT_EQ(check(mr, off + 4095, 1, FI_REMOTE_READ, &p), 0);
  EXPECT_EQ(p, buf.data() + 4095);
  EXPECT_EQ(check(mr, off - 1, 1, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, off - 1, 2, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, off + 4096, 1, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(check(mr, 0, 1, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  // offset + len past the top of the address space
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 1, u64_max - 100), -FI_EINVAL);
}

TEST_P(MrTest, AccessIsEnforced) {
  set_mode(FI_MR_VIRT_ADDR);
  std::vector<char> buf(256);
  const uint64_t base = addr_of(buf.data());
  fid_mr* ro = reg(buf.data(), buf.size(), FI_REMOTE_READ, 1);
  fid_mr* local = reg(buf.data(), buf.size(), FI_SEND | FI_RECV, 2);
  ASSERT_NE(ro, nullptr);
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(check(ro, base, 8, FI_REMOTE_READ), 0);
  EXPECT_EQ(check(ro, base, 8, FI_REMOTE_WRITE), -FI_EACCES);
  EXPECT_EQ(check(ro, base, 8, FI_REMOTE_READ | FI_REMOTE_WRITE), -FI_EACCES);
  EXPECT_EQ(check(local, base, 8, FI_REMOTE_READ), -FI_EACCES);
  EXPECT_EQ(check(local, base, 8, 0), 0);
  // local side: descriptors
  EXPECT_EQ(map().check_local(fi_mr_desc(local), buf.data(), 10, FI_SEND), 0);
  EXPECT_EQ(map().check_local(fi_mr_desc(local), buf.data(), 10, FI_RECV), 0);
  EXPECT_EQ(map().check_local(fi_mr_desc(local), buf.data(), 10, FI_WRITE), -FI_EACCES);
  EXPECT_EQ(map().check_local(fi_mr_desc(ro), buf.data(), 10, FI_SEND), -FI_EACCES);
  uint64_t key = 0;
  EXPECT_EQ(map().check_local(fi_mr_desc(local), buf.data() + 255, 1, 0, &key), 0);
  EXPECT_EQ(key, 2u);
  EXPECT_EQ(map().check_local(fi_mr_desc(local), buf.data() + 256, 0, 0), 0);
  EXPECT_EQ(map().check_local(fi_mr_desc(local), buf.data() + 255, 2, 0), -FI_EINVAL);
  EXPECT_EQ(map().check_local(fi_mr_desc(local), buf.data() - 1, 2, 0), -FI_EINVAL);
  EXPECT_EQ(map().check_local(fi_mr_desc(local), buf.data() + 1, SIZE_MAX, 0), -FI_EINVAL);
  EXPECT_EQ(map().check_local(nullptr, buf.data(), 1, 0), -FI_EINVAL);
  EXPECT_EQ(map().check_local(ptr_at(0x12345678), buf.data(), 1, 0), -FI_EINVAL);
  void* stale = fi_mr_desc(local);
  EXPECT_EQ(fi_close(&local->fid), 0);
  EXPECT_EQ(map().check_local(stale, buf.data(), 1, 0), -FI_EINVAL);
  EXPECT_EQ(map().owner(stale), nullptr);
  // The slot is reused by the next registration, the stale descriptor stays dead.
  fid_mr* again = reg(buf.data(), buf.size(), FI_SEND, 3);
  ASSERT_NE(again, nullptr);
  EXPECT_NE(fi_mr_desc(again), stale);
  EXPECT_EQ(map().check_local(stale, buf.data(), 1, 0), -FI_EINVAL);
  EXPECT_EQ(map().check_local(fi_mr_desc(again), buf.data(), 1, FI_SEND), 0);
  EXPECT_EQ(fi_close(&again->fid), 0);
  EXPECT_EQ(fi_close(&ro->fid), 0);
}

TEST_P(MrTest, VectoredRegions) {
  ASSERT_GE(iov_limit(), 3u) << "provider's mr_iov_limit";
  std::vector<char> a(100), b(200), c(300);
  iovec iov[3] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  for (uint64_t mode : {uint64_t{FI_MR_VIRT_ADDR}, uint64_t{0}}) {
    SCOPED_TRACE(mode);
    set_mode(mode);
    fid_mr* mr = nullptr;
    ASSERT_EQ(fi_mr_regv(domain, iov, 3, all_access, 0, 9, 0, &mr, nullptr), 0);
    const uint64_t base = mode ? addr_of(a.data()) : 0;
    void* p = nullptr;
    EXPECT_EQ(check(mr, base + 0, 100, FI_REMOTE_READ, &p), 0);
    EXPECT_EQ(p, a.data());
    EXPECT_EQ(check(mr, base + 150, 10, FI_REMOTE_READ, &p), 0);
    EXPECT_EQ(p, b.data() + 50);
    EXPECT_EQ(check(mr, base + 300, 300, FI_REMOTE_READ, &p), 0);
    EXPECT_EQ(p, c.data());
    EXPECT_EQ(check(mr, base + 599, 1, FI_REMOTE_READ, &p), 0);
    EXPECT_EQ(p, c.data() + 299);
    EXPECT_EQ(check(mr, base + 600, 0, FI_REMOTE_READ, &p), 0);
    EXPECT_EQ(p, c.data() + 300);
    EXPECT_EQ(check(mr, base + 600, 1, FI_REMOTE_READ), -FI_EINVAL);
    // spanning segments: valid, but one pointer cannot describe it
    EXPECT_EQ(check(mr, base + 90, 20, FI_REMOTE_READ), 0);
    EXPECT_EQ(check(mr, base + 90, 20, FI_REMOTE_READ, &p), -FI_ETOOSMALL);
    iovec out[weft::mr_iov_max];
    size_t n = 0;
    ASSERT_EQ(map().resolve(fi_mr_key(mr), base + 90, 20, FI_REMOTE_READ, out, &n), 0);
    ASSERT_EQ(n, 2u);
    EXPECT_EQ(out[0].iov_base, a.data() + 90);
    EXPECT_EQ(out[0].iov_len, 10u);
    EXPECT_EQ(out[1].iov_base, b.data());
    EXPECT_EQ(out[1].iov_len, 10u);
    ASSERT_EQ(map().resolve(fi_mr_key(mr), base + 50, 550, FI_REMOTE_READ, out, &n), 0);
    ASSERT_EQ(n, 3u);
    EXPECT_EQ(out[0].iov_len + out[1].iov_len + out[2].iov_len, 550u);
    EXPECT_EQ(out[2].iov_base, c.data());
    EXPECT_EQ(out[2].iov_len, 300u);
    EXPECT_EQ(map().resolve(fi_mr_key(mr), base + 50, 551, FI_REMOTE_READ, out, &n), -FI_EINVAL);
    // local side: any single segment, not the gaps between them
    EXPECT_EQ(map().check_local(fi_mr_desc(mr), b.data() + 10, 190, 0), 0);
    EXPECT_EQ(map().check_local(fi_mr_desc(mr), c.data(), 300, 0), 0);
    EXPECT_EQ(map().check_local(fi_mr_desc(mr), b.data() + 10, 191, 0), -FI_EINVAL);
    EXPECT_EQ(fi_close(&mr->fid), 0);
  }
  // Adjacent segments carry a local range across their boundary.
  set_mode(FI_MR_VIRT_ADDR);
  std::vector<char> big(400);
  iovec halves[2] = {{big.data(), 200}, {big.data() + 200, 200}};
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_regv(domain, halves, 2, all_access, 0, 10, 0, &mr, nullptr), 0);
  EXPECT_EQ(map().check_local(fi_mr_desc(mr), big.data() + 150, 100, 0), 0);
  EXPECT_EQ(map().check_local(fi_mr_desc(mr), big.data(), 400, 0), 0);
  EXPECT_EQ(map().check_local(fi_mr_desc(mr), big.data(), 401, 0), -FI_EINVAL);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

// ---------------------------------------------------------------- bind / enable

TEST_P(MrTest, EndpointModeBindEnable) {
  set_mode(FI_MR_VIRT_ADDR | FI_MR_ENDPOINT);
  std::vector<char> buf(128);
  const uint64_t base = addr_of(buf.data());
  fid_mr* mr = reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  // Created disabled: no access, local or remote, until enabled.
  EXPECT_EQ(check(mr, base, 1, FI_REMOTE_READ), -FI_EACCES);
  EXPECT_EQ(map().check_local(fi_mr_desc(mr), buf.data(), 1, 0), -FI_EACCES);
  EXPECT_EQ(fi_mr_enable(mr), -FI_EOPBADSTATE);  // not bound to an endpoint yet
  // Wrong objects to bind to. The MR's bind only reads fclass, so small
  // stand-ins do for the endpoint and counter.
  EXPECT_EQ(fi_mr_bind(mr, nullptr, 0), -FI_EINVAL);
  EXPECT_EQ(fi_mr_bind(mr, &domain->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_mr_bind(mr, &fabric->fid, 0), -FI_EINVAL);
  EXPECT_EQ(fi_mr_bind(mr, &mr->fid, 0), -FI_EINVAL);
  fid ep{};
  ep.fclass = FI_CLASS_EP;
  fid other_ep{};
  other_ep.fclass = FI_CLASS_EP;
  EXPECT_EQ(fi_mr_bind(mr, &ep, FI_REMOTE_WRITE), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_bind(mr, &ep, 0), 0);
  EXPECT_EQ(fi_mr_bind(mr, &ep, 0), 0);
  EXPECT_EQ(fi_mr_bind(mr, &other_ep, 0), -FI_EINVAL);
  EXPECT_EQ(check(mr, base, 1, FI_REMOTE_READ), -FI_EACCES);  // bound, not yet enabled
  EXPECT_EQ(fi_mr_enable(mr), 0);
  EXPECT_EQ(check(mr, base, 1, FI_REMOTE_READ), 0);
  EXPECT_EQ(map().check_local(fi_mr_desc(mr), buf.data(), 1, 0), 0);
  EXPECT_EQ(fi_mr_enable(mr), 0);
  EXPECT_EQ(fi_mr_bind(mr, &ep, 0), -FI_EOPBADSTATE);  // no bindings after enable
  EXPECT_EQ(weft::mr::of(mr)->ep, &ep);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(MrTest, CounterBinding) {
  std::vector<char> buf(128);
  const uint64_t base = addr_of(buf.data());
  fi_cntr_attr cattr{};
  cattr.events = FI_CNTR_EVENTS_COMP;
  cattr.wait_obj = FI_WAIT_NONE;
  fid_cntr* cntr = nullptr;
  const int opened = fi_cntr_open(domain, &cattr, &cntr, nullptr);
  if (opened == -FI_ENOSYS) GTEST_SKIP() << "counters not available yet";
  ASSERT_EQ(opened, 0);
  fid_cntr* other = nullptr;
  ASSERT_EQ(fi_cntr_open(domain, &cattr, &other, nullptr), 0);
  fid fake{};  // of class CNTR, but not a counter weft opened
  fake.fclass = FI_CLASS_CNTR;
  const uint64_t saved_caps = dom().info->caps;

  set_mode(FI_MR_VIRT_ADDR);
  fid_mr* mr = reg(buf.data(), buf.size(), all_access, 1);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(fi_mr_bind(mr, &fake, FI_REMOTE_WRITE), -FI_EINVAL);
  dom().info->caps = saved_caps & ~FI_RMA_EVENT;
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE),
            -FI_ENOSYS);  // no remote-access events without FI_RMA_EVENT
  dom().info->caps = saved_caps | FI_RMA_EVENT;
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, 0), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_SEND), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE | FI_READ), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE), 0);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_READ), 0);
  EXPECT_EQ(fi_mr_bind(mr, &other->fid, FI_REMOTE_READ), -FI_EINVAL);  // one counter per region
  EXPECT_EQ(weft::mr::of(mr)->cntr, cntr);
  EXPECT_EQ(weft::mr::of(mr)->cntr_flags, FI_REMOTE_WRITE | FI_REMOTE_READ);
  EXPECT_EQ(fi_mr_enable(mr), 0);                             // created enabled: a no-op
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE), 0);  // and bindings stay open
  EXPECT_EQ(fi_close(&cntr->fid), -FI_EBUSY);                 // the region holds it
  EXPECT_EQ(fi_close(&mr->fid), 0);

  // FI_MR_RMA_EVENT: regions that count events say so at registration, are
  // created disabled, and take their counters before fi_mr_enable.
  set_mode(FI_MR_VIRT_ADDR | FI_MR_RMA_EVENT);
  mr = reg(buf.data(), buf.size(), all_access, 2);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(check(mr, base, 1, FI_REMOTE_WRITE), 0);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE), -FI_EINVAL);  // registered without FI_RMA_EVENT
  EXPECT_EQ(fi_close(&mr->fid), 0);
  mr = reg(buf.data(), buf.size(), all_access, 3, 0, FI_RMA_EVENT);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(check(mr, base, 1, FI_REMOTE_WRITE), -FI_EACCES);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE), 0);
  EXPECT_EQ(fi_mr_enable(mr), 0);
  EXPECT_EQ(check(mr, base, 1, FI_REMOTE_WRITE), 0);
  EXPECT_EQ(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE), -FI_EOPBADSTATE);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  dom().info->caps = saved_caps;
  EXPECT_EQ(fi_close(&cntr->fid), 0);
  EXPECT_EQ(fi_close(&other->fid), 0);
}

// The provider's hook (prov_domain::mr_changed) hears of every change, after
// the map holds it: what the shm provider uses to publish registrations.
struct change_log final : weft::prov_domain {
  explicit change_log(weft::domain& d) : dom(d) {}
  void mr_changed(uint64_t key) noexcept override {
    weft::mr_entry e{};
    const bool present = dom.mrs->find(key, &e);
    calls.emplace_back(key, present);
    flags = present ? e.flags : 0;
  }
  weft::domain& dom;
  static inline std::vector<std::pair<uint64_t, bool>> calls;  // key, present in the map
  static inline uint32_t flags = 0;
};

TEST_P(MrTest, ChangeHook) {
  set_mode(FI_MR_VIRT_ADDR | FI_MR_ENDPOINT);
  change_log::calls.clear();
  auto saved = std::move(dom().pd);
  dom().pd = std::make_unique<change_log>(dom());
  std::vector<char> buf(64);
  fid_mr* mr = reg(buf.data(), buf.size(), all_access, 77);
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(change_log::calls.size(), 1u);
  EXPECT_EQ(change_log::calls[0], std::make_pair(uint64_t{77}, true));
  EXPECT_EQ(change_log::flags & weft::mr_entry_enabled, 0u);
  fid ep{};
  ep.fclass = FI_CLASS_EP;
  ASSERT_EQ(fi_mr_bind(mr, &ep, 0), 0);
  ASSERT_EQ(fi_mr_enable(mr), 0);
  ASSERT_EQ(change_log::calls.size(), 2u);
  EXPECT_EQ(change_log::calls[1], std::make_pair(uint64_t{77}, true));
  EXPECT_EQ(change_log::flags & weft::mr_entry_enabled, weft::mr_entry_enabled);
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 77), -FI_ENOKEY);  // failures change nothing
  ASSERT_EQ(change_log::calls.size(), 2u);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  ASSERT_EQ(change_log::calls.size(), 3u);
  EXPECT_EQ(change_log::calls[2], std::make_pair(uint64_t{77}, false));
  dom().pd = std::move(saved);
}

// ---------------------------------------------------------------- bad input

TEST_P(MrTest, BadArguments) {
  set_mode(FI_MR_VIRT_ADDR);
  std::vector<char> buf(256);
  fid_mr* mr = sentinel;
  EXPECT_EQ(fi_mr_reg(domain, buf.data(), buf.size(), all_access, 0, 0, 0, nullptr, nullptr), -FI_EINVAL);
  EXPECT_EQ(try_reg(buf.data(), 0), -FI_EINVAL);  // len must be > 0
  EXPECT_EQ(try_reg(buf.data(), buf.size(), FI_TAGGED), -FI_EINVAL);
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access | (1ULL << 63)), -FI_EINVAL);
  EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 0, 0, 1ULL << 62), -FI_EBADFLAGS);
  if (!(info->caps & FI_RMA_PMEM)) {
    EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 0, 0, FI_RMA_PMEM), -FI_EBADFLAGS);
  }
  if (!(info->caps & FI_HMEM)) {
    EXPECT_EQ(try_reg(buf.data(), buf.size(), all_access, 0, 0, FI_HMEM_DEVICE_ONLY), -FI_EBADFLAGS);
  }
  // buffer wrapping around the top of the address space
  EXPECT_EQ(try_reg(ptr_at(u64_max - 10), 100), -FI_EINVAL);
  EXPECT_EQ(try_reg(ptr_at(u64_max - 99), 100), -FI_EINVAL);  // one past its last byte is not an address
  EXPECT_EQ(try_reg(ptr_at(u64_max - 100), 100), 0);          // any other range may be registered

  // regv
  const size_t limit = iov_limit();
  std::vector<iovec> iov(limit + 1, iovec{buf.data(), 16});
  EXPECT_EQ(fi_mr_regv(domain, nullptr, 1, all_access, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_mr_regv(domain, iov.data(), 0, all_access, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_mr_regv(domain, iov.data(), limit + 1, all_access, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  if (limit >= 2) {
    iov[1].iov_len = 0;
    EXPECT_EQ(fi_mr_regv(domain, iov.data(), 2, all_access, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
    // VIRT_ADDR: base + total length past the top of the address space
    iov[0] = {ptr_at(u64_max - 200), 100};
    iov[1] = {buf.data(), 200};
    EXPECT_EQ(fi_mr_regv(domain, iov.data(), 2, all_access, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  }
  // regattr
  EXPECT_EQ(fi_mr_regattr(domain, nullptr, 0, &mr), -FI_EINVAL);
  iovec one{buf.data(), buf.size()};
  uint8_t auth[4] = {};
  fi_mr_attr attr{};
  attr.mr_iov = &one;
  attr.iov_count = 1;
  attr.access = all_access;
  attr.auth_key_size = sizeof(auth);
  attr.auth_key = auth;
  EXPECT_EQ(fi_mr_regattr(domain, &attr, 0, &mr), -FI_EINVAL);
  attr.auth_key_size = 0;
  attr.iov_count = limit + 1;
  EXPECT_EQ(fi_mr_regattr(domain, &attr, 0, &mr), -FI_EINVAL);
  attr.iov_count = 1;
  EXPECT_EQ(fi_mr_regattr(domain, &attr, 1ULL << 62, &mr), -FI_EBADFLAGS);
  EXPECT_EQ(mr, sentinel);
  EXPECT_EQ(map().size(), 0u);
  // a domain's ops called with something else than a domain
  EXPECT_EQ(domain->mr->reg(&fabric->fid, buf.data(), buf.size(), all_access, 0, 0, 0, &mr, nullptr),
            -FI_EINVAL);
  EXPECT_EQ(domain->mr->reg(nullptr, buf.data(), buf.size(), all_access, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  EXPECT_EQ(mr, sentinel);
}

TEST_P(MrTest, AllocatedMode) {
  const long pg = sysconf(_SC_PAGESIZE);
  char* pages =
      static_cast<char*>(mmap(nullptr, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(pages, MAP_FAILED);
  ASSERT_EQ(munmap(pages + pg, pg), 0);  // a hole in the middle

  set_mode(FI_MR_VIRT_ADDR | FI_MR_ALLOCATED);
  EXPECT_EQ(try_reg(nullptr, 4096), -FI_EINVAL);
  EXPECT_EQ(try_reg(pages, 3 * pg), -FI_EINVAL);
  EXPECT_EQ(try_reg(pages + pg + 10, 10), -FI_EINVAL);
  EXPECT_EQ(try_reg(pages, pg), 0);
  EXPECT_EQ(try_reg(pages + 2 * pg + 1, pg - 1), 0);
  // Without FI_MR_ALLOCATED any address range can be registered.
  set_mode(FI_MR_VIRT_ADDR);
  EXPECT_EQ(try_reg(pages, 3 * pg), 0);
  EXPECT_EQ(try_reg(nullptr, 4096), 0);
  munmap(pages, pg);
  munmap(pages + 2 * pg, pg);
}

// ---------------------------------------------------------------- raw keys, refresh, misc

TEST_P(MrTest, RawKeys) {
  set_mode(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY);
  std::vector<char> buf(64);
  fid_mr* mr = reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  uint64_t base = 0;
  uint8_t raw[16] = {};
  size_t size = 0;
  EXPECT_EQ(fi_mr_raw_attr(mr, &base, raw, &size, 0), -FI_ETOOSMALL);
  EXPECT_EQ(size, 8u);
  size = sizeof(raw);
  EXPECT_EQ(fi_mr_raw_attr(mr, &base, raw, &size, 1), -FI_EBADFLAGS);
  ASSERT_EQ(fi_mr_raw_attr(mr, &base, raw, &size, 0), 0);
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(base, addr_of(buf.data()));
  uint64_t key = 0;
  for (size_t i = 0; i < size; ++i) key |= uint64_t{raw[i]} << (8 * i);
  EXPECT_EQ(key, fi_mr_key(mr));
  EXPECT_EQ(fi_close(&mr->fid), 0);

  // FI_MR_RAW: fi_mr_key is not available; the raw key maps back to a usable one.
  set_mode(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_RAW);
  mr = reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(fi_mr_key(mr), FI_KEY_NOTAVAIL);
  size = sizeof(raw);
  ASSERT_EQ(fi_mr_raw_attr(mr, &base, raw, &size, 0), 0);
  struct fi_mr_map_raw m {};
  m.base_addr = base;
  m.raw_key = raw;
  m.key_size = size;
  m.key = &key;
  ASSERT_EQ(weft::mr_map_raw(dom(), &m), 0);  // what the domain's FI_MAP_RAW_MR runs
  EXPECT_EQ(map().check(key, addr_of(buf.data()), buf.size(), FI_REMOTE_READ, nullptr), 0);
  EXPECT_EQ(weft::mr_unmap_key(dom(), &key), 0);
  m.key_size = 9;
  EXPECT_EQ(weft::mr_map_raw(dom(), &m), -FI_EINVAL);
  m.key_size = size;
  m.flags = 1;
  EXPECT_EQ(weft::mr_map_raw(dom(), &m), -FI_EBADFLAGS);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(MrTest, RefreshAndControl) {
  set_mode(FI_MR_VIRT_ADDR | FI_MR_MMU_NOTIFY);
  std::vector<char> buf(256);
  fid_mr* mr = reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(fi_mr_refresh(mr, nullptr, 0, 0), 0);
  iovec part{buf.data() + 16, 32};
  EXPECT_EQ(fi_mr_refresh(mr, &part, 1, 0), 0);
  EXPECT_EQ(fi_mr_refresh(mr, &part, 1, 1), -FI_EBADFLAGS);
  EXPECT_EQ(fi_mr_refresh(mr, nullptr, 1, 0), -FI_EINVAL);
  iovec outside{buf.data() + 200, 57};
  EXPECT_EQ(fi_mr_refresh(mr, &outside, 1, 0), -FI_EINVAL);
  EXPECT_EQ(fi_control(&mr->fid, FI_BACKLOG, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(MrTest, DomainBusyWhileRegistered) {
  std::vector<char> buf(64);
  fid_mr* mr = reg(buf.data(), buf.size());
  ASSERT_NE(mr, nullptr);
  const int ret = fi_close(&domain->fid);
  if (ret == 0) {  // the domain is gone: leak the MR rather than touch freed memory
    domain = nullptr;
    FAIL() << "domain closed with a registered MR";
  }
  EXPECT_EQ(ret, -FI_EBUSY);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_P(MrTest, AsyncRegistrationEvent) {
  fi_eq_attr attr{};
  attr.size = 16;
  attr.wait_obj = FI_WAIT_NONE;
  fid_eq* eq = nullptr;
  const int ret = fi_eq_open(fabric, &attr, &eq, nullptr);
  if (ret == -FI_ENOSYS) GTEST_SKIP() << "event queues not available yet";
  ASSERT_EQ(ret, 0);
  ASSERT_EQ(fi_domain_bind(domain, &eq->fid, FI_REG_MR), 0);
  std::vector<char> buf(64);
  int ctx = 0;
  fid_mr* mr = nullptr;
  ASSERT_EQ(fi_mr_reg(domain, buf.data(), buf.size(), all_access, 0, 0, 0, &mr, &ctx), 0);
  uint32_t event = 0;
  fi_eq_entry entry{};
  ASSERT_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), static_cast<ssize_t>(sizeof(entry)));
  EXPECT_EQ(event, uint32_t{FI_MR_COMPLETE});
  EXPECT_EQ(entry.fid, &mr->fid);
  EXPECT_EQ(entry.context, &ctx);
  // A failed registration posts nothing.
  EXPECT_EQ(try_reg(buf.data(), 0), -FI_EINVAL);
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  EXPECT_EQ(fi_close(&domain->fid), 0);
  domain = nullptr;
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

WEFT_ALL_PROVIDERS(MrTest);

// FI_MR_BASIC from an API 1.4 caller: the domain runs with VIRT_ADDR |
// ALLOCATED | PROV_KEY, and registration behaves accordingly.
class MrLegacyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MrLegacyTest, BasicModeFromApi14) {
  fi_info* hints = fi_allocinfo();
  ASSERT_NE(hints, nullptr);
  hints->fabric_attr->prov_name = strdup(GetParam());
  hints->domain_attr->mr_mode = FI_MR_BASIC;
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 4), nullptr, nullptr, 0, hints, &info), 0);
  fi_freeinfo(hints);
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
  weft::domain& dom = *weft::domain::of(domain);
  EXPECT_EQ(dom.mr_mode & (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY),
            uint64_t{FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY});

  std::vector<char> buf(256);
  fid_mr* a = nullptr;
  fid_mr* b = nullptr;
  ASSERT_EQ(fi_mr_reg(domain, buf.data(), buf.size(), FI_REMOTE_READ, 0, 5, 0, &a, nullptr), 0);
  ASSERT_EQ(fi_mr_reg(domain, buf.data(), buf.size(), FI_REMOTE_READ, 0, 5, 0, &b, nullptr),
            0);  // key ignored
  EXPECT_NE(fi_mr_key(a), fi_mr_key(b));
  EXPECT_EQ(dom.mrs->check(fi_mr_key(a), addr_of(buf.data()) + 10, 10, FI_REMOTE_READ, nullptr), 0);
  EXPECT_EQ(dom.mrs->check(fi_mr_key(a), 10, 10, FI_REMOTE_READ, nullptr), -FI_EINVAL);
  fid_mr* c = sentinel;
  EXPECT_EQ(fi_mr_reg(domain, nullptr, 4096, FI_REMOTE_READ, 0, 0, 0, &c, nullptr), -FI_EINVAL);  // ALLOCATED
  // fi_mr_attr of API 1.4 ends before auth_key_size: garbage there is not read.
  struct {
    fi_mr_attr attr;
  } big{};
  iovec iov{buf.data(), buf.size()};
  big.attr.mr_iov = &iov;
  big.attr.iov_count = 1;
  big.attr.access = FI_REMOTE_WRITE;
  big.attr.auth_key_size = 12345;  // beyond a 1.4 caller's struct
  ASSERT_EQ(fi_mr_regattr(domain, &big.attr, 0, &c), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
  EXPECT_EQ(fi_close(&a->fid), 0);
  EXPECT_EQ(fi_close(&b->fid), 0);
  EXPECT_EQ(fi_close(&domain->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  fi_freeinfo(info);
}

INSTANTIATE_TEST_SUITE_P(prov, MrLegacyTest, ::testing::ValuesIn(weft_test::offered_providers()),
                         [](const auto& p) { return std::string(p.param); });

// ---------------------------------------------------------------- white box: mr_map

TEST(MrMap, EntryLayout) {
  EXPECT_EQ(sizeof(weft::mr_entry), 128u);
  EXPECT_TRUE(std::is_standard_layout_v<weft::mr_entry>);
}

TEST(MrMap, SmallKeySpaces) {
  weft::mr_map map(1, 5);
  weft::mr_entry e{};
  e.len = e.seg[0].len = 1;
  e.iov_count = 1;
  std::set<uint64_t> keys;
  uint64_t desc = 0;
  for (int i = 0; i < 255; ++i) {
    ASSERT_EQ(map.insert(e, nullptr, true, &desc), 0);
    EXPECT_LE(e.key, 0xffu);
    keys.insert(e.key);
  }
  EXPECT_EQ(keys.size(), 255u);
  EXPECT_EQ(map.insert(e, nullptr, true, &desc), -FI_ENOSPC);
  e.key = 0x100;
  EXPECT_EQ(map.insert(e, nullptr, false, &desc), -FI_EKEYREJECTED);
  const uint64_t gone = *keys.begin();
  EXPECT_TRUE(map.erase(gone));
  EXPECT_FALSE(map.erase(gone));
  keys.erase(gone);
  EXPECT_EQ(map.insert(e, nullptr, true, &desc), 0);
  EXPECT_EQ(keys.count(e.key), 0u);
  EXPECT_EQ(map.insert(e, nullptr, true, &desc), -FI_ENOSPC);
}

// A region of the brute-force model: bytes k of the logical space live at
// seg_addr(k); everything is decided byte by byte.
struct model_region {
  uint64_t key;
  uint64_t base;
  uint64_t access;
  bool enabled;
  bool alive;
  uint64_t desc;
  std::vector<weft::mr_segment> segs;

  uint64_t len() const {
    uint64_t n = 0;
    for (auto& s : segs) n += s.len;
    return n;
  }
  // Segment index and owner's address of logical byte k (k < len()).
  std::pair<size_t, uint64_t> byte(uint64_t k) const {
    for (size_t i = 0; i < segs.size(); ++i) {
      if (k < segs[i].len) return {i, segs[i].addr + k};
      k -= segs[i].len;
    }
    return {SIZE_MAX, 0};
  }
  bool owns(uint64_t a) const {
    for (auto& s : segs)
      if (a >= s.addr && a < s.addr + s.len) return true;
    return false;
  }
};

int model_check(const model_region* r, uint64_t addr, uint64_t len, uint64_t access, bool want_ptr,
                uint64_t* ptr) {
  if (!r || !r->alive) return -FI_EINVAL;
  if (!r->enabled || (access & ~r->access)) return -FI_EACCES;
  const unsigned __int128 lo = addr, hi = static_cast<unsigned __int128>(addr) + len;
  if (lo < r->base || hi > static_cast<unsigned __int128>(r->base) + r->len()) return -FI_EINVAL;
  if (!want_ptr) return 0;
  const uint64_t k = addr - r->base;
  if (len == 0) {
    if (k == r->len()) {
      *ptr = r->segs.back().addr + r->segs.back().len;
      return 0;
    }
    *ptr = r->byte(k).second;
    return 0;
  }
  auto first = r->byte(k);
  for (uint64_t j = 1; j < len; ++j)
    if (r->byte(k + j).first != first.first) return -FI_ETOOSMALL;
  *ptr = first.second;
  return 0;
}

int model_check_local(const model_region* r, uint64_t buf, uint64_t len, uint64_t access) {
  if (!r || !r->alive) return -FI_EINVAL;
  if (!r->enabled || (access & ~r->access)) return -FI_EACCES;
  if (len == 0) {
    for (auto& s : r->segs)
      if (buf >= s.addr && buf <= s.addr + s.len) return 0;
    return -FI_EINVAL;
  }
  if (len > u64_max - buf) return -FI_EINVAL;
  for (uint64_t j = 0; j < len; ++j)
    if (!r->owns(buf + j)) return -FI_EINVAL;
  return 0;
}

TEST(MrMap, RandomAgainstModel) {
  std::mt19937_64 rng(12345);
  auto rnd = [&](uint64_t n) { return n ? rng() % n : 0; };
  weft::mr_map map(8, 99);
  std::vector<model_region> regions;
  const uint64_t accesses[] = {FI_REMOTE_READ, FI_REMOTE_WRITE, FI_SEND, FI_RECV, FI_READ, FI_WRITE};
  auto random_access = [&] {
    uint64_t a = 0;
    for (uint64_t bit : accesses)
      if (rng() & 1) a |= bit;
    return a;
  };
  auto find_key = [&](uint64_t key) -> model_region* {
    for (auto& r : regions)
      if (r.alive && r.key == key) return &r;
    return nullptr;
  };

  // Build: segments in a small address universe so that they touch, overlap and
  // abut; some regions with requested keys from a small set (duplicates).
  for (int op = 0; op < 3000; ++op) {
    const uint64_t what = rnd(10);
    if (what < 6 || regions.empty()) {
      model_region r{};
      weft::mr_entry e{};
      const size_t n = 1 + rnd(weft::mr_iov_max);
      uint64_t addr = 0x10000 + rnd(1 << 14);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t len = 1 + rnd(200);
        r.segs.push_back({addr, len});
        e.seg[i] = {addr, len};
        addr = (rng() & 1) ? addr + len : 0x10000 + rnd(1 << 14);  // adjacent or anywhere
      }
      e.iov_count = static_cast<uint32_t>(n);
      e.len = r.len();
      r.base = (rng() & 1) ? r.segs[0].addr : rnd(1 << 16);
      e.base = r.base;
      r.access = e.access = random_access();
      r.enabled = rnd(4) != 0;
      e.flags = r.enabled ? weft::mr_entry_enabled : 0;
      const bool prov = rng() & 1;
      e.key = rnd(64);
      const model_region* dup = prov ? nullptr : find_key(e.key);
      uint64_t desc = 0;
      const int ret = map.insert(e, nullptr, prov, &desc);
      if (dup) {
        ASSERT_EQ(ret, -FI_ENOKEY);
        continue;
      }
      ASSERT_EQ(ret, 0);
      ASSERT_EQ(find_key(e.key), nullptr) << "provider key collides";
      r.key = e.key;
      r.desc = desc;
      r.alive = true;
      regions.push_back(r);
    } else {
      // By the key of any region, dead or alive: a requested key may have been
      // taken again by a later region.
      const uint64_t key = regions[rnd(regions.size())].key;
      model_region* live = find_key(key);
      if (what < 9) {
        ASSERT_EQ(map.erase(key), live != nullptr);
        if (live) live->alive = false;
      } else {
        const bool on = live && live->enabled;
        ASSERT_EQ(map.update_flags(key, on ? 0 : weft::mr_entry_enabled, on ? weft::mr_entry_enabled : 0),
                  live != nullptr);
        if (live) live->enabled = !on;
      }
    }
  }
  size_t alive = 0;
  for (auto& r : regions) alive += r.alive;
  ASSERT_EQ(map.size(), alive);
  std::vector<weft::mr_entry> snap;
  map.snapshot(snap);
  ASSERT_EQ(snap.size(), alive);
  for (auto& e : snap) ASSERT_NE(find_key(e.key), nullptr);

  std::map<int, int> outcomes, local_outcomes;
  for (int q = 0; q < 20000; ++q) {
    model_region* r = &regions[rnd(regions.size())];
    // A key: the region's (alive or dead), or now and then a random one.
    uint64_t key = r->key;
    if (rnd(20) == 0) key = rng();
    const model_region* m = find_key(key);
    // An address near a boundary of the region or anywhere in it.
    const uint64_t total = r->len();
    const uint64_t picks[] = {r->base,     r->base + total,     r->base + rnd(total + 1),
                              r->base - 1, r->base + total - 1, r->base + total + 1,
                              rng()};
    const uint64_t addr = picks[rnd(7)];
    const uint64_t lens[] = {0, 1, 2, rnd(total + 2), total, u64_max - rnd(3), rnd(16)};
    const uint64_t len = lens[rnd(7)];
    const uint64_t access = rnd(3) ? (r->access & rng()) : random_access();
    const bool want_ptr = rng() & 1;
    void* p = nullptr;
    uint64_t model_ptr = 0;
    const int got = map.check(key, addr, len, access, want_ptr ? &p : nullptr);
    ASSERT_EQ(got, model_check(m, addr, len, access, want_ptr, &model_ptr))
        << "q=" << q << " addr=" << addr << " len=" << len;
    if (got == 0 && want_ptr) {
      ASSERT_EQ(addr_of(p), model_ptr) << "q=" << q;
    }
    outcomes[got]++;
    // resolve: the pieces, concatenated, are the model's bytes
    iovec iov[weft::mr_iov_max];
    size_t n = 0;
    const int rgot = map.resolve(key, addr, len, access, iov, &n);
    ASSERT_EQ(rgot, model_check(m, addr, len, access, false, nullptr)) << "q=" << q;
    if (rgot == 0) {
      uint64_t k = addr - m->base;
      size_t sum = 0;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_GT(iov[i].iov_len, 0u);
        ASSERT_EQ(addr_of(iov[i].iov_base), m->byte(k).second);
        ASSERT_EQ(addr_of(iov[i].iov_base) + iov[i].iov_len - 1, m->byte(k + iov[i].iov_len - 1).second);
        k += iov[i].iov_len;
        sum += iov[i].iov_len;
      }
      ASSERT_EQ(sum, len);
    }
    // local side
    const model_region* lr = r->alive ? r : nullptr;
    const weft::mr_segment& s = r->segs[rnd(r->segs.size())];
    const uint64_t bpicks[] = {s.addr, s.addr - 1, s.addr + s.len, s.addr + rnd(s.len), s.addr + s.len - 1};
    const uint64_t buf = bpicks[rnd(5)];
    const uint64_t blen = rnd(4) ? rnd(400) : (rnd(2) ? 0 : u64_max - rnd(2));
    const uint64_t baccess = rnd(3) ? (r->access & rng()) : random_access();
    const int lgot = map.check_local(ptr_at(r->desc), ptr_at(buf), blen, baccess);
    ASSERT_EQ(lgot, model_check_local(lr, buf, blen, baccess))
        << "q=" << q << " buf=" << buf << " len=" << blen;
    local_outcomes[lgot]++;
  }
  // The queries reached every outcome, often.
  for (int code : {0, -FI_EINVAL, -FI_EACCES}) EXPECT_GT(outcomes[code], 500) << code;
  EXPECT_GT(outcomes[-FI_ETOOSMALL], 40);
  for (int code : {0, -FI_EINVAL, -FI_EACCES}) EXPECT_GT(local_outcomes[code], 500) << code;
}

TEST(MrMap, ConcurrentReadersAndWriter) {
  weft::mr_map map(8, 1);
  static char stable_buf[256];
  weft::mr_entry stable{};
  stable.seg[0] = {addr_of(stable_buf), sizeof(stable_buf)};
  stable.iov_count = 1;
  stable.len = sizeof(stable_buf);
  stable.base = addr_of(stable_buf);
  stable.access = FI_REMOTE_READ;
  stable.flags = weft::mr_entry_enabled;
  uint64_t desc = 0;
  ASSERT_EQ(map.insert(stable, nullptr, true, &desc), 0);
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  auto reader = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      void* p = nullptr;
      if (map.check(stable.key, stable.base + 10, 20, FI_REMOTE_READ, &p) != 0 || p != stable_buf + 10)
        ++errors;
      if (map.check_local(ptr_at(desc), stable_buf, 256, FI_REMOTE_READ) != 0) ++errors;
    }
  };
  std::thread r1(reader), r2(reader);
  weft::mr_entry e = stable;
  for (int i = 0; i < 5000; ++i) {
    uint64_t d = 0;
    ASSERT_EQ(map.insert(e, nullptr, true, &d), 0);
    ASSERT_EQ(map.check(e.key, e.base, 1, FI_REMOTE_READ, nullptr), 0);
    ASSERT_TRUE(map.erase(e.key));
  }
  stop = true;
  r1.join();
  r2.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(map.size(), 1u);
}

}  // namespace
