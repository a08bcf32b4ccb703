// tests/support/fp8_blockwise_cases.hpp: the block-scaled FP8 cases of the gpu tier
// (tests/gpu/fp8_blockwise_gpu_test.cpp), which gemmkit_gpu_prebuild's "fp8" group builds ahead.
#pragma once

#include <string>
#include <vector>

#include "gemmkit/gemm.hpp"
#include "support/plan_options.hpp"

namespace gemmkit::gpu_cases {

// M a multiple of 4 (A's scales load with TMA), N three 128-column blocks with the last one partial, K four 128-deep
// blocks with the last one 16 deep.
struct BlockwiseShape {
  long m = 192, n = 320, k = 400;
};

struct Fp8BlockwiseCase {
  std::string label;
  DataType d = DataType::bf16;
  Activation activation = Activation::Identity;
  bool pingpong = false;  // the 64 x 128 ping-pong tile instead of the plan's default (cooperative 128 x 128)
  long batch = 1;
  BlockwiseShape shape{};
};

// Few rows over a long K, which run() splits in parallel (tests/unit/fp8_blockwise_test.cpp checks the pick): 32 K
// blocks, N ending in a partial block of B's scales.
inline constexpr BlockwiseShape kBlockwiseSplitShape{64, 320, 4096};

inline std::vector<Fp8BlockwiseCase> fp8_blockwise_cases() {
  return {{"bf16"},
          {"f32_relu", DataType::f32, Activation::ReLU},
          {"pingpong_bf16", DataType::bf16, Activation::Identity, true},
          {"batched_f32", DataType::f32, Activation::Identity, false, 2},
          {"split_k_bf16", DataType::bf16, Activation::Identity, false, 1, kBlockwiseSplitShape}};
}

inline Gemm fp8_blockwise_plan(const Fp8BlockwiseCase& c, int cc) {
  Gemm plan(testing::fp8_tn(cc, DataType::e4m3, c.d));
  plan.set_block_scaling(BlockScaling::Blockwise);
  plan.set_activation(c.activation);
  if (c.pingpong) {
    for (const TileDescription& td : plan.tile_descriptions()) {
      if (td.kernel_schedule == KernelSchedule::TmaWarpSpecializedPingpong && td.cluster_shape == Shape3{1, 1, 1}) {
        plan.set_tile_description(td);
        break;
      }
    }
  }
  return plan;
}

// The kernel each case's run() takes (packed device tensors).
inline std::vector<KernelSpec> fp8_blockwise_specs(int cc) {
  std::vector<KernelSpec> out;
  for (const auto& c : fp8_blockwise_cases()) {
    out.push_back(fp8_blockwise_plan(c, cc).spec_for_problem(c.shape.m, c.shape.n, c.shape.k, c.batch));
  }
  return out;
}

}  // namespace gemmkit::gpu_cases
