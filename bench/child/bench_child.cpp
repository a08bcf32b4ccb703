// bench/child/bench_child.cpp: the fresh process that gemmkit_bench times for its compile and start-up sections.
// It links gemmkit only (not cuBLAS), so its start-up cost is that of a program using gemmkit alone. It prints
// one JSON line on stdout; errors go to stderr with exit status 1.
//
//   gemmkit_bench_child compile --cache-dir DIR --cc N [--kind K]   time plan.compile() of a kind's default kernel
//                                                       (compile_kinds() below; default gemm), empty cache
//   gemmkit_bench_child first-result                     construct, run 128^3 once on device tensors, sync
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using Value = nlohmann::ordered_json;

namespace {

// Steady clock (CLOCK_MONOTONIC), comparable with the parent's timestamps.
double now_ns() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

double seconds_since(double start_ns) {
  return (now_ns() - start_ns) * 1e-9;
}

gk::GemmOptions default_options() {
  gk::GemmOptions o;
  o.element = gk::DataType::f16;
  o.layout = gk::Layout::RowMajor;
  o.element_accumulator = gk::DataType::f32;
  return o;
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw gk::CudaError(std::string(what) + " failed: " + cudaGetErrorName(status), status);
}

// A plan's default tile on gemmkit's lean epilogue, which takes the epilogue at launch.
void use_lean_epilogue(gk::Plan& plan) {
  gk::TileDescription tile = plan.tile_descriptions().front();
  tile.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  tile.epilogue_schedule = gk::EpilogueSchedule::Lean;
  plan.set_tile_description(tile);
}

// The kinds the compile section times: each builds one plan's kernel.
gk::CompiledKernel compile_kind(const std::string& kind, int cc) {
  gk::GemmOptions o = default_options();
  o.cc = cc;
  const bool lean = kind.size() > 5 && kind.ends_with("_lean");
  const std::string base = lean ? kind.substr(0, kind.size() - 5) : kind;
  if (base == "gemm" || base == "bias_relu") {
    gk::Gemm plan(o);
    if (base == "bias_relu") {
      plan.set_activation(gk::Activation::ReLU);
      plan.set_bias(gk::BiasMode::PerColumn);
    }
    if (lean) use_lean_epilogue(plan);
    return plan.compile();
  }
  if (base == "fp8_scaled") {
    gk::GemmOptions f;
    f.element_a = f.element_b = gk::DataType::e4m3;
    f.element_c = f.element_d = gk::DataType::bf16;
    f.element_accumulator = gk::DataType::f32;
    f.layout_a = f.layout_c = gk::Layout::RowMajor;
    f.layout_b = gk::Layout::ColumnMajor;
    f.cc = cc;
    gk::Gemm plan(f);
    plan.set_scale(gk::ScaleMode::RowAndColumn);
    if (lean) use_lean_epilogue(plan);
    return plan.compile();
  }
  if (kind == "grouped") return gk::GroupedGemm(o).compile();
  if (kind == "conv_fprop") {
    gk::Conv2dOptions c;
    c.element = gk::DataType::f16;
    c.element_accumulator = gk::DataType::f32;
    c.cc = cc;
    return gk::Conv2d(c).compile();
  }
  throw gk::Error("unknown kind '" + kind +
                  "' (gemm, bias_relu, fp8_scaled, each also with _lean; grouped, conv_fprop)");
}

int compile(const std::string& cache_dir, int cc, const std::string& kind) {
  // DiskCache reads the variable on every lookup; set it before anything touches the cache.
  if (setenv("GEMMKIT_CACHE_DIR", cache_dir.c_str(), 1) != 0) throw gk::Error("setenv GEMMKIT_CACHE_DIR failed");
  const double t0 = now_ns();
  (void)gk::Toolchain::discover();
  const double toolchain_seconds = seconds_since(t0);
  const double t1 = now_ns();
  const gk::CompiledKernel built = compile_kind(kind, cc);
  const double compile_seconds = seconds_since(t1);
  Value out = Value::object();
  out["kernel_name"] = built.kernel_name;
  out["kind"] = kind;
  out["cc"] = cc;
  out["cache_hit"] = built.cache_hit;
  out["builds"] = gk::cache_counters().builds;
  out["toolchain_seconds"] = toolchain_seconds;
  out["compile_seconds"] = compile_seconds;
  out["build_seconds"] = built.build_seconds;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int first_result(double main_entry_ns) {
  using gk::verify::HostMatrix;
  constexpr std::int64_t n = 128;
  gk::Gemm plan(default_options());
  const double plan_ready_ns = now_ns();
  HostMatrix A(gk::DataType::f16, n, n, gk::Layout::RowMajor), B(gk::DataType::f16, n, n, gk::Layout::RowMajor);
  HostMatrix D(gk::DataType::f16, n, n, gk::Layout::RowMajor);
  A.fill_integers(1, -2, 2);  // exact in f16 products and f32 sums: the check below is exact
  B.fill_integers(2, -2, 2);
  const gk::verify::DeviceBuffer dA(A), dB(B), dD(D.bytes());
  check(cudaMemset(dD.get(), 0xFF, D.bytes()), "cudaMemset");
  const double buffers_ready_ns = now_ns();
  const gk::TensorView vA = dA.view_like(A), vB = dB.view_like(B), vD = dD.view_like(D);
  plan.run(vA, vB, nullptr, vD, 1.0, 0.0, gk::RunOptions{nullptr, true, false});
  const double result_ns = now_ns();
  dD.copy_to(D);
  const auto cmp = gk::verify::compare_with_reference(A, B, nullptr, D, 1.0, 0.0);
  Value out = Value::object();
  out["kernel_name"] = plan.spec_for(vA, vB, nullptr, vD).name();
  out["main_entry_ns"] = main_entry_ns;
  out["plan_ready_ns"] = plan_ready_ns;
  out["buffers_ready_ns"] = buffers_ready_ns;
  out["result_ns"] = result_ns;
  out["builds"] = gk::cache_counters().builds;
  out["disk_hits"] = gk::cache_counters().disk_hits;
  out["max_abs_error"] = cmp.max_abs_error;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const double main_entry_ns = now_ns();
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "first-result" && argc == 2) return first_result(main_entry_ns);
    if (mode == "compile" && (argc == 6 || (argc == 8 && std::strcmp(argv[6], "--kind") == 0)) &&
        std::strcmp(argv[2], "--cache-dir") == 0 && std::strcmp(argv[4], "--cc") == 0) {
      return compile(argv[3], std::atoi(argv[5]), argc == 8 ? argv[7] : "gemm");
    }
    std::fprintf(stderr,
                 "usage: gemmkit_bench_child compile --cache-dir DIR --cc N [--kind K] | first-result\n"
                 "(started by gemmkit_bench; not meant to be run by hand)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemmkit_bench_child: %s\n", e.what());
    return 1;
  }
}
