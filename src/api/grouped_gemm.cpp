// src/api/grouped_gemm.cpp: the GroupedGemm plan: every group checked, one kernel chosen for the alignments all
// groups share, one launch (list form), or the MoE form whose group sizes only the GPU reads.
#include "gemmkit/grouped_gemm.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "api/plan_internal.hpp"
#include "api/tensor_check.hpp"
#include "catalog/catalog.hpp"
#include "gemmkit/errors.hpp"
#include "runtime/grouped_launch.hpp"

namespace gemmkit {
namespace {

std::string group_name(const char* operand, std::size_t group) {
  return std::string(operand) + "[" + std::to_string(group) + "]";
}

std::string dims(const detail::MatrixOperand& m) {
  return std::to_string(m.rows) + " x " + std::to_string(m.cols);
}

// Grouped kernels read one matrix per group.
void require_matrix(const detail::MatrixOperand& m, const std::string& name) {
  if (m.batch != 1) {
    throw TensorError("Tensor " + name + ": grouped GEMMs take one matrix per group (2-D); it holds a batch of " +
                      std::to_string(m.batch) + ". Pass each matrix as its own group.");
  }
}

void require_extent(std::int64_t extent, const std::string& tensors) {
  if (extent > INT32_MAX) {
    throw TensorError("Tensors " + tensors + ": an extent of " + std::to_string(extent) +
                      " exceeds 2^31-1, the kernels' limit; split the group.");
  }
}

// The index of the widest candidate vector `x` fits, else a TensorError naming it; `hint` says what else to try.
std::size_t fitting_index(const detail::MatrixOperand& x, DataType type, const std::vector<int>& candidates,
                          const std::string& name, const std::string& hint) {
  const int bytes = bits_of(type) / 8;
  if (const int a = detail::fitting_alignment(x, bytes, candidates.data(), static_cast<int>(candidates.size()))) {
    return std::find(candidates.begin(), candidates.end(), a) - candidates.begin();
  }
  throw TensorError("Tensor " + name + ": its leading dimension " + std::to_string(x.ld) + ", contiguous extent " +
                    std::to_string(x.inner) + " or address is not a multiple of " + std::to_string(candidates.back()) +
                    " elements (" + std::to_string(candidates.back() * bytes) + " bytes), the narrowest vector the " +
                    "plan's grouped kernels take. Pad the leading dimension" + hint + ".");
}

// The contiguous form's block scales, or none when the plan has no block scaling: given exactly when it has.
std::pair<std::optional<detail::MatrixOperand>, std::optional<detail::MatrixOperand>> check_contiguous_scales(
    BlockScaling scaling, const RunOptions& options, std::int64_t total_m, std::int64_t n, std::int64_t k,
    std::int64_t groups) {
  if (!detail::require_block_scales(scaling != BlockScaling::None, options.scale_a, options.scale_b)) return {};
  const std::int64_t k_blocks = (k + 127) / 128, n_blocks = (n + 127) / 128;
  return {detail::check_block_scales(*options.scale_a, "scale_a", 1, total_m, k_blocks, k_blocks, 1, 4,
                                     "total_M x ceil(K/128), row-major: strides (ceil(K/128), 1)"),
          detail::check_block_scales(*options.scale_b, "scale_b", groups, n_blocks, k_blocks, k_blocks, 1, 4,
                                     "G x ceil(N/128) x ceil(K/128), row-major")};
}

// run_contiguous's kernels for an N and the rows an expert gets on average: its configuration (index into
// choices.tiles) and, where the GPU picks between two, the other one's (0 for none).
struct ContiguousPick {
  std::size_t tile = 0, rival = 0;
};
ContiguousPick contiguous_pick(const selection::KernelChoices& choices, std::int64_t n, std::int64_t rows_per_group) {
  const std::size_t tile = catalog::choose_contiguous_tile(choices.base, choices.tiles, n, rows_per_group);
  return {tile, catalog::choose_contiguous_rival(choices.tiles, tile, n, rows_per_group)};
}

}  // namespace

// The checked groups and the widest vector width every non-empty group allows, per operand.
struct GroupedGemm::Groups {
  std::vector<runtime::GroupOperands> operands;
  int alignment_a = 0, alignment_b = 0, alignment_c = 0;
  bool any_work = false;  // some group has m, n and k above 0
};

GroupedGemm::GroupedGemm(const GemmOptions& options)
    : Plan(options, catalog::Operation::GroupedGemm), metadata_(std::make_unique<runtime::PinnedMetadata>()) {}

GroupedGemm::~GroupedGemm() = default;
GroupedGemm::GroupedGemm(GroupedGemm&&) noexcept = default;
GroupedGemm& GroupedGemm::operator=(GroupedGemm&&) noexcept = default;

BlockScaling GroupedGemm::block_scaling() const {
  return core_->config.block_scaling;
}

void GroupedGemm::set_block_scaling(BlockScaling scaling) {
  change_checked(core_->config.block_scaling, scaling);
}

GroupedGemm::Groups GroupedGemm::check_groups(std::span<const TensorView> A, std::span<const TensorView> B,
                                              std::span<const TensorView> C, std::span<const TensorView> D,
                                              double beta) {
  const std::size_t count = A.size();
  if (B.size() != count || D.size() != count || (!C.empty() && C.size() != count)) {
    throw TensorError("Lengths of A, B, C, and D lists must be equal: got " + std::to_string(A.size()) + ", " +
                      std::to_string(B.size()) + ", " + std::to_string(C.size()) + " and " + std::to_string(D.size()) +
                      " (C may also be empty when beta is 0).");
  }
  if (count == 0) throw TensorError("Tensors A, B and D: the lists are empty; pass at least one group.");
  if (C.empty() && beta != 0.0) {
    throw TensorError("Tensors C: beta is " + std::to_string(beta) +
                      " but no C list was given; pass C or set beta = 0.");
  }
  const selection::RunCache& cache = core_->cache();
  Groups groups;
  groups.alignment_a = cache.alignments_a.front();
  groups.alignment_b = cache.alignments_b.front();
  groups.alignment_c = cache.alignments_c.front();
  std::size_t index_a = 0, index_b = 0, index_c = 0;  // the narrowest vector any group needs, as candidate indices
  groups.operands.resize(count);
  for (std::size_t g = 0; g < count; ++g) {
    const std::string a_name = group_name("A", g), b_name = group_name("B", g), d_name = group_name("D", g);
    const detail::MatrixOperand a =
        detail::check_operand(A[g], a_name.c_str(), core_->config.types.a, core_->config.types.layout_a);
    const detail::MatrixOperand b =
        detail::check_operand(B[g], b_name.c_str(), core_->config.types.b, core_->config.types.layout_b);
    const detail::MatrixOperand d =
        detail::check_operand(D[g], d_name.c_str(), core_->config.types.d, core_->config.types.layout_c);
    require_matrix(a, a_name);
    require_matrix(b, b_name);
    require_matrix(d, d_name);
    if (a.cols != b.rows) {
      throw TensorError("Tensors " + a_name + " and " + b_name + ": A is " + dims(a) + " (M x K) but B is " + dims(b) +
                        " (K x N); their K extents must agree.");
    }
    if (d.rows != a.rows || d.cols != b.cols) {
      throw TensorError("Tensor " + d_name + " is " + dims(d) + " but " + a_name + " @ " + b_name + " is " +
                        std::to_string(a.rows) + " x " + std::to_string(b.cols) + " (M x N).");
    }
    require_extent(std::max({a.rows, a.cols, b.cols}), a_name + " and " + b_name);
    runtime::GroupOperands& operands = groups.operands[g];
    operands.m = a.rows;
    operands.n = b.cols;
    operands.k = a.cols;
    operands.a = detail::launch_operand(a, A[g], core_->config.types.a);
    operands.b = detail::launch_operand(b, B[g], core_->config.types.b);
    operands.d = detail::launch_operand(d, D[g], core_->config.types.d);
    std::optional<detail::MatrixOperand> c;
    if (!C.empty()) {
      const std::string c_name = group_name("C", g);
      c = detail::check_operand(C[g], c_name.c_str(), core_->config.types.c, core_->config.types.layout_c);
      require_matrix(*c, c_name);
      if (c->rows != d.rows || c->cols != d.cols) {
        throw TensorError("Tensor " + c_name + " is " + dims(*c) + " but " + d_name + " is " + dims(d) +
                          "; C and D of a group have the same shape.");
      }
      operands.c = detail::launch_operand(*c, C[g], core_->config.types.c);
    }
    if (operands.m == 0 || operands.n == 0 || operands.k == 0) continue;  // never read: any alignment will do
    groups.any_work = true;
    index_a = std::max(index_a, fitting_index(a, core_->config.types.a, cache.alignments_a, a_name, alignment_hint()));
    index_b = std::max(index_b, fitting_index(b, core_->config.types.b, cache.alignments_b, b_name, alignment_hint()));
    index_c = std::max(index_c, output_alignment_index(d, c ? &*c : nullptr, d_name, group_name("C", g)));
  }
  groups.alignment_a = cache.alignments_a[index_a];
  groups.alignment_b = cache.alignments_b[index_b];
  groups.alignment_c = cache.alignments_c[index_c];
  return groups;
}

const char* GroupedGemm::alignment_hint() const {
  return core_->cache().kernel_cc >= 90 ? ", or use kernel_cc = 80 (CUTLASS 2.x grouped kernels take narrower vectors)"
                                        : "";
}

std::size_t GroupedGemm::output_alignment_index(const detail::MatrixOperand& d, const detail::MatrixOperand* c,
                                                const std::string& d_name, const std::string& c_name) const {
  const std::vector<int>& candidates = core_->cache().alignments_c;
  // D is stored in vectors of as many bytes as C's: C's candidates, counted in D's elements.
  std::vector<int> d_vectors;
  for (int a_c : candidates) d_vectors.push_back(output_alignment(core_->config.types.c, core_->config.types.d, a_c));
  std::size_t index = fitting_index(d, core_->config.types.d, d_vectors, d_name, alignment_hint());
  if (c) index = std::max(index, fitting_index(*c, core_->config.types.c, candidates, c_name, alignment_hint()));
  return index;
}

selection::KernelChoices& GroupedGemm::choices_for_alignments(int alignment_a, int alignment_b, int alignment_c) {
  selection::ProblemKey p;
  p.alignment_a = alignment_a;
  p.alignment_b = alignment_b;
  p.alignment_c = alignment_c;
  return core_->choices_for(p);
}

// Configuration 0 of the alignments' choices: the set tile, else the family's default (no per-shape choice).
KernelModule& GroupedGemm::module_for_alignments(int alignment_a, int alignment_b, int alignment_c) {
  return core_->module_for(choices_for_alignments(alignment_a, alignment_b, alignment_c), 0, /*wait=*/true);
}

KernelSpec GroupedGemm::spec_for_alignments(int alignment_a, int alignment_b, int alignment_c) {
  return choices_for_alignments(alignment_a, alignment_b, alignment_c).spec(0);
}

KernelSpec GroupedGemm::spec_for(std::span<const TensorView> A, std::span<const TensorView> B,
                                 std::span<const TensorView> C, std::span<const TensorView> D, double beta) {
  const Groups groups = check_groups(A, B, C, D, beta);
  return spec_for_alignments(groups.alignment_a, groups.alignment_b, groups.alignment_c);
}

void GroupedGemm::run(std::span<const TensorView> A, std::span<const TensorView> B, std::span<const TensorView> C,
                      std::span<const TensorView> D, double alpha, double beta, const RunOptions& options) {
  if (core_->config.block_scaling != BlockScaling::None || options.scale_a != nullptr || options.scale_b != nullptr) {
    throw ConfigError(
        "Block-scaled grouped GEMMs run in the MoE form, whose scales stack like A's rows: call run_contiguous with "
        "RunOptions::scale_a and scale_b (or set_block_scaling(BlockScaling::None) for the list form).");
  }
  const Groups groups = check_groups(A, B, C, D, beta);
  const int device = current_device();
  for (std::span<const TensorView> list : {A, B, C, D}) {
    for (std::size_t g = 0; g < list.size(); ++g) {
      const TensorView& t = list[g];
      if (t.on_device() && t.device != device) {
        const char* operand = list.data() == A.data()   ? "A"
                              : list.data() == B.data() ? "B"
                              : list.data() == C.data() ? "C"
                                                        : "D";
        throw TensorError("Tensor " + group_name(operand, g) + " lives on CUDA device " + std::to_string(t.device) +
                          " but the current device is " + std::to_string(device) +
                          "; call cudaSetDevice first or move the tensor.");
      }
    }
  }
  if (!groups.any_work) return;  // every group is empty: nothing to compute, nothing to write
  KernelModule& module = module_for_alignments(groups.alignment_a, groups.alignment_b, groups.alignment_c);
  if (options.print_module) {
    std::fputs(render(spec_for_alignments(groups.alignment_a, groups.alignment_b, groups.alignment_c)).text.c_str(),
               stdout);
  }
  const runtime::GroupedCall call{alpha, beta, core_->config.activation_parameter, device,
                                  device_info(device).sm_count};
  runtime::launch_grouped(module, groups.operands, call, *metadata_, options.stream, options.sync);
}

// The MoE form's operands, checked against the plan (device residency and block scales apart), and the widest
// vector each allows.
struct GroupedGemm::Contiguous {
  detail::MatrixOperand a, b, d;
  std::optional<detail::MatrixOperand> c;
  std::int64_t groups = 0;
  int alignment_a = 0, alignment_b = 0, alignment_c = 0;
  // What catalog::choose_contiguous_tile weighs against N: the rows an expert gets on average.
  std::int64_t rows_per_group() const { return a.rows / std::max<std::int64_t>(groups, 1); }
};

GroupedGemm::Contiguous GroupedGemm::check_contiguous(const TensorView& A, const TensorView& B, const TensorView* C,
                                                      const TensorView& D, const TensorView& offsets,
                                                      double beta) const {
  if (core_->config.types.layout_a != Layout::RowMajor || core_->config.types.layout_c != Layout::RowMajor) {
    throw ConfigError(
        "run_contiguous stacks the groups' rows in A, C and D: the plan needs layout_A and layout_C "
        "RowMajor (B may be either: ColumnMajor reads transposed weights [G, N, K]).");
  }
  if (C == nullptr && beta != 0.0) {
    throw TensorError("Tensor C: beta is " + std::to_string(beta) + " but no C was given; pass C or set beta = 0.");
  }
  Contiguous out;
  out.a = detail::check_operand(A, "A", core_->config.types.a, core_->config.types.layout_a);
  out.b = detail::check_operand(B, "B", core_->config.types.b, core_->config.types.layout_b);
  out.d = detail::check_operand(D, "D", core_->config.types.d, core_->config.types.layout_c);
  const detail::MatrixOperand &a = out.a, &b = out.b, &d = out.d;
  require_matrix(a, "A");
  require_matrix(d, "D");
  if (B.rank != 3) {
    throw TensorError(
        "Tensor B: run_contiguous takes one k x n matrix per group, [G, K, N] (or a transposed [G, N, K] "
        "weight viewed as [G, K, N]); received shape " +
        B.shape_string() + ".");
  }
  out.groups = b.batch;
  if (a.cols != b.rows || d.rows != a.rows || d.cols != b.cols) {
    throw TensorError("Tensors A, B and D: A is " + dims(a) + " (total M x K), each group of B is " + dims(b) +
                      " (K x N) and D is " + dims(d) + "; they must be [total_M, K], [G, K, N] and [total_M, N].");
  }
  if (C != nullptr) {
    out.c = detail::check_operand(*C, "C", core_->config.types.c, core_->config.types.layout_c);
    require_matrix(*out.c, "C");
    if (out.c->rows != d.rows || out.c->cols != d.cols) {
      throw TensorError("Tensor C is " + dims(*out.c) + " but D is " + dims(d) + "; C and D have the same shape.");
    }
  }
  if (offsets.dtype != DataType::s32 || offsets.rank != 1 || offsets.shape[0] != out.groups ||
      (out.groups > 1 && offsets.strides[0] != 1)) {
    throw TensorError("Tensor offsets: expected a contiguous int32 vector of " + std::to_string(out.groups) +
                      " cumulative row ends (one per group of B); received " + std::string(to_string(offsets.dtype)) +
                      " of shape " + offsets.shape_string() + ".");
  }
  require_extent(std::max({a.rows, a.cols, b.cols, out.groups}), "A, B and D");
  const selection::RunCache& cache = core_->cache();
  out.alignment_a =
      cache.alignments_a[fitting_index(a, core_->config.types.a, cache.alignments_a, "A", alignment_hint())];
  out.alignment_b =
      cache.alignments_b[fitting_index(b, core_->config.types.b, cache.alignments_b, "B", alignment_hint())];
  out.alignment_c = cache.alignments_c[output_alignment_index(d, out.c ? &*out.c : nullptr, "D", "C")];
  return out;
}

KernelSpec GroupedGemm::spec_for_contiguous(const TensorView& A, const TensorView& B, const TensorView* C,
                                            const TensorView& D, const TensorView& offsets, double beta) {
  const Contiguous x = check_contiguous(A, B, C, D, offsets, beta);
  selection::KernelChoices& choices = choices_for_alignments(x.alignment_a, x.alignment_b, x.alignment_c);
  return choices.spec(catalog::choose_contiguous_tile(choices.base, choices.tiles, x.b.cols, x.rows_per_group()));
}

std::optional<KernelSpec> GroupedGemm::rival_for_contiguous(const TensorView& A, const TensorView& B,
                                                            const TensorView* C, const TensorView& D,
                                                            const TensorView& offsets, double beta) {
  const Contiguous x = check_contiguous(A, B, C, D, offsets, beta);
  selection::KernelChoices& choices = choices_for_alignments(x.alignment_a, x.alignment_b, x.alignment_c);
  const ContiguousPick pick = contiguous_pick(choices, x.b.cols, x.rows_per_group());
  if (pick.rival == 0) return std::nullopt;
  return choices.spec(pick.rival);
}

std::vector<KernelSpec> GroupedGemm::run_time_kernels() const {
  const KernelSpec own = spec();
  std::vector<KernelSpec> out = {own};
  const std::vector<TileDescription> tiles = core_->valid_tiles(core_->base_spec());  // run_contiguous's choices
  // Both wide tiles, over experts of 256 rows: an N that is a multiple of 256 (256), and one that is not (128).
  for (const std::int64_t n : {256, 128}) {
    if (const std::size_t wide = catalog::choose_contiguous_tile(own, tiles, n, 256); wide != 0) {
      out.push_back(own);
      out.back().tile = tiles[wide];
    }
  }
  return out;
}

void GroupedGemm::run_contiguous(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                                 const TensorView& offsets, double alpha, double beta, const RunOptions& options) {
  const Contiguous x = check_contiguous(A, B, C, D, offsets, beta);
  const detail::MatrixOperand &a = x.a, &b = x.b, &d = x.d;
  const auto [scale_a, scale_b] =
      check_contiguous_scales(core_->config.block_scaling, options, a.rows, b.cols, a.cols, x.groups);
  const int device = current_device();
  for (const auto& [tensor, name] : {std::pair{&A, "A"},
                                     {&B, "B"},
                                     {&D, "D"},
                                     {C, "C"},
                                     {&offsets, "offsets"},
                                     {options.scale_a, "scale_a"},
                                     {options.scale_b, "scale_b"}}) {
    if (tensor == nullptr) continue;
    if (!tensor->on_device() || tensor->device != device) {
      throw TensorError(std::string("Tensor ") + name + ": run_contiguous takes tensors on the current CUDA device (" +
                        std::to_string(device) + "), where the GPU reads the group sizes; move it there.");
    }
  }
  if (a.rows == 0 || b.cols == 0 || a.cols == 0 || x.groups == 0) return;  // nothing to compute, nothing to write

  selection::KernelChoices& choices = choices_for_alignments(x.alignment_a, x.alignment_b, x.alignment_c);
  const ContiguousPick pick = contiguous_pick(choices, b.cols, x.rows_per_group());
  KernelModule& module = core_->module_for(choices, pick.tile, /*wait=*/true);
  KernelModule* rival_module = pick.rival != 0 ? &core_->module_for(choices, pick.rival, /*wait=*/true) : nullptr;
  if (options.print_module) std::fputs(render(choices.spec(pick.tile)).text.c_str(), stdout);
  gk_grouped_contiguous problem{};
  problem.total_m = static_cast<std::int32_t>(a.rows);
  problem.n = static_cast<std::int32_t>(b.cols);
  problem.k = static_cast<std::int32_t>(a.cols);
  problem.A = a.data;
  problem.B = b.data;
  problem.C = x.c ? x.c->data : nullptr;
  problem.D = d.data;
  problem.offsets = static_cast<const std::int32_t*>(offsets.data);
  problem.lda = a.ld;
  problem.ldb = b.ld;
  problem.ldc = x.c ? x.c->ld : d.ld;
  problem.ldd = d.ld;
  problem.batch_stride_b = x.groups > 1 ? b.batch_stride : 0;
  problem.scale_a = scale_a ? static_cast<const float*>(scale_a->data) : nullptr;
  problem.scale_b = scale_b ? static_cast<const float*>(scale_b->data) : nullptr;
  const runtime::GroupedCall call{alpha, beta, core_->config.activation_parameter, device,
                                  device_info(device).sm_count};
  if (rival_module != nullptr) {
    // Both launched; the GPU gives the work to the one of fewer waves and empty groups to the other.
    problem.transposed_rival = 2;
    runtime::launch_grouped_contiguous(*rival_module, problem, static_cast<int>(x.groups), call, options.stream,
                                       /*sync=*/false);
    problem.transposed_rival = 1;
  }
  runtime::launch_grouped_contiguous(module, problem, static_cast<int>(x.groups), call, options.stream, options.sync);
}

}  // namespace gemmkit
