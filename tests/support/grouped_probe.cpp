// tests/support/grouped_probe.cpp: runs a grouped kernel module (.so) through its C ABI alone and checks every D
// against a float64 host reference on small-integer data: the list form (1, 2, 50, 1000 and 4096 groups, odd sizes,
// padded leading dimensions, empty groups, with and without C, a rerun over the same buffers), its argument checks,
// and the contiguous (MoE) form with skewed, empty and clamped experts, also captured in a CUDA graph; then times
// 50-group list runs and MoE shapes. Prints PASS / FAIL / SKIP / TIME lines; exits 1 on a failure.
// Usage: gemmkit_grouped_probe KERNEL.so [--form list|contiguous|all] [--device N] [--seed S] [--rounds R]
//                              [--slope X] [--no-timing]
// This file loads the module and reads the command line; the checks and timings are grouped_probe_list.cpp,
// _contiguous.cpp and _timing.cpp, over the host reference of grouped_probe_reference.cpp.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "gemmkit/abi.h"
#include "grouped_probe.hpp"

namespace grouped_probe {
namespace {

// ---- The module -------------------------------------------------------------------------------------------------

template <class Fn>
Fn symbol(void* handle, const char* name) {
  void* address = dlsym(handle, name);
  if (address == nullptr) throw Failure(std::string("the module does not export ") + name);
  return reinterpret_cast<Fn>(address);
}

Module load_module(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw Failure(std::string("dlopen: ") + dlerror());
  Module m;
  const int version = symbol<gk_abi_version_fn>(handle, "gk_abi_version")();
  if (version != GK_ABI_VERSION) {
    throw Failure("ABI version " + std::to_string(version) + ", expected " + std::to_string(GK_ABI_VERSION));
  }
  if (dlsym(handle, "gk_module_kind") == nullptr) throw Failure("no gk_module_kind: a dense module");
  const int kind = symbol<gk_module_kind_fn>(handle, "gk_module_kind")();
  if (kind != GK_MODULE_GROUPED) throw Failure("module kind " + std::to_string(kind) + ", not grouped");
  m.name = symbol<gk_kernel_name_fn>(handle, "gk_kernel_name")();
  m.info = *symbol<gk_grouped_describe_fn>(handle, "gk_grouped_describe")();
  m.metadata_bytes = symbol<gk_grouped_metadata_bytes_fn>(handle, "gk_grouped_metadata_bytes");
  m.can_implement = symbol<gk_grouped_can_implement_fn>(handle, "gk_grouped_can_implement");
  m.workspace_size = symbol<gk_grouped_workspace_size_fn>(handle, "gk_grouped_workspace_size");
  m.pack = symbol<gk_grouped_pack_fn>(handle, "gk_grouped_pack");
  m.run = symbol<gk_grouped_run_fn>(handle, "gk_grouped_run");
  m.run_contiguous = symbol<gk_grouped_run_contiguous_fn>(handle, "gk_grouped_run_contiguous");
  m.last_cuda_error = symbol<gk_last_cuda_error_fn>(handle, "gk_last_cuda_error");
  return m;
}

const char* dtype_name(int dtype) {
  switch (dtype) {
    case GK_DTYPE_F16: return "f16";
    case GK_DTYPE_BF16: return "bf16";
    case GK_DTYPE_F32: return "f32";
    case GK_DTYPE_TF32: return "tf32";
    default: return "unsupported";
  }
}

// ---- Command line -------------------------------------------------------------------------------------------------

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s KERNEL.so [--form list|contiguous|all] [--device N] [--seed S] [--rounds R] [--slope X] "
               "[--no-timing]\n",
               program);
  return 2;
}

}  // namespace
}  // namespace grouped_probe

int main(int argc, char** argv) {
  using namespace grouped_probe;
  if (argc < 2) return usage(argv[0]);
  const char* path = argv[1];
  std::string form = "all";
  int device = 0, rounds = 20;
  uint64_t seed = 2023;
  double slope = 0.25;
  bool timing = true;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--form" && has_value)
      form = argv[++i];
    else if (flag == "--device" && has_value)
      device = std::atoi(argv[++i]);
    else if (flag == "--seed" && has_value)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (flag == "--rounds" && has_value)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (flag == "--slope" && has_value)
      slope = std::atof(argv[++i]);
    else if (flag == "--no-timing")
      timing = false;
    else
      return usage(argv[0]);
  }
  if (form != "list" && form != "contiguous" && form != "all") return usage(argv[0]);

  Module module;
  try {
    module = load_module(path);
  } catch (const std::exception& e) {
    std::printf("FAIL load %s: %s\n", path, e.what());
    return 1;
  }
  const gk_grouped_info& info = module.info;
  std::printf("module %s\n  A %s %s align %d, B %s %s align %d, C %s %s align %d, D %s align %d, activation %s%s\n",
              module.name.c_str(), dtype_name(info.element_a), info.layout_a == GK_ROW_MAJOR ? "row" : "col",
              info.alignment_a, dtype_name(info.element_b), info.layout_b == GK_ROW_MAJOR ? "row" : "col",
              info.alignment_b, dtype_name(info.element_c), info.layout_c == GK_ROW_MAJOR ? "row" : "col",
              info.alignment_c, dtype_name(info.element_d), info.alignment_d, info.activation,
              info.contiguous ? ", contiguous form" : "");

  Context ctx{module};
  ctx.device = device;
  ctx.rounds = rounds;
  ctx.seed = seed;
  ctx.slope = slope;
  try {
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaDeviceGetAttribute(&ctx.sm_count, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
    cudaDeviceProp properties{};
    CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    std::printf("device %d: %s, %d SMs\n", device, properties.name, ctx.sm_count);
  } catch (const std::exception& e) {
    std::printf("FAIL device %d: %s\n", device, e.what());
    return 1;
  }
  const gk_grouped_args args = ctx.args(50, 1, 0);
  std::printf("metadata for 50 groups: %zu bytes; workspace: %zu bytes\n", module.metadata_bytes(50),
              module.workspace_size(&args));

  if (form != "contiguous") list_tests(ctx);
  if (form != "list") contiguous_tests(ctx);
  if (timing) {
    if (form != "contiguous") list_timing(ctx);
    if (form != "list") moe_timing(ctx);
  }
  std::printf("%s: %d failure%s\n", ctx.failures == 0 ? "PASS" : "FAIL", ctx.failures, ctx.failures == 1 ? "" : "s");
  return ctx.failures == 0 ? 0 : 1;
}
