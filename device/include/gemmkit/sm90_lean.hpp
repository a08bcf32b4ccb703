// device/include/gemmkit/sm90_lean.hpp: glue for Sm90Collective kernels with gemmkit's lean epilogue
// (gemmkit/sm90_lean_epilogue.hpp): the mainloop from CUTLASS's collective builder, the epilogue ours, its
// activation, bias and scale vectors taken at launch. A generated source (templates/sm90_gemm_lean.cu.in) includes
// this, declares its GemmUniversalAdapter, names gemmkit::sm90::LeanModule<Gemm> as gemmkit_kernel::Module and
// includes gemmkit/module_entry.hpp.
#pragma once

#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "gemmkit/sm90_launch.hpp"
#include "gemmkit/sm90_lean_epilogue.hpp"

namespace gemmkit::sm90 {

// The module glue: ABI arguments -> CUTLASS arguments (the epilogue's from the launch's activation, bias and scales).
template <class DeviceGemm>
class LeanModule : public ParamsLaunch<DeviceGemm, typename DeviceGemm::GemmKernel, gk_gemm_args> {
 public:
  using Gemm = DeviceGemm;
  static constexpr module::Bias kBias = module::Bias::None;  // the bias comes at launch (args.bias_mode)

  static typename Gemm::Arguments to_arguments(const gk_gemm_args& args) {
    return make_arguments<Gemm>(args, [](LeanEpilogueParams& thread, const gk_gemm_args& a) {
      thread.alpha = float(a.alpha);
      thread.beta = float(a.beta);
      thread.activation = a.activation;
      thread.activation_parameter = float(a.activation_params[0]);
      thread.bias = a.bias;
      thread.bias_mode = a.bias_mode;
      thread.row_scale = static_cast<const float*>(a.row_scale);
      thread.column_scale = static_cast<const float*>(a.column_scale);
    });
  }
};

}  // namespace gemmkit::sm90
