// tests/unit/cache_keys_test.cpp: cache keys and the records they hash: stable, changed by every field that
// matters and by nothing else, and the split path's two keys (cubin and host module), with a fake toolchain.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/gemm.hpp"
#include "jit/toolchain_detail.hpp"
#include "unit/cache_fixture.hpp"
#include "unit/fake_build.hpp"
#include "unit/test_env.hpp"

namespace gemmkit {
namespace {

// ---- keys --------------------------------------------------------------------------------------------------

TEST_F(CacheTest, KeyIsStableAndHex) {
  const std::string key = cache_.key(tc_, source_);
  EXPECT_EQ(key, cache_.key(fake_toolchain(), fake_source()));
  EXPECT_EQ(key, DiskCache("/elsewhere").key(tc_, source_));
  ASSERT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
}

// One change to each field of a cache key's record, by name.
std::vector<std::pair<const char*, std::function<void(Toolchain&, KernelSource&)>>> record_changes() {
  return {
      {"an included device header",
       [](Toolchain& t, KernelSource&) { t.device_headers["gemmkit/module_entry.hpp"].sha256 = std::string(64, 'e'); }},
      {"a header included through another",
       [](Toolchain& t, KernelSource&) { t.device_headers["gemmkit/abi.h"].sha256 = std::string(64, 'e'); }},
      {"cutlass version", [](Toolchain& t, KernelSource&) { t.cutlass_version = "4.2.1"; }},
      {"nvcc version", [](Toolchain& t, KernelSource&) { t.nvcc_version = "12.8"; }},
      {"nvcc build", [](Toolchain& t, KernelSource&) { t.nvcc_build = "Build cuda_13.0.r13.0/compiler.1_0"; }},
      {"host target", [](Toolchain& t, KernelSource&) { t.host_target = "aarch64-linux-gnu"; }},
      {"arch", [](Toolchain&, KernelSource& s) { s.arch_flag = "sm_90"; }},
      {"kernel name", [](Toolchain&, KernelSource& s) { s.kernel_name += "_x"; }},
      {"source text", [](Toolchain&, KernelSource& s) { s.text += " "; }},
  };
}

TEST_F(CacheTest, EveryRecordFieldChangesTheKey) {
  const std::string base = cache_.key(tc_, source_);
  const auto changes = record_changes();
  for (const auto& [what, change] : changes) {
    Toolchain tc = tc_;
    KernelSource source = source_;
    change(tc, source);
    EXPECT_NE(cache_.key(tc, source), base) << what;
  }
}

// A glue header the kernel does not include, directly or through another, leaves its key (and its pack entry) valid.
TEST_F(CacheTest, DeviceHeadersTheSourceDoesNotIncludeDoNotChangeTheKey) {
  const std::string base = cache_.key(tc_, source_);
  Toolchain other = tc_;
  other.device_headers["gemmkit/sm80_gemm.hpp"].sha256 = std::string(64, 'e');
  other.device_headers["gemmkit/new_family.hpp"] = {std::string(64, 'f'), {"gemmkit/abi.h"}};
  EXPECT_EQ(cache_.key(other, source_), base);
  // An include the toolchain lacks still counts (as missing), and adding the header changes the key.
  KernelSource includes_more = source_;
  includes_more.text += "#include <gemmkit/later.hpp>\n";
  const std::string missing = cache_.key(tc_, includes_more);
  EXPECT_NE(missing, base);
  other.device_headers["gemmkit/later.hpp"] = {std::string(64, '1'), {}};
  EXPECT_NE(cache_.key(other, includes_more), missing);
}

// With gemmkit's own device headers: an SM80 GEMM compiles without the SM90 lean epilogue's header, so editing that
// header leaves the SM80 kernel's key (and its cached module) alone, and moves the lean kernel's; a header every
// kernel includes (the ABI) moves both.
TEST(DeviceHeaderKeys, AGlueHeaderEditMovesOnlyTheKeysOfTheKernelsThatIncludeIt) {
  Toolchain tc;
  tc.device_headers = toolchain_detail::scan_device_headers(
      (std::filesystem::path(GEMMKIT_GOLDEN_DIR).parent_path().parent_path() / "device" / "include").string());
  ASSERT_TRUE(tc.device_headers.count("gemmkit/sm90_lean_epilogue.hpp"));
  GemmOptions o;
  o.element = DataType::f16;
  o.element_accumulator = DataType::f32;
  o.layout = Layout::RowMajor;
  o.cc = 80;
  const std::string sm80 = render(Gemm(o).spec()).text;
  o.cc = 90;
  Gemm lean_plan(o);
  for (const TileDescription& td : lean_plan.tile_descriptions()) {
    if (td.epilogue_schedule == EpilogueSchedule::Lean) {
      lean_plan.set_tile_description(td);
      break;
    }
  }
  const std::string lean = render(lean_plan.spec()).text;
  const std::string sm80_digest = included_headers_digest(tc, sm80), lean_digest = included_headers_digest(tc, lean);

  Toolchain edited = tc;
  edited.device_headers["gemmkit/sm90_lean_epilogue.hpp"].sha256 = std::string(64, '0');
  EXPECT_EQ(included_headers_digest(edited, sm80), sm80_digest);
  EXPECT_NE(included_headers_digest(edited, lean), lean_digest);
  edited = tc;
  edited.device_headers["gemmkit/abi.h"].sha256 = std::string(64, '0');
  EXPECT_NE(included_headers_digest(edited, sm80), sm80_digest);
  EXPECT_NE(included_headers_digest(edited, lean), lean_digest);
}

TEST_F(CacheTest, PathsAndTheHostCompilersVersionDoNotChangeTheKey) {
  const std::string base = cache_.key(tc_, source_);
  // A module built by another g++ for the same target is the same kernel behind the same C interface.
  Toolchain other_host = tc_;
  other_host.host_compiler = "g++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0";
  EXPECT_EQ(cache_.key(other_host, source_), base);
  Toolchain moved = tc_;
  moved.nvcc = "/usr/local/cuda-13.0/bin/nvcc";
  moved.cuda_home = "/usr/local/cuda-13.0";
  moved.cutlass_root = "/srv/cutlass";
  moved.device_include_dir = "/usr/share/gemmkit/device/include";
  EXPECT_EQ(cache_.key(moved, source_), base);
}

TEST_F(CacheTest, RecordHoldsFlagsWithPlaceholdersAndTheSource) {
  const std::string record = cache_.record(tc_, source_);
  EXPECT_NE(record.find("flag: -DNDEBUG\n"), std::string::npos);
  EXPECT_NE(record.find("flag: -gencode=arch=compute_90a,code=sm_90a\n"), std::string::npos);
  EXPECT_NE(record.find("flag: -I<cutlass>/include\n"), std::string::npos);
  EXPECT_NE(record.find("nvcc-version: 13.0\n"), std::string::npos);
  EXPECT_EQ(record.find(tc_.cutlass_root), std::string::npos);
  EXPECT_EQ(record.find(tc_.nvcc), std::string::npos);
  EXPECT_EQ(record.substr(record.size() - source_.text.size()), source_.text);
}

// ---- the split path's two keys (compiler.hpp) ------------------------------------------------------------------

TEST_F(CacheTest, TheCubinKeyLeavesOutTheHostTargetAndTheHostKeyHasIt) {
  const std::string cubin = cache_.split_key(tc_, source_, SplitArtifact::cubin);
  const std::string host = cache_.split_key(tc_, source_, SplitArtifact::host);
  const std::string single = cache_.key(tc_, source_);
  EXPECT_NE(cubin, host);
  EXPECT_NE(cubin, single);
  EXPECT_NE(host, single);

  // Another host target (an aarch64 host with the same toolkit): its cubin hits, its host module is its own.
  Toolchain other_target = tc_;
  other_target.host_target = "aarch64-linux-gnu";
  EXPECT_EQ(cache_.split_key(other_target, source_, SplitArtifact::cubin), cubin);
  EXPECT_NE(cache_.split_key(other_target, source_, SplitArtifact::host), host);
  EXPECT_NE(cache_.key(other_target, source_), single);
  // Another g++ version or other paths change neither.
  Toolchain moved = tc_;
  moved.host_compiler = "g++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0";
  moved.nvcc = "/usr/local/cuda-13.0/bin/nvcc";
  moved.cutlass_root = "/srv/cutlass";
  moved.device_include_dir = "/usr/share/gemmkit/device/include";
  EXPECT_EQ(cache_.split_key(moved, source_, SplitArtifact::cubin), cubin);
  EXPECT_EQ(cache_.split_key(moved, source_, SplitArtifact::host), host);
}

TEST_F(CacheTest, TheCubinKeyCoversWhatTheCubinDependsOn) {
  // Every field of the record but the host target, which a cubin does not depend on.
  auto changes = record_changes();
  std::erase_if(changes, [](const auto& change) { return std::string_view(change.first) == "host target"; });
  for (const SplitArtifact artifact : {SplitArtifact::cubin, SplitArtifact::host}) {
    const std::string base = cache_.split_key(tc_, source_, artifact);
    for (const auto& [what, change] : changes) {
      Toolchain tc = tc_;
      KernelSource source = source_;
      change(tc, source);
      EXPECT_NE(cache_.split_key(tc, source, artifact), base) << what;
    }
  }
}

TEST_F(CacheTest, SplitRecordsHoldTheirOwnFlags) {
  const std::string cubin = cache_.split_record(tc_, source_, SplitArtifact::cubin);
  EXPECT_NE(cubin.find("flag: -cubin\n"), std::string::npos);
  EXPECT_NE(cubin.find("flag: -DGEMMKIT_SPLIT_DEVICE\n"), std::string::npos);
  EXPECT_NE(cubin.find("flag: -gencode=arch=compute_90a,code=sm_90a\n"), std::string::npos);
  EXPECT_EQ(cubin.find("host-target"), std::string::npos);
  EXPECT_EQ(cubin.find("-shared"), std::string::npos);
  EXPECT_EQ(cubin.substr(cubin.size() - source_.text.size()), source_.text);
  const std::string host = cache_.split_record(tc_, source_, SplitArtifact::host);
  EXPECT_NE(host.find("flag: -DGEMMKIT_SPLIT_HOST\n"), std::string::npos);
  EXPECT_NE(host.find("flag: -shared\n"), std::string::npos);
  EXPECT_NE(host.find("host-target: " + tc_.host_target + "\n"), std::string::npos);
  EXPECT_EQ(host.find(tc_.host_compiler), std::string::npos);
  EXPECT_EQ(host.find("-cubin"), std::string::npos);
}

// The fields of a record, up to the source text (which follows "source-bytes").
std::set<std::string> record_fields(const std::string& record) {
  std::set<std::string> fields;
  std::istringstream lines(record);
  for (std::string line; std::getline(lines, line);) {
    fields.insert(line.substr(0, line.find(':')));
    if (line.rfind("source-bytes:", 0) == 0) break;
  }
  return fields;
}

// A cubin built on a machine without a GPU must hit on the GPU machine: the split keys hold the toolchain, the exact
// arch, the flags and the source, nothing the building machine's devices could change.
TEST_F(CacheTest, TheSplitKeysHoldNothingOfTheBuildingMachinesGpu) {
  const std::set<std::string> common = {"gemmkit-cache-key-schema",
                                        "gemmkit-version",
                                        "included-device-headers-sha256",
                                        "cutlass-version",
                                        "nvcc-version",
                                        "nvcc-build",
                                        "artifact",
                                        "arch",
                                        "kernel-name",
                                        "flag",
                                        "source-bytes"};
  EXPECT_EQ(record_fields(cache_.split_record(tc_, source_, SplitArtifact::cubin)), common);
  std::set<std::string> host = common;
  host.insert({"host-target", "host-wrapper"});
  EXPECT_EQ(record_fields(cache_.split_record(tc_, source_, SplitArtifact::host)), host);
  const std::vector<std::string> keys = {cache_.split_key(tc_, source_, SplitArtifact::cubin),
                                         cache_.split_key(tc_, source_, SplitArtifact::host)};
  testenv::ScopedEnv no_devices("CUDA_VISIBLE_DEVICES", "");
  EXPECT_EQ(cache_.split_key(tc_, source_, SplitArtifact::cubin), keys[0]);
  EXPECT_EQ(cache_.split_key(tc_, source_, SplitArtifact::host), keys[1]);
}

TEST_F(CacheTest, SplittableSourcesBuildSplitUnlessTurnedOff) {
  KernelSource splittable = source_;
  splittable.splittable = true;
  {
    testenv::ScopedEnv off("GEMMKIT_SPLIT_BUILD", "0");
    EXPECT_FALSE(DiskCache::builds_split(splittable));
    EXPECT_EQ(cache_.keys(tc_, splittable), std::vector<std::string>{cache_.key(tc_, splittable)});
  }
  testenv::ScopedEnv by_default("GEMMKIT_SPLIT_BUILD", std::nullopt);
  EXPECT_TRUE(DiskCache::builds_split(splittable));
  EXPECT_FALSE(DiskCache::builds_split(source_));
  EXPECT_EQ(cache_.keys(tc_, splittable),
            (std::vector<std::string>{cache_.split_key(tc_, splittable, SplitArtifact::cubin),
                                      cache_.split_key(tc_, splittable, SplitArtifact::host)}));
  // A builder given by the caller builds one module, whatever the knob says.
  const CacheEntry built = cache_.get_or_build(tc_, splittable, fake_builder());
  EXPECT_EQ(built.key, cache_.key(tc_, splittable));
  EXPECT_TRUE(built.cubin_path.empty());
}

}  // namespace
}  // namespace gemmkit
