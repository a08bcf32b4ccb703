// examples/consumer/main.cpp: plans an f16 GEMM for SM90 against an installed gemmkit (find_package) and prints
// its kernel name and where the library finds the headers it compiles kernels with. Needs no GPU and no nvcc.
#include <iostream>

#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"

int main() {
  try {
    gemmkit::GemmOptions options;
    options.element = gemmkit::DataType::f16;
    options.layout = gemmkit::Layout::RowMajor;
    options.element_accumulator = gemmkit::DataType::f32;
    options.cc = 90;
    gemmkit::Gemm plan(options);
    std::cout << "kernel " << plan.kernel_name() << "\n";
    const gemmkit::Toolchain headers = gemmkit::Toolchain::find_headers();
    std::cout << "cutlass " << headers.cutlass_root << " (" << headers.cutlass_version << ")\n";
    std::cout << "device_include " << headers.device_include_dir << "\n";
  } catch (const gemmkit::Error& error) {
    std::cerr << "consumer: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
