// tests/support/gpu_cases.hpp: the plans and shapes the gpu tier runs, shared with the prebuild tool so the
// GPU machine can compile every kernel in parallel before the tests start.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "catalog/catalog.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "support/conv_cases.hpp"
#include "support/fp8_blockwise_cases.hpp"
#include "support/front_door_cases.hpp"
#include "verify/shape_suite.hpp"

namespace gemmkit::gpu_cases {

struct TypeCase {
  const char* name;
  DataType ab, cd, accumulator;
};

inline std::vector<TypeCase> type_cases() {
  return {{"f16", DataType::f16, DataType::f16, DataType::f32},
          {"bf16", DataType::bf16, DataType::bf16, DataType::f32},
          {"f32", DataType::f32, DataType::f32, DataType::f32},
          {"f64", DataType::f64, DataType::f64, DataType::f64},
          {"s8", DataType::s8, DataType::s32, DataType::s32}};
}

struct LayoutCase {
  Layout a, b, c;
  std::string name() const { return std::string(1, layout_letter(a)) + layout_letter(b) + layout_letter(c); }
};

inline std::vector<LayoutCase> layout_cases() {
  std::vector<LayoutCase> out;
  for (Layout a : {Layout::RowMajor, Layout::ColumnMajor})
    for (Layout b : {Layout::RowMajor, Layout::ColumnMajor})
      for (Layout c : {Layout::RowMajor, Layout::ColumnMajor}) out.push_back({a, b, c});
  return out;
}

// f16 and bf16 plans on kOddShape, whose odd leading dimensions run on the 2.x two-stage tensor-op kernels: f16 with
// A and B row-major, column-major and mixed, C both ways; bf16 row-major.
inline std::vector<std::pair<TypeCase, LayoutCase>> odd_leading_dimension_cases() {
  constexpr Layout R = Layout::RowMajor, C = Layout::ColumnMajor;
  const TypeCase f16 = type_cases()[0], bf16 = type_cases()[1];
  return {{f16, {R, R, R}}, {f16, {C, C, C}}, {f16, {R, C, R}}, {bf16, {R, R, R}}};
}

struct Shape {
  long m, n, k;
};

// Not multiples of any tile (K = 272 is 4 x 64 + 16), but of 16 elements, so every alignment stays wide.
inline constexpr Shape kMatrixShape{200, 136, 272};
// Odd everything: only alignment-1 kernels (f32 cp.async on SM90, f64, SIMT) take it.
inline constexpr Shape kOddShape{127, 97, 131};
// Odd too, a GFLOP in under one wave of two-stage tiles: run() takes the Stream-K kernel of its tile.
inline constexpr Shape kOddOneWaveShape{513, 1001, 1025};

inline GemmOptions options(const TypeCase& t, const LayoutCase& l, int cc) {
  GemmOptions o;
  o.element_a = o.element_b = t.ab;
  o.element_c = o.element_d = t.cd;
  o.element_accumulator = t.accumulator;
  o.layout_a = l.a;
  o.layout_b = l.b;
  o.layout_c = l.c;
  o.cc = cc;
  return o;
}

// Views with this shape at 256-byte aligned fake addresses, for asking a plan which kernel run() would use.
inline TensorView probe_view(DataType dtype, long rows, long cols, Layout layout) {
  alignas(256) static char base[256];
  return TensorView::on_gpu(base, dtype, {rows, cols}, layout, 0);
}

inline KernelSpec spec_for_shape(Gemm& plan, const Shape& s) {
  const auto A = probe_view(plan.element_a(), s.m, s.k, plan.layout_a());
  const auto B = probe_view(plan.element_b(), s.k, s.n, plan.layout_b());
  const auto D = probe_view(plan.element_d(), s.m, s.n, plan.layout_c());
  if (plan.element_c() == DataType::void_t) return plan.spec_for(A, B, nullptr, D);  // a plan without C
  const auto C = probe_view(plan.element_c(), s.m, s.n, plan.layout_c());
  return plan.spec_for(A, B, C, D, 1.0);
}

inline const std::vector<Activation>& all_activations() {
  static const std::vector<Activation> kAll = {Activation::Identity, Activation::ReLU,     Activation::LeakyReLU,
                                               Activation::GELU,     Activation::GELUTanh, Activation::HardSwish,
                                               Activation::Sigmoid,  Activation::SiLU,     Activation::Tanh};
  return kAll;
}

// The epilogue tier: each activation on the 3.x (kernel_cc 90) and 2.x (kernel_cc 80) families.
inline GemmOptions epilogue_options(DataType type, int cc, int kernel_cc) {
  const TypeCase t{"", type, type, type == DataType::f16 || type == DataType::bf16 ? DataType::f32 : type};
  GemmOptions o = options(t, {Layout::RowMajor, Layout::RowMajor, Layout::RowMajor}, cc);
  o.kernel_cc = kernel_cc;
  return o;
}

// f16 with a bias: 2.x kernels broadcast along D's contiguous dimension, so a per-row bias takes a column-major D.
inline GemmOptions bias_options(BiasMode bias, int cc, int kernel_cc) {
  GemmOptions o = epilogue_options(DataType::f16, cc, kernel_cc);
  if (kernel_cc < 90 && bias == BiasMode::PerRow) o.layout_c = Layout::ColumnMajor;
  return o;
}

inline const std::vector<DataType>& epilogue_types() {
  static const std::vector<DataType> kTypes = {DataType::f16, DataType::bf16, DataType::f32};
  return kTypes;
}

// Sets the plan's first Lean configuration (gemmkit's lean epilogue, which takes the epilogue at launch).
inline void use_lean_epilogue(Gemm& plan) {
  for (const TileDescription& tile : plan.tile_descriptions()) {
    if (tile.epilogue_schedule == EpilogueSchedule::Lean) {
      plan.set_tile_description(tile);
      return;
    }
  }
  throw ConfigError("the plan lists no Lean configuration");
}

// The lean epilogue's gpu cases: its two walks (alpha alone on whole tiles; everything else, and tiles that stick
// out of the problem).
inline constexpr Shape kWholeTilesShape{256, 512, 128};
inline const std::vector<DataType>& lean_types() {
  static const std::vector<DataType> kTypes = {DataType::f16, DataType::bf16};
  return kTypes;
}

// The SM90 kernel that takes its activation at launch, for one bias mode: the one tests/gpu/epilogue_gpu_test.cpp
// runs every activation on.
inline KernelSpec activation_at_launch_spec(DataType type, BiasMode bias, int cc) {
  Gemm plan(epilogue_options(type, cc, 90));
  plan.set_activation_at_launch(true);
  plan.set_activation(Activation::ReLU);
  plan.set_bias(bias);
  return spec_for_shape(plan, kMatrixShape);
}

// The SM90 plan whose kernel compiles `activation` in: what the at-launch kernel's output is compared with.
inline Gemm compiled_in_plan(DataType type, Activation activation, int cc, double slope = 0.5) {
  Gemm plan(epilogue_options(type, cc, 90));
  plan.set_activation_at_launch(false);
  plan.set_activation(activation, slope);
  return plan;
}

inline std::vector<int> kernel_generations(int cc) {
  return cc >= 90 ? std::vector<int>{90, 80} : std::vector<int>{80};
}

// One configuration of the configuration tier: a plan (kernel generation, opclass, element) and a tile or swizzle.
struct ConfigCase {
  std::string label;
  int kernel_cc;
  OpClass opclass;
  DataType type;
  std::optional<TileDescription> tile;
  Swizzle swizzle = Swizzle::Identity1;
};

inline Gemm config_plan(const ConfigCase& c, int cc) {
  Gemm plan(epilogue_options(c.type, cc, c.kernel_cc));
  plan.set_opclass(c.opclass);
  if (c.tile) plan.set_tile_description(*c.tile);
  if (c.swizzle != Swizzle::Identity1) plan.set_swizzling_functor(c.swizzle);
  return plan;
}

// Every SM90 f16 configuration (all schedules and schedulers), every other SM80-family f16 tile/stage count,
// SIMT tiles, and each 2.x swizzle including Stream-K.
inline std::vector<ConfigCase> config_cases(int cc) {
  std::vector<ConfigCase> out;
  auto add_tiles = [&](int kernel_cc, OpClass opclass, DataType type, int step, const std::string& prefix) {
    Gemm plan(epilogue_options(type, cc, kernel_cc));
    plan.set_opclass(opclass);
    const auto tiles = plan.tile_descriptions();
    for (std::size_t i = 0; i < tiles.size(); i += step) {
      out.push_back({prefix + std::to_string(i), kernel_cc, opclass, type, tiles[i]});
    }
  };
  if (cc >= 90) add_tiles(90, OpClass::TensorOp, DataType::f16, 1, "sm90_f16_tile");
  add_tiles(80, OpClass::TensorOp, DataType::f16, 2, "sm80_f16_tile");
  add_tiles(80, OpClass::Simt, DataType::f32, 3, "simt_f32_tile");
  for (Swizzle s : {Swizzle::Identity2, Swizzle::Identity4, Swizzle::Identity8, Swizzle::StreamK}) {
    out.push_back({"sm80_f16_" + std::string(to_string(s)), 80, OpClass::TensorOp, DataType::f16, std::nullopt, s});
  }
  return out;
}

// The front-door fuzzer's plans (tests/gpu/fuzz_gpu_test.cpp): f16 tensor-op kernels in two layouts, one with a
// fused bias and activation, and f32 SIMT. Its problems stay under the shape-choice threshold and its operands are
// aligned to the widest vector or not at all, so these four kernels are all it runs.
inline std::vector<fuzz::PlanDraw> fuzz_plans(int cc) {
  fuzz::PlanDraw f16;
  f16.cc = cc;
  fuzz::PlanDraw f16_tn = f16;
  f16_tn.layout_b = Layout::ColumnMajor;
  fuzz::PlanDraw simt = f16;
  simt.a = simt.b = simt.c = simt.d = DataType::f32;
  simt.opclass = OpClass::Simt;
  fuzz::PlanDraw bias = f16;
  bias.kernel_cc = cc >= 90 ? 90 : 80;
  bias.activation = Activation::ReLU;
  bias.bias = BiasMode::PerColumn;
  return {f16, f16_tn, simt, bias};
}
inline constexpr std::uint64_t kFuzzSeed = 20261130;
inline constexpr int kFuzzCases = 1200;

// One grouped plan of the gpu tier (tests/gpu/grouped_gpu_test.cpp).
struct GroupedCase {
  std::string label;
  GemmOptions options;
  Activation activation = Activation::Identity;
};

inline GroupedGemm grouped_plan(const GroupedCase& c) {
  GroupedGemm plan(c.options);
  plan.set_activation(c.activation);
  return plan;
}

// f16 in all 8 layouts and each activation on the default (SM90) family; bf16 and tf32; the SM80 family.
inline std::vector<GroupedCase> grouped_cases(int cc) {
  std::vector<GroupedCase> out;
  const int newest = cc >= 90 ? 90 : 80;
  for (const auto& l : layout_cases()) {
    GemmOptions o = options(type_cases()[0], l, cc);
    o.kernel_cc = newest;
    out.push_back({"f16_" + l.name() + "_sm" + std::to_string(newest), o});
  }
  for (Activation activation : all_activations()) {
    if (activation == Activation::Identity) continue;
    GemmOptions o = epilogue_options(DataType::f16, cc, newest);
    out.push_back({"f16_" + std::string(to_string(activation)) + "_sm" + std::to_string(newest), o, activation});
  }
  GemmOptions bf16 = epilogue_options(DataType::bf16, cc, newest);
  out.push_back({"bf16_ttt_sm" + std::to_string(newest), bf16});
  GemmOptions tf32 = epilogue_options(DataType::f32, cc, newest);
  tf32.layout_b = Layout::ColumnMajor;  // tf32 row/row takes the SM80 family on SM90
  out.push_back({"tf32_tnt_sm" + std::to_string(newest), tf32});
  if (cc >= 90) {
    out.push_back({"f16_ttt_sm80", epilogue_options(DataType::f16, cc, 80)});
    out.push_back({"bf16_ttt_sm80", epilogue_options(DataType::bf16, cc, 80)});
  }
  return out;
}

// The MoE form's plans: bf16 with transposed ([G, N, K]) weights on each family, and row-major weights; on SM90 also
// e4m3 activations and weights (FP8 reads B transposed only) into bf16.
inline std::vector<GroupedCase> contiguous_cases(int cc) {
  std::vector<GroupedCase> out;
  for (int kernel_cc : kernel_generations(cc)) {
    GemmOptions o = epilogue_options(DataType::bf16, cc, kernel_cc);
    o.layout_b = Layout::ColumnMajor;
    out.push_back({"bf16_weights_nk_sm" + std::to_string(kernel_cc), o});
  }
  out.push_back({"bf16_weights_kn", epilogue_options(DataType::bf16, cc, cc >= 90 ? 90 : 80)});
  if (cc >= 90 && cc < 100) out.push_back({"e4m3_weights_nk_sm90", testing::fp8_tn(cc)});
  return out;
}

// The MoE form with block-scaled FP8 (tests/gpu/grouped_gpu_test.cpp): the default cooperative tile, and the 64 x 128
// ping-pong one.
inline std::vector<GroupedGemm> blockwise_moe_plans(int cc) {
  std::vector<GroupedGemm> out;
  for (bool pingpong : {false, true}) {
    GroupedGemm plan(testing::fp8_tn(cc));
    plan.set_block_scaling(BlockScaling::Blockwise);
    for (const TileDescription& td : plan.tile_descriptions()) {
      if (pingpong && td.kernel_schedule == KernelSchedule::TmaWarpSpecializedPingpong &&
          td.cluster_shape == Shape3{1, 1, 1}) {
        plan.set_tile_description(td);
        break;
      }
    }
    out.push_back(std::move(plan));
  }
  return out;
}

// The FP8 tier (tests/gpu/fp8_gpu_test.cpp): SM90 only, A row-major and B column-major (what FP8 WGMMA reads).
struct Fp8Case {
  std::string label;
  DataType a, b, d;
  Layout layout_c = Layout::RowMajor;
};

inline std::vector<Fp8Case> fp8_cases() {
  return {{"e4m3_bf16", DataType::e4m3, DataType::e4m3, DataType::bf16},
          {"e4m3_f16", DataType::e4m3, DataType::e4m3, DataType::f16},
          {"e4m3_f32", DataType::e4m3, DataType::e4m3, DataType::f32},
          {"e5m2_bf16", DataType::e5m2, DataType::e5m2, DataType::bf16},
          {"e4m3_e5m2_f32_colmajor_d", DataType::e4m3, DataType::e5m2, DataType::f32, Layout::ColumnMajor}};
}

inline GemmOptions fp8_options(const Fp8Case& c, int cc) {
  GemmOptions o = testing::fp8_tn(cc, c.a, c.d);
  o.element_b = c.b;
  o.layout_c = c.layout_c;
  return o;
}

// FP8 plans with scale vectors (e4m3 -> bf16 unless said otherwise), some with a bias and an activation too.
struct Fp8ScaleCase {
  std::string label;
  ScaleMode scale;
  BiasMode bias = BiasMode::None;
  Activation activation = Activation::Identity;
  DataType d = DataType::bf16;
  bool lean = false;     // on gemmkit's lean epilogue (the scales, bias and activation taken at launch)
  bool overlap = false;  // on gemmkit's FP8 mainloop with the promotion overlapped (its 128 x 192 tile, 2x1 cluster)
  bool no_c = false;     // a plan without C (element_C void), run with beta = 0
};

inline std::vector<Fp8ScaleCase> fp8_scale_cases() {
  return {
      {"rows", ScaleMode::PerRow},
      {"columns", ScaleMode::PerColumn},
      {"rows_and_columns", ScaleMode::RowAndColumn},
      {"rows_and_columns_f32", ScaleMode::RowAndColumn, BiasMode::None, Activation::Identity, DataType::f32},
      {"rows_and_columns_bias_relu", ScaleMode::RowAndColumn, BiasMode::PerColumn, Activation::ReLU},
      {"lean_rows_and_columns_f32", ScaleMode::RowAndColumn, BiasMode::None, Activation::Identity, DataType::f32, true},
      {"lean_rows_bias_relu", ScaleMode::PerRow, BiasMode::PerRow, Activation::ReLU, DataType::bf16, true},
      {"lean_rows_and_columns_bias_relu", ScaleMode::RowAndColumn, BiasMode::PerColumn, Activation::ReLU,
       DataType::bf16, true},
      {"overlap_rows_and_columns_bias_relu", ScaleMode::RowAndColumn, BiasMode::PerColumn, Activation::ReLU,
       DataType::bf16, false, true},
      {"overlap_rows_bias_relu_f16", ScaleMode::PerRow, BiasMode::PerRow, Activation::ReLU, DataType::f16, false, true},
      {"no_c_rows_and_columns_bias_relu", ScaleMode::RowAndColumn, BiasMode::PerColumn, Activation::ReLU,
       DataType::bf16, false, false, true}};
}

// The FP8 plan's configurations on gemmkit's mainloops with the promotion overlapped
// (TmaWarpSpecialized{Cooperative,Pingpong}{FP8Overlap,FP8AlternatingPromotion}), in listing order.
inline std::vector<TileDescription> fp8_overlap_tiles(const Gemm& plan) {
  std::vector<TileDescription> out;
  for (const TileDescription& tile : plan.tile_descriptions()) {
    switch (tile.kernel_schedule) {
      case KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap:
      case KernelSchedule::TmaWarpSpecializedPingpongFP8Overlap:
      case KernelSchedule::TmaWarpSpecializedCooperativeFP8AlternatingPromotion:
      case KernelSchedule::TmaWarpSpecializedPingpongFP8AlternatingPromotion: out.push_back(tile); break;
      default: break;
    }
  }
  return out;
}

// Each of them, on e4m3 operands and an f32 D (exact for the long K of its tests).
struct Fp8OverlapCase {
  std::string label;
  TileDescription tile;
};

inline std::vector<Fp8OverlapCase> fp8_overlap_cases(int cc) {
  std::vector<Fp8OverlapCase> out;
  const Gemm plan(testing::fp8_tn(cc, DataType::e4m3, DataType::f32));
  for (const TileDescription& tile : fp8_overlap_tiles(plan)) {
    out.push_back({std::string(to_string(tile.kernel_schedule)) + "_cta" + shape_text(tile.cta_tile()) + "_cluster" +
                       shape_text(tile.cluster_shape),
                   tile});
  }
  return out;
}

// Few rows over a long K, where the default FP8 plan splits K in parallel on gemmkit's alternating loop.
inline constexpr Shape kFp8ParallelSplitKShape{128, 4096, 4096};

inline Gemm fp8_overlap_plan(const Fp8OverlapCase& c, int cc) {
  Gemm plan(testing::fp8_tn(cc, DataType::e4m3, DataType::f32));
  plan.set_tile_description(c.tile);
  return plan;
}

inline Gemm fp8_scale_plan(const Fp8ScaleCase& c, int cc) {
  GemmOptions options = fp8_options({c.label, DataType::e4m3, DataType::e4m3, c.d}, cc);
  if (c.no_c) options.element_c = DataType::void_t;
  Gemm plan(options);
  plan.set_scale(c.scale);
  plan.set_bias(c.bias);
  plan.set_activation(c.activation);
  if (c.lean) use_lean_epilogue(plan);
  if (c.overlap) plan.set_tile_description(fp8_overlap_tiles(plan).front());
  return plan;
}

// The tuning tier (tests/gpu/tuning_gpu_test.cpp): an f16 plan tuned on one problem among this many candidates.
inline constexpr Shape kTuneShape{1024, 1024, 1024};  // not a parallel split-K shape (tune() refuses those)
inline constexpr int kTuneCandidates = 4;

inline GemmOptions tuning_options(int cc) {
  return epilogue_options(DataType::f16, cc, 90);
}

inline std::vector<KernelSpec> tuning_specs(int cc) {
  Gemm plan(tuning_options(cc));
  const auto A = probe_view(DataType::f16, kTuneShape.m, kTuneShape.k, Layout::RowMajor);
  const auto B = probe_view(DataType::f16, kTuneShape.k, kTuneShape.n, Layout::RowMajor);
  const auto D = probe_view(DataType::f16, kTuneShape.m, kTuneShape.n, Layout::RowMajor);
  TuneOptions options;
  options.max_candidates = kTuneCandidates;
  return plan.tune_candidates(A, B, nullptr, D, options);
}

// The kernels the benchmark's suite section runs without a tuning database (f16 and bf16 default plans, the
// heuristic's choice per shape), so the GPU machine can build them in parallel first.
inline std::vector<KernelSpec> suite_specs(int cc) {
  std::vector<KernelSpec> out;
  for (DataType type : {DataType::f16, DataType::bf16}) {
    Gemm plan(epilogue_options(type, cc, 90));
    for (const auto& s : verify::shape_suite()) {
      const auto A = probe_view(type, s.m, s.k, Layout::RowMajor);
      const auto B = probe_view(type, s.k, s.n, Layout::RowMajor);
      const auto D = probe_view(type, s.m, s.n, Layout::RowMajor);
      out.push_back(plan.spec_for(A, B, nullptr, D));
    }
  }
  return out;
}

// tests/gpu/split_k_gpu_test.cpp: forced split-K and decompositions on a ReLU plan (kSplitKShape: K = 37 x 64 + 24, so
// no split count divides its 38 K steps), and the automatic choice on a plain plan for a long K and two decode shapes.
inline constexpr Shape kSplitKShape{256, 384, 2392};
inline const std::vector<Shape>& split_k_auto_shapes() {
  static const std::vector<Shape> kShapes = {{512, 512, 8192}, {16, 4096, 4096}, {16, 14336, 4096}, {128, 4096, 4096}};
  return kShapes;
}
inline Gemm split_k_plan(int cc, Activation activation) {
  Gemm plan(epilogue_options(DataType::f16, cc, 90));
  plan.set_activation(activation);
  return plan;
}
// The same ReLU plan with a per-column bias, on the quick twin (the lean epilogue) of the Stream-K tile that two
// splits of kSplitKShape choose: the stand-in that run() builds first for split-K shapes.
inline Gemm lean_split_k_plan(int cc) {
  Gemm plan = split_k_plan(cc, Activation::ReLU);
  plan.set_bias(BiasMode::PerColumn);
  plan.set_split_k_slices(2);
  const KernelSpec chosen = spec_for_shape(plan, kSplitKShape);
  const std::vector<TileDescription> tiles = plan.tile_descriptions();
  const std::optional<std::size_t> twin = catalog::quick_twin_index(tiles, chosen);
  if (!twin) throw ConfigError("the split-K tile " + chosen.tile.to_string() + " has no quick twin");
  plan.set_tile_description(tiles[*twin]);
  return plan;
}
// Parallel split-K (SM90): run() picks it for this long K over 12 tiles of 64 x 128; in both layouts, with a ReLU or
// leaky_relu (slope 0.25: exact in f16) and a per-row bias.
inline constexpr Shape kParallelSplitKShape{256, 384, 4096};
inline Gemm parallel_split_k_plan(int cc, Activation activation, Layout layout) {
  GemmOptions o = epilogue_options(DataType::f16, cc, 90);
  o.layout_a = o.layout_b = o.layout_c = layout;
  Gemm plan(o);
  plan.set_activation(activation, 0.25);
  plan.set_bias(BiasMode::PerRow);
  return plan;
}
inline const std::vector<Activation>& parallel_split_k_activations() {
  static const std::vector<Activation> kActivations = {Activation::ReLU, Activation::LeakyReLU};
  return kActivations;
}
// Decode shapes, which run() computes transposed on the narrow tile: 64 tiles of the weights' rows (clusters of four)
// at 1, 8 and 16 rows, and 128 (clusters of two); the plan plain, or with a ReLU and a per-column bias.
inline const std::vector<Shape>& decode_shapes() {
  static const std::vector<Shape> kShapes = {{1, 4096, 4096}, {8, 4096, 4096}, {16, 4096, 4096}, {16, 8192, 4096}};
  return kShapes;
}
inline Gemm decode_plan(int cc, bool bias_relu) {
  Gemm plan = split_k_plan(cc, bias_relu ? Activation::ReLU : Activation::Identity);
  if (bias_relu) plan.set_bias(BiasMode::PerColumn);
  return plan;
}
inline std::vector<KernelSpec> split_k_specs(int cc) {
  std::vector<KernelSpec> out;
  for (const Layout layout : {Layout::RowMajor, Layout::ColumnMajor}) {
    for (const Activation activation : parallel_split_k_activations()) {
      Gemm parallel = parallel_split_k_plan(cc, activation, layout);
      out.push_back(spec_for_shape(parallel, kParallelSplitKShape));
    }
  }
  Gemm relu = split_k_plan(cc, Activation::ReLU);
  relu.set_split_k_slices(2);
  out.push_back(spec_for_shape(relu, kSplitKShape));
  Gemm lean = lean_split_k_plan(cc);
  out.push_back(spec_for_shape(lean, kSplitKShape));
  Gemm plain = split_k_plan(cc, Activation::Identity);
  for (const Shape& s : split_k_auto_shapes()) out.push_back(spec_for_shape(plain, s));
  for (const bool bias_relu : {false, true}) {
    Gemm decode = decode_plan(cc, bias_relu);
    for (const Shape& s : decode_shapes()) {
      if (!bias_relu || s.n == decode_shapes().front().n) out.push_back(spec_for_shape(decode, s));
    }
  }
  return out;
}

// Epilogue visitor trees (tests/gpu/visitor_gpu_test.cpp), one kernel each on SM90 and on CUTLASS 2.x f16 plans. Tensor
// names ending in "_batch" hold one tensor per batch; the others are shared by every batch (inputs) or reduce over
// every batch (reductions).
struct VisitorCase {
  const char* name;
  std::int64_t batch;
  epilogue::Epilogue tree;
  bool sm90_only = false;  // scalar reductions, column-major tensors, scale vectors: SM90 kernels only
};

inline void PrintTo(const VisitorCase& c, std::ostream* os) {
  *os << c.name;
}

inline std::vector<VisitorCase> visitor_cases() {
  using namespace epilogue;
  std::vector<VisitorCase> out;
  {
    // The reference's notebook: F used twice (a DAG) and stored.
    Expr F = store(scalar("alpha") * acc() + (scalar("beta") * source() + aux("aux")), "F");
    out.push_back({"notebook", 1, Epilogue(relu(F + 1.0) + column_broadcast("bias") + F)});
  }
  out.push_back({"loads", 3,
                 Epilogue(acc() + source() + aux("aux") + aux("aux_batch", DataType::f32) + row_broadcast("row") +
                          row_broadcast("row_batch", DataType::f32) + column_broadcast("col_batch"))});
  {
    Expr x = acc() * 0.125 + source();
    Expr small = x * 0.01;
    Expr D = multiply_add(relu(x + 1.5), 0.5, 2.5) - maximum(x, 0.0) / 2.0 + minimum(-x, 1.0) + leaky_relu(x, 0.1) +
             sigmoid(small) + tanh(small) + gelu(small) + gelu_tanh(small) + silu(small) + hardswish(small) +
             convert(x * 0.3, DataType::f16);
    out.push_back({"compute", 1, Epilogue(D)});
  }
  {
    Expr F = scalar("alpha") * acc();
    Expr D = column_reduction(row_reduction(F, "row_max", ReduceOp::Max), "column_sum_batch") + source();
    out.push_back({"reductions", 3, Epilogue(D)});
    out.push_back({"scalar_reductions", 3,
                   Epilogue(F + source(),
                            {scalar_reduction(acc(), "acc_max_batch", ReduceOp::Max), scalar_reduction(F, "F_sum")}),
                   true});
  }
  // Trees of the plain form run on the fused kernels of the same settings (activation, bias, scale vectors) where the
  // plan has one: on SM90. A 2.x plan has neither a per-row bias with row-major C nor scale vectors; it runs them on
  // their visitor kernels.
  out.push_back(
      {"plain", 2, Epilogue(gelu(scalar("alpha") * acc() + scalar("beta") * source() + column_broadcast("bias")))});
  out.push_back({"plain_scales", 2,
                 Epilogue(relu(row_broadcast("bias") + 2.0 * (acc() * column_broadcast("rows", DataType::f32) *
                                                              row_broadcast("columns", DataType::f32))))});
  out.push_back({"layouts", 2,
                 Epilogue(acc() + aux("aux_column_major", std::nullopt, Layout::ColumnMajor),
                          {store(acc() * 2.0, "G", DataType::f32, Layout::ColumnMajor)}),
                 true});
  return out;
}

// A plan of SM90 (kernel_cc 90) or CUTLASS 2.x (80) kernels with the case's tree.
inline Gemm visitor_plan(const VisitorCase& c, int cc, int kernel_cc) {
  GemmOptions o;
  o.element = DataType::f16;
  o.layout = Layout::RowMajor;
  o.element_accumulator = DataType::f32;
  o.cc = cc;
  o.kernel_cc = kernel_cc;
  Gemm plan(o);
  plan.set_epilogue_visitor(c.tree);
  return plan;
}

// Every kernel the gpu tier and the walk-through run on a device of compute capability cc; `groups` (comma-separated)
// picks "config", "epilogue", "concurrency", "types", "fuzz", "grouped", "conv", "conv90" (SM90 only), "fp8" (SM90
// only), "splitk", "tuning" and/or "evt" (empty: all of these), or "suite" (the benchmark's shape suite; only when
// named).
inline std::vector<KernelSpec> all_specs(int cc, const std::string& groups = "") {
  auto named = [&](const std::string& group) {
    return ("," + groups + ",").find("," + group + ",") != std::string::npos;
  };
  auto wanted = [&](const char* group) { return groups.empty() || named(group); };
  std::vector<KernelSpec> out;
  for (const auto& p : wanted("fuzz") ? fuzz_plans(cc) : std::vector<fuzz::PlanDraw>{}) out.push_back(p.make().spec());
  for (const auto& c : wanted("config") ? config_cases(cc) : std::vector<ConfigCase>{}) {
    Gemm plan = config_plan(c, cc);
    out.push_back(spec_for_shape(plan, kMatrixShape));
  }
  for (DataType type : wanted("epilogue") && cc >= 90 ? lean_types() : std::vector<DataType>{}) {
    Gemm plan(epilogue_options(type, cc, 90));
    use_lean_epilogue(plan);
    out.push_back(spec_for_shape(plan, kMatrixShape));
    out.push_back(spec_for_shape(plan, kWholeTilesShape));
  }
  for (DataType type : wanted("epilogue") && cc >= 90 ? lean_types() : std::vector<DataType>{}) {
    for (BiasMode bias : {BiasMode::None, BiasMode::PerRow, BiasMode::PerColumn}) {
      out.push_back(activation_at_launch_spec(type, bias, cc));
    }
    for (Activation activation : all_activations()) {
      Gemm plan = compiled_in_plan(type, activation, cc);
      out.push_back(spec_for_shape(plan, kMatrixShape));
    }
  }
  for (int kernel_cc : wanted("epilogue") ? kernel_generations(cc) : std::vector<int>{}) {
    for (DataType type : epilogue_types()) {
      for (Activation activation : all_activations()) {
        Gemm plan(epilogue_options(type, cc, kernel_cc));
        plan.set_activation(activation);
        out.push_back(spec_for_shape(plan, kMatrixShape));
      }
      for (BiasMode bias : {BiasMode::PerRow, BiasMode::PerColumn}) {
        if (type != DataType::f16) continue;
        Gemm plan(bias_options(bias, cc, kernel_cc));
        plan.set_activation(Activation::ReLU);
        plan.set_bias(bias);
        out.push_back(spec_for_shape(plan, kMatrixShape));
      }
    }
  }
  if (wanted("concurrency")) {
    // tests/gpu/concurrency_gpu_test.cpp: the default and Stream-K kernels of each generation.
    for (int kernel_cc : kernel_generations(cc)) {
      for (Swizzle swizzle : {Swizzle::Identity1, Swizzle::StreamK}) {
        Gemm plan(epilogue_options(DataType::f16, cc, kernel_cc));
        plan.set_swizzling_functor(swizzle);
        out.push_back(spec_for_shape(plan, kMatrixShape));
      }
    }
  }
  if (named("suite")) {
    for (const auto& spec : suite_specs(cc)) out.push_back(spec);
  }
  if (wanted("splitk") && cc >= 90) {
    for (const auto& spec : split_k_specs(cc)) out.push_back(spec);
  }
  if (wanted("tuning") && cc >= 90) {
    for (const auto& spec : tuning_specs(cc)) out.push_back(spec);
  }
  if (wanted("grouped")) {
    for (const auto& cases : {grouped_cases(cc), contiguous_cases(cc)}) {
      for (const auto& c : cases) out.push_back(grouped_plan(c).spec());
    }
    if (cc >= 90 && cc < 100) {
      for (const GroupedGemm& plan : blockwise_moe_plans(cc)) out.push_back(plan.spec());
    }
    // The MoE form's wide tiles, which run_contiguous picks for some shapes on SM90 16-bit plans.
    for (const auto& c : contiguous_cases(cc)) {
      const std::vector<KernelSpec> kernels = grouped_plan(c).run_time_kernels();
      out.insert(out.end(), kernels.begin() + 1, kernels.end());
    }
  }
  if (wanted("conv")) {
    for (const auto& c : conv_cases()) out.push_back(conv_spec(c, cc));
  }
  if (wanted("fp8") && cc >= 90) {
    for (const auto& c : fp8_cases()) {
      Gemm plan(fp8_options(c, cc));
      out.push_back(spec_for_shape(plan, kMatrixShape));
    }
    for (const auto& c : fp8_scale_cases()) {
      Gemm plan = fp8_scale_plan(c, cc);
      out.push_back(spec_for_shape(plan, kMatrixShape));
    }
    for (const auto& c : fp8_overlap_cases(cc)) out.push_back(fp8_overlap_plan(c, cc).spec());
    out.push_back(
        Gemm(testing::fp8_tn(cc, DataType::e4m3, DataType::f32))
            .spec_for_problem(kFp8ParallelSplitKShape.m, kFp8ParallelSplitKShape.n, kFp8ParallelSplitKShape.k));
    for (const auto& spec : fp8_blockwise_specs(cc)) out.push_back(spec);
    // The MoE form's FP8 experts (tests/gpu/grouped_gpu_test.cpp), which the grouped group lists too.
    if (cc < 100) {
      out.push_back(GroupedGemm(testing::fp8_tn(cc)).spec());
      for (const GroupedGemm& plan : blockwise_moe_plans(cc)) out.push_back(plan.spec());
    }
  }
  for (int kernel_cc : wanted("evt") ? kernel_generations(cc) : std::vector<int>{}) {
    for (const auto& c : visitor_cases()) {
      if (c.sm90_only && kernel_cc < 90) continue;
      Gemm plan = visitor_plan(c, cc, kernel_cc);
      out.push_back(plan.spec_for_problem(kMatrixShape.m, kMatrixShape.n, kMatrixShape.k, c.batch));
    }
  }
  if (wanted("conv90") && cc >= 90 && cc < 100) {
    for (const auto& c : conv90_cases()) out.push_back(conv_spec(c, cc));
  }
  if (!wanted("types")) return out;
  for (const auto& t : type_cases()) {
    for (const auto& l : layout_cases()) {
      Gemm plan(options(t, l, cc));
      out.push_back(spec_for_shape(plan, kMatrixShape));
    }
  }
  const LayoutCase rrr{Layout::RowMajor, Layout::RowMajor, Layout::RowMajor};
  for (const char* name : {"f32", "f64"}) {
    for (const auto& t : type_cases()) {
      if (std::string(t.name) != name) continue;
      Gemm plan(options(t, rrr, cc));
      out.push_back(spec_for_shape(plan, kOddShape));
    }
  }
  for (const auto& [t, l] : odd_leading_dimension_cases()) {
    Gemm plan(options(t, l, cc));
    out.push_back(spec_for_shape(plan, kOddShape));
    out.push_back(spec_for_shape(plan, kOddOneWaveShape));
  }
  Gemm simt(options(type_cases()[0], rrr, cc));
  simt.set_opclass(OpClass::Simt);
  out.push_back(simt.spec());
  Gemm stream_k(options(type_cases()[0], rrr, cc));
  stream_k.set_swizzling_functor(Swizzle::StreamK);
  out.push_back(stream_k.spec());
  // The walk-through's compile(tile_descriptions()[1]).
  Gemm third(options(type_cases()[0], rrr, cc));
  third.set_tile_description(third.tile_descriptions().at(1));
  out.push_back(third.spec());
  return out;
}

// How gtest prints a case (and so how ctest lists the test): its name, not a dump of its bytes.
inline void PrintTo(const TypeCase& c, std::ostream* os) {
  *os << c.name;
}
inline void PrintTo(const LayoutCase& c, std::ostream* os) {
  *os << c.name();
}
inline void PrintTo(const ConfigCase& c, std::ostream* os) {
  *os << c.label;
}
inline void PrintTo(const GroupedCase& c, std::ostream* os) {
  *os << c.label;
}
inline void PrintTo(const Fp8Case& c, std::ostream* os) {
  *os << c.label;
}
inline void PrintTo(const Fp8ScaleCase& c, std::ostream* os) {
  *os << c.label;
}

}  // namespace gemmkit::gpu_cases

namespace gemmkit {

// gemmkit's enums as gtest prints them in a parameter (Combine tuples): their names.
inline void PrintTo(DataType value, std::ostream* os) {
  *os << to_string(value);
}
inline void PrintTo(Activation value, std::ostream* os) {
  *os << to_string(value);
}
inline void PrintTo(Layout value, std::ostream* os) {
  *os << to_string(value);
}

}  // namespace gemmkit
