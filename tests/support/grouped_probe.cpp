// tests/support/grouped_probe.cpp: runs a grouped kernel module (.so) through its C ABI alone and checks every D
// against a float64 host reference on small-integer data: the list form (1, 2, 50, 1000 and 4096 groups, odd sizes,
// padded leading dimensions, empty groups, with and without C, a rerun over the same buffers), its argument checks,
// and the contiguous (MoE) form with skewed, empty and clamped experts, also captured in a CUDA graph; then times
// 50-group list runs and MoE shapes. Prints PASS / FAIL / SKIP / TIME lines; exits 1 on a failure.
// Usage: gemmkit_grouped_probe KERNEL.so [--form list|contiguous|all] [--device N] [--seed S] [--rounds R]
//                              [--slope X] [--no-timing]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit/abi.h"

namespace {

// ---- Failures ---------------------------------------------------------------------------------------------------

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Skip : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check_cuda(cudaError_t error, const char* call) {
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

// ---- Elements ---------------------------------------------------------------------------------------------------

const char* dtype_name(int dtype) {
  switch (dtype) {
    case GK_DTYPE_F16: return "f16";
    case GK_DTYPE_BF16: return "bf16";
    case GK_DTYPE_F32: return "f32";
    case GK_DTYPE_TF32: return "tf32";
    default: return "unsupported";
  }
}

std::size_t element_bytes(int dtype) {
  switch (dtype) {
    case GK_DTYPE_F16:
    case GK_DTYPE_BF16: return 2;
    case GK_DTYPE_F32:
    case GK_DTYPE_TF32: return 4;
    default:
      throw Skip(std::string("the probe handles f16, bf16, f32 and tf32 operands, not dtype ") + std::to_string(dtype));
  }
}

void encode(int dtype, double value, unsigned char* at) {
  const float f = static_cast<float>(value);
  if (dtype == GK_DTYPE_F16) {
    const __half h = __float2half_rn(f);
    std::memcpy(at, &h, sizeof h);
  } else if (dtype == GK_DTYPE_BF16) {
    const __nv_bfloat16 b = __float2bfloat16_rn(f);
    std::memcpy(at, &b, sizeof b);
  } else {
    std::memcpy(at, &f, sizeof f);  // tf32 operands live in f32 storage
  }
}

double decode(int dtype, const unsigned char* at) {
  if (dtype == GK_DTYPE_F16) {
    __half h;
    std::memcpy(&h, at, sizeof h);
    return __half2float(h);
  }
  if (dtype == GK_DTYPE_BF16) {
    __nv_bfloat16 b;
    std::memcpy(&b, at, sizeof b);
    return __bfloat162float(b);
  }
  float f;
  std::memcpy(&f, at, sizeof f);
  return f;
}

double round_to(int dtype, double value) {
  unsigned char bytes[8];
  encode(dtype, value, bytes);
  return decode(dtype, bytes);
}

// Relative rounding step of an output element type.
double epsilon(int dtype) {
  return dtype == GK_DTYPE_F16 ? 0x1p-10 : dtype == GK_DTYPE_BF16 ? 0x1p-7 : 0x1p-20;
}

constexpr double kSentinel = 99.0;  // what D holds before a launch; exact in every element type

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

double activate(const Epilogue& e, double x) {
  const std::string& a = e.activation;
  if (a == "identity") return x;
  if (a == "relu") return x > 0 ? x : 0;
  if (a == "leaky_relu") return x > 0 ? x : x * e.slope;
  if (a == "sigmoid") return 1 / (1 + std::exp(-x));
  if (a == "silu") return x / (1 + std::exp(-x));
  if (a == "tanh") return std::tanh(x);
  if (a == "gelu") return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  if (a == "gelu_tanh") return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  if (a == "hardswish") return x * std::clamp(x + 3, 0.0, 6.0) / 6;
  throw Skip("the probe has no reference for activation '" + a + "'");
}

// Identity, ReLU and LeakyReLU (slope 0.25) of small integers are exact in f32; the others are compared within a
// couple of output rounding steps.
bool exact(const Epilogue& e) {
  return e.activation == "identity" || e.activation == "relu" || e.activation == "leaky_relu";
}

int pick(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// One group of the list form with the module's layouts: leading dimensions rounded up to the alignment, plus one
// alignment's worth of padding when `pad`; A, B, C small integers, D the sentinel everywhere (padding included).
Group make_group(Arena& arena, const gk_grouped_info& info, int m, int n, int k, bool has_c, bool pad,
                 std::mt19937_64& rng) {
  auto matrix = [&](int rows, int cols, int layout, int alignment, int dtype) {
    const bool row_major = layout == GK_ROW_MAJOR;
    const int64_t ld = round_up(std::max(row_major ? cols : rows, 1), alignment) + (pad ? alignment : 0);
    return arena.add(rows, cols, ld, row_major, dtype);
  };
  Group g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.has_c = has_c;
  g.A = matrix(m, k, info.layout_a, info.alignment_a, info.element_a);
  g.B = matrix(k, n, info.layout_b, info.alignment_b, info.element_b);
  g.C = matrix(has_c ? m : 0, has_c ? n : 0, info.layout_c, info.alignment_c, info.element_c);
  g.D = matrix(m, n, info.layout_c, info.alignment_d, info.element_d);
  arena.fill(g.A, [&] { return pick(rng, -2, 2); });
  arena.fill(g.B, [&] { return pick(rng, -2, 2); });
  arena.fill(g.C, [&] { return pick(rng, -3, 3); });
  arena.fill(g.D, [] { return kSentinel; });
  return g;
}

// Checks one group's D: the m x n result where A, B, C define one (m, n, k all > 0), the sentinel everywhere else in
// its allocation. Returns the first mismatch, or "".
std::string check_group(const Arena& arena, const Group& g, const Epilogue& e) {
  const bool computed = g.m > 0 && g.n > 0 && g.k > 0;
  std::vector<double> a, bt;  // A row by row, B column by column: contiguous dot products
  if (computed) {
    a.resize(static_cast<std::size_t>(g.m) * g.k);
    bt.resize(static_cast<std::size_t>(g.n) * g.k);
    for (int i = 0; i < g.m; ++i)
      for (int p = 0; p < g.k; ++p) a[static_cast<std::size_t>(i) * g.k + p] = arena.get(g.A, g.A.index(i, p));
    for (int j = 0; j < g.n; ++j)
      for (int p = 0; p < g.k; ++p) bt[static_cast<std::size_t>(j) * g.k + p] = arena.get(g.B, g.B.index(p, j));
  }
  const int outer = g.D.row_major ? g.D.rows : g.D.cols;
  for (int o = 0; o < outer; ++o) {
    for (int64_t inner = 0; inner < g.D.ld; ++inner) {
      const int i = g.D.row_major ? o : static_cast<int>(inner);
      const int j = g.D.row_major ? static_cast<int>(inner) : o;
      const double got = arena.get(g.D, static_cast<std::size_t>(o) * g.D.ld + inner);
      const bool inside = computed && i < g.m && j < g.n;
      double want = kSentinel, tolerance = 0;
      if (inside) {
        double dot = 0;
        for (int p = 0; p < g.k; ++p)
          dot += a[static_cast<std::size_t>(i) * g.k + p] * bt[static_cast<std::size_t>(j) * g.k + p];
        const double c = g.has_c ? arena.get(g.C, g.C.index(i, j)) : 0.0;
        const double value = activate(e, e.alpha * dot + e.beta * c);
        want = exact(e) ? round_to(g.D.dtype, value) : value;
        tolerance = exact(e) ? 0 : 2 * epsilon(g.D.dtype) * std::fabs(value) + 1e-3;
      }
      if (std::fabs(got - want) > tolerance || std::isnan(got)) {
        char text[200];
        std::snprintf(text, sizeof text, "%dx%dx%d: D(%d, %d) = %g, expected %g%s", g.m, g.n, g.k, i, j, got, want,
                      inside ? "" : " (outside the result: must stay untouched)");
        return text;
      }
    }
  }
  return {};
}

// Checks every group, in parallel; returns the first mismatch with its group index, or "".
std::string check_groups(const Arena& arena, const std::vector<Group>& groups, const Epilogue& e) {
  std::vector<std::string> errors(groups.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> workers;
  const unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 32));
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (std::size_t g = next++; g < groups.size(); g = next++) errors[g] = check_group(arena, groups[g], e);
    });
  }
  for (auto& worker : workers) worker.join();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!errors[g].empty()) return "group " + std::to_string(g) + " " + errors[g];
  }
  return {};
}

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

std::vector<gk_grouped_problem> problems_of(const Arena& arena, const std::vector<Group>& groups) {
  std::vector<gk_grouped_problem> out;
  for (const Group& g : groups) {
    gk_grouped_problem p{};
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    p.A = arena.device(g.A);
    p.B = arena.device(g.B);
    p.C = g.has_c ? arena.device(g.C) : nullptr;
    p.D = arena.device(g.D);
    p.lda = g.A.ld;
    p.ldb = g.B.ld;
    p.ldc = g.C.ld;
    p.ldd = g.D.ld;
    out.push_back(p);
  }
  return out;
}

// Pack, one copy, run.
void run_list(const Context& ctx, const gk_grouped_args& args, const std::vector<gk_grouped_problem>& problems,
              Buffers& buffers) {
  int32_t failed = -1;
  const int status = ctx.module.pack(&args, problems.data(), buffers.host, buffers.bytes, &failed);
  if (status != GK_OK) {
    throw Failure("gk_grouped_pack returned " + std::to_string(status) + " for group " + std::to_string(failed));
  }
  CUDA_CHECK(cudaMemcpyAsync(buffers.device, buffers.host, buffers.bytes, cudaMemcpyHostToDevice, ctx.stream));
  ctx.module.expect_ok(ctx.module.run(&args, buffers.device, buffers.workspace, ctx.stream), "gk_grouped_run");
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

using Shapes = std::vector<std::array<int, 3>>;

// Rounds the extents a 2.x module reads in whole vectors (rows of a row-major operand, columns of a column-major one)
// up to the alignment; TMA modules take any extent.
std::array<int, 3> legal(const gk_grouped_info& info, std::array<int, 3> shape) {
  if (!info.aligned_extents) return shape;
  auto& [m, n, k] = shape;
  auto up = [](int& extent, int alignment) { extent = static_cast<int>(round_up(extent, alignment)); };
  up(info.layout_a == GK_ROW_MAJOR ? k : m, info.alignment_a);
  up(info.layout_b == GK_ROW_MAJOR ? n : k, info.alignment_b);
  up(info.layout_c == GK_ROW_MAJOR ? n : m, std::max(info.alignment_c, info.alignment_d));
  return shape;
}

// The list form end to end: groups of the given shapes, checked; `buffers` (optional) is reused.
std::string list_case(Context& ctx, const Shapes& shapes, double alpha, double beta, bool pad,
                      Buffers* reuse = nullptr) {
  std::mt19937_64 rng(ctx.seed + shapes.size());
  Arena arena;
  std::vector<Group> groups;
  for (const auto& shape : shapes) {
    const auto [m, n, k] = legal(ctx.module.info, shape);
    groups.push_back(make_group(arena, ctx.module.info, m, n, k, beta != 0 || pick(rng, 0, 1) == 1, pad, rng));
  }
  arena.upload();
  const gk_grouped_args args = ctx.args(static_cast<int>(shapes.size()), alpha, beta);
  ctx.module.expect_ok(ctx.module.can_implement(&args, nullptr), "gk_grouped_can_implement");
  std::unique_ptr<Buffers> own;
  Buffers& buffers = reuse != nullptr ? *reuse : *(own = std::make_unique<Buffers>(ctx.module, args));
  run_list(ctx, args, problems_of(arena, groups), buffers);
  arena.download();
  if (std::string error = check_groups(arena, groups, ctx.epilogue(args)); !error.empty()) throw Failure(error);
  int empty = 0;
  for (const auto& [m, n, k] : shapes) empty += m == 0 || n == 0 || k == 0;
  return std::to_string(shapes.size()) + " groups, " + std::to_string(empty) + " empty, alpha " +
         std::to_string(alpha) + ", beta " + std::to_string(beta);
}

Shapes random_shapes(std::mt19937_64& rng, int groups, int lo, int hi, int every_nth_empty) {
  Shapes out;
  for (int g = 0; g < groups; ++g) {
    std::array<int, 3> s{pick(rng, lo, hi), pick(rng, lo, hi), pick(rng, lo, hi)};
    if (every_nth_empty > 0 && g % every_nth_empty == every_nth_empty - 1) s[g / every_nth_empty % 3] = 0;
    out.push_back(s);
  }
  return out;
}

// The walk-through workload: 50 problems with M, N, K from {128, 256, 512, 1024}.
Shapes walkthrough_shapes(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int sizes[] = {128, 256, 512, 1024};
  Shapes out;
  for (int g = 0; g < 50; ++g) out.push_back({sizes[pick(rng, 0, 3)], sizes[pick(rng, 0, 3)], sizes[pick(rng, 0, 3)]});
  return out;
}

void list_tests(Context& ctx) {
  std::mt19937_64 rng(ctx.seed);
  ctx.test("list 1 group", [&] { return list_case(ctx, {{128, 128, 128}}, 1, 0, false); });
  ctx.test("list 2 groups, odd sizes, padded", [&] { return list_case(ctx, {{257, 72, 129}, {3, 5, 7}}, 1, 0, true); });
  ctx.test("list 50 groups (walk-through sizes)",
           [&] { return list_case(ctx, walkthrough_shapes(ctx.seed), 1, 0, false); });
  ctx.test("list 50 groups, odd sizes, empty groups, C",
           [&] { return list_case(ctx, random_shapes(rng, 50, 1, 300, 7), 2, -1, true); });
  ctx.test("list 1000 groups, empty groups, C",
           [&] { return list_case(ctx, random_shapes(rng, 1000, 1, 96, 10), 1, 1, true); });
  ctx.test("list 4096 groups", [&] { return list_case(ctx, random_shapes(rng, 4096, 1, 40, 0), 1, 0, false); });
  ctx.test("list all groups empty", [&] {
    return list_case(ctx, {{0, 64, 64}, {64, 0, 64}, {64, 64, 0}}, 1, 0, false);
  });
  ctx.test("list rerun over the same buffers (prepared launch reused)", [&] {
    const gk_grouped_args args = ctx.args(50, 1, 0);
    Buffers buffers(ctx.module, args);
    list_case(ctx, random_shapes(rng, 50, 1, 200, 0), 1, 0, true, &buffers);
    return list_case(ctx, random_shapes(rng, 50, 1, 200, 5), 1, 0, false, &buffers);
  });

  ctx.test("list pack refuses bad groups", [&] {
    const gk_grouped_info& info = ctx.module.info;
    Arena arena;
    std::vector<Group> groups;
    for (int g = 0; g < 5; ++g) groups.push_back(make_group(arena, info, 64, 64, 64, true, false, rng));
    arena.upload();
    const gk_grouped_args args = ctx.args(5, 1, 1);
    Buffers buffers(ctx.module, args);
    auto expect = [&](std::vector<gk_grouped_problem> problems, int want, int32_t want_group, const char* what) {
      int32_t failed = -1;
      const int status = ctx.module.pack(&args, problems.data(), buffers.host, buffers.bytes, &failed);
      if (status != want || (want != GK_OK && failed != want_group)) {
        throw Failure(std::string(what) + ": status " + std::to_string(status) + " for group " +
                      std::to_string(failed) + ", expected " + std::to_string(want) + " for group " +
                      std::to_string(want_group));
      }
    };
    const auto good = problems_of(arena, groups);
    auto bad = good;
    bad[3].C = nullptr;  // beta is 1
    expect(bad, GK_ERR_ARGS, 3, "C null with beta 1");
    bad = good;
    bad[2].m = -1;
    expect(bad, GK_ERR_ARGS, 2, "negative m");
    bad = good;
    bad[4].ldd = 1;
    expect(bad, GK_ERR_ARGS, 4, "ldd shorter than a row");
    if (info.alignment_a > 1) {
      bad = good;
      bad[1].lda += 1;
      expect(bad, GK_ERR_CANNOT_IMPLEMENT, 1, "lda not a multiple of the alignment");
      bad = good;
      bad[0].A = static_cast<const char*>(bad[0].A) + element_bytes(info.element_a);
      expect(bad, GK_ERR_CANNOT_IMPLEMENT, 0, "A misaligned");
    }
    if (info.aligned_extents && info.alignment_a > 1) {
      bad = good;
      (info.layout_a == GK_ROW_MAJOR ? bad[2].k : bad[2].m) -= 1;
      expect(bad, GK_ERR_CANNOT_IMPLEMENT, 2, "A's row length not a multiple of the alignment (2.x)");
    }
    bad = good;
    bad[1].k = 0;  // empty: its pointers are not looked at
    bad[1].A = bad[1].B = nullptr;
    expect(bad, GK_OK, -1, "empty group with null pointers");
    int32_t failed = -1;
    if (ctx.module.pack(&args, good.data(), buffers.host, buffers.bytes - 1, &failed) != GK_ERR_WORKSPACE) {
      throw Failure("a metadata buffer one byte short was accepted");
    }
    return std::string("null C with beta, negative extent, short ld, misalignment, short buffer");
  });
}

// ---- Contiguous form ----------------------------------------------------------------------------------------------

// A MoE problem: A [total_m, k], B [G] x (k x n) in the module's B layout, D [total_m, n], offsets on the device.
struct Moe {
  int groups = 0, total_m = 0, n = 0, k = 0;
  bool has_c = false;
  Arena arena;
  Matrix A, B, C, D;  // B: the whole stack as one (G * k) x n or n x (G * k) allocation
  int32_t* offsets = nullptr;

  Moe(const gk_grouped_info& info, int groups_, int total_m_, int n_, int k_, bool has_c_, std::mt19937_64& rng)
      : groups(groups_), total_m(total_m_), n(n_), k(k_), has_c(has_c_) {
    A = arena.add(total_m, k, k, true, info.element_a);
    const bool b_row = info.layout_b == GK_ROW_MAJOR;
    B = arena.add(b_row ? groups * k : k, b_row ? n : groups * n, b_row ? n : k, b_row, info.element_b);
    C = arena.add(has_c ? total_m : 0, n, n, true, info.element_c);
    D = arena.add(total_m, n, n, true, info.element_d);
    arena.fill(A, [&] { return pick(rng, -2, 2); });
    arena.fill(B, [&] { return pick(rng, -2, 2); });
    arena.fill(C, [&] { return pick(rng, -3, 3); });
    arena.fill(D, [] { return kSentinel; });
    arena.upload();
    CUDA_CHECK(cudaMalloc(&offsets, sizeof(int32_t) * groups));
  }
  ~Moe() { cudaFree(offsets); }

  int64_t batch_stride_b() const { return static_cast<int64_t>(k) * n; }
  gk_grouped_contiguous problem() const {
    gk_grouped_contiguous c{};
    c.total_m = total_m;
    c.n = n;
    c.k = k;
    c.A = arena.device(A);
    c.B = arena.device(B);
    c.C = has_c ? arena.device(C) : nullptr;
    c.D = arena.device(D);
    c.offsets = offsets;
    c.lda = A.ld;
    c.ldb = B.ld;
    c.ldc = C.ld;
    c.ldd = D.ld;
    c.batch_stride_b = batch_stride_b();
    return c;
  }

  // The groups as the module derives them (offsets clamped into [0, total_m]), plus the rows no group owns as an
  // empty group whose D must stay untouched.
  std::vector<Group> groups_for(const std::vector<int32_t>& ends) const {
    std::vector<Group> out;
    std::vector<bool> owned(total_m, false);
    int32_t previous = 0;
    for (int g = 0; g < groups; ++g) {
      const int32_t start = g == 0 ? 0 : std::clamp(previous, 0, total_m);
      const int32_t end = std::clamp(ends[g], start, total_m);
      previous = ends[g];
      Group group;
      group.m = end - start;
      group.n = n;
      group.k = k;
      group.has_c = has_c;
      group.A = A.rows_from(start, group.m);
      group.B = B;
      group.B.rows = k;
      group.B.cols = n;
      group.B.offset += static_cast<std::size_t>(g) * batch_stride_b() * element_bytes(B.dtype);
      group.C = has_c ? C.rows_from(start, group.m) : C;
      group.D = D.rows_from(start, group.m);
      for (int r = start; r < end; ++r) owned[r] = true;
      out.push_back(group);
    }
    for (int r = 0; r < total_m; ++r) {
      if (owned[r]) continue;
      Group untouched;  // k = 0: the whole row must hold the sentinel
      untouched.D = D.rows_from(r, 1);
      out.push_back(untouched);
    }
    return out;
  }

  void set_offsets(const std::vector<int32_t>& ends, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(offsets, ends.data(), sizeof(int32_t) * groups, cudaMemcpyHostToDevice, stream));
  }
};

std::vector<int32_t> cumulative(const std::vector<int>& sizes) {
  std::vector<int32_t> out;
  int32_t sum = 0;
  for (int s : sizes) out.push_back(sum += s);
  return out;
}

std::string check_moe(Moe& moe, const std::vector<int32_t>& ends, const Epilogue& e) {
  moe.arena.download();
  if (std::string error = check_groups(moe.arena, moe.groups_for(ends), e); !error.empty()) return error;
  return {};
}

// One contiguous call on fresh buffers, checked.
std::string contiguous_case(Context& ctx, const std::vector<int32_t>& ends, int total_m, int n, int k, double beta) {
  std::mt19937_64 rng(ctx.seed + ends.size());
  const int groups = static_cast<int>(ends.size());
  Moe moe(ctx.module.info, groups, total_m, n, k, beta != 0, rng);
  moe.set_offsets(ends, ctx.stream);
  const gk_grouped_args args = ctx.args(groups, 1, beta);
  const gk_grouped_contiguous problem = moe.problem();
  ctx.module.expect_ok(ctx.module.can_implement(&args, &problem), "gk_grouped_can_implement");
  Buffers buffers(ctx.module, args);
  ctx.module.expect_ok(
      ctx.module.run_contiguous(&args, &problem, buffers.device, buffers.bytes, buffers.workspace, ctx.stream),
      "gk_grouped_run_contiguous");
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (std::string error = check_moe(moe, ends, ctx.epilogue(args)); !error.empty()) throw Failure(error);
  return std::to_string(groups) + " experts, total_m " + std::to_string(total_m) + ", n " + std::to_string(n) + ", k " +
         std::to_string(k);
}

// Random skewed split of `rows` over `groups` experts, some of them empty; the sum may fall short of total_m.
std::vector<int> skewed_sizes(std::mt19937_64& rng, int groups, int rows) {
  std::vector<int> sizes(groups, 0);
  for (int r = 0; r < rows; ++r) {
    const int g =
        std::min(groups - 1, static_cast<int>(std::pow(std::uniform_real_distribution<double>(0, 1)(rng), 3) * groups));
    ++sizes[g];
  }
  return sizes;
}

// Captures one contiguous call in a graph (on a thread of its own when `cold`: the module then prepares the launch
// inside the capture), then replays it `replays` times with new offsets written between replays.
std::string graph_case(Context& ctx, bool cold, int replays) {
  std::mt19937_64 rng(ctx.seed + 77);
  const int groups = 8, total_m = 1024, n = 128, k = 192;
  Moe moe(ctx.module.info, groups, total_m, n, k, false, rng);
  const gk_grouped_args args = ctx.args(groups, 1, 0);
  const gk_grouped_contiguous problem = moe.problem();
  Buffers buffers(ctx.module, args);
  std::vector<int32_t> ends = cumulative(skewed_sizes(rng, groups, 1000));
  moe.set_offsets(ends, ctx.stream);
  auto call = [&] {
    return ctx.module.run_contiguous(&args, &problem, buffers.device, buffers.bytes, buffers.workspace, ctx.stream);
  };
  if (!cold) ctx.module.expect_ok(call(), "gk_grouped_run_contiguous (eager warm-up)");
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));

  cudaGraph_t graph = nullptr;
  int status = GK_OK;
  auto capture = [&] {
    CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal));
    status = call();
    CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
  };
  if (cold) {
    std::string error;
    std::thread thread([&] {
      try {
        CUDA_CHECK(cudaSetDevice(ctx.device));
        capture();
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    thread.join();
    if (!error.empty()) throw Failure(error);
  } else {
    capture();
  }
  ctx.module.expect_ok(status, "gk_grouped_run_contiguous (captured)");
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::size_t nodes = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  std::string result;
  for (int replay = 0; replay < replays && result.empty(); ++replay) {
    ends = cumulative(skewed_sizes(rng, groups, pick(rng, 0, total_m)));
    moe.set_offsets(ends, ctx.stream);
    moe.arena.fill(moe.D, [] { return kSentinel; });
    moe.arena.upload(moe.D, ctx.stream);
    CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    if (std::string error = check_moe(moe, ends, ctx.epilogue(args)); !error.empty()) {
      result = "replay " + std::to_string(replay) + ": " + error;
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (!result.empty()) throw Failure(result);
  return std::to_string(replays) + " replays with new offsets, " + std::to_string(nodes) + " graph nodes";
}

void contiguous_tests(Context& ctx) {
  if (!ctx.module.info.contiguous) {
    ctx.test("contiguous", []() -> std::string { throw Skip("the module's A or C is column-major"); });
    return;
  }
  const int align = std::max({ctx.module.info.alignment_a, ctx.module.info.alignment_b, ctx.module.info.alignment_d});
  const int n = static_cast<int>(round_up(190, align)), k = static_cast<int>(round_up(260, align));
  std::mt19937_64 rng(ctx.seed + 5);
  ctx.test("contiguous skewed and empty experts, rows past the last offset", [&] {
    return contiguous_case(ctx, cumulative({0, 700, 3, 0, 200, 1, 100, 0}), 1024, n, k, 0);
  });
  ctx.test("contiguous 64 uniform experts, C",
           [&] { return contiguous_case(ctx, cumulative(std::vector<int>(64, 128)), 8192, 256, 512, 1); });
  ctx.test("contiguous one non-empty expert of 16", [&] {
    std::vector<int> sizes(16, 0);
    sizes[9] = 333;
    return contiguous_case(ctx, cumulative(sizes), 333, n, k, 0);
  });
  ctx.test("contiguous random skew, 32 experts",
           [&] { return contiguous_case(ctx, cumulative(skewed_sizes(rng, 32, 2000)), 2048, n, k, 0); });
  // Past total_m: clamped; decreasing: an empty group (offsets that decrease and rise again would make groups
  // overlap: undefined results, as for torch._grouped_mm, but no access outside A, C and D).
  ctx.test("contiguous offsets clamped (past total_m, then decreasing)", [&] {
    return contiguous_case(ctx, {100, 400, 200}, 350, n, k, 0);
  });
  ctx.test("contiguous in a CUDA graph (warm)", [&] { return graph_case(ctx, false, 10); });
  ctx.test("contiguous in a CUDA graph (captured cold, on a new thread)", [&] { return graph_case(ctx, true, 10); });
}

// ---- Timing -------------------------------------------------------------------------------------------------------

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Median over rounds of the GPU time of `per_round` calls of `enqueue`, in microseconds per call, after warm-up.
double time_gpu(Context& ctx, int per_round, const std::function<void()>& enqueue) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 10; ++i) enqueue();
  std::vector<double> rounds;
  for (int r = 0; r < ctx.rounds; ++r) {
    CUDA_CHECK(cudaEventRecord(start, ctx.stream));
    for (int i = 0; i < per_round; ++i) enqueue();
    CUDA_CHECK(cudaEventRecord(stop, ctx.stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    rounds.push_back(1000.0 * ms / per_round);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(rounds);
}

// Median over rounds of the host time of `per_round` calls, in microseconds per call.
double time_host(Context& ctx, int per_round, const std::function<void()>& call) {
  std::vector<double> rounds;
  for (int r = 0; r < ctx.rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < per_round; ++i) call();
    const auto end = std::chrono::steady_clock::now();
    rounds.push_back(std::chrono::duration<double, std::micro>(end - start).count() / per_round);
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  }
  return median(rounds);
}

void list_timing(Context& ctx) {
  ctx.test("timing: list, 50 groups (walk-through sizes)", [&] {
    std::mt19937_64 rng(ctx.seed);
    Arena arena;
    std::vector<Group> groups;
    double flop = 0;
    for (const auto& [m, n, k] : walkthrough_shapes(ctx.seed)) {
      groups.push_back(make_group(arena, ctx.module.info, m, n, k, false, false, rng));
      flop += 2.0 * m * n * k;
    }
    arena.upload();
    const gk_grouped_args args = ctx.args(50, 1, 0);
    Buffers buffers(ctx.module, args);
    const auto problems = problems_of(arena, groups);
    run_list(ctx, args, problems, buffers);
    const Module& m = ctx.module;
    auto launch = [&] { m.expect_ok(m.run(&args, buffers.device, buffers.workspace, ctx.stream), "run"); };
    auto copy_and_launch = [&] {
      CUDA_CHECK(cudaMemcpyAsync(buffers.device, buffers.host, buffers.bytes, cudaMemcpyHostToDevice, ctx.stream));
      launch();
    };
    int32_t failed = -1;
    auto pack = [&] { m.expect_ok(m.pack(&args, problems.data(), buffers.host, buffers.bytes, &failed), "pack"); };

    const double kernel = time_gpu(ctx, 100, launch);
    const double with_copy = time_gpu(ctx, 100, copy_and_launch);
    const double host_pack = time_host(ctx, 100, pack);
    const double host_copy_and_launch = time_host(ctx, 100, copy_and_launch);

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeGlobal));
    copy_and_launch();
    CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double in_graph = time_gpu(ctx, 100, [&] { CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream)); });
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    std::printf("TIME list50 kernel only: %.1f us/run (%.0f TFLOP/s)\n", kernel, flop / kernel * 1e-6);
    std::printf("TIME list50 metadata copy + run: %.1f us/run on the GPU, %.1f us/run of host enqueue time\n",
                with_copy, host_copy_and_launch);
    std::printf("TIME list50 pack (host, %zu bytes): %.2f us\n", buffers.bytes, host_pack);
    std::printf("TIME list50 copy + run in a CUDA graph: %.1f us/replay\n", in_graph);
    return std::string("median of ") + std::to_string(ctx.rounds) + " rounds x 100 runs after 10 warm-up runs";
  });
}

// MoE shapes of the issue: K 4096, total M 8192, uniform and skewed splits; operands hold a constant bit pattern
// (the time does not depend on the values), so nothing is checked here.
void moe_timing(Context& ctx) {
  if (!ctx.module.info.contiguous) return;
  const int total_m = 8192, k = 4096;
  for (int groups : {8, 64}) {
    for (int n : {1408, 14336}) {
      for (bool skewed : {false, true}) {
        const std::string name = "timing: contiguous " + std::to_string(groups) + " experts, n " + std::to_string(n) +
                                 ", k 4096, total_m 8192, " + (skewed ? "skewed" : "uniform");
        ctx.test(name, [&] {
          const gk_grouped_info& info = ctx.module.info;
          const std::size_t a_bytes = std::size_t(total_m) * k * element_bytes(info.element_a);
          const std::size_t b_bytes = std::size_t(groups) * k * n * element_bytes(info.element_b);
          const std::size_t d_bytes = std::size_t(total_m) * n * element_bytes(info.element_d);
          void *a = nullptr, *b = nullptr, *d = nullptr;
          int32_t* offsets = nullptr;
          CUDA_CHECK(cudaMalloc(&a, a_bytes));
          CUDA_CHECK(cudaMalloc(&b, b_bytes));
          CUDA_CHECK(cudaMalloc(&d, d_bytes));
          CUDA_CHECK(cudaMalloc(&offsets, sizeof(int32_t) * groups));
          CUDA_CHECK(cudaMemset(a, 0x11, a_bytes));
          CUDA_CHECK(cudaMemset(b, 0x11, b_bytes));
          std::mt19937_64 rng(ctx.seed);
          std::vector<int> sizes =
              skewed ? skewed_sizes(rng, groups, total_m) : std::vector<int>(groups, total_m / groups);
          const std::vector<int32_t> ends = cumulative(sizes);
          CUDA_CHECK(cudaMemcpy(offsets, ends.data(), sizeof(int32_t) * groups, cudaMemcpyHostToDevice));
          gk_grouped_contiguous problem{};
          problem.total_m = total_m;
          problem.n = n;
          problem.k = k;
          problem.A = a;
          problem.B = b;
          problem.D = d;
          problem.offsets = offsets;
          problem.lda = k;
          problem.ldb = info.layout_b == GK_ROW_MAJOR ? n : k;
          problem.ldd = n;
          problem.batch_stride_b = int64_t(k) * n;
          const gk_grouped_args args = ctx.args(groups, 1, 0);
          Buffers buffers(ctx.module, args);
          const Module& m = ctx.module;
          const double us = time_gpu(ctx, 20, [&] {
            m.expect_ok(m.run_contiguous(&args, &problem, buffers.device, buffers.bytes, buffers.workspace, ctx.stream),
                        "gk_grouped_run_contiguous");
          });
          cudaFree(a);
          cudaFree(b);
          cudaFree(d);
          cudaFree(offsets);
          const double flop = 2.0 * total_m * n * k;
          std::printf("TIME moe %d experts n %d %s: %.1f us/run, %.0f TFLOP/s\n", groups, n,
                      skewed ? "skewed" : "uniform", us, flop / us * 1e-6);
          return std::string("largest expert ") + std::to_string(*std::max_element(sizes.begin(), sizes.end())) +
                 " rows";
        });
      }
    }
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

int main(int argc, char** argv) {
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
