// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: the registration table a domain publishes (open addressing by
// key with linear probing; write_table and lookup_mr). A withdrawn entry
// leaves no tombstone: the entries after it move back, colliding keys stay
// reachable, also for a reader looking while entries move.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "prov/shm/shm.hpp"

namespace {

using namespace weft::shm;
using weft::mr_entry;

struct table_fixture {
  // a domain region: its header, then the table
  std::unique_ptr<unsigned char[]> mem{new unsigned char[domain_region_size + cacheline]};
  unsigned char* base = nullptr;
  mr_slot* t = nullptr;
  table_fixture() {
    auto p = reinterpret_cast<uintptr_t>(mem.get());
    base = reinterpret_cast<unsigned char*>((p + cacheline - 1) & ~uintptr_t{cacheline - 1});
    memset(base, 0, domain_region_size);
    t = reinterpret_cast<mr_slot*>(base + domain_table_off);
  }
  void put(uint64_t key, bool live) {
    mr_entry e{};
    e.key = key;
    e.base = key * 4096;
    e.len = 4096;
    e.iov_count = 1;
    write_table(reinterpret_cast<domain_hdr*>(base), t, key, live, e);
  }
  bool has(uint64_t key) const {
    mr_entry e{};
    return lookup_mr(base, key, &e) && e.key == key && e.base == key * 4096;
  }
  size_t live() const {
    size_t n = 0;
    for (uint32_t i = 0; i < mr_table_slots; i++) n += t[i].state == 1;
    return n;
  }
};

uint32_t home(uint64_t key) {
  return mr_hash(key) & (mr_table_slots - 1);
}

// Keys whose home slot is `h`, from `from` on.
std::vector<uint64_t> colliding(uint32_t h, size_t n, uint64_t from = 1) {
  std::vector<uint64_t> keys;
  for (uint64_t k = from; keys.size() < n; k++)
    if (home(k) == h) keys.push_back(k);
  return keys;
}

TEST(ShmTable, WithdrawnKeyBeforeOthersMovesThemBack) {
  table_fixture f;
  auto k = colliding(home(7), 3);  // stored in three slots one after another
  for (uint64_t key : k) f.put(key, true);
  for (uint64_t key : k) EXPECT_TRUE(f.has(key));
  const uint32_t h = home(k[0]);
  EXPECT_EQ(f.t[(h + 2) & (mr_table_slots - 1)].entry.key, k[2]);
  f.put(k[0], false);  // the first: the others move back a slot each
  EXPECT_FALSE(f.has(k[0]));
  EXPECT_TRUE(f.has(k[1]));
  EXPECT_TRUE(f.has(k[2]));
  EXPECT_EQ(f.t[h].entry.key, k[1]);
  EXPECT_EQ(f.t[(h + 1) & (mr_table_slots - 1)].entry.key, k[2]);
  EXPECT_EQ(f.t[(h + 2) & (mr_table_slots - 1)].state, 0u);
  EXPECT_EQ(f.live(), 2u);
  f.put(k[0], true);  // back in, after them
  EXPECT_TRUE(f.has(k[0]));
  for (uint64_t key : k) f.put(key, false);
  EXPECT_EQ(f.live(), 0u);
  for (uint64_t key : k) EXPECT_FALSE(f.has(key));
}

TEST(ShmTable, EntryAtItsHomeStaysWhereItIs) {
  table_fixture f;
  // a at home h, b homed at h too (slot h+1), c at its own home h+2: when
  // a goes, b moves back, c must not (its home is after the hole)
  const uint32_t h = 100;
  auto ab = colliding(h, 2);
  auto c = colliding(h + 2, 1);
  for (uint64_t key : {ab[0], ab[1], c[0]}) f.put(key, true);
  EXPECT_EQ(f.t[h + 2].entry.key, c[0]);
  f.put(ab[0], false);
  EXPECT_EQ(f.t[h].entry.key, ab[1]);
  EXPECT_EQ(f.t[h + 1].state, 0u);
  EXPECT_EQ(f.t[h + 2].entry.key, c[0]);
  EXPECT_TRUE(f.has(ab[1]));
  EXPECT_TRUE(f.has(c[0]));
}

TEST(ShmTable, EndOfTableWrapsAround) {
  table_fixture f;
  auto k = colliding(mr_table_slots - 1, 3);  // the last slot, then slots 0 and 1
  for (uint64_t key : k) f.put(key, true);
  for (uint64_t key : k) EXPECT_TRUE(f.has(key));
  EXPECT_EQ(f.t[1].entry.key, k[2]);
  f.put(k[0], false);
  EXPECT_TRUE(f.has(k[1]));
  EXPECT_TRUE(f.has(k[2]));
  EXPECT_EQ(f.t[mr_table_slots - 1].entry.key, k[1]);
  EXPECT_EQ(f.t[0].entry.key, k[2]);
  f.put(k[2], false);
  f.put(k[1], false);
  EXPECT_EQ(f.live(), 0u);
}

TEST(ShmTable, RegistrationsOneAfterAnotherLeaveTheTableAsItWas) {
  table_fixture f;
  // a few long-lived registrations, and 200,000 made and withdrawn in turn
  // (the face's rendezvous sends take a fresh key each)
  for (uint64_t key = 1; key <= 8; key++) f.put(key, true);
  for (uint64_t key = 100; key < 200100; key++) {
    f.put(key, true);
    ASSERT_TRUE(f.has(key));
    f.put(key, false);
  }
  for (uint64_t key = 1; key <= 8; key++) EXPECT_TRUE(f.has(key));
  EXPECT_FALSE(f.has(100));
  EXPECT_EQ(f.live(), 8u);
}

TEST(ShmTable, ReaderFindsEveryLiveKeyWhileEntriesMove) {
  table_fixture f;
  // long-lived keys in one run of slots, and a writer that inserts and
  // withdraws keys of the same homes in front of them, moving them back and
  // forth while a reader looks them up
  const uint32_t h = 4000;
  std::vector<uint64_t> kept, churn;
  for (uint32_t d = 0; d < 8; d++) {
    auto k = colliding(h + d, 6);
    kept.insert(kept.end(), k.begin() + 3, k.end());
    churn.insert(churn.end(), k.begin(), k.begin() + 3);
  }
  for (uint64_t key : churn) f.put(key, true);
  for (uint64_t key : kept) f.put(key, true);
  std::atomic<bool> stop{false};
  std::atomic<long> misses{0}, looks{0};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed))
      for (uint64_t key : kept) {
        if (!f.has(key)) misses.fetch_add(1, std::memory_order_relaxed);
        looks.fetch_add(1, std::memory_order_relaxed);
      }
  });
  for (int round = 0; round < 3000; round++)
    for (size_t i = 0; i < churn.size(); i++) {
      f.put(churn[(i + round) % churn.size()], false);
      f.put(churn[(i + round) % churn.size()], true);
    }
  stop = true;
  reader.join();
  EXPECT_EQ(misses.load(), 0) << "of " << looks.load() << " lookups";
  EXPECT_GT(looks.load(), 0);
  for (uint64_t key : kept) EXPECT_TRUE(f.has(key));
  EXPECT_EQ(f.live(), kept.size() + churn.size());
}

}  // namespace
