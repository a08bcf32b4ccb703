// tests/support/front_door_case.hpp: one front-door fuzz case as data (the plan, each tensor argument, alpha/beta,
// and the mutations with the verdict they call for), for the generator (front_door_generator.hpp) and the fuzzers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gemmkit/gemm.hpp"
#include "gemmkit/tensor.hpp"

namespace gemmkit::fuzz {

// How a call must end once its mutations are applied: Valid (a kernel, or a result), Invalid (a typed error naming
// one of the mutated operands), Either (one of the two, e.g. a narrower alignment that only some plans accept).
enum class Verdict { Valid, Either, Invalid };

// Which check refuses a broken argument: the tensor checks (spec_for and run), run's bias checks (spec_for takes no
// bias), or run's device check (it asks CUDA for the current device, so it needs a GPU).
enum class Stage { Tensors, Bias, Device };

struct Mutation {
  std::string what;
  std::vector<std::string> operands;  // as error messages name them: "A", "B", "C", "D", "bias"
  Verdict verdict = Verdict::Invalid;
  Stage stage = Stage::Tensors;
  bool exact = true;  // alone, its error names every one of `operands` (else: some of them)
};

// A plan as the fuzzer declares it (explicit types: the generator needs them to draw matching tensors).
struct PlanDraw {
  DataType a = DataType::f16, b = DataType::f16, c = DataType::f16, d = DataType::f16;
  DataType accumulator = DataType::f32;
  Layout layout_a = Layout::RowMajor, layout_b = Layout::RowMajor, layout_c = Layout::RowMajor;
  int cc = 90;
  std::optional<int> kernel_cc;
  std::optional<OpClass> opclass;
  Activation activation = Activation::Identity;
  double activation_parameter = 0.25;  // exact in every float type, so leaky_relu results stay exact
  BiasMode bias = BiasMode::None;

  GemmOptions options() const {
    return {.element = std::nullopt,
            .element_a = a,
            .element_b = b,
            .element_c = c,
            .element_d = d,
            .element_accumulator = accumulator,
            .layout = std::nullopt,
            .layout_a = layout_a,
            .layout_b = layout_b,
            .layout_c = layout_c,
            .cc = cc,
            .kernel_cc = kernel_cc};
  }
  // The plan itself; throws ConfigError when the combination has no kernel.
  Gemm make() const {
    Gemm plan(options());
    // Pinned always: the oracle knows one opclass's rules (an unpinned plan runs narrow operands on its twin of
    // scalar loads).
    plan.set_opclass(opclass.value_or(plan.opclass()));
    if (activation != Activation::Identity) plan.set_activation(activation, activation_parameter);
    if (bias != BiasMode::None) plan.set_bias(bias);
    return plan;
  }
  std::string describe() const {
    std::ostringstream out;
    out << "plan(" << to_string(a) << "," << to_string(b) << "," << to_string(c) << "," << to_string(d) << " acc "
        << to_string(accumulator) << ", " << layout_letter(layout_a) << layout_letter(layout_b)
        << layout_letter(layout_c) << ", cc " << cc;
    if (kernel_cc) out << ", kernel_cc " << *kernel_cc;
    if (opclass) out << ", " << to_string(*opclass);
    out << ", " << to_string(activation) << ", bias " << to_string(bias) << ")";
    return out.str();
  }
};

// One tensor argument: a matrix (or, for the bias, a vector) with leading batch dimensions, from which the view's
// shape and strides are derived; `edits` then break them on purpose.
struct TensorDraw {
  bool present = true;
  DataType dtype = DataType::f16;
  int device = -1;
  bool null_data = false;
  std::int64_t byte_offset = 0;  // from a 256-byte aligned allocation
  bool vector = false;           // rank 1 of `cols` elements (the bias)
  Layout layout = Layout::RowMajor;
  std::int64_t rows = 0, cols = 0, ld = 0;
  // Batch dimensions, outermost first. A dimension of extent 1 takes the arbitrary stride given; the others are
  // packed one after the other, the innermost `batch_gap` elements beyond one matrix.
  std::vector<std::int64_t> batch_shape, unit_strides;
  std::int64_t batch_gap = 0;
  struct Edit {
    int dim = 0;  // from the last dimension: 0 = last
    std::int64_t stride = 0;
  };
  std::vector<Edit> stride_edits;
  int rank_override = -1;  // >= 0: drop leading dimensions, or pad with extent-1 ones, to this rank

  std::int64_t inner() const { return layout == Layout::RowMajor ? cols : rows; }
  std::int64_t outer() const { return layout == Layout::RowMajor ? rows : cols; }
  std::int64_t batch() const {
    std::int64_t n = 1;
    for (auto e : batch_shape) n *= e;
    return n;
  }

  void dims(std::vector<std::int64_t>& shape, std::vector<std::int64_t>& strides) const {
    shape.clear();
    strides.clear();
    if (vector) {
      shape = {cols};
      strides = {1};
    } else {
      // Unused, and so free to pass 2^63, when every batch extent is 1 (as with an overflowing leading dimension).
      std::int64_t stride = 0;
      (void)(__builtin_mul_overflow(outer(), ld, &stride) || __builtin_add_overflow(stride, batch_gap, &stride));
      for (std::size_t i = batch_shape.size(); i-- > 0;) {
        shape.insert(shape.begin(), batch_shape[i]);
        strides.insert(strides.begin(), batch_shape[i] == 1 ? unit_strides[i] : stride);
        // The next stride out; it may pass 2^63 only beyond the outermost dimension, where it is never used.
        if (batch_shape[i] != 1) (void)__builtin_mul_overflow(stride, batch_shape[i], &stride);
      }
      shape.push_back(rows);
      shape.push_back(cols);
      strides.push_back(layout == Layout::RowMajor ? ld : 1);
      strides.push_back(layout == Layout::RowMajor ? 1 : ld);
    }
    for (const Edit& e : stride_edits) {
      if (e.dim < static_cast<int>(strides.size())) strides[strides.size() - 1 - e.dim] = e.stride;
    }
    if (rank_override < 0) return;
    while (static_cast<int>(shape.size()) > rank_override) {
      shape.erase(shape.begin());
      strides.erase(strides.begin());
    }
    while (static_cast<int>(shape.size()) < rank_override) {
      shape.insert(shape.begin(), 1);
      strides.insert(strides.begin(), 0);
    }
  }

  // The view at `base` (+ byte_offset). A rank above kMaxRank keeps its rank but only kMaxRank extents: the view lies.
  TensorView view(void* base) const {
    std::vector<std::int64_t> shape, strides;
    dims(shape, strides);
    TensorView v;
    v.data = null_data ? nullptr : static_cast<char*>(base) + byte_offset;
    v.dtype = dtype;
    v.device = device;
    v.rank = static_cast<int>(shape.size());
    for (int i = 0; i < std::min(v.rank, kMaxRank); ++i) {
      v.shape[i] = shape[i];
      v.strides[i] = strides[i];
    }
    return v;
  }

  // Bytes from the allocation's start to one past the last addressed element; nullopt when the view has a negative
  // extent or stride, or addresses more than `limit` bytes.
  std::optional<std::int64_t> bytes_needed(std::int64_t limit) const {
    std::vector<std::int64_t> shape, strides;
    dims(shape, strides);
    const std::int64_t element = std::max(1, bits_of(dtype) / 8);
    std::int64_t last = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] < 0 || strides[i] < 0) return std::nullopt;
      if (shape[i] == 0) return byte_offset;
      std::int64_t step = 0;
      if (__builtin_mul_overflow(shape[i] - 1, strides[i], &step) || __builtin_add_overflow(last, step, &last) ||
          last > limit) {
        return std::nullopt;
      }
    }
    if (last + 1 > (limit - byte_offset) / element) return std::nullopt;
    return byte_offset + (last + 1) * element;
  }

  std::string describe(const char* name) const {
    if (!present) return std::string(name) + ": none\n";
    std::vector<std::int64_t> shape, strides;
    dims(shape, strides);
    std::ostringstream out;
    out << name << ": " << to_string(dtype) << " shape (";
    for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? "," : "") << shape[i];
    out << ") strides (";
    for (std::size_t i = 0; i < strides.size(); ++i) out << (i ? "," : "") << strides[i];
    out << ") +" << byte_offset << " bytes, device " << device << (null_data ? ", null" : "") << "\n";
    return out.str();
  }
};

struct Case {
  std::uint64_t seed = 0;
  PlanDraw plan;
  int plan_index = -1;  // into Profile::plans, when drawn from there
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  TensorDraw a, b, c, d, bias;
  double alpha = 1.0, beta = 0.0;
  std::vector<Mutation> mutations;

  // The strictest verdict of the mutations checked at these stages.
  Verdict verdict(std::initializer_list<Stage> stages) const {
    Verdict v = Verdict::Valid;
    for (const Mutation& mu : mutations) {
      if (std::find(stages.begin(), stages.end(), mu.stage) != stages.end()) v = std::max(v, mu.verdict);
    }
    return v;
  }
  // The operands an error may name: those of every mutation checked at these stages that can break the call.
  std::vector<std::string> suspects(std::initializer_list<Stage> stages) const {
    std::vector<std::string> out;
    for (const Mutation& mu : mutations) {
      if (mu.verdict == Verdict::Valid || std::find(stages.begin(), stages.end(), mu.stage) == stages.end()) continue;
      out.insert(out.end(), mu.operands.begin(), mu.operands.end());
    }
    return out;
  }
  std::string describe() const {
    std::ostringstream out;
    out << "case seed " << seed << ": " << plan.describe() << ", problem " << m << "x" << n << "x" << k << " batch "
        << batch << ", alpha " << alpha << ", beta " << beta << "\n"
        << a.describe("A") << b.describe("B") << c.describe("C") << d.describe("D") << bias.describe("bias")
        << "mutations:";
    for (const Mutation& mu : mutations) out << " [" << mu.what << "]";
    if (mutations.empty()) out << " none";
    return out.str() + "\n";
  }
};

}  // namespace gemmkit::fuzz
