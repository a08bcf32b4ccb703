// python/src/enums.cpp: every C++ enum as a Python enum whose member names are the C++ to_string() names
// (DataType.f16, LayoutType.RowMajor, SwizzlingFunctor.IdentitySwizzle1, Activation.relu, ...).
#include <array>

#include "bindings.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit::python {
namespace {

template <typename E, std::size_t N>
void bind_enum(nb::module_& m, const char* name, const std::array<E, N>& values, const char* doc) {
  nb::enum_<E> e(m, name, doc);
  // to_string() returns views of string literals, so data() is a NUL-terminated static string.
  for (E v : values) e.value(to_string(v).data(), v);
}

}  // namespace

void bind_enums(nb::module_& m) {
  using DT = DataType;
  bind_enum(m, "DataType",
            std::array{DT::f16, DT::bf16, DT::f32, DT::tf32, DT::f64, DT::s8, DT::u8, DT::s32, DT::void_t},
            "Element types.");
  bind_enum(m, "LayoutType", std::array{Layout::RowMajor, Layout::ColumnMajor}, "Matrix layouts.");
  bind_enum(m, "OpcodeClass", std::array{OpClass::TensorOp, OpClass::Simt}, "Tensor cores or CUDA cores.");
  bind_enum(m, "KernelFamily", std::array{KernelFamily::Sm80Universal, KernelFamily::Sm90Collective},
            "Which template renders a kernel.");
  bind_enum(m, "MathOperation",
            std::array{MathOperation::MultiplyAdd, MathOperation::MultiplyAddFastF32,
                       MathOperation::MultiplyAddSaturate},
            "The tensor-core math variant.");
  using KS = KernelSchedule;
  bind_enum(m, "KernelScheduleType",
            std::array{KS::Auto, KS::TmaWarpSpecialized, KS::TmaWarpSpecializedPingpong,
                       KS::TmaWarpSpecializedCooperative, KS::CpAsyncWarpSpecialized,
                       KS::CpAsyncWarpSpecializedPingpong, KS::CpAsyncWarpSpecializedCooperative},
            "SM90 mainloop schedules.");
  using ES = EpilogueSchedule;
  bind_enum(m, "EpilogueScheduleType",
            std::array{ES::Auto, ES::NoSmemWarpSpecialized, ES::TmaWarpSpecialized, ES::TmaWarpSpecializedCooperative},
            "SM90 epilogue schedules.");
  bind_enum(m, "TileSchedulerType",
            std::array{TileScheduler::Default, TileScheduler::Persistent, TileScheduler::StreamK},
            "SM90 tile schedulers.");
  bind_enum(m, "SwizzlingFunctor",
            std::array{Swizzle::Identity1, Swizzle::Identity2, Swizzle::Identity4, Swizzle::Identity8,
                       Swizzle::Horizontal, Swizzle::StreamK},
            "Threadblock swizzles; ThreadblockSwizzleStreamK selects Stream-K (on SM80 and SM90 kernels).");
  using A = Activation;
  bind_enum(m, "Activation",
            std::array{A::Identity, A::ReLU, A::LeakyReLU, A::GELU, A::GELUTanh, A::HardSwish, A::Sigmoid, A::SiLU,
                       A::Tanh},
            "Elementwise activations fused into the epilogue: D = act(alpha * A @ B + beta * C).");
}

}  // namespace gemmkit::python
