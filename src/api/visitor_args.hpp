// src/api/visitor_args.hpp: checking the named tensors and scalars of an epilogue visitor tree for one run().
#pragma once

#include <cstdint>
#include <vector>

#include "epilogue/plain_form.hpp"
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

// The options a plain-form tree (epilogue::plain_form) runs its fused kernel with: its bias and scale vectors taken
// from visitor_args by the tree's names, alpha and beta set to its factors' values (named scalars from visitor_args,
// alpha and beta defaulting to run()'s; a tree without C gets beta 0). TensorError naming the argument otherwise.
// Whether visitor_args gives one of a plain-form tree's vectors per batch ((L, 1, N) or (L, M, 1) with L > 1), which
// only the tree's own visitor kernel reads.
bool plain_vectors_per_batch(const epilogue::PlainForm& form, const RunOptions& options);

RunOptions plain_run_options(const epilogue::Epilogue& tree, const epilogue::PlainForm& form, const RunOptions& options,
                             double& alpha, double& beta);

// run()'s C or D, or the tensor visitor_args gives by that name (the reference passes both); TensorError when they
// are different tensors.
const TensorView* visitor_tensor(const RunOptions& options, const char* name, const TensorView* given);

}  // namespace gemmkit::detail
