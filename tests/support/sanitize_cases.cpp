// tests/support/sanitize_cases.cpp: one small problem of each kernel family, run by name and checked exactly, for
// compute-sanitizer (tools/dev/sanitize). Usage: gemmkit_sanitize_cases --list | --prebuild [--cc 90] | CASE
// Exit status: 0 when D is exact, 1 when it is not or the run failed, 2 for a bad command line or no GPU.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/gpu_cases.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
namespace cases = gk::gpu_cases;
using gk::verify::HostMatrix;

namespace {

struct SanitizeCase {
  const char* name;
  int kernel_cc;
  gk::Swizzle swizzle;
  gk::Activation activation;
  gk::BiasMode bias;
  cases::Shape shape;
};

// Small problems; Stream-K gets a long K so that its partial tiles really meet in the workspace. LeakyReLU's slope
// 0.25 and integer data keep every result exact.
constexpr cases::Shape kSmall{128, 128, 64};
constexpr cases::Shape kLongK{128, 128, 4096};
const std::vector<SanitizeCase>& all_cases() {
  using gk::Activation;
  using gk::BiasMode;
  using gk::Swizzle;
  static const std::vector<SanitizeCase> kCases = {
      {"sm80_universal", 80, Swizzle::Identity1, Activation::Identity, BiasMode::None, kSmall},
      {"sm90_collective", 90, Swizzle::Identity1, Activation::Identity, BiasMode::None, kSmall},
      {"sm80_stream_k", 80, Swizzle::StreamK, Activation::Identity, BiasMode::None, kLongK},
      {"sm90_stream_k", 90, Swizzle::StreamK, Activation::Identity, BiasMode::None, kLongK},
      {"sm80_activation", 80, Swizzle::Identity1, Activation::LeakyReLU, BiasMode::None, kSmall},
      {"sm90_activation", 90, Swizzle::Identity1, Activation::LeakyReLU, BiasMode::None, kSmall},
      {"sm80_bias_row", 80, Swizzle::Identity1, Activation::ReLU, BiasMode::PerRow, kSmall},
      {"sm80_bias_column", 80, Swizzle::Identity1, Activation::ReLU, BiasMode::PerColumn, kSmall},
      {"sm90_bias_row", 90, Swizzle::Identity1, Activation::ReLU, BiasMode::PerRow, kSmall},
      {"sm90_bias_column", 90, Swizzle::Identity1, Activation::ReLU, BiasMode::PerColumn, kSmall},
  };
  return kCases;
}

gk::Gemm make_plan(const SanitizeCase& c, int cc) {
  gk::Gemm plan(c.bias == gk::BiasMode::None ? cases::epilogue_options(gk::DataType::f16, cc, c.kernel_cc)
                                             : cases::bias_options(c.bias, cc, c.kernel_cc));
  if (c.swizzle != gk::Swizzle::Identity1) plan.set_swizzling_functor(c.swizzle);
  if (c.activation != gk::Activation::Identity) plan.set_activation(c.activation, 0.25);
  if (c.bias != gk::BiasMode::None) plan.set_bias(c.bias);
  return plan;
}

// A device copy of a host matrix in an allocation of exactly its size (memcheck sees an access past it).
class DeviceCopy {
 public:
  explicit DeviceCopy(const HostMatrix& m) : bytes_(m.bytes()) {
    check(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
    check(cudaMemcpy(ptr_, m.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~DeviceCopy() { cudaFree(ptr_); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  void* get() const { return ptr_; }
  void copy_to(HostMatrix& m) const { check(cudaMemcpy(m.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy"); }

 private:
  static void check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) throw gk::CudaError(std::string(call) + ": " + cudaGetErrorString(status), status);
  }
  std::size_t bytes_;
  void* ptr_ = nullptr;
};

int run_case(const SanitizeCase& c) {
  const int device = gk::current_device();
  gk::Gemm plan = make_plan(c, gk::device_info(device).cc);
  const cases::Shape& s = c.shape;
  HostMatrix A(plan.element_a(), s.m, s.k, plan.layout_a()), B(plan.element_b(), s.k, s.n, plan.layout_b());
  HostMatrix C(plan.element_c(), s.m, s.n, plan.layout_c()), D(plan.element_d(), s.m, s.n, plan.layout_c());
  HostMatrix bias(plan.element_c(), 1, c.bias == gk::BiasMode::PerRow ? s.m : s.n, gk::Layout::RowMajor);
  A.fill_integers(1, -2, 2);
  B.fill_integers(2, -2, 2);
  C.fill_integers(3, -2, 2);
  bias.fill_integers(4, -2, 2);
  const DeviceCopy dA(A), dB(B), dC(C), dD(D), dbias(bias);
  const auto vC = C.view_at(dC.get(), device);
  const auto vbias = gk::TensorView::on_gpu(dbias.get(), bias.dtype(), {bias.cols()}, gk::Layout::RowMajor, device);
  gk::RunOptions options;
  if (c.bias != gk::BiasMode::None) options.bias = &vbias;
  plan.run(A.view_at(dA.get(), device), B.view_at(dB.get(), device), &vC, D.view_at(dD.get(), device), 1.0, 1.0,
           options);
  dD.copy_to(D);
  const gk::verify::Epilogue epilogue{c.activation, 0.25, c.bias != gk::BiasMode::None ? &bias : nullptr, c.bias};
  const auto cmp = gk::verify::compare_with_reference(A, B, &C, D, 1.0, 1.0, 0, 1, epilogue);
  std::printf("%s: %s, %lldx%lldx%lld, %lld elements, max error %g\n", c.name, plan.kernel_name().c_str(),
              static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
              static_cast<long long>(cmp.checked), cmp.max_abs_error);
  return cmp.max_abs_error == 0.0 ? 0 : 1;
}

// Compiles every case's kernel into the cache, in parallel, so that sanitizer runs never wait for nvcc.
int prebuild(int cc) {
  std::set<std::string> seen;
  std::vector<gk::KernelSource> sources;
  for (const SanitizeCase& c : all_cases()) {
    gk::Gemm plan = make_plan(c, cc);
    const gk::KernelSpec spec = cases::spec_for_shape(plan, c.shape);
    if (seen.insert(spec.canonical()).second) sources.push_back(gk::render(spec));
  }
  gk::DiskCache cache;
  int built = 0;
  for (const auto& entry : cache.get_or_build_many(gk::Toolchain::discover(), sources)) built += entry.hit ? 0 : 1;
  std::printf("%zu kernels for SM%d: built %d, cached %zu, in %s\n", sources.size(), cc, built,
              sources.size() - static_cast<std::size_t>(built), cache.root().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: gemmkit_sanitize_cases --list | --prebuild [--cc 90] | CASE";
  if (argc < 2) {
    std::cerr << usage << "\n";
    return 2;
  }
  const std::string what = argv[1];
  try {
    if (what == "--list") {
      for (const SanitizeCase& c : all_cases()) std::printf("%s\n", c.name);
      return 0;
    }
    if (what == "--prebuild") return prebuild(argc > 3 && std::strcmp(argv[2], "--cc") == 0 ? std::atoi(argv[3]) : 90);
    for (const SanitizeCase& c : all_cases()) {
      if (what != c.name) continue;
      if (gk::cuda_device_count() == 0) {
        std::cerr << "gemmkit_sanitize_cases: no CUDA device visible; " << c.name << " needs one\n";
        return 2;
      }
      return run_case(c);
    }
    std::cerr << "gemmkit_sanitize_cases: unknown case '" << what << "' (see --list)\n" << usage << "\n";
    return 2;
  } catch (const gk::CompileError& e) {
    std::cerr << "gemmkit_sanitize_cases: " << e.what() << "\n" << e.log.substr(0, 4000) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "gemmkit_sanitize_cases: " << e.what() << "\n";
  }
  return 1;
}
