// tests/support/conv_cases.hpp: the Conv2d problems the gpu tier runs (tests/gpu/conv2d_gpu_test.cpp), shared with
// the prebuild tool (gemmkit_gpu_prebuild --only conv / conv90) so the GPU machine compiles their kernels in parallel
// first: conv_cases() pins the CUTLASS 2.x family (kernel_cc 80), conv90_cases() the CUTLASS 3.x one (kernel_cc 90).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemmkit/conv2d.hpp"
#include "verify/conv_reference.hpp"

namespace gemmkit::gpu_cases {

struct ConvCase {
  std::string name;
  ConvKind kind;
  DataType ab, cd, accumulator;
  verify::ConvShape shape;
  OpClass opclass = OpClass::TensorOp;
  Activation activation = Activation::Identity;
  double activation_parameter = 0.01;
  std::optional<SplitKMode> split_k_mode = std::nullopt;  // none: run() chooses (parallel for wgrad under a wave)
  int split_k_slices = 0;                                 // with a mode; 0: run() counts
  std::optional<IteratorAlgorithm> iterator = std::nullopt;
  double alpha = 1.0, beta = 0.0;
  int kernel_cc = 80;  // the family: 80 = Sm80Conv2d (on any SM80+ GPU), 90 = Sm90Conv2d (SM90 only)
};

inline verify::ConvShape conv_shape(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t k,
                                    std::int64_t r, std::int64_t s, int stride, int pad, int dilation = 1) {
  verify::ConvShape shape;
  shape.n = n, shape.h = h, shape.w = w, shape.c = c, shape.k = k, shape.r = r, shape.s = s;
  shape.geometry = {{stride, stride}, {pad, pad}, {dilation, dilation}};
  return shape;
}

// fprop, dgrad and wgrad; strides 1 and 2, padding, dilation; 1x1, 3x3 and 7x7 filters; odd channels (f32 SIMT) and
// channel counts that allow narrow vectors only; f16 (f32 and f16 accumulation), bf16, tf32; activations, alpha and
// beta with C; serial and parallel split-K (wgrad, also fprop and unit-stride dgrad; the activation after the
// reduction); a wgrad that run() splits by itself; the analytic iterators next to the optimized ones run() picks.
inline std::vector<ConvCase> conv_cases() {
  const DataType f16 = DataType::f16, bf16 = DataType::bf16, f32 = DataType::f32;
  const ConvKind fprop = ConvKind::Fprop, dgrad = ConvKind::Dgrad, wgrad = ConvKind::Wgrad;
  std::vector<ConvCase> out = {
      {"fprop_f16_3x3", fprop, f16, f16, f32, conv_shape(2, 9, 11, 32, 64, 3, 3, 1, 1)},
      {"fprop_f16_1x1", fprop, f16, f16, f32, conv_shape(3, 7, 7, 64, 40, 1, 1, 1, 0)},
      {"fprop_f16_7x7_stride2", fprop, f16, f16, f32, conv_shape(2, 23, 19, 8, 16, 7, 7, 2, 3)},
      {"fprop_f16_3x3_stride2_dilation2", fprop, f16, f16, f32, conv_shape(2, 17, 15, 16, 24, 3, 3, 2, 2, 2)},
      {"fprop_f16_channels12", fprop, f16, f16, f32, conv_shape(2, 8, 8, 12, 20, 3, 3, 1, 1)},
      {"fprop_f16_acc_f16", fprop, f16, f16, f16, conv_shape(1, 8, 8, 16, 16, 3, 3, 1, 1)},
      {"fprop_bf16", fprop, bf16, bf16, f32, conv_shape(2, 10, 10, 24, 32, 3, 3, 1, 1)},
      {"fprop_tf32", fprop, f32, f32, f32, conv_shape(2, 10, 10, 12, 20, 3, 3, 2, 1)},
      {"fprop_f32_simt_odd", fprop, f32, f32, f32, conv_shape(2, 9, 7, 3, 5, 3, 3, 1, 1), OpClass::Simt},
      {"dgrad_f16_3x3_unity", dgrad, f16, f16, f32, conv_shape(2, 9, 11, 32, 48, 3, 3, 1, 1)},
      {"dgrad_f16_3x3_stride2", dgrad, f16, f16, f32, conv_shape(2, 12, 10, 16, 32, 3, 3, 2, 1)},
      {"dgrad_f16_1x1_stride2", dgrad, f16, f16, f32, conv_shape(2, 8, 8, 32, 16, 1, 1, 2, 0)},
      {"dgrad_f16_3x3_dilation2", dgrad, f16, f16, f32, conv_shape(1, 11, 11, 16, 16, 3, 3, 1, 2, 2)},
      {"dgrad_bf16", dgrad, bf16, bf16, f32, conv_shape(2, 8, 8, 16, 24, 3, 3, 1, 1)},
      {"dgrad_tf32", dgrad, f32, f32, f32, conv_shape(2, 8, 8, 8, 12, 3, 3, 2, 1)},
      {"dgrad_f32_simt_odd", dgrad, f32, f32, f32, conv_shape(2, 7, 9, 3, 5, 3, 3, 1, 1), OpClass::Simt},
      {"wgrad_f16_3x3", wgrad, f16, f16, f32, conv_shape(2, 9, 9, 16, 32, 3, 3, 1, 1)},
      {"wgrad_f16_7x7_stride2", wgrad, f16, f16, f32, conv_shape(2, 20, 20, 8, 16, 7, 7, 2, 3)},
      {"wgrad_bf16", wgrad, bf16, bf16, f32, conv_shape(2, 8, 8, 16, 16, 3, 3, 1, 1)},
      {"wgrad_tf32", wgrad, f32, f32, f32, conv_shape(2, 8, 8, 8, 12, 3, 3, 1, 1)},
      {"wgrad_f32_simt_odd", wgrad, f32, f32, f32, conv_shape(2, 7, 7, 3, 5, 3, 3, 1, 1), OpClass::Simt},
  };
  auto split = [&](ConvCase c, SplitKMode mode, int slices) {
    c.split_k_mode = mode;
    c.split_k_slices = slices;
    out.push_back(c);
    return c;
  };
  const SplitKMode serial = SplitKMode::Serial, parallel = SplitKMode::Parallel;
  split({"wgrad_f16_split_k3", wgrad, f16, f16, f32, conv_shape(4, 16, 16, 16, 32, 3, 3, 1, 1)}, serial, 3);
  split({"wgrad_tf32_split_k4", wgrad, f32, f32, f32, conv_shape(4, 12, 12, 8, 16, 3, 3, 2, 1)}, serial, 4);
  // Parallel split-K: partial sums in f32, the reduction applies alpha, beta and the activation to the whole sum
  // (relu of a sum is not the sum of relus: a per-slice activation would not be exact). 5 slices do not divide
  // the 1024 = 16 x 64 of N*P*Q.
  ConvCase relu_split = {"wgrad_f16_parallel5_relu_beta",          wgrad, f16, f16, f32,
                         conv_shape(4, 16, 16, 16, 32, 3, 3, 1, 1)};
  relu_split.activation = Activation::ReLU;
  relu_split.alpha = 2.0;
  relu_split.beta = -1.0;
  split(relu_split, parallel, 5);
  ConvCase leaky_split = {"wgrad_tf32_parallel3_leaky_relu",       wgrad, f32, f32, f32,
                          conv_shape(4, 12, 12, 8, 16, 3, 3, 2, 1)};
  leaky_split.activation = Activation::LeakyReLU;
  leaky_split.activation_parameter = 0.5;
  split(leaky_split, parallel, 3);
  ConvCase simt_split = {"wgrad_f32_simt_odd_parallel4",        wgrad,        f32, f32, f32,
                         conv_shape(3, 9, 9, 3, 5, 3, 3, 1, 1), OpClass::Simt};
  split(simt_split, parallel, 4);
  split({"wgrad_bf16_parallel_auto_count", wgrad, bf16, bf16, f32, conv_shape(8, 16, 16, 16, 16, 3, 3, 1, 1)}, parallel,
        0);
  split({"fprop_f16_parallel3", fprop, f16, f16, f32, conv_shape(2, 8, 8, 64, 32, 3, 3, 1, 1)}, parallel, 3);
  split({"dgrad_f16_unity_parallel2", dgrad, f16, f16, f32, conv_shape(2, 8, 8, 64, 64, 3, 3, 1, 1)}, parallel, 2);
  // No split-K setting: run() splits this wgrad itself (a 32 x 32 output over N*P*Q = 16384).
  out.push_back({"wgrad_f16_auto_split", wgrad, f16, f16, f32, conv_shape(16, 32, 32, 32, 32, 1, 1, 1, 0)});
  ConvCase relu = {"fprop_f16_relu_alpha_beta", fprop, f16, f16, f32, conv_shape(2, 8, 8, 16, 24, 3, 3, 1, 1)};
  relu.activation = Activation::ReLU;
  relu.alpha = 2.0;
  relu.beta = -1.0;
  out.push_back(relu);
  ConvCase leaky = {"dgrad_f32_leaky_relu", dgrad, f32, f32, f32, conv_shape(2, 8, 8, 8, 8, 3, 3, 1, 1)};
  leaky.activation = Activation::LeakyReLU;
  leaky.activation_parameter = 0.5;  // exact on integers
  out.push_back(leaky);
  ConvCase analytic = {"fprop_f16_analytic", fprop, f16, f16, f32, conv_shape(2, 9, 9, 16, 16, 3, 3, 2, 1)};
  analytic.iterator = IteratorAlgorithm::Analytic;
  out.push_back(analytic);
  return out;
}

// The SM90 family (kernel_cc 90, TMA im2col): fprop, dgrad and wgrad; strides 1 and 2 (dgrad: 1, its only one),
// padding, dilation; 1x1, 3x3 and 7x7 filters; f16 (f32 and f16 accumulation), bf16, tf32 (fprop); activations,
// alpha and beta with C. The rows conv_cases() has too are taken from it by name; the others are SM90's own.
inline std::vector<ConvCase> conv90_cases() {
  const DataType f16 = DataType::f16, f32 = DataType::f32;
  const ConvKind dgrad = ConvKind::Dgrad, wgrad = ConvKind::Wgrad;
  const std::vector<ConvCase> all = conv_cases();
  std::vector<ConvCase> out;
  // conv_cases()'s row `name`, named `as` here (the test names stay those the SM90 list has always had).
  auto take = [&](const std::string& name, const std::string& as) {
    const auto row = std::find_if(all.begin(), all.end(), [&](const ConvCase& c) { return c.name == name; });
    if (row == all.end()) throw std::logic_error("conv90_cases: conv_cases() has no row " + name);
    out.push_back(*row);
    out.back().name = as;
  };
  auto shared = [&](std::initializer_list<const char*> names) {
    for (const char* name : names) take(name, name);
  };
  shared({"fprop_f16_3x3", "fprop_f16_1x1", "fprop_f16_7x7_stride2", "fprop_f16_3x3_stride2_dilation2",
          "fprop_f16_acc_f16", "fprop_bf16", "fprop_tf32"});
  take("dgrad_f16_3x3_unity", "dgrad_f16_3x3");  // SM90 dgrad has unit stride only
  out.push_back({"dgrad_f16_1x1", dgrad, f16, f16, f32, conv_shape(2, 8, 8, 32, 16, 1, 1, 1, 0)});
  shared({"dgrad_f16_3x3_dilation2", "dgrad_bf16", "wgrad_f16_3x3", "wgrad_f16_7x7_stride2"});
  out.push_back({"wgrad_f16_3x3_dilation2", wgrad, f16, f16, f32, conv_shape(2, 12, 12, 16, 16, 3, 3, 1, 2, 2)});
  shared({"wgrad_bf16", "fprop_f16_relu_alpha_beta"});
  // Strided 1x1 (ResNet's downsampling): with H = 2P the batched GEMM (alpha, beta, C and ReLU; an odd W; strides
  // 2 x 1), with an odd H and for wgrad the conv kernel. Short fprop conv reductions (most fprop cases here: K = 32 is
  // one step) run at 4 stages.
  ConvCase strided = {
      "fprop_f16_1x1_stride2", ConvKind::Fprop, f16, f16, f32, conv_shape(3, 12, 10, 32, 48, 1, 1, 2, 0)};
  strided.activation = Activation::ReLU;
  strided.alpha = 2.0;
  strided.beta = -1.0;
  out.push_back(strided);
  out.push_back(
      {"fprop_f16_1x1_stride2_odd_w", ConvKind::Fprop, f16, f16, f32, conv_shape(2, 8, 9, 32, 48, 1, 1, 2, 0)});
  ConvCase uneven = {
      "fprop_f16_1x1_stride2x1", ConvKind::Fprop, f16, f16, f32, conv_shape(2, 8, 6, 32, 48, 1, 1, 1, 0)};
  uneven.shape.geometry.stride = {2, 1};  // rows 2 apart, columns adjacent: the batch stride is C
  out.push_back(uneven);
  out.push_back(
      {"fprop_f16_1x1_stride2_odd_h", ConvKind::Fprop, f16, f16, f32, conv_shape(2, 11, 9, 32, 48, 1, 1, 2, 0)});
  out.push_back({"wgrad_f16_1x1_stride2", wgrad, f16, f16, f32, conv_shape(3, 12, 10, 32, 48, 1, 1, 2, 0)});
  ConvCase leaky = {"dgrad_f16_leaky_relu", dgrad, f16, f16, f32, conv_shape(2, 8, 8, 16, 16, 3, 3, 1, 1)};
  leaky.activation = Activation::LeakyReLU;
  leaky.activation_parameter = 0.5;  // exact on integers
  out.push_back(leaky);
  for (ConvCase& c : out) c.kernel_cc = 90;
  return out;
}

inline Conv2d conv_plan(const ConvCase& c, int cc) {
  Conv2dOptions o;
  o.kernel_cc = c.kernel_cc;
  o.kind = c.kind;
  o.element_a = o.element_b = c.ab;
  o.element_c = o.element_d = c.cd;
  o.element_accumulator = c.accumulator;
  o.cc = cc;
  Conv2d plan(o);
  if (plan.opclass() != c.opclass) plan.set_opclass(c.opclass);
  if (c.activation != Activation::Identity) plan.set_activation(c.activation, c.activation_parameter);
  if (c.iterator) plan.set_iterator_algorithm(c.iterator);
  if (c.split_k_mode) plan.set_split_k(c.split_k_mode, c.split_k_slices);
  return plan;
}

// The kernel run() takes for a case, asked with views at 256-byte aligned fake addresses (never read).
inline KernelSpec conv_spec(const ConvCase& c, int cc) {
  Conv2d plan = conv_plan(c, cc);
  alignas(256) static char base[256];
  auto view = [&](DataType type, const verify::Extent4& e) {
    return TensorView::strided(base, type, {e[0], e[1], e[2], e[3]}, {e[1] * e[2] * e[3], e[2] * e[3], e[3], 1}, 0);
  };
  const TensorView a = view(c.ab, c.shape.a(c.kind)), b = view(c.ab, c.shape.b(c.kind)),
                   d = view(c.cd, c.shape.d(c.kind));
  return plan.spec_for(a, b, c.beta != 0.0 ? &d : nullptr, d, c.shape.geometry, c.beta);
}

// How gtest prints a case (and so how ctest lists the test): its name, not a dump of its bytes.
inline void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.name;
}

}  // namespace gemmkit::gpu_cases
