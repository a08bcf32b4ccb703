// examples/grouped_gemm.cpp: the reference's grouped walk-through in C++: 50 fp16 problems with M, N and K drawn from
// {128, 256, 512, 1024} (seed 2023), run in one launch by GroupedGemm on each kernel family, checked against a
// float64 host reference.
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <vector>

#include "cc_option.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::verify::HostMatrix;

namespace {

gk::GemmOptions fp16(std::optional<int> kernel_cc) {
  gk::GemmOptions options;
  options.element = gk::DataType::f16;
  options.layout = gk::Layout::RowMajor;
  options.element_accumulator = gk::DataType::f32;
  options.kernel_cc = kernel_cc;
  return options;
}

// The walk-through's 50 problems on host arrays (staged through the GPU by run()); true when every group matches.
bool run_lists(gk::GroupedGemm& plan) {
  std::mt19937 random(2023);
  const long sizes[] = {128, 256, 512, 1024};
  std::vector<HostMatrix> A, B, D;
  std::vector<gk::TensorView> a, b, d;
  for (int g = 0; g < 50; ++g) {
    const long m = sizes[random() % 4], n = sizes[random() % 4], k = sizes[random() % 4];
    A.emplace_back(gk::DataType::f16, m, k, gk::Layout::RowMajor);
    B.emplace_back(gk::DataType::f16, k, n, gk::Layout::RowMajor);
    D.emplace_back(gk::DataType::f16, m, n, gk::Layout::RowMajor);
    A.back().fill_integers(2 * g, -4, 4);
    B.back().fill_integers(2 * g + 1, -4, 4);
  }
  for (int g = 0; g < 50; ++g) {
    a.push_back(A[g].view());
    b.push_back(B[g].view());
    d.push_back(D[g].view());
  }
  plan.run(a, b, {}, d);
  int wrong = 0;
  for (int g = 0; g < 50; ++g) {
    wrong += gk::verify::compare_with_reference(A[g], B[g], nullptr, D[g], 1.0, 0.0, 500, g).max_abs_error != 0.0;
  }
  std::printf("  %s: 50 groups, %d differ from the float64 reference (500 sampled elements each)\n",
              plan.kernel_name().c_str(), wrong);
  return wrong == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<int> cc = cc_option(argc, argv);
  try {
    gk::GemmOptions options = fp16(std::nullopt);
    // --cc, else the current GPU's; no GPU to ask: the H100/H200 generation.
    options.cc = cc ? cc : gk::cuda_device_count() > 0 ? std::nullopt : std::optional<int>(90);
    gk::GroupedGemm plan(options);
    std::cout << "grouped kernel: " << plan.kernel_name() << "\n";
    const auto compiled = plan.compile();
    std::printf("compiled (%s, %.1f s): %s\n", compiled.cache_hit ? "cache hit" : "built", compiled.build_seconds,
                compiled.module_path.c_str());
    if (gk::cuda_device_count() == 0) {
      std::cout << "Run: skipped. Running needs a CUDA device and none is visible; planning and compiling for SM"
                << plan.cc() << " worked.\n";
      return 0;
    }
    bool ok = run_lists(plan);
    gk::GroupedGemm sm80(fp16(80));  // the CUTLASS 2.x family, as the reference uses on every GPU
    ok &= run_lists(sm80);
    return ok ? 0 : 1;
  } catch (const gk::Error& e) {
    std::cerr << "grouped_gemm: " << e.what() << "\n";
    return 1;
  }
}
