// include/gemmkit/enums.hpp: every enum of gemmkit, each with one table {value, name, CUTLASS spelling, kernel-name
// part}; printing, parsing, code generation, the CLI and the Python binding all read these tables.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gemmkit {

// e4m3 and e5m2 (FP8, SM90 tensor cores only) come last so that the older values keep their numbers.
enum class DataType { f16, bf16, f32, tf32, f64, s8, u8, s32, void_t, e4m3, e5m2 };
enum class Layout { RowMajor, ColumnMajor };
enum class OpClass { TensorOp, Simt };
// Which family renders a kernel (src/families/).
enum class KernelFamily {
  Sm80Universal,   // CUTLASS 2.x GemmUniversal (TensorOp or SIMT); also used on SM90 for SIMT and f64
  Sm90Collective,  // CUTLASS 3.x collective-builder GEMM (TMA / cp.async, warp-specialized)
  Sm80Grouped,     // CUTLASS 2.x GemmGrouped: many GEMMs of different extents in one launch
  Sm90Grouped,     // CUTLASS 3.x ptr-array grouped GEMM (TMA, warp-specialized, persistent group scheduler)
  Sm80Conv2d,      // CUTLASS 2.x implicit-GEMM Conv2d (fprop, dgrad, wgrad; NHWC activations, KRSC filters)
  Sm90Conv2d,      // CUTLASS 3.x implicit-GEMM Conv2d (ConvUniversal from the SM90 collective builders, TMA im2col)
};
// The tensor-core math of a kernel. For f32 operands (CUTLASS 2.x): MultiplyAdd rounds them to tf32, FastF32 is
// 3xTF32 (f32 accuracy from three tf32 MMAs), FastBF16 / FastF16 round them to bf16 / f16. Saturate clamps integer
// sums. FastAccum (SM90 FP8): the tensor cores' own accumulation throughout, never promoted into f32 every 128 deep
// (torch._scaled_mm's use_fast_accum: faster, less accurate over a long K).
enum class MathOperation {
  MultiplyAdd,
  MultiplyAddFastF32,
  MultiplyAddSaturate,
  MultiplyAddFastBF16,
  MultiplyAddFastF16,
  MultiplyAddFastAccum
};
enum class KernelSchedule {
  Auto,
  TmaWarpSpecialized,
  TmaWarpSpecializedPingpong,
  TmaWarpSpecializedCooperative,
  CpAsyncWarpSpecialized,
  CpAsyncWarpSpecializedPingpong,
  CpAsyncWarpSpecializedCooperative,
  // CUTLASS's TMA cooperative kernel with its two consumer warp groups splitting the CTA tile along N instead of M:
  // 192-row tiles (gemmkit's own collective assembly, device/include/gemmkit/sm90_split_n.hpp).
  TmaWarpSpecializedCooperativeSplitN,
  // CUTLASS's TMA cooperative and ping-pong FP8 kernels with gemmkit's consumer loop, which promotes one half of the
  // tile's columns while the other half's GMMAs run (device/include/gemmkit/sm90_fp8_overlap.hpp).
  TmaWarpSpecializedCooperativeFP8Overlap,
  TmaWarpSpecializedPingpongFP8Overlap,
  // The same kernels with gemmkit's other such loop: whole K tiles alternate between two sets of partial sums, one set
  // promoted while the next K tile runs into the other (64 x 128 per warp group).
  TmaWarpSpecializedCooperativeFP8AlternatingPromotion,
  TmaWarpSpecializedPingpongFP8AlternatingPromotion,
};
// Lean: gemmkit's own SM90 epilogue, which takes the activation, bias and scale vectors at launch (one kernel serves
// every plain epilogue of a plan) and builds in about half the time of CUTLASS's TMA epilogue.
enum class EpilogueSchedule { Auto, NoSmemWarpSpecialized, TmaWarpSpecialized, TmaWarpSpecializedCooperative, Lean };
enum class TileScheduler { Default, Persistent, StreamK };
// Threadblock swizzles (SM80 kernels). On SM90 kernels StreamK selects the Stream-K tile scheduler.
enum class Swizzle { Identity1, Identity2, Identity4, Identity8, Horizontal, StreamK };
// In the reference's order (its eight, then ours), which is the order Gemm::activations() lists.
enum class Activation { GELU, HardSwish, Identity, LeakyReLU, ReLU, Sigmoid, SiLU, Tanh, GELUTanh };
enum class BiasMode { None, PerRow, PerColumn };
// f32 scale vectors that multiply the accumulator per output row (length M), per column (length N) or both (SM90
// kernels; e.g. FP8 dequantization scales): D = act(alpha * (acc * row_scale[i] * column_scale[j]) + beta*C + bias).
enum class ScaleMode { None, PerRow, PerColumn, RowAndColumn };
// Scales applied inside an FP8 mainloop, per block of the operands (SM90 kernels), the DeepSeek-V3 format: Blockwise
// scales A per row and 128-wide K block and B per 128 x 128 block, in f32, while the tensor cores accumulate.
enum class BlockScaling { None, Blockwise };
// Order in which SM90 persistent schedulers walk output tiles (a run-time argument).
enum class RasterOrder { Heuristic, AlongM, AlongN };
// How an SM90 Stream-K kernel shares out the K extent of its output tiles (a run-time argument, no recompile): Auto =
// gemmkit's choice per problem shape (split-K for a long K over few output tiles, else CUTLASS's heuristic), or one
// of the CUTLASS scheduler's decompositions.
enum class Decomposition { Auto, Heuristic, DataParallel, SplitK, StreamK };
// How the CTAs that share an output tile add up their partial sums: in K order (bitwise reproducible) or atomically
// in any order (less waiting; the rounding may differ from run to run).
enum class ReductionMode { Deterministic, Nondeterministic };
// Which convolution a Conv2d kernel computes (the reference's ConvKind: Fprop=0, Dgrad=1, Wgrad=2).
enum class ConvKind { Fprop, Dgrad, Wgrad };
// How a 2.x conv kernel walks its operands: analytic (any problem) or optimized (precomputed masks and offsets;
// channel counts a multiple of the vector width, filters of at most 32x32).
enum class IteratorAlgorithm { Analytic, Optimized };
// Dgrad kernels for unit strides only (Unity) or for any stride (Strided).
enum class StrideSupport { Strided, Unity };
// Split-K of a conv: serial (the slices add into D in turn) or parallel (partial sums reduced afterwards).
enum class SplitKMode { Serial, Parallel };

// One value of an enum and every way gemmkit spells it.
template <class Enum>
struct EnumRow {
  Enum value;
  std::string_view name;            // printed, parsed (case-insensitive), the CLI's and Python's member name
  std::string_view cutlass;         // its C++ spelling in a generated kernel source; "" where none is rendered
  std::string_view in_kernel_name;  // what it adds to a kernel's name; "" where nothing
  std::string_view aliases = {};    // other names parsing accepts, space-separated
};

// An activation also names the approximated functor a 16-bit D instantiates (device/include/gemmkit/activations.hpp);
// "" keeps `cutlass`.
struct ActivationRow : EnumRow<Activation> {
  std::string_view cutlass_for_16bit_d = {};
};

// EnumTable<E>::rows lists every value of E in declaration order; ::what names E in messages.
template <class Enum>
struct EnumTable;

template <>
struct EnumTable<DataType> {
  static constexpr std::string_view what = "element type";
  // in_kernel_name: the letter an accumulator of this type gives the math part of a name (s16816gemm = f32).
  static constexpr EnumRow<DataType> rows[] = {
      {DataType::f16, "f16", "cutlass::half_t", "h", "float16 half"},
      {DataType::bf16, "bf16", "cutlass::bfloat16_t", "s", "bfloat16"},
      {DataType::f32, "f32", "float", "s", "float32 float"},
      {DataType::tf32, "tf32", "cutlass::tfloat32_t", "s"},
      {DataType::f64, "f64", "double", "d", "float64 double"},
      {DataType::s8, "s8", "int8_t", "s", "int8"},
      {DataType::u8, "u8", "uint8_t", "s", "uint8"},
      {DataType::s32, "s32", "int32_t", "i", "int32"},
      {DataType::void_t, "void", "void", ""},
      {DataType::e4m3, "e4m3", "cutlass::float_e4m3_t", "", "float8_e4m3fn float8_e4m3 fp8_e4m3"},
      {DataType::e5m2, "e5m2", "cutlass::float_e5m2_t", "", "float8_e5m2 fp8_e5m2"},
  };
};

template <>
struct EnumTable<Layout> {
  static constexpr std::string_view what = "layout";
  static constexpr EnumRow<Layout> rows[] = {
      {Layout::RowMajor, "RowMajor", "cutlass::layout::RowMajor", "t", "row row_major t"},
      {Layout::ColumnMajor, "ColumnMajor", "cutlass::layout::ColumnMajor", "n", "col column column_major n"},
  };
};

template <>
struct EnumTable<OpClass> {
  static constexpr std::string_view what = "opcode class";
  static constexpr EnumRow<OpClass> rows[] = {
      {OpClass::TensorOp, "TensorOp", "cutlass::arch::OpClassTensorOp", "tensorop", "tensor_op"},
      {OpClass::Simt, "Simt", "cutlass::arch::OpClassSimt", "simt"},
  };
};

template <>
struct EnumTable<KernelFamily> {
  static constexpr std::string_view what = "kernel family";
  static constexpr EnumRow<KernelFamily> rows[] = {
      {KernelFamily::Sm80Universal, "sm80_universal", "", ""},
      {KernelFamily::Sm90Collective, "sm90_collective", "", ""},
      {KernelFamily::Sm80Grouped, "sm80_grouped", "", ""},
      {KernelFamily::Sm90Grouped, "sm90_grouped", "", ""},
      {KernelFamily::Sm80Conv2d, "sm80_conv2d", "", ""},
      {KernelFamily::Sm90Conv2d, "sm90_conv2d", "", ""},
  };
};

template <>
struct EnumTable<MathOperation> {
  static constexpr std::string_view what = "math operation";
  static constexpr EnumRow<MathOperation> rows[] = {
      {MathOperation::MultiplyAdd, "multiply_add", "cutlass::arch::OpMultiplyAdd", ""},
      {MathOperation::MultiplyAddFastF32, "multiply_add_fast_f32", "cutlass::arch::OpMultiplyAddFastF32", ""},
      {MathOperation::MultiplyAddSaturate, "multiply_add_saturate", "cutlass::arch::OpMultiplyAddSaturate", ""},
      {MathOperation::MultiplyAddFastBF16, "multiply_add_fast_bf16", "cutlass::arch::OpMultiplyAddFastBF16", ""},
      {MathOperation::MultiplyAddFastF16, "multiply_add_fast_f16", "cutlass::arch::OpMultiplyAddFastF16", ""},
      {MathOperation::MultiplyAddFastAccum, "multiply_add_fast_accum", "cutlass::arch::OpMultiplyAddFastAccum",
       "_fp8_fastaccum", "fast_accum"},
  };
};

template <>
struct EnumTable<KernelSchedule> {
  static constexpr std::string_view what = "kernel schedule";
  static constexpr EnumRow<KernelSchedule> rows[] = {
      {KernelSchedule::Auto, "ScheduleAuto", "cutlass::gemm::collective::KernelScheduleAuto", ""},
      {KernelSchedule::TmaWarpSpecialized, "TmaWarpSpecialized", "cutlass::gemm::KernelTmaWarpSpecialized",
       "_warpspecialized"},
      {KernelSchedule::TmaWarpSpecializedPingpong, "TmaWarpSpecializedPingpong",
       "cutlass::gemm::KernelTmaWarpSpecializedPingpong", "_warpspecialized_pingpong"},
      {KernelSchedule::TmaWarpSpecializedCooperative, "TmaWarpSpecializedCooperative",
       "cutlass::gemm::KernelTmaWarpSpecializedCooperative", "_warpspecialized_cooperative"},
      {KernelSchedule::CpAsyncWarpSpecialized, "CpAsyncWarpSpecialized", "cutlass::gemm::KernelCpAsyncWarpSpecialized",
       "_cpasync_warpspecialized"},
      {KernelSchedule::CpAsyncWarpSpecializedPingpong, "CpAsyncWarpSpecializedPingpong",
       "cutlass::gemm::KernelCpAsyncWarpSpecializedPingpong", "_cpasync_warpspecialized_pingpong"},
      {KernelSchedule::CpAsyncWarpSpecializedCooperative, "CpAsyncWarpSpecializedCooperative",
       "cutlass::gemm::KernelCpAsyncWarpSpecializedCooperative", "_cpasync_warpspecialized_cooperative"},
      {KernelSchedule::TmaWarpSpecializedCooperativeSplitN, "TmaWarpSpecializedCooperativeSplitN",
       "cutlass::gemm::KernelTmaWarpSpecializedCooperative", "_warpspecialized_cooperative_splitn"},
      {KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap, "TmaWarpSpecializedCooperativeFP8Overlap",
       "cutlass::gemm::KernelTmaWarpSpecializedCooperative", "_warpspecialized_cooperative_fp8overlap"},
      {KernelSchedule::TmaWarpSpecializedPingpongFP8Overlap, "TmaWarpSpecializedPingpongFP8Overlap",
       "cutlass::gemm::KernelTmaWarpSpecializedPingpong", "_warpspecialized_pingpong_fp8overlap"},
      {KernelSchedule::TmaWarpSpecializedCooperativeFP8AlternatingPromotion,
       "TmaWarpSpecializedCooperativeFP8AlternatingPromotion", "cutlass::gemm::KernelTmaWarpSpecializedCooperative",
       "_warpspecialized_cooperative_fp8alternating"},
      {KernelSchedule::TmaWarpSpecializedPingpongFP8AlternatingPromotion,
       "TmaWarpSpecializedPingpongFP8AlternatingPromotion", "cutlass::gemm::KernelTmaWarpSpecializedPingpong",
       "_warpspecialized_pingpong_fp8alternating"},
  };
};

template <>
struct EnumTable<EpilogueSchedule> {
  static constexpr std::string_view what = "epilogue schedule";
  static constexpr EnumRow<EpilogueSchedule> rows[] = {
      {EpilogueSchedule::Auto, "ScheduleAuto", "cutlass::epilogue::collective::EpilogueScheduleAuto", ""},
      {EpilogueSchedule::NoSmemWarpSpecialized, "NoSmemWarpSpecialized", "cutlass::epilogue::NoSmemWarpSpecialized",
       "_epi_nosmem"},
      {EpilogueSchedule::TmaWarpSpecialized, "TmaWarpSpecialized", "cutlass::epilogue::TmaWarpSpecialized", "_epi_tma"},
      {EpilogueSchedule::TmaWarpSpecializedCooperative, "TmaWarpSpecializedCooperative",
       "cutlass::epilogue::TmaWarpSpecializedCooperative", "_epi_tma"},
      {EpilogueSchedule::Lean, "Lean", "gemmkit::sm90::LeanCollectiveEpilogue", "_epi_lean"},
  };
};

template <>
struct EnumTable<TileScheduler> {
  static constexpr std::string_view what = "tile scheduler";
  static constexpr EnumRow<TileScheduler> rows[] = {
      {TileScheduler::Default, "Default", "void", ""},
      {TileScheduler::Persistent, "Persistent", "cutlass::gemm::PersistentScheduler", ""},
      {TileScheduler::StreamK, "StreamK", "cutlass::gemm::StreamKScheduler", "_stream_k"},
  };
};

template <>
struct EnumTable<Swizzle> {
  static constexpr std::string_view what = "swizzling functor";
  static constexpr EnumRow<Swizzle> rows[] = {
      {Swizzle::Identity1, "IdentitySwizzle1", "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<1>", ""},
      {Swizzle::Identity2, "IdentitySwizzle2", "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<2>",
       "_IdentitySwizzle2"},
      {Swizzle::Identity4, "IdentitySwizzle4", "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<4>",
       "_IdentitySwizzle4"},
      {Swizzle::Identity8, "IdentitySwizzle8", "cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>",
       "_IdentitySwizzle8"},
      {Swizzle::Horizontal, "HorizontalSwizzle", "cutlass::gemm::threadblock::GemmHorizontalThreadblockSwizzle",
       "_HorizontalSwizzle"},
      {Swizzle::StreamK, "ThreadblockSwizzleStreamK", "cutlass::gemm::threadblock::ThreadblockSwizzleStreamK",
       "_stream_k"},
  };
};

template <>
struct EnumTable<Activation> {
  static constexpr std::string_view what = "activation";
  static constexpr ActivationRow rows[] = {
      {{Activation::GELU, "gelu", "cutlass::epilogue::thread::GELU", "_gelu"}, "gemmkit::activation::GELU"},
      {{Activation::HardSwish, "hardswish", "cutlass::epilogue::thread::HardSwish", "_hardswish"}},
      {{Activation::Identity, "identity", "cutlass::epilogue::thread::Identity", ""}},
      {{Activation::LeakyReLU, "leaky_relu", "cutlass::epilogue::thread::LeakyReLU", "_leaky_relu"}},
      {{Activation::ReLU, "relu", "cutlass::epilogue::thread::ReLu", "_relu"}},
      {{Activation::Sigmoid, "sigmoid", "cutlass::epilogue::thread::Sigmoid", "_sigmoid"},
       "gemmkit::activation::Sigmoid"},
      {{Activation::SiLU, "silu", "cutlass::epilogue::thread::SiLu", "_silu"}, "gemmkit::activation::SiLu"},
      {{Activation::Tanh, "tanh", "cutlass::epilogue::thread::Tanh", "_tanh"}},
      {{Activation::GELUTanh, "gelu_tanh", "cutlass::epilogue::thread::GELU_taylor", "_gelu_tanh"}},
  };
};

template <>
struct EnumTable<BiasMode> {
  static constexpr std::string_view what = "bias";
  // cutlass: the gemmkit::module::Bias enumerator of device/include/gemmkit/module_common.hpp.
  static constexpr EnumRow<BiasMode> rows[] = {
      {BiasMode::None, "none", "None", ""},
      {BiasMode::PerRow, "row", "PerRow", "_biasrow", "per_row"},
      {BiasMode::PerColumn, "column", "PerColumn", "_biascolumn", "per_column col"},
  };
};

template <>
struct EnumTable<ScaleMode> {
  static constexpr std::string_view what = "scale";
  // cutlass: the gemmkit::module::Scale enumerator of device/include/gemmkit/module_common.hpp.
  static constexpr EnumRow<ScaleMode> rows[] = {
      {ScaleMode::None, "none", "None", ""},
      {ScaleMode::PerRow, "row", "PerRow", "_scalerow", "per_row"},
      {ScaleMode::PerColumn, "column", "PerColumn", "_scalecolumn", "per_column col"},
      {ScaleMode::RowAndColumn, "row_and_column", "RowAndColumn", "_scalerowcolumn", "rowwise both"},
  };
};

template <>
struct EnumTable<BlockScaling> {
  static constexpr std::string_view what = "block scaling";
  static constexpr EnumRow<BlockScaling> rows[] = {
      {BlockScaling::None, "none", "", ""},
      {BlockScaling::Blockwise, "blockwise", "", "_blockwise", "1x128_128x128 deepseek"},
  };
};

template <>
struct EnumTable<RasterOrder> {
  static constexpr std::string_view what = "raster order";
  static constexpr EnumRow<RasterOrder> rows[] = {
      {RasterOrder::Heuristic, "Heuristic", "", ""},
      {RasterOrder::AlongM, "AlongM", "", "", "along_m m"},
      {RasterOrder::AlongN, "AlongN", "", "", "along_n n"},
  };
};

template <>
struct EnumTable<Decomposition> {
  static constexpr std::string_view what = "decomposition";
  static constexpr EnumRow<Decomposition> rows[] = {
      {Decomposition::Auto, "Auto", "", ""},
      {Decomposition::Heuristic, "Heuristic", "", ""},
      {Decomposition::DataParallel, "DataParallel", "", "", "data_parallel dp"},
      {Decomposition::SplitK, "SplitK", "", "", "split_k"},
      {Decomposition::StreamK, "StreamK", "", "", "stream_k"},
  };
};

template <>
struct EnumTable<ReductionMode> {
  static constexpr std::string_view what = "reduction mode";
  static constexpr EnumRow<ReductionMode> rows[] = {
      {ReductionMode::Deterministic, "Deterministic", "", ""},
      {ReductionMode::Nondeterministic, "Nondeterministic", "", ""},
  };
};

template <>
struct EnumTable<ConvKind> {
  static constexpr std::string_view what = "conv kind";
  static constexpr EnumRow<ConvKind> rows[] = {
      {ConvKind::Fprop, "fprop", "cutlass::conv::Operator::kFprop", "fprop", "forward"},
      {ConvKind::Dgrad, "dgrad", "cutlass::conv::Operator::kDgrad", "dgrad"},
      {ConvKind::Wgrad, "wgrad", "cutlass::conv::Operator::kWgrad", "wgrad"},
  };
};

template <>
struct EnumTable<IteratorAlgorithm> {
  static constexpr std::string_view what = "iterator algorithm";
  static constexpr EnumRow<IteratorAlgorithm> rows[] = {
      {IteratorAlgorithm::Analytic, "analytic", "cutlass::conv::IteratorAlgorithm::kAnalytic", "analytic"},
      {IteratorAlgorithm::Optimized, "optimized", "cutlass::conv::IteratorAlgorithm::kOptimized", "optimized"},
  };
};

template <>
struct EnumTable<StrideSupport> {
  static constexpr std::string_view what = "stride support";
  static constexpr EnumRow<StrideSupport> rows[] = {
      {StrideSupport::Strided, "strided", "cutlass::conv::StrideSupport::kStrided", ""},
      {StrideSupport::Unity, "unity", "cutlass::conv::StrideSupport::kUnity", "_unity_stride"},
  };
};

template <>
struct EnumTable<SplitKMode> {
  static constexpr std::string_view what = "split-K mode";
  static constexpr EnumRow<SplitKMode> rows[] = {
      {SplitKMode::Serial, "serial", "cutlass::conv::SplitKMode::kSerial", ""},
      {SplitKMode::Parallel, "parallel", "cutlass::conv::SplitKMode::kParallel", "_splitk_parallel"},
  };
};

namespace enum_detail {

template <class Enum>
constexpr bool rows_in_declaration_order() {
  std::size_t i = 0;
  for (const auto& row : EnumTable<Enum>::rows) {
    if (static_cast<std::size_t>(row.value) != i++) return false;
  }
  return true;
}

inline bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](unsigned char x, unsigned char y) { return std::tolower(x) == std::tolower(y); });
}

}  // namespace enum_detail

// Every row of Enum's table, in declaration order.
template <class Enum>
constexpr const auto& enum_rows() {
  static_assert(enum_detail::rows_in_declaration_order<Enum>(), "an enum table must list its values in order");
  return EnumTable<Enum>::rows;
}

template <class Enum>
constexpr const auto& row_of(Enum value) {
  return enum_rows<Enum>()[static_cast<std::size_t>(value)];
}

template <class Enum, class = decltype(EnumTable<Enum>::rows)>
constexpr std::string_view to_string(Enum value) {
  return row_of(value).name;
}

// The value whose name or alias is `text` (case-insensitive), or nullopt.
template <class Enum>
std::optional<Enum> parse_enum(std::string_view text) {
  for (const auto& row : enum_rows<Enum>()) {
    if (enum_detail::same_name(text, row.name)) return row.value;
    for (std::string_view rest = row.aliases; !rest.empty();) {
      const std::size_t space = std::min(rest.find(' '), rest.size());
      if (enum_detail::same_name(text, rest.substr(0, space))) return row.value;
      rest.remove_prefix(std::min(space + 1, rest.size()));
    }
  }
  return std::nullopt;
}

// "a, b, c": every value's name, for help texts and error messages.
template <class Enum>
std::string enum_names() {
  std::string out;
  for (const auto& row : enum_rows<Enum>()) out += (out.empty() ? "" : ", ") + std::string(row.name);
  return out;
}

}  // namespace gemmkit
