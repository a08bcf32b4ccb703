// tools/gemmkit/commands/prebuild.cpp: gemmkit prebuild: a pack of kernels built into the cache in parallel.
#include <algorithm>
#include <chrono>
#include <memory>
#include "commands/commands.hpp"
#include "gemmkit/cache.hpp"
#include "gemmkit/jit.hpp"
#include "gemmkit/packs.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {
namespace {

// What gemmkit prebuild parses.
struct PrebuildArgs {
  std::string pack, pack_file;
  bool quiet = false;
};

// Builds a pack into the cache in parallel, showing progress on stderr (a bar on a terminal, lines otherwise).
int cmd_prebuild(const std::string& pack, const std::string& pack_file, bool quiet, const Output& output) {
  const std::vector<gk::KernelSpec> specs = pack_of(pack, pack_file, "gemmkit prebuild");
  const auto start = std::chrono::steady_clock::now();
  const auto style = quiet || output.json ? gk::ProgressStyle::Quiet : gk::default_progress_style();
  const std::vector<gk::CompiledKernel> built = gk::compile_many(specs, gk::progress_printer(style));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto misses = std::count_if(built.begin(), built.end(), [](const auto& k) { return !k.cache_hit; });
  Json out = {{"pack", pack.empty() ? pack_file : pack},
              {"kernels", built.size()},
              {"built", misses},
              {"seconds", seconds},
              {"cache", gk::DiskCache().root()},
              {"list", built}};
  output.print(out, "pack " + (pack.empty() ? pack_file : pack) + ": " + std::to_string(built.size()) + " kernels, " +
                        std::to_string(misses) + " built, " + std::to_string(built.size() - misses) +
                        " already in the cache " + gk::DiskCache().root() + " (" + fixed(seconds, 1) + " s)\n");
  return 0;
}

}  // namespace

Command add_prebuild(CLI::App& gemmkit, Shared& shared) {
  CLI::App* app =
      add_command(gemmkit, "prebuild", "build a pack of kernels into the cache, in parallel (no GPU needed)", shared);
  auto args = std::make_shared<PrebuildArgs>();
  app->add_option("--pack", args->pack, "a named pack: defaults (sm80 and sm90 x f16/bf16/f32/tf32 x layouts)")
      ->type_name("NAME");
  app->add_option("--pack-file", args->pack_file,
                  "a file with one kernel per line, as plan options: --cc 90 --element bf16 --layout-b col "
                  "[--tile N] [--run-time-kernels]; # comments")
      ->type_name("FILE");
  add_flag(*app, "--quiet", args->quiet, "no progress on stderr");
  return {app, [&shared, args] { return cmd_prebuild(args->pack, args->pack_file, args->quiet, shared.output); }};
}

}  // namespace gemmkit::cli
