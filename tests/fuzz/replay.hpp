// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The corpus replay every fuzz target shares: with the normal compiler and
// no libFuzzer, CI runs each committed corpus through its target this way,
// under the sanitizers of the build.
//
//   <replay> DIR...            the seeds (in memory), then every file of each DIR, once
//   <replay> --seeds DIR       writes the seed inputs into DIR
//
// A target that finds its decoder wrong aborts (as under the fuzzer).
#include <dirent.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace weft_fuzz {

using bytes = std::vector<unsigned char>;
using seed_list = std::vector<std::pair<std::string, bytes>>;

inline bool read_file(const std::string& path, bytes& out) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return false;
  out.clear();
  unsigned char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  fclose(f);
  return true;
}

inline int write_seeds(const seed_list& seeds, const char* dir) {
  for (auto& [name, b] : seeds) {
    const std::string path = std::string(dir) + "/seed_" + name;
    FILE* f = fopen(path.c_str(), "wb");
    if (!f || fwrite(b.data(), 1, b.size(), f) != b.size()) {
      perror(path.c_str());
      return 1;
    }
    fclose(f);
  }
  return 0;
}

inline int replay_main(int argc, char** argv, int (*target)(const uint8_t*, size_t), const seed_list& seeds) {
  if (argc == 3 && !strcmp(argv[1], "--seeds")) return write_seeds(seeds, argv[2]);
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR... | --seeds DIR\n", argv[0]);
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  size_t files = 0, total = 0;
  // The seeds in memory too, so the test means something even without a corpus.
  for (auto& [name, b] : seeds) target(b.data(), b.size());
  for (int i = 1; i < argc; ++i) {
    DIR* d = opendir(argv[i]);
    if (!d) {
      perror(argv[i]);
      return 1;
    }
    bytes b;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string path = std::string(argv[i]) + "/" + e->d_name;
      if (!read_file(path, b)) continue;
      target(b.data(), b.size());
      ++files;
      total += b.size();
    }
    closedir(d);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("replayed %zu inputs (%zu bytes) in %.2f s\n", files, total, s);
  return files ? 0 : 1;
}

}  // namespace weft_fuzz
