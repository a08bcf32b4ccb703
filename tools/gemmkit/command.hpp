// tools/gemmkit/command.hpp: what every command shares (the option values, the output) and how a command is added
// to the command line; each command lives in commands/, registered by main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "gemmkit/kernel_spec.hpp"
#include "messages.hpp"
#include "options.hpp"

namespace gemmkit::cli {

// The state the command line's parse fills in, read by the command it chose.
struct Shared {
  Values values;
  Output output;
  bool json = false;     // registered so that CLI11 accepts and documents --json; read from argv, for errors too
  bool grouped = false;  // --grouped, of the commands that take the plan options
};

// One command: its CLI11 subcommand, and what runs when the command line chose it (the exit status).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// A flag that takes no =value.
void add_flag(CLI::App& command, const char* name, bool& value, const char* help);

// A subcommand of `parent` that takes --json (and leaves unknown words to refuse_leftovers).
CLI::App* add_command(CLI::App& parent, const char* name, const char* help, Shared& shared);

// The plan options (plan_table, --grouped, conv_table), and with `sized` the problem plan and compile build for.
void add_plan_options(CLI::App& command, Shared& shared, bool sized);

// `value` with `digits` decimals.
std::string fixed(double value, int digits);

// The kernels of --pack NAME or --pack-file FILE (one of them must be given).
std::vector<KernelSpec> pack_of(const std::string& pack, const std::string& pack_file, const char* command);

}  // namespace gemmkit::cli
