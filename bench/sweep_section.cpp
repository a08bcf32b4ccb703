// bench/sweep_section.cpp: every valid configuration of the f16 plan on a set of shapes against cuBLAS (the best
// per shape prepares autotuning), and Stream-K against data-parallel tiling on wave-quantized and long-K shapes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <regex>

#include "bench.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/jit.hpp"

namespace bench {
namespace {

std::string tile_text(const gk::TileDescription& td) {
  const auto cta = td.cta_tile();
  std::string s = std::to_string(cta[0]) + "x" + std::to_string(cta[1]) + "x" + std::to_string(cta[2]) + " c" +
                  std::to_string(td.cluster_shape[0]) + "x" + std::to_string(td.cluster_shape[1]) + " " +
                  std::string(gk::to_string(td.kernel_schedule)) + "/" +
                  std::string(gk::to_string(td.epilogue_schedule));
  if (td.tile_scheduler == gk::TileScheduler::StreamK) s += " StreamK";
  if (td.stages) s += " s" + std::to_string(td.stages);
  return s;
}

// The configurations the sweep times: the f16 plan's, those --configs names.
std::vector<gk::TileDescription> sweep_tiles(const Context& ctx) {
  std::vector<gk::TileDescription> tiles = default_plan(gk::DataType::f16, ctx).tile_descriptions();
  if (!ctx.options.configs.empty()) {
    const std::regex wanted(ctx.options.configs);
    std::erase_if(tiles, [&](const gk::TileDescription& td) { return !std::regex_search(tile_text(td), wanted); });
  }
  return tiles;
}

}  // namespace

std::vector<Shape> sweep_shapes(const Context& ctx) {
  std::vector<Shape> shapes = ctx.options.shapes;
  for (const Shape& extra : {Shape{1024, 1024, 4096}, Shape{128, 8192, 8192}, Shape{512, 512, 16384}}) {
    shapes.push_back(extra);
  }
  return shapes;
}

namespace {

// The f16 plan's kernel for each configuration.
std::vector<gk::KernelSpec> kernels_of(const Context& ctx, const std::vector<gk::TileDescription>& tiles) {
  std::vector<gk::KernelSpec> specs;
  for (const auto& td : tiles) {
    gk::Gemm plan = default_plan(gk::DataType::f16, ctx);
    plan.set_tile_description(td);
    specs.push_back(plan.spec());
  }
  return specs;
}

}  // namespace

std::vector<gk::KernelSpec> sweep_kernels(const Context& ctx) {
  return kernels_of(ctx, sweep_tiles(ctx));
}

SectionResult sweep_section(Context& ctx) {
  SectionResult result;
  const gk::DataType t = gk::DataType::f16;
  const std::vector<gk::TileDescription> tiles = sweep_tiles(ctx);
  gk::compile_many(kernels_of(ctx, tiles));  // every configuration first, in parallel

  const std::vector<Shape> shapes = sweep_shapes(ctx);
  Table best_table{{"M x N x K", "cuBLAS TFLOP/s", "default TFLOP/s", "default / cuBLAS", "best configuration",
                    "best TFLOP/s", "best / cuBLAS"},
                   {}};
  Value rows = Value::array();
  for (const Shape& s : shapes) {
    std::printf("sweep %s: %zu configurations ...\n", s.text().c_str(), tiles.size());
    std::fflush(stdout);
    Operands b(t, s);
    const double cublas_ms = time_cublas(ctx, t, s, b);
    gk::Gemm default_plan_for_shape = default_plan(t, ctx);
    const double default_ms = time_plan(ctx, default_plan_for_shape, t, s, b);
    Value row = Value::object();
    row["shape"] = s.text();
    row["cublas_tflops"] = tflops(s, cublas_ms);
    row["default_kernel"] = planned_spec(default_plan_for_shape, s).name();
    row["default_tflops"] = tflops(s, default_ms);
    Value configs = Value::array();
    double best_ms = std::numeric_limits<double>::infinity();
    std::size_t best = 0;
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      gk::Gemm plan = default_plan(t, ctx);
      plan.set_tile_description(tiles[i]);
      Value c = Value::object();
      c["index"] = static_cast<int>(i);
      c["config"] = tile_text(tiles[i]);
      try {
        const double ms = time_plan(ctx, plan, t, s, b);
        c["tflops"] = tflops(s, ms);
        c["ratio_vs_cublas"] = cublas_ms / ms;
        if (ms < best_ms) {
          best_ms = ms;
          best = i;
        }
      } catch (const std::exception& e) {
        c["error"] = e.what();
        (void)cudaGetLastError();
      }
      configs.push_back(c);
    }
    row["configs"] = configs;
    row["best_index"] = static_cast<int>(best);
    row["best_config"] = tile_text(tiles[best]);
    row["best_tflops"] = tflops(s, best_ms);
    rows.push_back(row);
    best_table.rows.push_back({s.text(), fixed(tflops(s, cublas_ms), 1), fixed(tflops(s, default_ms), 1),
                               fixed(cublas_ms / default_ms, 3), tile_text(tiles[best]), fixed(tflops(s, best_ms), 1),
                               fixed(cublas_ms / best_ms, 3)});
  }
  result.json["dtype"] = "f16";
  result.json["configurations"] = static_cast<int>(tiles.size());
  result.json["rows"] = rows;
  const std::string title = ctx.options.configs.empty()
                                ? "## Configuration sweep (f16, every valid configuration; best per shape)\n\n"
                                : "## Configuration sweep (f16, the configurations matching `" + ctx.options.configs +
                                      "`; best per shape)\n\n";
  if (!ctx.options.configs.empty()) {  // a chosen few: no Stream-K comparison (it needs the default tile)
    result.markdown = title + best_table.markdown();
    return result;
  }

  // Stream-K against data-parallel tiles: one tile over a whole number of waves, and long K with small M, N.
  const int sms = gk::device_info(ctx.device).sm_count;
  const auto cta = tiles.front().cta_tile();
  std::vector<Shape> streamk_shapes = {
      {static_cast<std::int64_t>(cta[0]) * (2 * sms + 1), cta[1], 4096},  // 2 waves + 1 tile
      {static_cast<std::int64_t>(cta[0]) * (sms + 1), cta[1] * 3, 4096},  // (132+1) x 3 tiles
      {512, 512, 16384},
      {256, 1024, 16384}};
  Table streamk_table{{"M x N x K", "data-parallel TFLOP/s", "Stream-K TFLOP/s", "Stream-K / DP", "cuBLAS TFLOP/s"},
                      {}};
  Value streamk_rows = Value::array();
  for (const Shape& s : streamk_shapes) {
    Operands b(t, s);
    gk::Gemm dp = default_plan(t, ctx);
    dp.set_tile_description(tiles.front());
    gk::Gemm sk = default_plan(t, ctx);
    sk.set_swizzling_functor(gk::Swizzle::StreamK);
    const double dp_ms = time_plan(ctx, dp, t, s, b), sk_ms = time_plan(ctx, sk, t, s, b);
    const double cublas_ms = time_cublas(ctx, t, s, b);
    Value row = Value::object();
    row["shape"] = s.text();
    row["data_parallel_tflops"] = tflops(s, dp_ms);
    row["stream_k_tflops"] = tflops(s, sk_ms);
    row["stream_k_kernel"] = sk.kernel_name();
    row["cublas_tflops"] = tflops(s, cublas_ms);
    streamk_rows.push_back(row);
    streamk_table.rows.push_back({s.text(), fixed(tflops(s, dp_ms), 1), fixed(tflops(s, sk_ms), 1),
                                  fixed(dp_ms / sk_ms, 3), fixed(tflops(s, cublas_ms), 1)});
  }
  result.json["stream_k"] = streamk_rows;
  result.markdown =
      title + best_table.markdown() + "\n## Stream-K vs data-parallel (f16)\n\n" + streamk_table.markdown();
  return result;
}

}  // namespace bench
