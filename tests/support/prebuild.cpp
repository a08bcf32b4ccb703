// tests/support/prebuild.cpp: compiles every kernel of the gpu tier into the cache, in parallel, before the
// tests run (usage: gemmkit_gpu_prebuild --cc 90 [--only
// config,epilogue,types,fuzz,grouped,conv,conv90,fp8,splitk,tuning,suite]
// [--match REGEX] [--list] [--keys] [--missing]; --missing: only the kernels not in the cache; --keys: list each
// kernel's cache keys beside its name, for tools/dev/carry-cache --keys, and stop).
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/jit.hpp"
#include "support/gpu_cases.hpp"

int main(int argc, char** argv) {
  int cc = 90;
  bool list_only = false;
  bool keys_only = false;
  bool missing_only = false;
  // "config,epilogue,types,fuzz,grouped,conv,conv90,fp8,splitk,tuning" subsets, empty = all; "suite": the benchmark's
  // shape suite
  std::string groups;
  std::string match = ".";  // only kernels whose name this regular expression finds
  constexpr const char* kUsage =
      "usage: gemmkit_gpu_prebuild [--cc N] [--only GROUPS] [--match REGEX] [--list] [--keys] [--missing]\n"
      "  GROUPS: comma-separated config,epilogue,concurrency,types,fuzz,grouped,conv,conv90,fp8,splitk,tuning,evt\n"
      "          (default: all of these) or suite\n";
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--cc") == 0 && has_value) {
      cc = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--list") == 0) {
      list_only = true;
    } else if (std::strcmp(argv[i], "--keys") == 0) {
      list_only = keys_only = true;
    } else if (std::strcmp(argv[i], "--missing") == 0) {
      missing_only = true;
    } else if (std::strcmp(argv[i], "--only") == 0 && has_value) {
      groups = argv[++i];
    } else if (std::strcmp(argv[i], "--match") == 0 && has_value) {
      match = argv[++i];
    } else {
      // Anything else (--help too) stops here: a mistyped option must not start hundreds of builds.
      const bool help = std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0;
      (help ? std::cout : std::cerr) << (help ? "" : "unknown option " + std::string(argv[i]) + "\n") << kUsage;
      return help ? 0 : 2;
    }
  }
  try {
    const gemmkit::DiskCache cache;
    std::optional<gemmkit::Toolchain> toolchain;  // found on first use: --list alone needs no nvcc
    auto tools = [&]() -> const gemmkit::Toolchain& {
      if (!toolchain) toolchain = gemmkit::Toolchain::discover();
      return *toolchain;
    };
    std::set<std::string> seen;
    std::vector<gemmkit::KernelSpec> specs;
    int refused = 0;  // kernels the generator refuses: reported, and the tests that need them fail
    for (const auto& spec : gemmkit::gpu_cases::all_specs(cc, groups)) {
      if (!std::regex_search(spec.name(), std::regex(match)) || !seen.insert(spec.canonical()).second) continue;
      try {
        const gemmkit::KernelSource source = gemmkit::render(spec);
        if (missing_only && cache.find(tools(), source)) continue;
        specs.push_back(spec);
        if (!keys_only) std::cout << spec.name() << "\n";
        // The entries this build of gemmkit would load: a stale entry under the same name has another key.
        for (const auto& key : keys_only ? cache.keys(tools(), source) : std::vector<std::string>{}) {
          std::cout << key << " " << spec.name() << "\n";
        }
      } catch (const gemmkit::ConfigError& e) {
        std::cout << "REFUSED " << spec.name() << ": " << e.what() << "\n";
        ++refused;
      }
    }
    std::cout << specs.size() << " kernels for SM" << cc << "\n";
    if (list_only) return 0;
    const auto start = std::chrono::steady_clock::now();
    const auto entries = gemmkit::compile_many(specs);
    int built = 0;
    for (const auto& e : entries) built += e.cache_hit ? 0 : 1;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "built " << built << ", cached " << entries.size() - built << " in " << seconds << " s with "
              << gemmkit::max_parallel_compiles() << " parallel jobs into " << gemmkit::DiskCache::default_root()
              << "\n";
    return refused == 0 ? 0 : 1;
  } catch (const gemmkit::CompileError& e) {
    std::cerr << "gemmkit_gpu_prebuild: " << e.what() << "\n" << e.log.substr(0, 4000) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "gemmkit_gpu_prebuild: " << e.what() << "\n";
  }
  return 1;
}
