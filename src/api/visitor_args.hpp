// src/api/visitor_args.hpp: checking the named tensors and scalars of an epilogue visitor tree for one run().
#pragma once

#include <cstdint>
#include <vector>

#include "gemmkit/epilogue.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/plan.hpp"
#include "runtime/launch.hpp"

namespace gemmkit::detail {

// One operand per node of spec's tree, in the tree's order (the ABI's gk_visitor_operand array): every tensor checked
// for its type, shape (m x n matrices, (1, n) rows, (m, 1) columns, per-batch scalars; an input may broadcast over
// the batch), contiguity and the alignment the spec's kernel loads or stores it with; every scalar found or defaulted
// (alpha and beta to run()'s). Throws TensorError naming the argument and the node; nothing has run.
std::vector<runtime::VisitorOperand> check_visitor_args(const KernelSpec& spec, const RunOptions& options, double alpha,
                                                        double beta, std::int64_t m, std::int64_t n,
                                                        std::int64_t batch);

// run()'s C or D, or the tensor visitor_args gives by that name (the reference passes both); TensorError when they
// are different tensors.
const TensorView* visitor_tensor(const RunOptions& options, const char* name, const TensorView* given);

}  // namespace gemmkit::detail
