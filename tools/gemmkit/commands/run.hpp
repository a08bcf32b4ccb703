// tools/gemmkit/commands/run.hpp: the three ways gemmkit run runs a plan (a GEMM, --grouped, --conv) and what they
// share: the timing of the first and the repeated runs, the tolerance of --check.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "gemmkit/conv2d.hpp"
#include "gemmkit/types.hpp"
#include "messages.hpp"
#include "options.hpp"
#include "verify/host_matrix.hpp"

namespace gemmkit::cli {

// gemmkit run --grouped: --groups problems of M rows drawn from [1, --m] (N and K as given), in one launch.
int run_grouped(const Values& args, bool check, const Output& output);

// gemmkit run --conv KIND: one convolution on small-integer data, timed; --check compares every element of D with
// the float64 reference.
int run_conv(Conv2d& plan, const Values& args, bool check, const Output& output);

// The seconds `run` takes, once (the first run: compile or load).
double first_run_seconds(const std::function<void()>& run);
// The GPU seconds per run of `run` (which launches without waiting) over `repeat` runs, by CUDA events.
double seconds_per_run(std::int64_t repeat, const std::function<void()>& run);

// The largest relative error --check takes in a D of `element`: its rounding (1e-2 for 16 bits and fewer, else 1e-6).
double check_tolerance(DataType element);

// --check's verdict on `cmp` (D of `element`) added to the output (with `rel_error`, the largest relative error too);
// true when D is within check_tolerance.
bool add_check(const verify::Comparison& cmp, DataType element, bool rel_error, Json& out, std::string& text);

}  // namespace gemmkit::cli
