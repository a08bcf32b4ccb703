// tests/unit/cache_archive_test.cpp: cache entries that come from elsewhere: exported and imported archives
// (round trip, tampered or foreign ones, concurrent importers, the CLI's cache export/import) and kernel packs on
// GEMMKIT_PACK_PATH, with a fake builder.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/errors.hpp"
#include "support/cli.hpp"
#include "unit/cache_fixture.hpp"
#include "unit/fake_build.hpp"
#include "unit/test_env.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

using testenv::read;

// ---- export and import -----------------------------------------------------------------------------------------

TEST_F(CacheTest, ExportImportRoundTripNeedsNoBuild) {
  const CacheEntry a = cache_.get_or_build(tc_, fake_source("k1"), fake_builder());
  const CacheEntry b = cache_.get_or_build(tc_, fake_source("k2"), fake_builder());
  const fs::path archive = dir_.path() / "pack.tar";
  EXPECT_EQ(cache_.export_archive(archive.string()), 2u);

  testenv::TempDir other_dir;
  DiskCache other(other_dir.str());
  const DiskCache::ImportResult imported = other.import_archive(archive.string());
  EXPECT_EQ(imported.imported, 2u);
  EXPECT_EQ(imported.present, 0u);
  const int builds_before = builds();
  for (const CacheEntry& entry : {a, b}) {
    const std::optional<CacheEntry> found = other.lookup(entry.key);
    ASSERT_TRUE(found) << entry.kernel_name;
    EXPECT_EQ(read(found->module_path), read(entry.module_path));
    EXPECT_TRUE(other.get_or_build(tc_, fake_source(entry.kernel_name), fake_builder()).hit);
  }
  EXPECT_EQ(builds(), builds_before);  // the imported entries serve without a build
  EXPECT_EQ(count_children(other_dir.path() / "v1" / "tmp"), 0u);

  // Importing again changes nothing; exporting one key writes one entry.
  EXPECT_EQ(other.import_archive(archive.string()).present, 2u);
  EXPECT_EQ(other.export_archive((dir_.path() / "one.tar").string(), {a.key}), 1u);
  EXPECT_EQ(DiskCache((dir_.path() / "third").string()).import_archive((dir_.path() / "one.tar").string()).imported,
            1u);
  EXPECT_THROW(cache_.export_archive((dir_.path() / "x.tar").string(), {std::string(64, 'a')}), Error);
}

TEST_F(CacheTest, ImportRefusesATamperedOrForeignArchive) {
  const CacheEntry built = cache_.get_or_build(tc_, source_, fake_builder());
  const fs::path archive = dir_.path() / "pack.tar";
  cache_.export_archive(archive.string());
  std::string bytes = read(archive);
  const std::size_t module = bytes.find("ELF-ish module");
  ASSERT_NE(module, std::string::npos);
  bytes[module] = 'X';  // kernel.so no longer matches the SHA-256 its manifest records
  const fs::path tampered = dir_.path() / "tampered.tar";
  std::ofstream(tampered, std::ios::binary) << bytes;

  testenv::TempDir other_dir;
  DiskCache other(other_dir.str());
  try {
    other.import_archive(tampered.string());
    ADD_FAILURE() << "a tampered archive was imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel.so does not match"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(other.lookup(built.key));

  const fs::path foreign = dir_.path() / "foreign.tar";
  std::ofstream(foreign, std::ios::binary) << std::string(2048, 'z');
  EXPECT_THROW(other.import_archive(foreign.string()), Error);
  EXPECT_THROW(other.import_archive((dir_.path() / "missing.tar").string()), Error);
  EXPECT_EQ(count_children(other_dir.path() / "v1" / "tmp"), 0u);
}

TEST_F(CacheTest, ConcurrentImportersPublishEachEntryOnce) {
  cache_.get_or_build(tc_, source_, fake_builder());
  const fs::path archive = dir_.path() / "pack.tar";
  cache_.export_archive(archive.string());
  testenv::TempDir other_dir;
  std::atomic<int> imported{0}, present{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      const auto result = DiskCache(other_dir.str()).import_archive(archive.string());
      imported += static_cast<int>(result.imported);
      present += static_cast<int>(result.present);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(imported.load(), 1);
  EXPECT_EQ(present.load(), 3);
  EXPECT_EQ(count_entries(other_dir.path()), 1u);
}

TEST_F(CacheTest, CliExportsAndImportsTheCache) {
  const CacheEntry built = cache_.get_or_build(tc_, source_, fake_builder());
  const std::string archive = (dir_.path() / "all.tar").string();
  const auto exported = testing::run_cli("cache export " + archive + " --json", dir_.str());
  ASSERT_EQ(exported.status, 0) << exported.out;
  EXPECT_EQ(nlohmann::json::parse(exported.out).at("exported").get<int>(), 1);
  testenv::TempDir other_dir;
  const auto imported = testing::run_cli("cache import " + archive + " --json", other_dir.str());
  ASSERT_EQ(imported.status, 0) << imported.out;
  EXPECT_EQ(nlohmann::json::parse(imported.out).at("imported").get<int>(), 1);
  EXPECT_TRUE(DiskCache(other_dir.str()).lookup(built.key));
  EXPECT_EQ(testing::run_cli("cache import", other_dir.str()).status, 2);  // the file is required
}

// ---- kernel packs ------------------------------------------------------------------------------------------

TEST_F(CacheTest, APackOnThePackPathServesAMissWithoutABuildAndIsOnlyRead) {
  testenv::TempDir pack_dir;
  const CacheEntry shipped = DiskCache(pack_dir.str()).get_or_build(tc_, source_, fake_builder());
  const std::string key = cache_.key(tc_, source_);
  ASSERT_FALSE(cache_.lookup(key).has_value());  // the pack path is unset

  testenv::ScopedEnv pack_path("GEMMKIT_PACK_PATH", "/no/such/pack:" + pack_dir.str());
  EXPECT_EQ(DiskCache::pack_roots().front(), "/no/such/pack");
  EXPECT_EQ(DiskCache::pack_roots().at(1), pack_dir.str());
  const int pack_hits_before = cache_counters().pack_hits;
  const CacheEntry entry = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_TRUE(entry.hit);
  EXPECT_EQ(entry.dir, shipped.dir);
  EXPECT_EQ(entry.module_path, shipped.module_path);
  EXPECT_EQ(builds(), 1);  // the pack's own build above, nothing since
  EXPECT_EQ(cache_counters().pack_hits - pack_hits_before, 1);
  EXPECT_EQ(cache_.find(tc_, source_)->dir, shipped.dir);
  EXPECT_EQ(cache_.lookup(key)->dir, shipped.dir);
  EXPECT_FALSE(fs::exists(dir_.path() / "v1" / key.substr(0, 2)));  // nothing copied into the cache

  // A damaged pack entry is passed over and left where it is; the kernel is built into the cache.
  std::ofstream(shipped.module_path, std::ios::binary | std::ios::app) << "damage";
  const CacheEntry rebuilt = cache_.get_or_build(tc_, source_, fake_builder());
  EXPECT_FALSE(rebuilt.hit);
  EXPECT_EQ(fs::path(rebuilt.dir), dir_.path() / "v1" / key.substr(0, 2) / key);
  EXPECT_TRUE(fs::exists(shipped.dir));
  EXPECT_EQ(count_children(pack_dir.path() / "v1" / "trash"), 0u);
}

TEST_F(CacheTest, TheCacheWinsOverAPackAndAPackIsNotItsOwnFallback) {
  testenv::TempDir pack_dir;
  DiskCache(pack_dir.str()).get_or_build(tc_, source_, fake_builder());
  const CacheEntry own = cache_.get_or_build(tc_, source_, fake_builder());
  testenv::ScopedEnv pack_path("GEMMKIT_PACK_PATH", pack_dir.str() + ":" + dir_.str());
  const int pack_hits_before = cache_counters().pack_hits;
  EXPECT_EQ(cache_.get_or_build(tc_, source_, fake_builder()).dir, own.dir);
  EXPECT_EQ(cache_counters().pack_hits, pack_hits_before);
  // With its own entry gone, the cache's root on the pack path is skipped and the other pack serves it.
  cache_.clear();
  EXPECT_EQ(fs::path(cache_.lookup(own.key)->dir).parent_path().parent_path().parent_path(), pack_dir.path());
}

TEST_F(CacheTest, CliCacheInfoListsThePacks) {
  testenv::TempDir pack_dir;
  DiskCache(pack_dir.str()).get_or_build(tc_, source_, fake_builder());
  testenv::ScopedEnv pack_path("GEMMKIT_PACK_PATH", pack_dir.str());
  const auto info = testing::run_cli("cache info --json", dir_.str());
  ASSERT_EQ(info.status, 0) << info.out;
  const auto packs = nlohmann::json::parse(info.out).at("packs");
  ASSERT_FALSE(packs.empty());
  EXPECT_EQ(packs.front().at("root").get<std::string>(), pack_dir.str());
  EXPECT_EQ(packs.front().at("entries").get<int>(), 1);
  const auto text = testing::run_cli("cache info", dir_.str());
  EXPECT_NE(text.out.find("pack " + pack_dir.str() + ": 1 entries"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace gemmkit
