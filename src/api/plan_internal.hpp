// src/api/plan_internal.hpp: what the plans' sources share: the checked GEMM problem, the configuration check, and the
// choice between a plan and its twin on other kernels.
#pragma once

#include <exception>
#include <memory>

#include "api/tensor_check.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/plan.hpp"
#include "selection/plan_core.hpp"

namespace gemmkit {

// A GEMM's operands checked against a plan, with the key selection chooses its kernel by.
struct GemmProblem : selection::ProblemKey {
  detail::MatrixOperand a, b, c, d;
};

// Checks A, B, C (may be null when beta is 0) and D against the plan's types, layouts and vectors; TensorError naming
// the operand and what to change.
GemmProblem check_gemm_problem(const selection::PlanCore& core, const TensorView& A, const TensorView& B,
                               const TensorView* C, const TensorView& D, double beta);

// The selection layer's core of a new plan, its tuning-database lookup wired in.
std::unique_ptr<selection::PlanCore> make_core(const selection::PlanConfig& config);

// Sets `field`, and restores it when `check` throws.
template <class Field, class Check>
void assign_checked(Field& field, Field value, const Check& check) {
  const Field previous = field;
  field = value;
  try {
    check();
  } catch (...) {
    field = previous;
    throw;
  }
}

template <class Field>
void Plan::change_checked(Field& field, Field value) {
  const Field previous = field;
  assign_checked(field, value, [&] { (void)spec(); });  // every rule is checked before the plan keeps the value
  if (previous != value) core_->invalidate();
}

// The plan that takes a problem: `own` when check(own) passes; else, where `may_use_twin`, the plan twin() makes or
// finds (a Gemm's or Conv2d's CUTLASS 2.x twin) when check passes on it; otherwise own's error, rethrown.
// `twin_first`: own cannot take the problem (the caller knows it cheaply), so the twin is checked first, sparing
// own's check the cost of building and throwing its error on every call.
template <class Plan, class Check, class Twin>
Plan& plan_taking(Plan& own, bool may_use_twin, const Check& check, const Twin& twin, bool twin_first = false) {
  if (may_use_twin && twin_first) {
    try {
      Plan& other = twin();
      check(other);
      return other;
    } catch (const Error&) {  // own's check says what is wrong, as below
    }
  }
  std::exception_ptr own_error;
  try {
    check(own);
    return own;
  } catch (const Error&) {
    if (!may_use_twin) throw;
    own_error = std::current_exception();
  }
  try {
    Plan& other = twin();
    check(other);
    return other;
  } catch (const Error&) {
    std::rethrow_exception(own_error);
  }
}

}  // namespace gemmkit
