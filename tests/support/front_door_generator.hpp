// tests/support/front_door_generator.hpp: draws seeded front-door fuzz cases (front_door_case.hpp): a plan, tensors
// valid for it, then 0 to 3 mutations, each recording which operands it breaks and whether the call must then fail.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gemmkit/gemm.hpp"
#include "gemmkit/tensor.hpp"
#include "support/front_door_case.hpp"

namespace gemmkit::fuzz {

// What the generator may draw.
struct Profile {
  // Plans to draw from; empty: random types, layouts, architectures, opclasses, activations and biases.
  std::vector<PlanDraw> plans;
  // GPU runs: small problems only, and only leading dimensions, extents and offsets that are either aligned to the
  // widest vector or not even element-aligned (odd), so that no narrow-alignment kernel is ever needed.
  bool gpu = false;
};

inline const std::vector<DataType>& all_data_types() {
  static const std::vector<DataType> kAll = {DataType::f16,  DataType::bf16, DataType::f32,
                                             DataType::tf32, DataType::f64,  DataType::s8,
                                             DataType::u8,   DataType::s32,  DataType::void_t};
  return kAll;
}

class Generator {
 public:
  Generator(std::uint64_t seed, const Profile& profile) : rng_(seed), seed_(seed), profile_(profile) {}

  // One call: a plan, and tensors valid for it, then 0 to 3 mutations.
  Case draw() {
    Case x;
    x.seed = seed_;
    if (profile_.plans.empty()) {
      x.plan = random_plan();
    } else {
      x.plan_index = static_cast<int>(uniform(0, static_cast<std::int64_t>(profile_.plans.size()) - 1));
      x.plan = profile_.plans[static_cast<std::size_t>(x.plan_index)];
    }
    draw_valid(x);
    const int count = chance(0.35) ? 0 : chance(0.7) ? 1 : static_cast<int>(uniform(2, 3));
    for (int i = 0; i < count; ++i) mutate(x);
    // A tensor without elements may come without data: gemmkit reads nothing of it.
    const std::pair<const char*, const TensorDraw*> tensors[] = {{"A", &x.a}, {"B", &x.b}, {"C", &x.c}, {"D", &x.d}};
    for (Mutation& mu : x.mutations) {
      for (const auto& [name, t] : tensors) {
        if (mu.what == std::string("null ") + name && (t->rows == 0 || t->cols == 0 || t->batch() == 0)) {
          mu.verdict = Verdict::Either;
        }
      }
    }
    return x;
  }

 private:
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  T pick(const std::vector<T>& values) {
    return values[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(values.size()) - 1))];
  }

  // Mostly combinations gemmkit has kernels for; sometimes any types at all (the plan is then usually refused).
  PlanDraw random_plan() {
    PlanDraw p;
    struct Types {
      DataType ab, cd, acc;
    };
    static const std::vector<Types> kSupported = {
        {DataType::f16, DataType::f16, DataType::f32}, {DataType::f16, DataType::f32, DataType::f32},
        {DataType::f16, DataType::f16, DataType::f16}, {DataType::bf16, DataType::bf16, DataType::f32},
        {DataType::f32, DataType::f32, DataType::f32}, {DataType::f64, DataType::f64, DataType::f64},
        {DataType::s8, DataType::s32, DataType::s32},  {DataType::s8, DataType::s8, DataType::s32}};
    if (chance(0.85)) {
      const Types t = pick(kSupported);
      p.a = p.b = t.ab;
      p.c = p.d = t.cd;
      p.accumulator = t.acc;
      if (t.ab == DataType::f16 && chance(0.1)) p.c = DataType::f32;  // 3.x kernels may read an f32 C
    } else {
      p.a = pick(all_data_types());
      p.b = chance(0.5) ? p.a : pick(all_data_types());
      p.c = pick(all_data_types());
      p.d = chance(0.7) ? p.c : pick(all_data_types());
      p.accumulator = pick(all_data_types());
    }
    const std::vector<Layout> layouts = {Layout::RowMajor, Layout::ColumnMajor};
    p.layout_a = pick(layouts);
    p.layout_b = pick(layouts);
    p.layout_c = pick(layouts);
    p.cc = chance(0.5) ? 80 : 90;
    if (chance(0.3)) p.kernel_cc = chance(0.5) ? 80 : 90;
    if (chance(0.2)) p.opclass = chance(0.5) ? OpClass::TensorOp : OpClass::Simt;
    if (chance(0.3)) p.activation = pick(Gemm::activations());
    if (chance(0.25)) p.bias = chance(0.5) ? BiasMode::PerRow : BiasMode::PerColumn;
    return p;
  }

  // An extent along which memory is contiguous for some operand: a multiple of 16 elements (every vector width).
  std::int64_t inner_extent() {
    if (!profile_.gpu && chance(0.03)) return 16 * (std::int64_t{1} << uniform(8, 20));
    return 16 * uniform(1, profile_.gpu ? 4 : 12);
  }
  // Any extent, except on the GPU: a multiple of 8 or odd, as it may become contiguous when a mutation flips a layout.
  std::int64_t outer_extent() {
    if (profile_.gpu) return chance(0.5) ? 8 * uniform(1, 9) : 2 * uniform(0, 36) + 1;
    if (chance(0.02)) return std::numeric_limits<std::int32_t>::max();  // the largest valid one
    if (chance(0.05)) return uniform(1000, 1 << 20);
    return chance(0.2) ? uniform(1, 3) : uniform(1, 300);
  }

  // Leading dimension: the inner extent padded by whole 16-element vectors; batches a whole vector count apart.
  void set_matrix(TensorDraw& t, DataType dtype, Layout layout, std::int64_t rows, std::int64_t cols, int device) {
    t.present = true;
    t.dtype = dtype;
    t.layout = layout;
    t.rows = rows;
    t.cols = cols;
    t.ld = t.inner() + 16 * (chance(0.6) ? 0 : uniform(1, 2));
    t.device = device;
    t.byte_offset = chance(0.7) ? 0 : 16 * uniform(1, 4);
    t.batch_gap = chance(0.7) ? 0 : 16 * uniform(1, 3);
  }
  void resize(TensorDraw& t, std::int64_t rows, std::int64_t cols) {
    const std::int64_t padding = t.ld - t.inner();
    t.rows = rows;
    t.cols = cols;
    t.ld = t.inner() + padding;
  }

  // Batch dimensions holding `count` matrices: one or two dimensions, with extent-1 ones mixed in (at most 4 in all,
  // so the rank stays within a TensorView's 6).
  void set_batch(TensorDraw& t, std::int64_t count) {
    t.batch_shape.clear();
    t.unit_strides.clear();
    auto add = [&](std::int64_t extent) {
      t.batch_shape.push_back(extent);
      t.unit_strides.push_back(extent == 1 && chance(0.5) ? uniform(1, 1 << 20) : 0);
    };
    auto maybe_unit = [&] {
      if (t.batch_shape.size() < 3 && chance(0.25)) add(1);
    };
    maybe_unit();
    if (count == 1) return;
    if (count % 2 == 0 && count >= 4 && chance(0.4)) {
      add(2);
      maybe_unit();
      add(count / 2);
    } else {
      add(count);
    }
    maybe_unit();
  }

  int placement() { return chance(0.5) ? -1 : 0; }

  void draw_valid(Case& x) {
    const PlanDraw& p = x.plan;
    auto inner_of = [&](bool m_inner, bool n_inner, bool k_inner, char dim) {
      const bool inner = (dim == 'm' && m_inner) || (dim == 'n' && n_inner) || (dim == 'k' && k_inner);
      return inner ? inner_extent() : outer_extent();
    };
    const bool row_a = p.layout_a == Layout::RowMajor, row_b = p.layout_b == Layout::RowMajor,
               row_c = p.layout_c == Layout::RowMajor;
    const bool m_inner = !row_a || !row_c, n_inner = row_b || row_c, k_inner = row_a || !row_b;
    x.m = inner_of(m_inner, n_inner, k_inner, 'm');
    x.n = inner_of(m_inner, n_inner, k_inner, 'n');
    x.k = inner_of(m_inner, n_inner, k_inner, 'k');
    x.batch = chance(0.5) ? 1 : uniform(2, profile_.gpu ? 3 : 6);
    set_matrix(x.a, p.a, p.layout_a, x.m, x.k, placement());
    set_matrix(x.b, p.b, p.layout_b, x.k, x.n, placement());
    set_matrix(x.c, p.c, p.layout_c, x.m, x.n, placement());
    set_matrix(x.d, p.d, p.layout_c, x.m, x.n, placement());
    // D holds every batch; A or B holds it too (the other may broadcast); C broadcasts or holds it.
    const bool a_batched = x.batch == 1 || chance(0.7);
    const bool b_batched = !a_batched || chance(0.6);
    set_batch(x.a, a_batched ? x.batch : 1);
    set_batch(x.b, b_batched ? x.batch : 1);
    set_batch(x.c, chance(0.5) ? x.batch : 1);
    set_batch(x.d, x.batch);
    x.alpha = pick(std::vector<double>{1.0, 1.0, 2.0, -1.0, 0.5, 0.0});
    x.beta = chance(0.4) ? 0.0 : pick(std::vector<double>{1.0, -1.0, 2.0});
    x.c.present = x.beta != 0.0 || chance(0.5);
    x.bias = TensorDraw{};
    x.bias.present = p.bias != BiasMode::None;
    x.bias.vector = true;
    x.bias.dtype = p.c;
    x.bias.rows = 1;
    x.bias.cols = p.bias == BiasMode::PerRow ? x.m : x.n;
    x.bias.device = placement();
    if (chance(0.2)) x.bias.rank_override = 2;  // (1, length): a vector all the same
  }

  std::vector<TensorDraw*> operands(Case& x, bool with_bias) {
    std::vector<TensorDraw*> out = {&x.a, &x.b, &x.d};
    if (x.c.present) out.push_back(&x.c);
    if (with_bias && x.bias.present) out.push_back(&x.bias);
    return out;
  }
  static std::string name_of(const Case& x, const TensorDraw* t) {
    return t == &x.a ? "A" : t == &x.b ? "B" : t == &x.c ? "C" : t == &x.d ? "D" : "bias";
  }
  static Stage stage_of(const Case& x, const TensorDraw* t) { return t == &x.bias ? Stage::Bias : Stage::Tensors; }
  // What the plan expects of an operand (mutations never undo one another by restoring it).
  static DataType plan_type(const Case& x, const TensorDraw* t) {
    return t == &x.a ? x.plan.a : t == &x.b ? x.plan.b : t == &x.d ? x.plan.d : x.plan.c;
  }
  static Layout plan_layout(const Case& x, const TensorDraw* t) {
    return t == &x.a ? x.plan.layout_a : t == &x.b ? x.plan.layout_b : x.plan.layout_c;
  }
  // A matrix of at least 2 x 2 in the plan's layout: a stride that breaks it surely breaks the call (a thinner or
  // transposed one may still fit some layout).
  static bool plain(const Case& x, const TensorDraw& t) {
    return t.rows >= 2 && t.cols >= 2 && t.layout == plan_layout(x, &t);
  }
  // Whether every extent is small enough that an extent of 2^33 keeps every span (and stride) below 2^63.
  static bool small(const Case& x) { return std::max({x.m, x.n, x.k}) <= (1 << 24); }

  // Sets one of M, N, K (and every extent, leading dimension and bias that follows it) to `value`.
  void set_dimension(Case& x, char dim, std::int64_t value) {
    auto keep_ld = [](TensorDraw& t, std::int64_t rows, std::int64_t cols) {
      const bool grows = (t.layout == Layout::RowMajor ? cols : rows) > t.ld;
      t.rows = rows;
      t.cols = cols;
      if (grows) t.ld = t.inner();
    };
    if (dim == 'm') x.m = value;
    if (dim == 'n') x.n = value;
    if (dim == 'k') x.k = value;
    keep_ld(x.a, x.m, x.k);
    keep_ld(x.b, x.k, x.n);
    keep_ld(x.c, x.m, x.n);
    keep_ld(x.d, x.m, x.n);
    x.bias.cols = x.plan.bias == BiasMode::PerRow ? x.m : x.n;
  }

  void mutate(Case& x) {
    auto add = [&](std::string what, std::vector<std::string> names, Verdict v, Stage s = Stage::Tensors,
                   bool exact = true) {
      x.mutations.push_back({std::move(what), std::move(names), v, s, exact});
    };
    std::vector<TensorDraw*> targets = operands(x, true);
    TensorDraw& t = *pick(targets);
    const std::string name = name_of(x, &t);
    const Stage stage = stage_of(x, &t);
    const bool is_bias = &t == &x.bias;
    const std::int64_t element = std::max(1, bits_of(t.dtype) / 8);
    // Mutations that set M, N, K or the batch rewrite every operand: only as the first, so none undoes another.
    const bool first = x.mutations.empty();
    switch (uniform(0, 22)) {
      case 0: {  // another element type
        DataType other = plan_type(x, &t);
        while (other == plan_type(x, &t)) other = pick(all_data_types());
        t.dtype = other;
        add("dtype " + name, {name}, Verdict::Invalid, stage);
        return;
      }
      case 1:  // a scalar or a vector where a matrix belongs
        t.rank_override = is_bias ? 0 : static_cast<int>(uniform(0, 1));
        add("rank " + std::to_string(t.rank_override) + " " + name, {name}, Verdict::Invalid, stage);
        return;
      case 2:  // a rank one above what a TensorView holds
        t.rank_override = kMaxRank + 1;
        add("rank 7 " + name, {name}, Verdict::Invalid, stage);
        return;
      case 3: {  // a negative stride
        const int dim = is_bias ? 0 : static_cast<int>(uniform(0, 1));
        t.stride_edits.push_back({dim, -uniform(1, 64)});
        // The bias ignores the stride of an extent-1 dimension.
        const bool matters = !is_bias || t.cols > 1;
        add("negative stride " + name, {name}, matters ? Verdict::Invalid : Verdict::Either, stage);
        return;
      }
      case 4: {  // a zero stride in a matrix dimension
        if (is_bias) break;
        const bool contiguous = chance(0.5);
        t.stride_edits.push_back({(t.layout == Layout::RowMajor) == contiguous ? 0 : 1, 0});
        add("zero stride " + name, {name}, plain(x, t) ? Verdict::Invalid : Verdict::Either);
        return;
      }
      case 5: {  // a zero stride in a batch dimension: a broadcast read, or overlapping outputs
        if (is_bias || t.batch() <= 1) break;
        t.batch_gap = -(t.outer() * t.ld);  // every batch stride becomes 0
        const bool output = &t == &x.d && t.rows > 0 && t.cols > 0;
        add("zero batch stride " + name, {name}, output ? Verdict::Invalid : Verdict::Valid);
        return;
      }
      case 6: {  // rows closer together than a row is long
        if (is_bias || t.inner() < 2 || t.outer() < 2) break;
        t.ld = t.inner() - 1;
        add("overlapping rows " + name, {name}, plain(x, t) ? Verdict::Invalid : Verdict::Either);
        return;
      }
      case 7: {  // a data pointer off by 1..15 bytes (odd only on the GPU: no narrow kernels there)
        if (t.byte_offset % 16 != 0) break;  // once: two offsets could add up to an aligned one
        const std::int64_t delta = profile_.gpu ? 2 * uniform(0, 7) + 1 : uniform(1, 15);
        t.byte_offset += delta;
        // A device bias must be element-aligned; a host one is copied (aligned) to the device first.
        const bool misaligned = delta % element != 0 && (!is_bias || t.device >= 0);
        add("offset +" + std::to_string(delta) + " " + name, {name}, misaligned ? Verdict::Invalid : Verdict::Either,
            stage);
        return;
      }
      case 8:                                    // an odd leading dimension: only narrow-alignment kernels take it
        if (is_bias || t.ld < t.inner()) break;  // not over rows that already overlap
        t.ld += t.ld % 2 == 0 ? 1 : 2;
        add("odd leading dimension " + name, {name}, Verdict::Either);
        return;
      case 9: {  // an odd extent along a contiguous dimension (the same for every operand)
        if (!first) break;
        const char dim = "mnk"[uniform(0, 2)];
        set_dimension(x, dim, 2 * uniform(0, 40) + 1);
        add(std::string("odd ") + dim, {"A", "B", "C", "D"}, Verdict::Either);
        return;
      }
      case 10:  // B's K differs from A's
        resize(x.b, x.b.rows + pick(std::vector<std::int64_t>{1, 16, std::max<std::int64_t>(x.b.rows, 1)}), x.b.cols);
        add("K mismatch", {"A", "B"}, Verdict::Invalid);
        return;
      case 11: {  // C or D of another M x N
        TensorDraw& out = x.c.present && chance(0.5) ? x.c : x.d;
        const std::int64_t delta = pick(std::vector<std::int64_t>{1, 16});
        if (chance(0.5))
          resize(out, out.rows + delta, out.cols);
        else
          resize(out, out.rows, out.cols + delta);
        add("shape " + name_of(x, &out), {name_of(x, &out)}, Verdict::Invalid);
        return;
      }
      case 12: {  // batch counts that cannot broadcast
        const int which = static_cast<int>(uniform(0, 2));
        const std::int64_t wrong = std::max<std::int64_t>(x.batch, 1) + uniform(1, 3);
        if (which == 0) {
          set_batch(x.a, wrong);
          set_batch(x.b, wrong + 1);
          add("batch A != B", {"A", "B"}, Verdict::Invalid);
        } else if (which == 1 || !x.c.present) {
          set_batch(x.d, x.batch == 1 ? wrong : 1);
          add("batch D", {"D"}, Verdict::Invalid);
        } else {
          set_batch(x.c, wrong);
          add("batch C", {"C"}, Verdict::Invalid);
        }
        return;
      }
      case 13:  // beta without C
        x.c.present = false;
        x.beta = pick(std::vector<double>{1.0, -1.0, 0.5});
        add("beta without C", {"C"}, Verdict::Invalid);
        return;
      case 14:  // no data
        t.null_data = true;
        add("null " + name, {name}, Verdict::Invalid, stage);
        return;
      case 15: {  // M, N or K beyond 2^31 - 1 (the kernels' int32 extents)
        if (!first || !small(x)) break;
        const char dim = "mnk"[uniform(0, 2)];
        set_dimension(x, dim, std::int64_t{1} << uniform(31, 33));  // no span passes 2^63
        const std::vector<std::string> names = dim == 'm'   ? std::vector<std::string>{"A", "D"}
                                               : dim == 'n' ? std::vector<std::string>{"B", "D"}
                                                            : std::vector<std::string>{"A", "B"};
        add(std::string("huge ") + dim, names, Verdict::Invalid);
        return;
      }
      case 16: {  // an extent or stride whose span overflows 64 bits
        if (is_bias || !small(x) || t.ld > (1 << 30) || t.outer() * t.ld > (std::int64_t{1} << 40)) break;
        const bool one_matrix = std::all_of(t.batch_shape.begin(), t.batch_shape.end(), [](auto e) { return e == 1; });
        if (t.outer() >= 3 && one_matrix && chance(0.5)) {
          t.ld = std::int64_t{1} << 62;  // (outer - 1) * ld passes 2^63, unless the tensor addresses nothing
          const bool empty = t.rows == 0 || t.cols == 0 || t.batch() == 0;
          add("overflowing span " + name, {name}, empty ? Verdict::Valid : Verdict::Invalid);
        } else {
          t.batch_shape = {std::int64_t{1} << 40, 3};
          t.unit_strides = {0, 0};
          t.batch_gap = (std::int64_t{1} << 40) - t.outer() * t.ld;
          // An empty tensor addresses nothing, but its batch count still differs from the others'.
          add("overflowing batch " + name, {"A", "B", "C", "D"}, Verdict::Invalid, Stage::Tensors, false);
        }
        return;
      }
      case 17:  // K = 0: nothing to sum; an error unless the output is empty anyway
        if (!first) break;
        set_dimension(x, 'k', 0);
        add("K = 0", {"A", "B"}, x.m == 0 || x.n == 0 || x.batch == 0 ? Verdict::Valid : Verdict::Invalid);
        return;
      case 18: {  // an empty output: nothing to do
        if (!first) break;
        const int which = static_cast<int>(uniform(0, 2));
        if (which < 2) {
          set_dimension(x, which == 0 ? 'm' : 'n', 0);
        } else {
          x.batch = 0;
          set_batch(x.d, 0);
          set_batch(x.a, 0);
          if (x.b.batch() != 1) set_batch(x.b, 0);
          if (x.c.batch() != 1) set_batch(x.c, 0);
        }
        add("empty output", {}, Verdict::Valid);
        return;
      }
      case 19: {  // the other layout
        if (is_bias || t.layout != plan_layout(x, &t)) break;
        const bool ambiguous = t.rows <= 1 || t.cols <= 1;
        t.layout = t.layout == Layout::RowMajor ? Layout::ColumnMajor : Layout::RowMajor;
        t.ld = t.inner() + 16 * uniform(0, 1);
        add("layout " + name, {name}, ambiguous ? Verdict::Either : Verdict::Invalid);
        return;
      }
      case 20: {  // a bias the plan does not take, a missing one, or one of the wrong length
        if (x.plan.bias == BiasMode::None) {
          x.bias.present = true;
          x.bias.vector = true;
          x.bias.dtype = x.plan.c;
          x.bias.cols = x.n;
          add("unexpected bias", {"bias"}, Verdict::Invalid, Stage::Bias);
        } else if (chance(0.5)) {
          x.bias.present = false;
          add("missing bias", {"bias"}, Verdict::Invalid, Stage::Bias);
        } else if (x.bias.present && x.bias.cols == (x.plan.bias == BiasMode::PerRow ? x.m : x.n)) {
          x.bias.cols += pick(std::vector<std::int64_t>{1, -1, 16});
          add("bias length", {"bias"}, Verdict::Invalid, Stage::Bias);
        } else {
          break;  // its length is already wrong
        }
        return;
      }
      case 21: {  // a strided bias
        if (!x.bias.present) break;
        x.bias.stride_edits.push_back({0, 2});
        add("strided bias", {"bias"}, x.bias.cols > 1 ? Verdict::Invalid : Verdict::Either, Stage::Bias);
        return;
      }
      case 22: {  // a device other than the current one (0)
        t.device = pick(std::vector<int>{1, 7});
        add("device " + std::to_string(t.device) + " " + name, {name}, Verdict::Invalid, Stage::Device);
        return;
      }
    }
    mutate(x);  // this kind does not apply to the operand drawn: draw again
  }

  std::mt19937_64 rng_;
  std::uint64_t seed_;
  const Profile& profile_;
};

}  // namespace gemmkit::fuzz
