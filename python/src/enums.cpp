// python/src/enums.cpp: every C++ enum as a Python enum, its members named and ordered by the enum's table
// (include/gemmkit/enums.hpp): DataType.f16, LayoutType.RowMajor, SwizzlingFunctor.IdentitySwizzle1, Activation.relu.
#include "gemmkit/enums.hpp"
#include "bindings.hpp"

namespace gemmkit::python {
namespace {

template <typename E>
void bind_enum(nb::module_& m, const char* name, const char* doc) {
  nb::enum_<E> e(m, name, doc);
  // The table's names are views of string literals, so data() is a NUL-terminated static string.
  for (const auto& row : enum_rows<E>()) e.value(row.name.data(), row.value);
}

}  // namespace

void bind_enums(nb::module_& m) {
  bind_enum<DataType>(m, "DataType", "Element types.");
  bind_enum<Layout>(m, "LayoutType", "Matrix layouts.");
  bind_enum<OpClass>(m, "OpcodeClass", "Tensor cores or CUDA cores.");
  bind_enum<KernelFamily>(m, "KernelFamily", "Which template renders a kernel.");
  bind_enum<MathOperation>(m, "MathOperation", "The tensor-core math variant.");
  bind_enum<KernelSchedule>(m, "KernelScheduleType", "SM90 mainloop schedules.");
  bind_enum<EpilogueSchedule>(m, "EpilogueScheduleType", "SM90 epilogue schedules.");
  bind_enum<TileScheduler>(m, "TileSchedulerType", "SM90 tile schedulers.");
  bind_enum<Swizzle>(m, "SwizzlingFunctor",
                     "Threadblock swizzles; ThreadblockSwizzleStreamK selects Stream-K (on SM80 and SM90 kernels).");
  bind_enum<Activation>(m, "Activation",
                        "Elementwise activations fused into the epilogue: D = act(alpha * A @ B + beta * C).");
  bind_enum<BiasMode>(m, "BiasMode", "A bias vector added before the activation, per output row or column.");
  bind_enum<ScaleMode>(m, "ScaleMode",
                       "f32 scale vectors multiplying the accumulator per output row, column or both (SM90; FP8).");
  bind_enum<BlockScaling>(m, "BlockScaling",
                          "FP8 block scales applied in the SM90 mainloop: blockwise = A per row and 128-wide K block, "
                          "B per 128 x 128 block (the DeepSeek-V3 format).");
  bind_enum<RasterOrder>(m, "RasterOrder", "Order in which SM90 persistent schedulers walk output tiles.");
  bind_enum<Decomposition>(m, "Decomposition",
                           "How an SM90 Stream-K kernel shares out K: Auto (per shape), Heuristic, DataParallel, "
                           "SplitK or StreamK.");
  bind_enum<ReductionMode>(m, "ReductionMode",
                           "How split-K / Stream-K partial sums add up: in K order or as they finish.");
  bind_enum<ConvKind>(m, "ConvKind", "Which convolution a Conv2d computes: fprop, dgrad or wgrad.");
  bind_enum<IteratorAlgorithm>(m, "IteratorAlgorithm", "How a conv kernel walks its operands.");
  bind_enum<StrideSupport>(m, "StrideSupport", "Dgrad kernels for unit strides only, or for any stride.");
  bind_enum<SplitKMode>(m, "SplitKMode", "How a conv splits its reduction: serial (one kernel) or parallel.");
}

}  // namespace gemmkit::python
