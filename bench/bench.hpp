// bench/bench.hpp: shared pieces of gemmkit_bench: options, the failure funnel, CUDA/cuBLAS RAII, timing, tables.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemmkit/gemm.hpp"
#include "gemmkit/types.hpp"
#include "verify/device_buffer.hpp"

namespace bench {

namespace gk = gemmkit;
using Value = nlohmann::ordered_json;
using gk::verify::DeviceBuffer;

struct Shape {
  std::int64_t m, n, k;
  std::string text() const;  // "MxNxK"
};

struct Options {
  std::string out_dir = "bench/results";
  std::set<std::string> sections = {"gemm", "overhead", "startup", "compile"};
  std::vector<Shape> shapes = {{2400, 3232, 4096}, {4096, 4096, 4096}, {8192, 8192, 8192}, {16384, 16384, 16384}};
  std::vector<gk::DataType> dtypes = {gk::DataType::f16, gk::DataType::bf16};
  int warmup = 10;                         // untimed calls per library before a GEMM row is timed, at least
  double warmup_ms = 500;                  // ... and at least this long per library (so the clocks settle)
  int iters = 0;                           // calls per timed batch; 0 = calibrated so one batch takes >= batch_ms
  double batch_ms = 100;                   // target duration of one timed batch when iters == 0
  int repeats = 9;                         // timed batches per library per row (the median is reported)
  int calls = 10000;                       // host-overhead calls per measurement
  int startup_runs = 5;                    // child processes for the time-to-first-result section
  std::string groups;                      // the suite section's groups (verify/shape_suite.hpp); "" = all
  Shape overhead_shape = {128, 128, 128};  // the overhead section's problem
  std::string configs;  // the sweep section's configurations: a regular expression on their text; "" = all
  int prebuild_cc = 0;  // > 0: only build the sections' kernels for this cc (no GPU needed), then stop
  int cc = 0;           // without a CUDA device: the compile section's target
  int max_swizzle = 0;  // > 0: every plan's max_swizzle_size (SM90 persistent schedulers); 0 = the plan's default
  gk::RasterOrder raster_order = gk::RasterOrder::Heuristic;  // every plan's (SM90 persistent schedulers)
};

// Everything the sections share: the options, the device, one stream and one cuBLAS handle bound to it.
struct Context {
  Options options;
  int device = 0;
  int cc = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::string child_path;  // gemmkit_bench_child, next to this executable
};

// What a section hands back: its JSON, its Markdown, and whether every measurement in it is valid.
struct SectionResult {
  Value json = Value::object();
  std::string markdown;
  bool ok = true;
};

SectionResult gemm_section(Context& ctx);
SectionResult suite_section(Context& ctx);
SectionResult overhead_section(Context& ctx);
SectionResult startup_section(Context& ctx);
SectionResult compile_section(Context& ctx);
SectionResult sweep_section(Context& ctx);
// The sweep section's shapes (--shapes and three of its own) and configurations' kernels.
std::vector<Shape> sweep_shapes(const Context& ctx);
std::vector<gk::KernelSpec> sweep_kernels(const Context& ctx);
SectionResult epilogue_section(Context& ctx);
// The epilogue section's kernels: the default plans' and the lean epilogue's.
std::vector<gk::KernelSpec> epilogue_kernels(const Context& ctx);

// One verified, timed GEMM row of gemmkit's plan against cuBLAS (the gemm section's method): its JSON, its Markdown
// cells (TFLOP/s, ratio, ms, spread, calls, check) and the ratio cuBLAS time / gemmkit time.
struct RowResult {
  Value json = Value::object();
  std::vector<std::string> cells;
  double ratio = 0.0;
};
RowResult measure_row(Context& ctx, gk::Gemm& plan, gk::DataType dtype, const Shape& s);

// The one error type of the benchmark: a measurement that cannot be trusted stops, never prints a number.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check_cuda(cudaError_t status, const char* call, const char* file, int line);
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

#define BENCH_CUDA(call) ::bench::check_cuda((call), #call, __FILE__, __LINE__)
#define BENCH_CUBLAS(call) ::bench::check_cublas((call), #call, __FILE__, __LINE__)

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Milliseconds per call of `call`, over `iters` back-to-back calls on `stream`, by CUDA events.
double time_batch_ms(cudaStream_t stream, int iters, const std::function<void()>& call);

// For sections that time many kernels: 3 warm-up calls, then the median of 3 batches of >= 20 ms each.
double quick_ms(cudaStream_t stream, const std::function<void()>& call);

// Milliseconds per call of each of `calls`, timed in interleaved rounds so that every call sees the same clock and
// thermal state: >= warmup_ms of all calls in turn, then `rounds` rounds of one batch (>= batch_ms) per call, the
// order rotated each round. Returns ms[call][round].
std::vector<std::vector<double>> interleaved_ms(cudaStream_t stream, const std::vector<std::function<void()>>& calls,
                                                int rounds, double batch_ms, double warmup_ms);

// Row-major A (m x k), B (k x n) of uniform [-1, 1) data and an output D, on the device.
struct Operands {
  Operands(gk::DataType t, const Shape& s);
  DeviceBuffer A, B, D;
};
double tflops(const Shape& s, double ms);
// plan.run(A, B, D) on o's row-major operands (beta 0, optional bias) on ctx.stream, without a sync; `plan` and `bias`
// must outlive the returned call.
std::function<void()> plan_call(Context& ctx, gk::Gemm& plan, gk::DataType t, const Shape& s, Operands& o,
                                const gk::TensorView* bias = nullptr);
// quick_ms of plan.run(A, B, D) (beta 0, optional bias) and of cuBLAS on the same operands.
double time_plan(Context& ctx, gk::Gemm& plan, gk::DataType t, const Shape& s, Operands& o,
                 const gk::TensorView* bias = nullptr);
double time_cublas(Context& ctx, gk::DataType t, const Shape& s, Operands& o);

// The default gemmkit plan for `dtype` inputs/outputs with f32 accumulation, all row-major, on ctx's GPU (with
// --max-swizzle's scheduler swizzle where given).
gk::Gemm default_plan(gk::DataType dtype, const Context& ctx);
// The kernel plan.run() would pick for this shape on packed device tensors (Gemm::spec_for_problem); nothing runs.
gk::KernelSpec planned_spec(gk::Gemm& plan, const Shape& s);
// The decomposition and split count run() passes that kernel (Gemm::k_split_for).
gk::KSplit planned_k_split(gk::Gemm& plan, const Shape& s);
cudaDataType_t cuda_type(gk::DataType dtype);
std::size_t element_bytes(gk::DataType dtype);

// D = A@B for row-major A (m x k), B (k x n), D (m x n), through cublasGemmEx (f32 compute) as D^T = B^T A^T.
void cublas_gemm(cublasHandle_t handle, gk::DataType dtype, const Shape& s, const void* A, const void* B, void* D);

// Uniform reals in [-1, 1), rounded to dtype, from a counter-based generator (parallel and deterministic).
void fill_uniform(gk::DataType dtype, void* host, std::size_t count, std::uint64_t seed);
// Element i of a host buffer of dtype (f16 / bf16 / f32), as a double.
double load_element(gk::DataType dtype, const void* host, std::size_t i);
// Calls body(begin, end) on disjoint chunks of [0, count) from all hardware threads.
void parallel_for(std::size_t count, const std::function<void(std::size_t, std::size_t)>& body);

std::int64_t now_ns();  // steady clock (CLOCK_MONOTONIC: comparable across processes)
double median(std::vector<double> values);
std::string fixed(double value, int digits);

// A Markdown table.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string markdown() const;
};

// Runs the child program with `args`; its stdout is returned, its stderr passes through.
struct ChildRun {
  int exit_code = -1;
  std::string out;
  std::int64_t spawn_ns = 0, exit_ns = 0;
};
ChildRun run_child(const std::string& path, const std::vector<std::string>& args);
// The last line of a child's stdout, parsed as JSON; throws Failure naming the child's exit code otherwise.
Value child_json(const ChildRun& run, const std::string& what);

}  // namespace bench
