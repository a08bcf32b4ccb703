// tests/support/grouped_probe.hpp: what the grouped probe's files share: its failures, the loaded module, matrices
// in one host/device arena, the groups and their epilogue, the call buffers, the test context, and each file's entry
// points (the probe's files: grouped_probe.cpp, _reference, _list, _contiguous and _timing).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemmkit/abi.h"

namespace grouped_probe {

// ---- Failures ---------------------------------------------------------------------------------------------------

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Skip : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check_cuda(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
    throw Failure(std::string(call) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
  }
}
#define CUDA_CHECK(call) check_cuda((call), #call)

// ---- The module -------------------------------------------------------------------------------------------------

struct Module {
  std::string name;
  gk_grouped_info info{};
  gk_grouped_metadata_bytes_fn metadata_bytes = nullptr;
  gk_grouped_can_implement_fn can_implement = nullptr;
  gk_grouped_workspace_size_fn workspace_size = nullptr;
  gk_grouped_pack_fn pack = nullptr;
  gk_grouped_run_fn run = nullptr;
  gk_grouped_run_contiguous_fn run_contiguous = nullptr;
  gk_last_cuda_error_fn last_cuda_error = nullptr;

  // Throws with the status, and the CUDA error behind a failed launch.
  void expect_ok(int status, const char* call) const {
    if (status == GK_OK) return;
    std::string message = std::string(call) + " returned gk_status " + std::to_string(status);
    if (status == GK_ERR_LAUNCH || status == GK_ERR_INITIALIZE) {
      message += std::string(" (CUDA error ") + cudaGetErrorName(static_cast<cudaError_t>(last_cuda_error())) + ")";
    }
    throw Failure(message);
  }
};

// ---- Elements (grouped_probe_reference.cpp) ---------------------------------------------------------------------

std::size_t element_bytes(int dtype);
void encode(int dtype, double value, unsigned char* at);
double decode(int dtype, const unsigned char* at);

inline constexpr double kSentinel = 99.0;  // what D holds before a launch; exact in every element type

// ---- Matrices in one host/device arena ----------------------------------------------------------------------------

// A rows x cols matrix at a byte offset of an Arena.
struct Matrix {
  std::size_t offset = 0;
  int rows = 0, cols = 0;
  int64_t ld = 1;
  bool row_major = true;
  int dtype = GK_DTYPE_F16;

  std::size_t index(int r, int c) const {
    return row_major ? static_cast<std::size_t>(r) * ld + c : static_cast<std::size_t>(c) * ld + r;
  }
  // Elements of its allocation: every row (column) is ld long, padding included.
  std::size_t span() const { return static_cast<std::size_t>(row_major ? rows : cols) * ld; }
  // The view of `count` rows from `first` (row-major matrices only).
  Matrix rows_from(int first, int count) const {
    Matrix out = *this;
    out.offset += static_cast<std::size_t>(first) * ld * element_bytes(dtype);
    out.rows = count;
    return out;
  }
};

// Host bytes of every matrix of a test and their device copy, each matrix 256-byte aligned.
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() { cudaFree(device_); }

  Matrix add(int rows, int cols, int64_t ld, bool row_major, int dtype) {
    Matrix m{host_.size(), rows, cols, ld, row_major, dtype};
    const std::size_t bytes = m.span() * element_bytes(dtype);
    host_.resize(host_.size() + (bytes + 255) / 256 * 256 + 256);
    return m;
  }
  double get(const Matrix& m, std::size_t index) const {
    return decode(m.dtype, host_.data() + m.offset + index * element_bytes(m.dtype));
  }
  void set(const Matrix& m, std::size_t index, double value) {
    encode(m.dtype, value, host_.data() + m.offset + index * element_bytes(m.dtype));
  }
  void fill(const Matrix& m, const std::function<double()>& value) {
    for (std::size_t i = 0; i < m.span(); ++i) set(m, i, value());
  }
  void* device(const Matrix& m) const { return static_cast<unsigned char*>(device_) + m.offset; }
  void upload() {
    if (device_ == nullptr) CUDA_CHECK(cudaMalloc(&device_, std::max<std::size_t>(host_.size(), 256)));
    CUDA_CHECK(cudaMemcpy(device_, host_.data(), host_.size(), cudaMemcpyHostToDevice));
  }
  void download() { CUDA_CHECK(cudaMemcpy(host_.data(), device_, host_.size(), cudaMemcpyDeviceToHost)); }
  // Copies one matrix's allocation to the device (e.g. to reset D).
  void upload(const Matrix& m, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(device(m), host_.data() + m.offset, m.span() * element_bytes(m.dtype),
                               cudaMemcpyHostToDevice, stream));
  }

 private:
  std::vector<unsigned char> host_;
  void* device_ = nullptr;
};

// ---- Problems and the reference ---------------------------------------------------------------------------------

struct Group {
  int m = 0, n = 0, k = 0;
  Matrix A, B, C, D;
  bool has_c = false;
};

struct Epilogue {
  double alpha = 1, beta = 0, slope = 0.25;
  std::string activation = "identity";
};

int pick(std::mt19937_64& rng, int lo, int hi);
int64_t round_up(int64_t value, int64_t multiple);
// One group of the list form with the module's layouts: leading dimensions rounded up to the alignment, plus one
// alignment's worth of padding when `pad`; A, B, C small integers, D the sentinel everywhere (padding included).
Group make_group(Arena& arena, const gk_grouped_info& info, int m, int n, int k, bool has_c, bool pad,
                 std::mt19937_64& rng);
// Checks every group, in parallel; returns the first mismatch with its group index, or "".
std::string check_groups(const Arena& arena, const std::vector<Group>& groups, const Epilogue& e);

// ---- Running the two forms ----------------------------------------------------------------------------------------

// A pinned host buffer, a device buffer and a workspace for one call shape, reusable across calls.
struct Buffers {
  std::size_t bytes = 0, workspace_bytes = 0;
  void* host = nullptr;
  void* device = nullptr;
  void* workspace = nullptr;

  Buffers(const Module& m, const gk_grouped_args& args) {
    bytes = m.metadata_bytes(args.groups);
    workspace_bytes = m.workspace_size(&args);
    CUDA_CHECK(cudaMallocHost(&host, bytes));
    CUDA_CHECK(cudaMalloc(&device, bytes));
    if (workspace_bytes > 0) CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
  }
  ~Buffers() {
    cudaFreeHost(host);
    cudaFree(device);
    cudaFree(workspace);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
};

struct Context {
  const Module& module;
  int device = 0, sm_count = 0, rounds = 20;
  double slope = 0.25;
  uint64_t seed = 2023;
  cudaStream_t stream = nullptr;
  int failures = 0;

  gk_grouped_args args(int groups, double alpha, double beta) const {
    gk_grouped_args a{};
    a.groups = groups;
    a.device_id = device;
    a.sm_count = sm_count;
    a.alpha = alpha;
    a.beta = beta;
    a.activation_params[0] = slope;
    return a;
  }
  Epilogue epilogue(const gk_grouped_args& a) const { return Epilogue{a.alpha, a.beta, slope, module.info.activation}; }

  void test(const std::string& name, const std::function<std::string()>& body) {
    try {
      const std::string detail = body();
      std::printf("PASS %s%s%s\n", name.c_str(), detail.empty() ? "" : ": ", detail.c_str());
    } catch (const Skip& skip) {
      std::printf("SKIP %s: %s\n", name.c_str(), skip.what());
    } catch (const std::exception& failure) {
      std::printf("FAIL %s: %s\n", name.c_str(), failure.what());
      ++failures;
      cudaGetLastError();  // a sticky error would fail every later test anyway
    }
    std::fflush(stdout);
  }
};

// ---- The two forms and their timing (grouped_probe_list.cpp, _contiguous.cpp, _timing.cpp) -----------------------

using Shapes = std::vector<std::array<int, 3>>;

std::vector<gk_grouped_problem> problems_of(const Arena& arena, const std::vector<Group>& groups);
// Pack, one copy, run.
void run_list(const Context& ctx, const gk_grouped_args& args, const std::vector<gk_grouped_problem>& problems,
              Buffers& buffers);
// The walk-through workload: 50 problems with M, N, K from {128, 256, 512, 1024}.
Shapes walkthrough_shapes(uint64_t seed);
void list_tests(Context& ctx);

std::vector<int32_t> cumulative(const std::vector<int>& sizes);
// Random skewed split of `rows` over `groups` experts, some of them empty; the sum may fall short of total_m.
std::vector<int> skewed_sizes(std::mt19937_64& rng, int groups, int rows);
void contiguous_tests(Context& ctx);

void list_timing(Context& ctx);
// MoE shapes of the issue: K 4096, total M 8192, uniform and skewed splits; operands hold a constant bit pattern
// (the time does not depend on the values), so nothing is checked here.
void moe_timing(Context& ctx);

}  // namespace grouped_probe
