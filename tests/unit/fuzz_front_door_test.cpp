// tests/unit/fuzz_front_door_test.cpp: the front door under 10,000+ seeded random calls, no GPU: spec_for, and run()
// up to the point where it needs a device, end in a kernel or a typed error naming a broken operand; never another
// exception, a crash or a hang. The generator's mutations say independently when a call must fail.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "gemmkit/codegen.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/gemm.hpp"
#include "support/front_door_cases.hpp"
#include "support/gpu_cases.hpp"

namespace gk = gemmkit;
using gk::fuzz::Case;
using gk::fuzz::Outcome;
using gk::fuzz::Stage;
using gk::fuzz::Verdict;

namespace {

constexpr std::uint64_t kSeed = 0x5eedf00d;  // GEMMKIT_FUZZ_SEED explores others
constexpr int kCases = 10000;

std::uint64_t first_seed() {
  const char* text = std::getenv("GEMMKIT_FUZZ_SEED");
  return text != nullptr ? std::strtoull(text, nullptr, 0) : kSeed;
}
constexpr int kMaxReported = 20;  // failures printed in full; the rest are counted

// Fake addresses: spec_for and run's checks never dereference them.
void* arena() {
  alignas(256) static char bytes[256];
  return bytes;
}

struct Views {
  gk::TensorView A, B, C, D, bias;
  explicit Views(const Case& x)
      : A(x.a.view(arena())),
        B(x.b.view(arena())),
        C(x.c.view(arena())),
        D(x.d.view(arena())),
        bias(x.bias.view(arena())) {}
};

// Counts of outcome classes, printed at the end ("spec_for: TensorError A" ...).
class Tally {
 public:
  void add(const std::string& stage, const Outcome& o) {
    std::string key = stage + ": " + o.kind_name();
    for (const auto& name : gk::fuzz::named_operands(o.message)) key += " " + name;
    ++counts_[key];
  }
  int count(const std::string& key) const { return counts_.count(key) ? counts_.at(key) : 0; }
  void print(const std::string& title) const {
    std::printf("%s\n", title.c_str());
    for (const auto& [key, n] : counts_) std::printf("  %6d  %s\n", n, key.c_str());
  }

 private:
  std::map<std::string, int> counts_;
};

// A KernelSpec must be one the code generator renders (run() would emit it next); for an unmutated call it must be
// the plan's own kernel at its widest alignments (everything drawn is 16-byte aligned; D is checked in C's vector
// count, so only equal widths compare).
std::string check_spec(const Case& x, const gk::Gemm& plan, const gk::KernelSpec& s) {
  const Outcome rendered = gk::fuzz::capture([&] { (void)gk::render(s); });
  if (rendered.kind != Outcome::Result)
    return "spec_for chose " + s.name() + ", which render refuses: " + rendered.message;
  if (!x.mutations.empty()) return "";
  const gk::KernelSpec widest = plan.spec();
  const bool same_c = gk::bits_of(x.plan.c) != gk::bits_of(x.plan.d) || s.alignment_c == widest.alignment_c;
  if (s.family != widest.family || s.element_a != widest.element_a || s.element_d != widest.element_d ||
      s.alignment_a != widest.alignment_a || s.alignment_b != widest.alignment_b || !same_c) {
    return "spec_for chose " + s.name() + " instead of an alignment of " + widest.name();
  }
  return "";
}

}  // namespace

TEST(FrontDoorFuzz, EveryCallEndsInAKernelOrATypedErrorNamingABrokenOperand) {
  const bool has_gpu = gk::cuda_device_count() > 0;
  const gk::fuzz::Profile profile;  // random plans
  gk::fuzz::Watchdog watchdog(std::chrono::seconds(60));
  Tally tally;
  int cases = 0, plans_refused = 0, failures = 0, valid_unmutated = 0;
  const std::uint64_t start = first_seed();
  for (std::uint64_t seed = start; cases < kCases; ++seed) {
    watchdog.beat(seed);
    const Case x = gk::fuzz::Generator(seed, profile).draw();
    std::optional<gk::Gemm> plan;
    const Outcome made = gk::fuzz::capture([&] { plan.emplace(x.plan.make()); });
    if (made.kind != Outcome::Result) {
      // A plan without kernels is refused up front, as a ConfigError and nothing else.
      ASSERT_EQ(made.kind, Outcome::ConfigError) << x.describe() << made.message;
      ++plans_refused;
      continue;
    }
    ++cases;
    const Views v(x);
    std::string problem;
    const Outcome spec = gk::fuzz::capture([&] {
      const gk::KernelSpec s = plan->spec_for(v.A, v.B, x.c.present ? &v.C : nullptr, v.D, x.beta);
      problem = check_spec(x, *plan, s);
    });
    tally.add("spec_for", spec);
    if (problem.empty()) problem = gk::fuzz::judge(x, spec, {Stage::Tensors});
    if (spec.kind == Outcome::Result && x.mutations.empty()) ++valid_unmutated;

    if (problem.empty() && !has_gpu) {
      // Without a GPU, run() checks every tensor and the bias, then stops asking for the current device.
      gk::RunOptions options;
      options.bias = x.bias.present ? &v.bias : nullptr;
      Outcome run =
          gk::fuzz::capture([&] { plan->run(v.A, v.B, x.c.present ? &v.C : nullptr, v.D, x.alpha, x.beta, options); });
      if (run.kind == Outcome::CudaError && run.message.find("No CUDA device is available") == 0) {
        run = Outcome{};  // every host-side check passed
      }
      tally.add("run (host checks)", run);
      problem = gk::fuzz::judge(x, run, {Stage::Tensors, Stage::Bias});
      if (!problem.empty()) problem = "run: " + problem;
    }
    if (!problem.empty() && ++failures <= kMaxReported) ADD_FAILURE() << problem << "\n" << x.describe();
  }
  tally.print("front-door fuzz: " + std::to_string(cases) + " calls from seed " + std::to_string(start) + " (" +
              std::to_string(plans_refused) + " more plans refused up front)" +
              (has_gpu ? "; run() skipped: a GPU is present (the gpu tier's fuzzer runs it)" : ""));
  EXPECT_EQ(failures, 0) << failures << " of " << cases << " calls ended wrongly (the first " << kMaxReported
                         << " are shown above)";
  // The generator must reach every kind of ending, or the test above proves little.
  EXPECT_GT(valid_unmutated, kCases / 10);
  for (const char* key : {"spec_for: result", "spec_for: TensorError A", "spec_for: TensorError B",
                          "spec_for: TensorError C", "spec_for: TensorError D", "spec_for: TensorError A B"}) {
    EXPECT_GT(tally.count(key), 0) << key;
  }
  if (!has_gpu) {
    EXPECT_GT(tally.count("run (host checks): TensorError bias"), 0);
  }
}

// The gpu tier's fuzzer (tests/gpu/fuzz_gpu_test.cpp), on the same seeds without a GPU: its oracle agrees with
// spec_for, and every kernel it needs is among those gemmkit_gpu_prebuild compiles for it.
TEST(FrontDoorFuzz, TheGpuFuzzersCallsNeedOnlyPrebuiltKernels) {
  const int cc = 90;
  const auto plans = gk::gpu_cases::fuzz_plans(cc);
  std::set<std::string> prebuilt;
  for (const gk::KernelSpec& s : gk::gpu_cases::all_specs(cc, "fuzz")) prebuilt.insert(s.name());
  const gk::fuzz::Profile profile{plans, true};
  std::vector<gk::Gemm> made;
  for (const auto& p : plans) made.push_back(p.make());
  int kernels = 0;
  for (int i = 0; i < gk::gpu_cases::kFuzzCases; ++i) {
    const Case x = gk::fuzz::Generator(gk::gpu_cases::kFuzzSeed + i, profile).draw();
    const Views v(x);
    std::string name;
    const Outcome spec = gk::fuzz::capture([&] {
      name = made[static_cast<std::size_t>(x.plan_index)]
                 .spec_for(v.A, v.B, x.c.present ? &v.C : nullptr, v.D, x.beta)
                 .name();
    });
    EXPECT_EQ(gk::fuzz::judge(x, spec, {Stage::Tensors}), "") << x.describe();
    if (spec.kind != Outcome::Result) continue;
    ++kernels;
    EXPECT_TRUE(prebuilt.count(name)) << name << " is not prebuilt\n" << x.describe();
  }
  EXPECT_GT(kernels, gk::gpu_cases::kFuzzCases / 4);
}
