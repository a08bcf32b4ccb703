// tools/gemmkit/commands/commands.hpp: the gemmkit commands, one file each; main.cpp adds them in this order.
#pragma once

#include <CLI/CLI.hpp>

#include "command.hpp"

namespace gemmkit::cli {

Command add_plan(CLI::App& gemmkit, Shared& shared);      // plan.cpp
Command add_tiles(CLI::App& gemmkit, Shared& shared);     // tiles.cpp
Command add_compile(CLI::App& gemmkit, Shared& shared);   // compile.cpp
Command add_run(CLI::App& gemmkit, Shared& shared);       // run.cpp (run_grouped.cpp, run_conv.cpp)
Command add_tune(CLI::App& gemmkit, Shared& shared);      // tune.cpp
Command add_prebuild(CLI::App& gemmkit, Shared& shared);  // prebuild.cpp
Command add_cache(CLI::App& gemmkit, Shared& shared);     // cache.cpp
Command add_demo(CLI::App& gemmkit, Shared& shared);      // demo.cpp

}  // namespace gemmkit::cli
