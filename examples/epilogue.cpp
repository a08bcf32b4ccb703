// examples/epilogue.cpp: the reference's epilogue walk-through in C++: fp16 256^3, identity by default, then every
// fused activation (and leaky_relu with its slope) checked against a float64 host reference.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "cc_option.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::verify::HostMatrix;

int main(int argc, char** argv) {
  const std::optional<int> cc = cc_option(argc, argv);
  try {
    const long n = 256;
    HostMatrix A(gk::DataType::f16, n, n, gk::Layout::RowMajor), B(gk::DataType::f16, n, n, gk::Layout::RowMajor);
    HostMatrix C(gk::DataType::f16, n, n, gk::Layout::RowMajor), D(gk::DataType::f16, n, n, gk::Layout::RowMajor);
    A.fill_uniform(2023);
    B.fill_uniform(2024);
    C.fill_uniform(2025);
    gk::GemmOptions options;
    options.element = gk::DataType::f16;
    options.layout = gk::Layout::RowMajor;
    options.element_accumulator = gk::DataType::f32;
    options.cc = cc;                                           // by default the current GPU's
    if (!cc && gk::cuda_device_count() == 0) options.cc = 90;  // no GPU to ask: the H100/H200 generation
    gk::Gemm plan(options);
    std::cout << "activation by default: " << gk::to_string(plan.activation()) << " (" << plan.kernel_name() << ")\n";
    if (gk::cuda_device_count() == 0) {
      const auto compiled = plan.compile();
      std::cout << "compiled for SM" << plan.cc() << " (" << (compiled.cache_hit ? "cache hit" : "built")
                << "): " << compiled.module_path
                << "\nRun: skipped. Running needs a CUDA device and none is visible.\n";
      return 0;
    }
    bool ok = true;
    const gk::TensorView c = C.view();
    auto check = [&](gk::Activation activation, double parameter) {
      plan.set_activation(activation, parameter);
      plan.run(A.view(), B.view(), c, D.view(), 1.0, 0.5);
      const auto cmp = gk::verify::compare_with_reference(A, B, &C, D, 1.0, 0.5, 0, 1, {activation, parameter});
      const bool pass = cmp.max_rel_error <= 1e-2;
      ok &= pass;
      std::printf("  %-10s %-6s max relative error %.2e  %s\n", std::string(gk::to_string(activation)).c_str(),
                  activation == gk::Activation::LeakyReLU ? std::to_string(parameter).substr(0, 4).c_str() : "",
                  cmp.max_rel_error, pass ? "ok" : "MISMATCH");
      // The kernel that ran: the plan's own once built, until then the quick twin that stands in for it.
      std::cout << "             ran " << plan.running_kernel_name(A.view(), B.view(), &c, D.view(), 0.5) << "\n";
    };
    std::cout << "D = act(A@B + 0.5*C), fp16 " << n << "^3, against a float64 reference:\n";
    for (auto activation : gk::Gemm::activations()) check(activation, 0.01);
    check(gk::Activation::LeakyReLU, 0.5);  // the slope is honoured (a run-time argument)
    return ok ? 0 : 1;
  } catch (const gk::Error& e) {
    std::cerr << "epilogue: " << e.what() << "\n";
    return 1;
  }
}
