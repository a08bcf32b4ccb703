// examples/quickstart.cpp: the README's C++ example, compiled with the project so the README cannot rot.
// Usage: example_quickstart (plans for the current GPU, or for SM90 without one, and prints the kernel).
#include <cuda_runtime_api.h>

#include <iostream>

#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"

// D = A @ B for device pointers of M x K, K x N and M x N row-major fp16 matrices, on `stream`.
void quickstart_gemm(void* a_ptr, void* b_ptr, void* c_ptr, void* d_ptr, long M, long N, long K, cudaStream_t stream) {
  // README begin (scripts/check-rules keeps the README's C++ example equal to these lines)
  gemmkit::GemmOptions options;
  options.element = gemmkit::DataType::f16;
  options.layout = gemmkit::Layout::RowMajor;
  options.element_accumulator = gemmkit::DataType::f32;
  gemmkit::Gemm plan(options);  // cc = the current GPU's; or options.cc = 90
  std::cout << plan.kernel_name() << "\n";

  auto A = gemmkit::TensorView::on_gpu(a_ptr, gemmkit::DataType::f16, {M, K});  // or ::host(...) to stage
  auto B = gemmkit::TensorView::on_gpu(b_ptr, gemmkit::DataType::f16, {K, N});
  auto C = gemmkit::TensorView::on_gpu(c_ptr, gemmkit::DataType::f16, {M, N});
  auto D = gemmkit::TensorView::on_gpu(d_ptr, gemmkit::DataType::f16, {M, N});
  plan.run(A, B, C, D, /*alpha=*/1.0, /*beta=*/0.0, {.stream = stream});
  // README end
}

int main() {
  try {
    if (gemmkit::cuda_device_count() == 0) {
      gemmkit::GemmOptions options;
      options.element = gemmkit::DataType::f16;
      options.layout = gemmkit::Layout::RowMajor;
      options.element_accumulator = gemmkit::DataType::f32;
      options.cc = 90;
      std::cout << gemmkit::Gemm(options).kernel_name() << " (no GPU: planned for SM90)\n";
      return 0;
    }
    const long M = 512, N = 256, K = 128;
    void *a, *b, *c, *d;
    cudaMalloc(&a, M * K * 2);
    cudaMalloc(&b, K * N * 2);
    cudaMalloc(&c, M * N * 2);
    cudaMalloc(&d, M * N * 2);
    quickstart_gemm(a, b, c, d, M, N, K, nullptr);
    for (void* p : {a, b, c, d}) cudaFree(p);
    return 0;
  } catch (const gemmkit::Error& e) {
    std::cerr << "quickstart: " << e.what() << "\n";
    return 1;
  }
}
