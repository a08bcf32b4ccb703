// tests/support/grouped_probe_list.cpp: the grouped probe's list form: groups of given or random shapes (odd
// sizes, padding, empty groups, a rerun over the same buffers) packed, run and checked, and pack's argument checks.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gemmkit/abi.h"
#include "grouped_probe.hpp"

namespace grouped_probe {

std::vector<gk_grouped_problem> problems_of(const Arena& arena, const std::vector<Group>& groups) {
  std::vector<gk_grouped_problem> out;
  for (const Group& g : groups) {
    gk_grouped_problem p{};
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    p.A = arena.device(g.A);
    p.B = arena.device(g.B);
    p.C = g.has_c ? arena.device(g.C) : nullptr;
    p.D = arena.device(g.D);
    p.lda = g.A.ld;
    p.ldb = g.B.ld;
    p.ldc = g.C.ld;
    p.ldd = g.D.ld;
    out.push_back(p);
  }
  return out;
}

void run_list(const Context& ctx, const gk_grouped_args& args, const std::vector<gk_grouped_problem>& problems,
              Buffers& buffers) {
  int32_t failed = -1;
  const int status = ctx.module.pack(&args, problems.data(), buffers.host, buffers.bytes, &failed);
  if (status != GK_OK) {
    throw Failure("gk_grouped_pack returned " + std::to_string(status) + " for group " + std::to_string(failed));
  }
  CUDA_CHECK(cudaMemcpyAsync(buffers.device, buffers.host, buffers.bytes, cudaMemcpyHostToDevice, ctx.stream));
  ctx.module.expect_ok(ctx.module.run(&args, buffers.device, buffers.workspace, ctx.stream), "gk_grouped_run");
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

namespace {

// Rounds the extents a 2.x module reads in whole vectors (rows of a row-major operand, columns of a column-major one)
// up to the alignment; TMA modules take any extent.
std::array<int, 3> legal(const gk_grouped_info& info, std::array<int, 3> shape) {
  if (!info.aligned_extents) return shape;
  auto& [m, n, k] = shape;
  auto up = [](int& extent, int alignment) { extent = static_cast<int>(round_up(extent, alignment)); };
  up(info.layout_a == GK_ROW_MAJOR ? k : m, info.alignment_a);
  up(info.layout_b == GK_ROW_MAJOR ? n : k, info.alignment_b);
  up(info.layout_c == GK_ROW_MAJOR ? n : m, std::max(info.alignment_c, info.alignment_d));
  return shape;
}

// The list form end to end: groups of the given shapes, checked; `buffers` (optional) is reused.
std::string list_case(Context& ctx, const Shapes& shapes, double alpha, double beta, bool pad,
                      Buffers* reuse = nullptr) {
  std::mt19937_64 rng(ctx.seed + shapes.size());
  Arena arena;
  std::vector<Group> groups;
  for (const auto& shape : shapes) {
    const auto [m, n, k] = legal(ctx.module.info, shape);
    groups.push_back(make_group(arena, ctx.module.info, m, n, k, beta != 0 || pick(rng, 0, 1) == 1, pad, rng));
  }
  arena.upload();
  const gk_grouped_args args = ctx.args(static_cast<int>(shapes.size()), alpha, beta);
  ctx.module.expect_ok(ctx.module.can_implement(&args, nullptr), "gk_grouped_can_implement");
  std::unique_ptr<Buffers> own;
  Buffers& buffers = reuse != nullptr ? *reuse : *(own = std::make_unique<Buffers>(ctx.module, args));
  run_list(ctx, args, problems_of(arena, groups), buffers);
  arena.download();
  if (std::string error = check_groups(arena, groups, ctx.epilogue(args)); !error.empty()) throw Failure(error);
  int empty = 0;
  for (const auto& [m, n, k] : shapes) empty += m == 0 || n == 0 || k == 0;
  return std::to_string(shapes.size()) + " groups, " + std::to_string(empty) + " empty, alpha " +
         std::to_string(alpha) + ", beta " + std::to_string(beta);
}

Shapes random_shapes(std::mt19937_64& rng, int groups, int lo, int hi, int every_nth_empty) {
  Shapes out;
  for (int g = 0; g < groups; ++g) {
    std::array<int, 3> s{pick(rng, lo, hi), pick(rng, lo, hi), pick(rng, lo, hi)};
    if (every_nth_empty > 0 && g % every_nth_empty == every_nth_empty - 1) s[g / every_nth_empty % 3] = 0;
    out.push_back(s);
  }
  return out;
}

}  // namespace

Shapes walkthrough_shapes(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int sizes[] = {128, 256, 512, 1024};
  Shapes out;
  for (int g = 0; g < 50; ++g) out.push_back({sizes[pick(rng, 0, 3)], sizes[pick(rng, 0, 3)], sizes[pick(rng, 0, 3)]});
  return out;
}

void list_tests(Context& ctx) {
  std::mt19937_64 rng(ctx.seed);
  ctx.test("list 1 group", [&] { return list_case(ctx, {{128, 128, 128}}, 1, 0, false); });
  ctx.test("list 2 groups, odd sizes, padded", [&] { return list_case(ctx, {{257, 72, 129}, {3, 5, 7}}, 1, 0, true); });
  ctx.test("list 50 groups (walk-through sizes)",
           [&] { return list_case(ctx, walkthrough_shapes(ctx.seed), 1, 0, false); });
  ctx.test("list 50 groups, odd sizes, empty groups, C",
           [&] { return list_case(ctx, random_shapes(rng, 50, 1, 300, 7), 2, -1, true); });
  ctx.test("list 1000 groups, empty groups, C",
           [&] { return list_case(ctx, random_shapes(rng, 1000, 1, 96, 10), 1, 1, true); });
  ctx.test("list 4096 groups", [&] { return list_case(ctx, random_shapes(rng, 4096, 1, 40, 0), 1, 0, false); });
  ctx.test("list all groups empty", [&] {
    return list_case(ctx, {{0, 64, 64}, {64, 0, 64}, {64, 64, 0}}, 1, 0, false);
  });
  ctx.test("list rerun over the same buffers (prepared launch reused)", [&] {
    const gk_grouped_args args = ctx.args(50, 1, 0);
    Buffers buffers(ctx.module, args);
    list_case(ctx, random_shapes(rng, 50, 1, 200, 0), 1, 0, true, &buffers);
    return list_case(ctx, random_shapes(rng, 50, 1, 200, 5), 1, 0, false, &buffers);
  });

  ctx.test("list pack refuses bad groups", [&] {
    const gk_grouped_info& info = ctx.module.info;
    Arena arena;
    std::vector<Group> groups;
    for (int g = 0; g < 5; ++g) groups.push_back(make_group(arena, info, 64, 64, 64, true, false, rng));
    arena.upload();
    const gk_grouped_args args = ctx.args(5, 1, 1);
    Buffers buffers(ctx.module, args);
    auto expect = [&](std::vector<gk_grouped_problem> problems, int want, int32_t want_group, const char* what) {
      int32_t failed = -1;
      const int status = ctx.module.pack(&args, problems.data(), buffers.host, buffers.bytes, &failed);
      if (status != want || (want != GK_OK && failed != want_group)) {
        throw Failure(std::string(what) + ": status " + std::to_string(status) + " for group " +
                      std::to_string(failed) + ", expected " + std::to_string(want) + " for group " +
                      std::to_string(want_group));
      }
    };
    const auto good = problems_of(arena, groups);
    auto bad = good;
    bad[3].C = nullptr;  // beta is 1
    expect(bad, GK_ERR_ARGS, 3, "C null with beta 1");
    bad = good;
    bad[2].m = -1;
    expect(bad, GK_ERR_ARGS, 2, "negative m");
    bad = good;
    bad[4].ldd = 1;
    expect(bad, GK_ERR_ARGS, 4, "ldd shorter than a row");
    if (info.alignment_a > 1) {
      bad = good;
      bad[1].lda += 1;
      expect(bad, GK_ERR_CANNOT_IMPLEMENT, 1, "lda not a multiple of the alignment");
      bad = good;
      bad[0].A = static_cast<const char*>(bad[0].A) + element_bytes(info.element_a);
      expect(bad, GK_ERR_CANNOT_IMPLEMENT, 0, "A misaligned");
    }
    if (info.aligned_extents && info.alignment_a > 1) {
      bad = good;
      (info.layout_a == GK_ROW_MAJOR ? bad[2].k : bad[2].m) -= 1;
      expect(bad, GK_ERR_CANNOT_IMPLEMENT, 2, "A's row length not a multiple of the alignment (2.x)");
    }
    bad = good;
    bad[1].k = 0;  // empty: its pointers are not looked at
    bad[1].A = bad[1].B = nullptr;
    expect(bad, GK_OK, -1, "empty group with null pointers");
    int32_t failed = -1;
    if (ctx.module.pack(&args, good.data(), buffers.host, buffers.bytes - 1, &failed) != GK_ERR_WORKSPACE) {
      throw Failure("a metadata buffer one byte short was accepted");
    }
    return std::string("null C with beta, negative extent, short ld, misalignment, short buffer");
  });
}

}  // namespace grouped_probe
