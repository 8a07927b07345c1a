// SPDX-License-Identifier: BSD-3-Clause
// prov/shm: finding the shared mapping that holds a registered range
// (shm_vma.cpp), by the kernel's PROCMAP_QUERY where it has it and as on
// kernels without it (/proc/self/pagemap, then /proc/self/maps as text);
// both must give the same answer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "prov/shm/shm.hpp"

namespace {

using weft::shm::shared_mapping;
using weft::shm::shared_mapping_of;
using weft::shm::vma_lookup;

const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// The answer of both lookups, which must agree.
bool lookup(const void* p, size_t len, shared_mapping* out) {
  shared_mapping fast{}, text{};
  auto a = reinterpret_cast<uintptr_t>(p);
  static weft::shm::vma_source src;
  bool f = shared_mapping_of(src, a, len, &fast, vma_lookup::any);
  bool t = shared_mapping_of(src, a, len, &text, vma_lookup::old_kernel);
  EXPECT_EQ(f, t) << "the lookups disagree at " << p << " + " << len;
  if (f && t) {
    EXPECT_EQ(fast.dev, text.dev);
    EXPECT_EQ(fast.ino, text.ino);
    EXPECT_EQ(fast.off, text.off);
    EXPECT_EQ(fast.start, text.start);
    EXPECT_EQ(fast.end, text.end);
  }
  *out = fast;
  return f;
}

struct memfd_map {
  int fd = -1;
  unsigned char* p = nullptr;
  size_t len = 0;
  memfd_map(size_t file_len, size_t off, size_t map_len, int prot) : len(map_len) {
    fd = memfd_create("weft_vma_test", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(file_len)) != 0) return;
    void* m = mmap(nullptr, map_len, prot, MAP_SHARED, fd, static_cast<off_t>(off));
    if (m != MAP_FAILED) p = static_cast<unsigned char*>(m);
  }
  ~memfd_map() {
    if (p) munmap(p, len);
    if (fd >= 0) close(fd);
  }
};

TEST(ShmVma, SharedFileMappingIsFoundWithItsOffset) {
  memfd_map m(8 * page, 2 * page, 3 * page, PROT_READ | PROT_WRITE);
  ASSERT_NE(m.p, nullptr);
  memset(m.p, 1, 3 * page);
  struct stat st {};
  ASSERT_EQ(fstat(m.fd, &st), 0);
  shared_mapping s{};
  ASSERT_TRUE(lookup(m.p + 100, 2 * page, &s));
  EXPECT_EQ(s.ino, st.st_ino);
  EXPECT_EQ(s.dev, st.st_dev);
  EXPECT_EQ(s.off, 2 * page + 100);
  EXPECT_EQ(s.start, reinterpret_cast<uintptr_t>(m.p));
  EXPECT_EQ(s.end, reinterpret_cast<uintptr_t>(m.p) + 3 * page);
  // The whole mapping, and its last byte.
  EXPECT_TRUE(lookup(m.p, 3 * page, &s));
  EXPECT_TRUE(lookup(m.p + 3 * page - 1, 1, &s));
}

TEST(ShmVma, UntouchedSharedMappingIsFound) {
  memfd_map m(4 * page, 0, 4 * page, PROT_READ | PROT_WRITE);  // no page present yet
  ASSERT_NE(m.p, nullptr);
  shared_mapping s{};
  EXPECT_TRUE(lookup(m.p + page, page, &s));
  EXPECT_EQ(s.off, page);
}

TEST(ShmVma, RangePastTheMappingIsRefused) {
  memfd_map m(4 * page, 0, 2 * page, PROT_READ | PROT_WRITE);
  ASSERT_NE(m.p, nullptr);
  shared_mapping s{};
  EXPECT_FALSE(lookup(m.p + page, page + 1, &s));
  EXPECT_FALSE(lookup(m.p, SIZE_MAX, &s));
}

TEST(ShmVma, ReadOnlySharedMappingIsRefused) {
  memfd_map m(2 * page, 0, 2 * page, PROT_READ);
  ASSERT_NE(m.p, nullptr);
  shared_mapping s{};
  EXPECT_FALSE(lookup(m.p, page, &s));
}

TEST(ShmVma, PrivateMemoryIsRefused) {
  // The heap, touched (pagemap answers on kernels without PROCMAP_QUERY) ...
  size_t len = 64 * 1024;
  auto* heap = static_cast<unsigned char*>(malloc(len));
  ASSERT_NE(heap, nullptr);
  memset(heap, 3, len);
  shared_mapping s{};
  EXPECT_FALSE(lookup(heap, len, &s));
  free(heap);
  // ... private anonymous memory never touched (the text decides) ...
  void* anon = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  EXPECT_FALSE(lookup(anon, page, &s));
  // ... and a private mapping of a file.
  memfd_map file(2 * page, 0, 0, 0);
  ASSERT_GE(file.fd, 0);
  void* priv = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd, 0);
  ASSERT_NE(priv, MAP_FAILED);
  memset(priv, 4, 2 * page);
  EXPECT_FALSE(lookup(priv, page, &s));
  munmap(priv, 2 * page);
  // Nothing mapped at all.
  munmap(anon, 4 * page);
  EXPECT_FALSE(lookup(anon, page, &s));
}

TEST(ShmVma, ChildAfterForkLooksAtItsOwnMappings) {
  memfd_map before(2 * page, 0, 2 * page, PROT_READ | PROT_WRITE);
  ASSERT_NE(before.p, nullptr);
  shared_mapping s{};
  ASSERT_TRUE(lookup(before.p, page, &s));  // the kept fd is the parent's now
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // a mapping only the child has: the parent's /proc/PID/maps would not know it
    memfd_map mine(2 * page, 0, 2 * page, PROT_READ | PROT_WRITE);
    shared_mapping c{};
    bool ok = mine.p && lookup(mine.p, page, &c) && c.start == reinterpret_cast<uintptr_t>(mine.p);
    _exit(ok && !::testing::Test::HasFailure() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
