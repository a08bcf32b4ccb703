// tests/unit/tuning_test.cpp: the tuning database (buckets, lookup, concurrent writers, export/import, a damaged
// file), the candidate set, and run()'s choice of a database entry (the choice function, counted; no GPU).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <thread>

#include "catalog/catalog.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/tuning.hpp"
#include "support/gpu_cases.hpp"
#include "tuning/choice.hpp"
#include "unit/test_env.hpp"

namespace gemmkit {
namespace {

using tuning::Database;
using tuning::Entry;
using tuning::Identity;

const Identity kH200{"NVIDIA H200", "13.0", "0.1.0"};

Entry entry(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& tile = R"({"stages":0})",
            const std::string& plan = "plan-a") {
  Entry e;
  e.identity = kH200;
  e.plan = plan;
  e.m = m;
  e.n = n;
  e.k = k;
  e.tile = tile;
  e.kernel_name = "kernel_" + std::to_string(m);
  e.ms = 1.5;
  e.heuristic_ms = 2.0;
  e.created = "2026-11-30T00:00:00Z";
  return e;
}

class TuningTest : public ::testing::Test {
 protected:
  testenv::TempDir dir;
  std::string path = (dir.path() / "tuning.sqlite3").string();
};

TEST(TuningBucket, HalfOctaves) {
  EXPECT_EQ(tuning::bucket_of(1), 0);
  EXPECT_EQ(tuning::bucket_of(3000), 23);
  EXPECT_EQ(tuning::bucket_of(3232), 23);
  EXPECT_EQ(tuning::bucket_of(4096), 24);
  EXPECT_EQ(tuning::bucket_of(5000), 25);  // 2 * log2(5000) = 24.58
  EXPECT_EQ(tuning::bucket_of(8192), 26);
  EXPECT_NE(tuning::bucket_of(512), tuning::bucket_of(1024));
}

TEST_F(TuningTest, DefaultPathFollowsTheKnobAndTheCache) {
  {
    testenv::ScopedEnv db("GEMMKIT_TUNING_DB", std::nullopt);
    testenv::ScopedEnv cache("GEMMKIT_CACHE_DIR", dir.str());
    EXPECT_EQ(Database::default_path(), (dir.path() / "tuning.sqlite3").string());
  }
  {
    testenv::ScopedEnv db("GEMMKIT_TUNING_DB", "/some/where.db");
    EXPECT_EQ(Database::default_path(), "/some/where.db");
  }
  testenv::ScopedEnv off("GEMMKIT_TUNING_DB", "off");
  EXPECT_EQ(Database::default_path(), "");
  EXPECT_THROW(Database(""), ConfigError);
}

TEST_F(TuningTest, PutLookupAndReplace) {
  Database db(path);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_TRUE(db.entries().empty());
  db.put(entry(3000, 3000, 3000));
  ASSERT_EQ(db.entries().size(), 1u);
  EXPECT_EQ(db.entries().front(), entry(3000, 3000, 3000));
  // The exact shape, a shape in the same bucket, and none outside it, of another plan or of another device.
  EXPECT_EQ(db.lookup(kH200, "plan-a", 3000, 3000, 3000)->m, 3000);
  EXPECT_EQ(db.lookup(kH200, "plan-a", 3232, 2900, 3100)->m, 3000);
  EXPECT_FALSE(db.lookup(kH200, "plan-a", 4096, 3000, 3000));
  EXPECT_FALSE(db.lookup(kH200, "plan-a", 3000, 3000, 3000, 4));
  EXPECT_FALSE(db.lookup(kH200, "plan-b", 3000, 3000, 3000));
  EXPECT_FALSE(db.lookup({"NVIDIA H100", "13.0", "0.1.0"}, "plan-a", 3000, 3000, 3000));
  EXPECT_FALSE(db.lookup({"NVIDIA H200", "12.8", "0.1.0"}, "plan-a", 3000, 3000, 3000));
  EXPECT_FALSE(db.lookup({"NVIDIA H200", "13.0", "0.2.0"}, "plan-a", 3000, 3000, 3000));
  // The nearest shape of the bucket wins; an exact one always.
  db.put(entry(3232, 3232, 3232, R"({"stages":3})"));
  EXPECT_EQ(db.lookup(kH200, "plan-a", 3200, 3200, 3200)->m, 3232);
  EXPECT_EQ(db.lookup(kH200, "plan-a", 3000, 3000, 3000)->m, 3000);
  // The same key again replaces the entry.
  db.put(entry(3000, 3000, 3000, R"({"stages":5})"));
  EXPECT_EQ(db.entries().size(), 2u);
  EXPECT_EQ(db.lookup(kH200, "plan-a", 3000, 3000, 3000)->tile, R"({"stages":5})");
  EXPECT_EQ(db.entries(kH200).size(), 2u);
  EXPECT_TRUE(db.entries(Identity{"other", "1.0", "0.1.0"}).empty());
  EXPECT_EQ(db.clear(), 2u);
  EXPECT_TRUE(db.entries().empty());
}

TEST_F(TuningTest, ReopenedDatabaseKeepsEntries) {
  Database(path).put(entry(1024, 1024, 1024));
  EXPECT_EQ(Database(path).entries().size(), 1u);
}

TEST_F(TuningTest, ConcurrentWritersFromTwoProcessesAndTwoThreads) {
  constexpr int kPerWriter = 40;
  { Database created(path); }  // created first, so that both writers race on the writes and not on the schema
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  auto write = [&](int writer) {
    Database db(path);
    for (int i = 0; i < kPerWriter; ++i) db.put(entry(64 + i, 1000 * writer + 8, 128));
  };
  if (child == 0) {
    int status = 0;
    try {
      write(1);
    } catch (...) {
      status = 1;
    }
    _exit(status);
  }
  std::thread a(write, 2), b(write, 3);
  a.join();
  b.join();
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(Database(path).entries().size(), 3u * kPerWriter);
}

TEST_F(TuningTest, ExportImportRoundTrip) {
  Database source(path);
  source.put(entry(16, 4096, 4096, R"({"threadblock_shape":[128,256,64]})"));
  source.put(entry(8192, 28672, 8192));
  const nlohmann::ordered_json exported = source.export_json();
  EXPECT_EQ(exported.at("format"), "gemmkit-tuning");
  ASSERT_EQ(exported.at("entries").size(), 2u);
  EXPECT_TRUE(exported.at("entries")[0].at("tile").is_object());

  Database target((dir.path() / "other.sqlite3").string());
  EXPECT_EQ(target.import_json(nlohmann::ordered_json::parse(exported.dump())), 2u);
  EXPECT_EQ(target.entries(), source.entries());
  EXPECT_EQ(target.export_json(), exported);
}

TEST_F(TuningTest, ImportRefusesABadDocumentBeforeWriting) {
  Database db(path);
  nlohmann::ordered_json document = db.export_json();
  nlohmann::ordered_json good = entry(128, 128, 128);
  document["entries"].push_back(good);
  nlohmann::ordered_json bad = good;
  bad["m"] = 0;
  document["entries"].push_back(bad);
  try {
    db.import_json(document);
    FAIL() << "a zero extent was imported";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 1"), std::string::npos) << e.what();
  }
  bad = good;
  bad.erase("tile");
  document["entries"] = {good, bad};
  EXPECT_THROW(db.import_json(document), ConfigError);
  EXPECT_THROW(db.import_json(nlohmann::ordered_json{{"format", "something-else"}}), ConfigError);
  EXPECT_TRUE(db.entries().empty());  // nothing of the refused documents was written
}

TEST_F(TuningTest, DamagedFileIsMovedAsideAndReplaced) {
  {
    std::ofstream file(path);
    file << std::string(4096, 'x');  // not SQLite's header
  }
  ::testing::internal::CaptureStderr();
  Database db(path);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("not a usable SQLite database"), std::string::npos) << warning;
  EXPECT_TRUE(std::filesystem::exists(path + ".damaged"));
  EXPECT_TRUE(db.entries().empty());
  db.put(entry(256, 256, 256));
  EXPECT_EQ(Database(path).entries().size(), 1u);
}

TEST_F(TuningTest, UnusablePathIsAClearError) {
  std::ofstream(dir.path() / "a-file") << "x";
  const std::string inside_a_file = (dir.path() / "a-file" / "tuning.sqlite3").string();  // its folder is a file
  try {
    Database db(inside_a_file);
    FAIL() << "a database was created under a regular file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(inside_a_file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GEMMKIT_TUNING_DB"), std::string::npos) << e.what();
  }
}

GemmOptions f16_options() {
  GemmOptions o;
  o.element = DataType::f16;
  o.layout = Layout::RowMajor;
  o.element_accumulator = DataType::f32;
  o.cc = 90;
  return o;
}

// run()'s choice: a matching entry whose kernel is built selects its configuration (counted), one whose kernel is
// not built, of another device, plan or bucket selects nothing (the heuristic decides).
TEST(TuningChoice, DatabaseEntrySelectsItsConfiguration) {
  Gemm plan(f16_options());
  const KernelSpec base = plan.spec();
  const auto tiles = plan.tile_descriptions();
  ASSERT_GT(tiles.size(), 5u);
  Entry tuned = entry(3000, 3000, 3000, tuning::tile_key(tiles[5]), tuning::plan_key(base));
  const std::vector<Entry> entries = {entry(3000, 3000, 3000, tuning::tile_key(tiles[2]), "another plan"), tuned};
  const tuning::Problem problem{3100, 2950, 3000, 1};
  std::vector<std::string> asked;
  auto built = [&](const KernelSpec& spec) {
    asked.push_back(spec.name());
    return true;
  };
  const auto before = tuning::counters();
  EXPECT_EQ(tuning::choose(entries, kH200, base, tiles, problem, built), 5u);
  EXPECT_EQ(tuning::counters().applied, before.applied + 1);
  KernelSpec expected = base;
  expected.tile = tiles[5];
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked.front(), expected.name());

  EXPECT_FALSE(tuning::choose(entries, kH200, base, tiles, problem, [](const KernelSpec&) { return false; }));
  EXPECT_EQ(tuning::counters().not_built, before.not_built + 1);
  EXPECT_FALSE(tuning::choose(entries, {"NVIDIA H100", "13.0", "0.1.0"}, base, tiles, problem, built));
  EXPECT_FALSE(tuning::choose(entries, kH200, base, tiles, {8192, 3000, 3000, 1}, built));
  KernelSpec relu = base;
  relu.activation = Activation::ReLU;  // another epilogue is another plan
  EXPECT_FALSE(tuning::choose(entries, kH200, relu, tiles, problem, built));
  // A configuration the plan does not offer (another build of gemmkit) is ignored.
  EXPECT_FALSE(tuning::choose({entry(3000, 3000, 3000, R"({"x":1})", tuning::plan_key(base))}, kH200, base, tiles,
                              problem, built));
  EXPECT_EQ(tuning::counters().applied, before.applied + 1);
}

TEST(TuningChoice, PlanKeyIgnoresOnlyTheTile) {
  Gemm plan(f16_options());
  KernelSpec a = plan.spec(), b = a;
  b.tile = plan.tile_descriptions().at(3);
  EXPECT_EQ(tuning::plan_key(a), tuning::plan_key(b));
  b.alignment_a = 4;
  EXPECT_NE(tuning::plan_key(a), tuning::plan_key(b));
  b = a;
  b.element_d = DataType::f32;
  EXPECT_NE(tuning::plan_key(a), tuning::plan_key(b));
}

TEST(TuningCandidates, BoundedDistinctAndHeuristicFirst) {
  Gemm plan(f16_options());
  const KernelSpec base = plan.spec();
  const auto tiles = plan.tile_descriptions();
  for (const catalog::ProblemShape shape : {catalog::ProblemShape{4096, 4096, 4096},
                                            {512, 512, 16384},
                                            {16, 4096, 4096},
                                            {3000, 3000, 3000},
                                            {8192, 28672, 8192}}) {
    const auto picked = catalog::tuning_candidates(tiles, base, shape, 132, 12);
    ASSERT_EQ(picked.size(), 12u);
    EXPECT_EQ(picked[0], catalog::choose_tile(tiles, base, shape, 132));
    EXPECT_NE(std::find(picked.begin(), picked.end(), 0u), picked.end());
    EXPECT_EQ(std::set<std::size_t>(picked.begin(), picked.end()).size(), picked.size());
    std::set<Shape3> ctas;
    bool stream_k = false;
    for (std::size_t i : picked) {
      ASSERT_LT(i, tiles.size());
      ctas.insert(tiles[i].cta_tile());
      stream_k = stream_k || tiles[i].tile_scheduler == TileScheduler::StreamK;
    }
    EXPECT_GE(ctas.size(), 3u) << "candidates should span several CTA shapes";
    EXPECT_TRUE(stream_k) << "Stream-K is always among the candidates";
  }
  EXPECT_EQ(catalog::tuning_candidates(tiles, base, {4096, 4096, 4096}, 132, 1).size(), 1u);
}

TEST(TuningCandidates, TuneCandidatesNeedNoGpu) {
  Gemm plan(f16_options());
  const gpu_cases::Shape s{1024, 1024, 1024};  // not a parallel split-K shape: spec_for is a candidate of tune()
  const auto A = gpu_cases::probe_view(DataType::f16, s.m, s.k, Layout::RowMajor);
  const auto B = gpu_cases::probe_view(DataType::f16, s.k, s.n, Layout::RowMajor);
  const auto D = gpu_cases::probe_view(DataType::f16, s.m, s.n, Layout::RowMajor);
  TuneOptions options;
  options.max_candidates = 4;
  const auto specs = plan.tune_candidates(A, B, nullptr, D, options);
  ASSERT_EQ(specs.size(), 4u);
  if (cuda_device_count() == 0) {
    EXPECT_EQ(specs.front(), plan.spec_for(A, B, nullptr, D));  // the heuristic's
  }
  options.max_candidates = 0;
  EXPECT_THROW(plan.tune_candidates(A, B, nullptr, D, options), ConfigError);
  options.max_candidates = 4;
  options.min_gain = -0.1;  // a fraction in [0, 1)
  EXPECT_THROW(plan.tune_candidates(A, B, nullptr, D, options), ConfigError);
}

TEST(TuningCandidates, TuneRefusesWhatItCannotTime) {
  Gemm plan(f16_options());
  std::vector<std::byte> host(64 * 64 * 2);
  const auto A = TensorView::host(host.data(), DataType::f16, {64, 64});
  EXPECT_THROW(plan.tune(A, A, nullptr, A), TensorError);  // host tensors: nothing to time on the GPU
  plan.set_tile_description(plan.tile_descriptions().at(1));
  const auto V = gpu_cases::probe_view(DataType::f16, 64, 64, Layout::RowMajor);
  EXPECT_THROW(plan.tune_candidates(V, V, nullptr, V), ConfigError);  // a set tile: nothing to choose
}

TEST(Tuning, WinnerMustBeatTheHeuristicByTheMargin) {
  auto candidate = [](double ms, bool ok = true) {
    TuneCandidate c;
    c.ms = ms;
    c.ok = ok;
    return c;
  };
  // 2 % faster is within run-to-run noise: the heuristic's choice stays.
  EXPECT_EQ(tuning_winner({candidate(1.0), candidate(0.98)}), 0u);
  // 5 % faster wins, and the fastest of several does.
  EXPECT_EQ(tuning_winner({candidate(1.0), candidate(0.95), candidate(0.90), candidate(1.2)}), 2u);
  // A failed candidate never wins, however fast it read.
  EXPECT_EQ(tuning_winner({candidate(1.0), candidate(0.1, false)}), 0u);
  // When the heuristic's own kernel failed, the fastest that ran wins outright.
  EXPECT_EQ(tuning_winner({candidate(0.0, false), candidate(1.0), candidate(0.99)}), 2u);
  // The margin is a parameter: 0 takes any lead.
  EXPECT_EQ(tuning_winner({candidate(1.0), candidate(0.99)}, 0.0), 1u);
}

}  // namespace
}  // namespace gemmkit
