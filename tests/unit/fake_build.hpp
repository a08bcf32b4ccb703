// tests/unit/fake_build.hpp: a toolchain, a kernel source and a module builder that need no CUDA, for the cache's and
// the background builds' unit tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"

namespace gemmkit {

inline Toolchain fake_toolchain() {
  Toolchain tc;
  tc.nvcc = "/opt/cuda/bin/nvcc";
  tc.cuda_home = "/opt/cuda";
  tc.nvcc_version = "13.0";
  tc.nvcc_build = "Build cuda_13.0.r13.0/compiler.36424714_0";
  tc.host_compiler = "g++ (Debian 12.2.0-14) 12.2.0";
  tc.host_target = "x86_64-linux-gnu";
  tc.cutlass_root = "/home/me/gemmkit/.deps/cutlass";
  tc.cutlass_version = "4.2.0";
  tc.device_include_dir = "/home/me/gemmkit/device/include";
  tc.device_headers = {{"gemmkit/abi.h", {std::string(64, 'a'), {}}},
                       {"gemmkit/module_entry.hpp", {std::string(64, 'b'), {"gemmkit/abi.h"}}},
                       {"gemmkit/sm80_gemm.hpp", {std::string(64, 'c'), {}}}};
  return tc;
}

inline KernelSource fake_source(const std::string& name = "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_align8") {
  return {name, "sm_90a",
          "// kernel " + name +
              "\n#include \"gemmkit/module_entry.hpp\"\nextern \"C\" int gk_abi_version(void) { return 1; }\n"};
}

// A ModuleBuilder that writes a dummy kernel.so derived from the source, optionally slowly.
inline ModuleBuilder fake_builder(std::chrono::milliseconds delay = std::chrono::milliseconds(0),
                                  std::function<void()> hook = {}) {
  return [delay, hook](const KernelSource& source, const std::string& work_dir) {
    std::this_thread::sleep_for(delay);
    if (hook) hook();
    std::ofstream(std::filesystem::path(work_dir) / "kernel.so", std::ios::binary)
        << "ELF-ish module for " << source.text << std::string(4096, '\x7f');
  };
}

}  // namespace gemmkit
