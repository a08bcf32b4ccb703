// bench/bench_util.cpp: CUDA/cuBLAS checks and RAII, timing, data generation, tables and child processes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <thread>

#include "bench.hpp"
#include "jit/process.hpp"

namespace bench {

std::string Shape::text() const {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw Failure(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                ") at " + file + ":" + std::to_string(line));
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Failure(std::string(call) + " failed: " + cublasGetStatusName(status) + " (" + cublasGetStatusString(status) +
                ") at " + file + ":" + std::to_string(line));
}

Event::Event() {
  BENCH_CUDA(cudaEventCreate(&event_));
}
Event::~Event() {
  cudaEventDestroy(event_);
}

double time_batch_ms(cudaStream_t stream, int iters, const std::function<void()>& call) {
  Event start, stop;
  BENCH_CUDA(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < iters; ++i) call();
  BENCH_CUDA(cudaEventRecord(stop.get(), stream));
  BENCH_CUDA(cudaEventSynchronize(stop.get()));
  BENCH_CUDA(cudaGetLastError());
  float ms = 0.f;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return static_cast<double>(ms) / iters;
}

gk::Gemm default_plan(gk::DataType dtype, const Context& ctx) {
  gk::GemmOptions o;
  o.element = dtype;
  o.layout = gk::Layout::RowMajor;
  o.element_accumulator = gk::DataType::f32;
  o.cc = ctx.cc;
  gk::Gemm plan(o);
  if (ctx.options.max_swizzle > 0) plan.set_max_swizzle_size(ctx.options.max_swizzle);
  if (ctx.options.raster_order != gk::RasterOrder::Heuristic) plan.set_raster_order(ctx.options.raster_order);
  return plan;
}

gk::KernelSpec planned_spec(gk::Gemm& plan, const Shape& s) {
  return plan.spec_for_problem(s.m, s.n, s.k);
}

gk::KSplit planned_k_split(gk::Gemm& plan, const Shape& s) {
  const auto [A, B, D] = plan.stand_in_tensors(s.m, s.n, s.k);
  return plan.k_split_for(A, B, nullptr, D);
}

cudaDataType_t cuda_type(gk::DataType dtype) {
  switch (dtype) {
    case gk::DataType::f16: return CUDA_R_16F;
    case gk::DataType::bf16: return CUDA_R_16BF;
    default: throw Failure("gemmkit_bench compares f16 and bf16 GEMMs only; got " + std::string(gk::to_string(dtype)));
  }
}

std::size_t element_bytes(gk::DataType dtype) {
  return static_cast<std::size_t>(gk::bits_of(dtype) / 8);
}

void cublas_gemm(cublasHandle_t handle, gk::DataType dtype, const Shape& s, const void* A, const void* B, void* D) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = cuda_type(dtype);
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  // Row-major D (m x n) is column-major D^T (n x m) = B^T (n x k, ld n) * A^T (k x m, ld k).
  BENCH_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, t, n, A, t, k, &beta, D, t, n,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void parallel_for(std::size_t count, const std::function<void(std::size_t, std::size_t)>& body) {
  const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 64);
  const std::size_t chunk = (count + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t begin = 0; begin < count; begin += chunk) {
    pool.emplace_back(body, begin, std::min(count, begin + chunk));
  }
  for (auto& t : pool) t.join();
}

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

void fill_uniform(gk::DataType dtype, void* host, std::size_t count, std::uint64_t seed) {
  if (dtype != gk::DataType::f16 && dtype != gk::DataType::bf16 && dtype != gk::DataType::f32) {
    throw Failure("fill_uniform: unsupported element type " + std::string(gk::to_string(dtype)));
  }
  const std::uint64_t base = splitmix64(seed);
  parallel_for(count, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      // 24 random bits -> a float in [-1, 1) with every value exact in f32.
      const float x = static_cast<float>(splitmix64(base + i) >> 40) * 0x1p-23f - 1.0f;
      switch (dtype) {
        case gk::DataType::f16: static_cast<__half*>(host)[i] = __float2half_rn(x); break;
        case gk::DataType::bf16: static_cast<__nv_bfloat16*>(host)[i] = __float2bfloat16_rn(x); break;
        default: static_cast<float*>(host)[i] = x; break;
      }
    }
  });
}

double load_element(gk::DataType dtype, const void* host, std::size_t i) {
  switch (dtype) {
    case gk::DataType::f16: return __half2float(static_cast<const __half*>(host)[i]);
    case gk::DataType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(host)[i]);
    case gk::DataType::f32: return static_cast<const float*>(host)[i];
    default: throw Failure("load_element: unsupported element type");
  }
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> values) {
  if (values.empty()) throw Failure("median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

std::string Table::markdown() const {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const auto& c : cells) out += " " + c + " |";
    return out + "\n";
  };
  std::string out = line(header);
  out += line(std::vector<std::string>(header.size(), "---"));
  for (const auto& row : rows) out += line(row);
  return out;
}

ChildRun run_child(const std::string& path, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {path};
  argv.insert(argv.end(), args.begin(), args.end());
  gk::ProcessOptions options;
  options.capture_stderr = false;  // the child's errors pass through; its stdout ends with its JSON report
  ChildRun run;
  run.spawn_ns = now_ns();
  const gk::ProcessResult result = gk::run_process(argv, options);
  run.exit_ns = now_ns();
  run.exit_code = result.exit_code;
  run.out = result.output;
  return run;
}

Value child_json(const ChildRun& run, const std::string& what) {
  if (run.exit_code != 0) {
    throw Failure(what + ": the child process exited with status " + std::to_string(run.exit_code) +
                  " (its error is printed above)");
  }
  std::string text = run.out;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto newline = text.rfind('\n');
  const std::string last = newline == std::string::npos ? text : text.substr(newline + 1);
  try {
    return Value::parse(last);
  } catch (const std::exception& e) {
    throw Failure(what + ": the child's last output line is not JSON (" + e.what() + "): " + last);
  }
}

}  // namespace bench
