// tools/gemmkit/commands/run_conv.cpp: gemmkit run --conv KIND: one Conv2d on small-integer data, timed and checked.
#include "commands/run.hpp"

#include "command.hpp"
#include "gemmkit/device.hpp"
#include "plan_options.hpp"
#include "verify/conv_reference.hpp"
#include "verify/device_buffer.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {

int run_conv(gk::Conv2d& plan, const Values& args, bool check, const Output& output) {
  using gk::verify::DeviceBuffer;
  using gk::verify::HostMatrix;
  const auto shape = conv_shape(args);
  gk::Conv2d::output_size(shape.input(), shape.filter(), shape.geometry);
  const gk::ConvKind kind = plan.kind();
  const std::int64_t repeat = *args.integer("repeat");
  const double alpha = *args.real("alpha"), beta = *args.real("beta");
  HostMatrix A = gk::verify::conv_tensor(plan.element_a(), shape.a(kind));
  HostMatrix B = gk::verify::conv_tensor(plan.element_b(), shape.b(kind));
  HostMatrix C = gk::verify::conv_tensor(plan.element_c(), shape.d(kind));
  HostMatrix D = gk::verify::conv_tensor(plan.element_d(), shape.d(kind));
  const int ab = gk::bits_of(plan.element_accumulator()) <= 16 ? 1 : 2;
  A.fill_integers(1, -ab, ab);
  B.fill_integers(2, -ab, ab);
  C.fill_integers(3, -4, 4);
  const DeviceBuffer dA(A), dB(B), dC(C), dD(D);
  const int device = gk::current_device();
  const auto vA = gk::verify::conv_view(A, shape.a(kind), dA.get(), device);
  const auto vB = gk::verify::conv_view(B, shape.b(kind), dB.get(), device);
  const auto vC = gk::verify::conv_view(C, shape.d(kind), dC.get(), device);
  const auto vD = gk::verify::conv_view(D, shape.d(kind), dD.get(), device);
  const gk::KernelSpec spec = plan.spec_for(vA, vB, &vC, vD, shape.geometry, beta);
  const gk::Conv2dSplitK split = plan.split_k_for(vA, vB, &vC, vD, shape.geometry, beta);
  gk::RunOptions options;
  const auto run = [&] { plan.run(vA, vB, &vC, vD, shape.geometry, alpha, beta, options); };
  const double first_seconds = first_run_seconds(run);  // compile or load
  dD.copy_to(D);  // before the timed runs: with beta != 0 each run reads C, so D is the same, but keep the first
  options.sync = false;
  const double seconds = seconds_per_run(repeat, run);
  const double tflops = shape.flops() / seconds / 1e12;
  Json out = {{"kernel_name", spec.name()},
              {"conv", gk::to_string(kind)},
              {"n", shape.n},
              {"h", shape.h},
              {"w", shape.w},
              {"c", shape.c},
              {"k", shape.k},
              {"r", shape.r},
              {"s", shape.s},
              {"p", shape.p()},
              {"q", shape.q()},
              {"split_k_mode", gk::to_string(split.mode)},
              {"split_k_slices", split.slices},
              {"first_run_seconds", first_seconds},
              {"seconds_per_run", seconds},
              {"tflops", tflops}};
  std::string text = "kernel: " + spec.name() + "\nsplit-K: " + std::string(gk::to_string(split.mode)) + " x" +
                     std::to_string(split.slices) + "\nfirst run (compile or load): " + fixed(first_seconds, 1) +
                     " s\n" + fixed(tflops, 1) + " TFLOP/s\n";
  if (!check) {
    output.print(out, text);
    return 0;
  }
  const gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(), nullptr, gk::BiasMode::None};
  const auto cmp = gk::verify::compare_conv(kind, shape, A, B, &C, D, alpha, beta, epilogue);
  const bool ok = add_check(cmp, plan.element_d(), false, out, text);
  output.print(out, text);
  return ok ? 0 : 1;
}

}  // namespace gemmkit::cli
