// tests/gpu/fuzz_gpu_test.cpp: the front-door fuzzer on the GPU: 1,200 seeded calls of the four prebuilt fuzz plans
// (gpu_cases::fuzz_plans) with host and device tensors. A valid call computes D exactly (small integers) and writes
// no byte outside D's elements; an invalid one throws the typed error naming the operand and leaves every byte of D
// as it was; after each call no CUDA error is pending. Skips itself when no device is present.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/front_door_cases.hpp"
#include "support/gpu_cases.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::fuzz::Case;
using gk::fuzz::Outcome;
using gk::fuzz::Stage;
using gk::fuzz::TensorDraw;
using gk::verify::HostMatrix;

namespace {

// An operand addressing more than this gets a small buffer instead: its call must fail before touching it.
constexpr std::int64_t kMaxBytes = std::int64_t{64} << 20;
constexpr std::int64_t kSmallBytes = 4096;

// The element type an operand's memory is filled as (bytes when its type has no size).
gk::DataType content_type(gk::DataType t) {
  return gk::bits_of(t) == 0 ? gk::DataType::u8 : t;
}
std::int64_t element_bytes(gk::DataType t) {
  return gk::bits_of(content_type(t)) / 8;
}

// One operand's memory: a 256-byte aligned host or device buffer, and a host copy of what it should hold (its
// elements as a 1 x n matrix of the operand's type).
class Buffer {
 public:
  Buffer(const TensorDraw& t, std::uint64_t seed, int lo, int hi)
      : on_device_(t.device >= 0),
        bytes_(round_up(t.bytes_needed(kMaxBytes).value_or(t.byte_offset + kSmallBytes))),
        content_(content_type(t.dtype), 1, bytes_ / element_bytes(t.dtype), gk::Layout::RowMajor) {
    content_.fill_integers(seed, lo, hi);
    if (on_device_) {
      EXPECT_EQ(cudaMalloc(&data_, bytes_), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(data_, content_.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
    } else {
      data_ = std::aligned_alloc(256, bytes_);
      std::memcpy(data_, content_.data(), bytes_);
    }
  }
  ~Buffer() {
    if (on_device_)
      cudaFree(data_);
    else
      std::free(data_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* base() const { return data_; }
  const HostMatrix& content() const { return content_; }
  // What the buffer holds now, as bytes.
  std::vector<unsigned char> read() const {
    std::vector<unsigned char> out(bytes_);
    if (on_device_)
      EXPECT_EQ(cudaMemcpy(out.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    else
      std::memcpy(out.data(), data_, bytes_);
    return out;
  }

 private:
  static std::size_t round_up(std::int64_t bytes) { return static_cast<std::size_t>((bytes + 255) / 256 * 256); }
  bool on_device_;
  std::size_t bytes_;
  HostMatrix content_;
  void* data_ = nullptr;
};

// The value of element (batch b, row r, column c) of an operand in a copy of its buffer; batch 1 broadcasts. Read by
// byte address: a host bias may start at any byte.
class Reader {
 public:
  Reader(const TensorDraw& t, const void* bytes)
      : bytes_(static_cast<const unsigned char*>(bytes)),
        offset_(t.byte_offset),
        one_(t.dtype, 1, 1, gk::Layout::RowMajor) {
    t.dims(shape_, strides_);
  }
  // The element's index in the buffer (its byte address over the element size).
  std::int64_t index(std::int64_t b, std::int64_t r, std::int64_t c) const {
    return byte(b, r, c) / static_cast<std::int64_t>(one_.bytes());
  }
  double at(std::int64_t b, std::int64_t r, std::int64_t c) {
    std::memcpy(one_.data(), bytes_ + byte(b, r, c), one_.bytes());
    return one_.get(0, 0, 0);
  }

 private:
  std::int64_t byte(std::int64_t b, std::int64_t r, std::int64_t c) const {
    const std::size_t rank = shape_.size();
    std::int64_t element = rank == 1 ? c * strides_[0] : r * strides_[rank - 2] + c * strides_[rank - 1];
    for (std::size_t i = rank < 2 ? 0 : rank - 2; i-- > 0;) {
      if (shape_[i] == 1) continue;
      element += (b % shape_[i]) * strides_[i];
      b /= shape_[i];
    }
    return offset_ + element * static_cast<std::int64_t>(one_.bytes());
  }
  const unsigned char* bytes_;
  std::int64_t offset_;
  HostMatrix one_;
  std::vector<std::int64_t> shape_, strides_;
};

// Compares D after a successful call with act(alpha * A@B + beta * C + bias) in float64, rounded to D's type, and
// checks that no element of D's buffer outside its view changed. Returns "" or the first difference.
std::string check_result(const Case& x, const Buffer& a, const Buffer& b, const Buffer* c, const Buffer* bias,
                         const std::vector<unsigned char>& d_before, const std::vector<unsigned char>& d_after) {
  Reader at_a(x.a, a.content().data()), at_b(x.b, b.content().data()), at_d(x.d, d_after.data());
  std::optional<Reader> at_c, at_bias;
  if (c) at_c.emplace(x.c, c->content().data());
  if (bias) at_bias.emplace(x.bias, bias->content().data());
  const std::size_t width = static_cast<std::size_t>(element_bytes(x.plan.d));
  // A host bias at an odd byte reads bytes that straddle two integers: fractional (often subnormal) values, which the
  // kernel adds in float32 and this reference in float64, so only there a rounding step of D's type may differ.
  const bool exact = !bias || x.bias.byte_offset % element_bytes(x.bias.dtype) == 0;
  std::vector<bool> inside(d_after.size() / width, false);
  for (std::int64_t n = 0; n < x.batch; ++n) {
    for (std::int64_t i = 0; i < x.m; ++i) {
      for (std::int64_t j = 0; j < x.n; ++j) {
        double sum = 0.0;
        for (std::int64_t k = 0; k < x.k; ++k) sum += at_a.at(n, i, k) * at_b.at(n, k, j);
        double value = x.alpha * sum;
        if (c) value += x.beta * at_c->at(n, i, j);
        if (bias) value += at_bias->at(0, 0, x.plan.bias == gk::BiasMode::PerRow ? i : j);
        const double expected = gk::verify::round_to(
            x.plan.d, gk::verify::apply_activation(x.plan.activation, value, x.plan.activation_parameter));
        inside[static_cast<std::size_t>(at_d.index(n, i, j))] = true;
        const double got = at_d.at(n, i, j);
        if (exact ? got != expected : std::abs(got - expected) > 1e-2 * std::abs(expected) + 1e-6) {
          return "D(" + std::to_string(n) + ", " + std::to_string(i) + ", " + std::to_string(j) + ") is " +
                 std::to_string(got) + ", expected " + std::to_string(expected);
        }
      }
    }
  }
  for (std::size_t e = 0; e < inside.size(); ++e) {
    if (!inside[e] && std::memcmp(&d_before[e * width], &d_after[e * width], width) != 0) {
      return "element " + std::to_string(e) + " of D's buffer, outside its view, changed";
    }
  }
  return "";
}

}  // namespace

TEST(FrontDoorFuzzGpu, ValidCallsAreExactAndInvalidOnesLeaveDUntouched) {
  if (gk::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  const int cc = gk::device_info(gk::current_device()).cc;
  const auto plan_draws = gk::gpu_cases::fuzz_plans(cc);
  std::vector<gk::Gemm> plans;
  for (const auto& p : plan_draws) {
    plans.push_back(p.make());
    plans.back().compile();  // a cache hit after gemmkit_gpu_prebuild; outside the watchdog's minute otherwise
  }
  const gk::fuzz::Profile profile{plan_draws, true};
  gk::fuzz::Watchdog watchdog(std::chrono::seconds(60));
  std::map<std::string, int> tally;
  int failures = 0;
  for (int i = 0; i < gk::gpu_cases::kFuzzCases && failures < 20; ++i) {
    const std::uint64_t seed = gk::gpu_cases::kFuzzSeed + i;
    watchdog.beat(seed);
    const Case x = gk::fuzz::Generator(seed, profile).draw();
    const Buffer a(x.a, seed * 8 + 1, -2, 2), b(x.b, seed * 8 + 2, -2, 2), d(x.d, seed * 8 + 4, -8, 8);
    std::unique_ptr<Buffer> c, bias;
    if (x.c.present) c = std::make_unique<Buffer>(x.c, seed * 8 + 3, -2, 2);
    if (x.bias.present) bias = std::make_unique<Buffer>(x.bias, seed * 8 + 5, -2, 2);
    const gk::TensorView A = x.a.view(a.base()), B = x.b.view(b.base()), D = x.d.view(d.base());
    const gk::TensorView C = c ? x.c.view(c->base()) : gk::TensorView{};
    const gk::TensorView bias_view = bias ? x.bias.view(bias->base()) : gk::TensorView{};
    gk::RunOptions options;
    options.bias = bias ? &bias_view : nullptr;

    const std::vector<unsigned char> before = d.read();
    gk::Gemm& plan = plans[static_cast<std::size_t>(x.plan_index)];
    const Outcome outcome = gk::fuzz::capture([&] { plan.run(A, B, c ? &C : nullptr, D, x.alpha, x.beta, options); });
    const cudaError_t synced = cudaDeviceSynchronize();
    const cudaError_t pending = cudaGetLastError();
    ASSERT_EQ(synced, cudaSuccess) << cudaGetErrorName(synced) << "\n" << x.describe();
    ASSERT_EQ(pending, cudaSuccess) << cudaGetErrorName(pending) << "\n" << x.describe();
    const std::vector<unsigned char> after = d.read();

    std::string key = outcome.kind_name();
    for (const auto& name : gk::fuzz::named_operands(outcome.message)) key += " " + name;
    ++tally[key];
    std::string problem = gk::fuzz::judge(x, outcome, {Stage::Tensors, Stage::Bias, Stage::Device});
    if (problem.empty() && outcome.kind != Outcome::Result && before != after) {
      problem = "the call failed but D's bytes changed: " + outcome.message;
    }
    if (problem.empty() && outcome.kind == Outcome::Result) {
      problem = check_result(x, a, b, c.get(), bias.get(), before, after);
    }
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << problem << "\n" << x.describe();
    }
  }
  std::printf("gpu front-door fuzz: %d calls from seed %llu\n", gk::gpu_cases::kFuzzCases,
              static_cast<unsigned long long>(gk::gpu_cases::kFuzzSeed));
  for (const auto& [key, n] : tally) std::printf("  %6d  %s\n", n, key.c_str());
  EXPECT_EQ(failures, 0);
  // Enough of each ending for the test to mean something.
  EXPECT_GT(tally["result"], gk::gpu_cases::kFuzzCases / 5);
  for (const char* key : {"TensorError A", "TensorError B", "TensorError D", "TensorError bias"}) {
    EXPECT_GT(tally[key], 0) << key;
  }
}
