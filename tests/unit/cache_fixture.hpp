// tests/unit/cache_fixture.hpp: the cache tests' fixture (a DiskCache in a fresh folder, the fake toolchain and
// source, the build counters since the test began) and counts of a cache root's entries and of a folder's children.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <iterator>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "unit/fake_build.hpp"
#include "unit/test_env.hpp"

namespace gemmkit {

inline std::size_t count_entries(const std::filesystem::path& root) {
  std::size_t n = 0;
  for (const auto& shard : std::filesystem::directory_iterator(root / "v1")) {
    if (shard.path().filename().string().size() != 2) continue;
    n += std::distance(std::filesystem::directory_iterator(shard.path()), std::filesystem::directory_iterator());
  }
  return n;
}

inline std::size_t count_children(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir)) return 0;
  return std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator());
}

class CacheTest : public ::testing::Test {
 protected:
  testenv::TempDir dir_;
  DiskCache cache_{dir_.str()};
  Toolchain tc_ = fake_toolchain();
  KernelSource source_ = fake_source();
  CacheCounters before_ = cache_counters();

  int builds() const { return cache_counters().builds - before_.builds; }
  int disk_hits() const { return cache_counters().disk_hits - before_.disk_hits; }
  int rebuilt_damaged() const { return cache_counters().rebuilt_damaged - before_.rebuilt_damaged; }
};

}  // namespace gemmkit
