// examples/conv2d.cpp: the Conv2d walk-through in C++: declare an fp16 fprop plan, see its kernel, run a ResNet-50
// 3x3 layer (batch 32, 56 x 56, 64 -> 64 channels, padding 1) on device tensors, check every output against the
// float64 host reference, time it; then dgrad and wgrad of the same layer.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "gemmkit/conv2d.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "verify/conv_reference.hpp"
#include "verify/device_buffer.hpp"

namespace gk = gemmkit;
using gk::verify::DeviceBuffer;
using gk::verify::HostMatrix;

namespace {

// One convolution of `kind` on small integers (exact in f16 with f32 accumulation): run, checked, timed.
bool run_kind(gk::ConvKind kind, const gk::verify::ConvShape& shape) {
  gk::Conv2dOptions options;
  options.kind = kind;
  options.element = gk::DataType::f16;
  options.element_accumulator = gk::DataType::f32;
  gk::Conv2d plan(options);
  HostMatrix A = gk::verify::conv_tensor(plan.element_a(), shape.a(kind));
  HostMatrix B = gk::verify::conv_tensor(plan.element_b(), shape.b(kind));
  HostMatrix D = gk::verify::conv_tensor(plan.element_d(), shape.d(kind));
  A.fill_integers(1, -1, 1);
  B.fill_integers(2, -1, 1);
  const DeviceBuffer dA(A), dB(B), dD(D);
  const int device = gk::current_device();
  const auto x = gk::verify::conv_view(A, shape.a(kind), dA.get(), device);
  const auto w = gk::verify::conv_view(B, shape.b(kind), dB.get(), device);
  const auto y = gk::verify::conv_view(D, shape.d(kind), dD.get(), device);
  const auto start = std::chrono::steady_clock::now();
  plan.run(x, w, nullptr, y, shape.geometry);  // the first run compiles (or loads) the kernel
  const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  dD.copy_to(D);
  const auto cmp = gk::verify::compare_conv(kind, shape, A, B, nullptr, D, 1.0, 0.0);
  gk::RunOptions async;
  async.sync = false;
  cudaEvent_t begin, end;
  cudaEventCreate(&begin);
  cudaEventCreate(&end);
  cudaEventRecord(begin);
  constexpr int kRuns = 20;
  for (int i = 0; i < kRuns; ++i) plan.run(x, w, nullptr, y, shape.geometry, 1.0, 0.0, async);
  cudaEventRecord(end);
  cudaEventSynchronize(end);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, begin, end);
  const double seconds = ms / 1e3 / kRuns;
  std::printf("%s: %s\n  first run %.1f s, %.3f ms, %.1f TFLOP/s, max error %g over %ld outputs\n",
              std::string(gk::to_string(kind)).c_str(), plan.spec_for(x, w, nullptr, y, shape.geometry).name().c_str(),
              first, seconds * 1e3, shape.flops() / seconds / 1e12, cmp.max_abs_error, static_cast<long>(cmp.checked));
  return cmp.max_abs_error == 0.0;
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it happens, also into a log file
  try {
    gk::Conv2dOptions options;
    options.element = gk::DataType::f16;
    options.element_accumulator = gk::DataType::f32;
    options.cc = gk::cuda_device_count() > 0 ? std::nullopt : std::optional<int>(90);
    gk::Conv2d plan(options);
    std::cout << "fprop kernel (construct): " << plan.kernel_name() << " (kernel_cc " << plan.kernel_cc() << ")\n";
    if (gk::cuda_device_count() == 0) {
      std::cout << "running needs a CUDA device and none is visible.\n";
      return 0;
    }
    gk::verify::ConvShape shape;
    shape.n = 32, shape.h = 56, shape.w = 56, shape.c = 64, shape.k = 64, shape.r = 3, shape.s = 3;
    shape.geometry.padding = {1, 1};
    bool ok = true;
    for (gk::ConvKind kind : {gk::ConvKind::Fprop, gk::ConvKind::Dgrad, gk::ConvKind::Wgrad})
      ok &= run_kind(kind, shape);
    return ok ? 0 : 1;
  } catch (const gk::Error& e) {
    std::cerr << "conv2d: " << e.what() << "\n";
    return 1;
  }
}
