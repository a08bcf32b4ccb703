// tools/gemmkit/main.cpp: the gemmkit command line (CLI11): plan, tiles, compile, run, tune, prebuild, cache, demo;
// --json everywhere. Each command is one file in commands/; they share one option model (options.hpp) and the plan
// it gives (plan_options.hpp). This file adds them, parses, refuses what no command takes, and runs the chosen one.
// Every option's value is checked as it is parsed, before any GPU query or compile: a bad one is a usage error
// (exit 2). What only the plan can judge (an unsupported cc, a tile index past the plan's list) is the library's
// ConfigError (exit 1), as are toolchain and CUDA failures.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "command.hpp"
#include "commands/commands.hpp"
#include "help_format.hpp"
#include "messages.hpp"
#include "util/knobs.hpp"
#include "util/notes.hpp"

#ifndef GEMMKIT_VERSION
#error "GEMMKIT_VERSION must be defined by the build"
#endif

namespace gk = gemmkit;

namespace {

using gk::cli::Command;
using gk::cli::Shared;
using gk::cli::UsageError;

// gemmkit help [COMMAND | env].
CLI::App* add_help(CLI::App& app, Shared& shared, std::string& topic) {
  CLI::App* help = gk::cli::add_command(app, "help",
                                        "this list; gemmkit help <command>: its options; gemmkit help env: the "
                                        "environment variables gemmkit reads",
                                        shared);
  help->add_option("topic", topic, "a command, or env")
      ->type_name("COMMAND|env")
      ->check(CLI::Validator(
          [&app](std::string& name) -> std::string {
            const auto commands = std::as_const(app).get_subcommands({});
            if (name == "env" ||
                std::any_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(name); })) {
              return "";
            }
            return "no command '" + name + "'; gemmkit help lists them (gemmkit help env: the environment variables).";
          },
          ""));
  return help;
}

int print_help(CLI::App& app, const std::string& topic) {
  if (topic.empty()) {
    std::cout << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
  } else if (topic == "env") {
    std::cout << "environment variables gemmkit reads:\n" << gk::knobs::help_text();
  } else {
    std::cout << app.get_subcommand(topic)->help("gemmkit");
  }
  return 0;
}

// The rules between plan options that no one option's check can see: --conv's options need it, a GEMM's problem
// letters do not go with it, and --m --n --k name one GEMM for plan and compile (tiles lists every configuration).
void refuse_conflicts(const gk::cli::Values& values, bool grouped, const CLI::App& tiles, bool sized_planning) {
  if (values.given("groups") && !grouped) throw UsageError("--groups needs --grouped.");
  if (!values.given("conv")) {
    std::vector<std::string> conv_only = gk::cli::conv_size_names();
    conv_only.insert(conv_only.end(), {"iterator-algorithm", "split-k-mode"});
    for (const std::string& name : conv_only) {
      if (values.given(name)) throw UsageError("--" + name + " needs --conv KIND.");
    }
    const bool sized = values.given("m") || values.given("n") || values.given("k") || values.given("batch");
    if (sized && tiles.parsed()) {
      throw UsageError("--m --n --k pick the kernel of one problem (gemmkit plan, compile); tiles lists them all.");
    }
    if (sized && sized_planning && !(values.given("m") && values.given("n") && values.given("k"))) {
      throw UsageError("--m, --n and --k go together: the GEMM whose kernel plan and compile show and build.");
    }
    if (sized && sized_planning && grouped) {
      throw UsageError("--m --n --k name one GEMM; a grouped plan's problems are given at run time.");
    }
    return;
  }
  for (const char* letter : {"n", "k"}) {
    if (values.given(letter)) {
      throw UsageError(std::string("--") + letter + " is --" + gk::cli::conv_spelling(letter) + " for conv.");
    }
  }
  if (values.given("m")) {
    throw UsageError(
        "--m is a GEMM's; a conv's problem is --batch --height --width --channels --out-channels --filter-height "
        "--filter-width (--stride --pad --dilation).");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Shared shared;
  gk::cli::Output& output = shared.output;
  output.json = std::any_of(argv + 1, argv + argc, [](const char* word) { return std::string(word) == "--json"; });
  CLI::App app("gemmkit: declare, compile and run CUTLASS GEMM kernels.", "gemmkit");
  app.set_version_flag("--version", "gemmkit " GEMMKIT_VERSION);
  app.allow_extras();
  app.require_subcommand(0, 1);
  gk::cli::add_flag(app, "--json", shared.json, "print one JSON object (errors too)");
  gk::set_note_handler([&app](const std::string& message) {
    std::cerr << "gemmkit: note: " << gk::cli::cli_spelling(message, app) << "\n";
  });

  const Command plan = gk::cli::add_plan(app, shared), tiles = gk::cli::add_tiles(app, shared),
                compile = gk::cli::add_compile(app, shared);
  const std::vector<Command> commands = {plan,
                                         tiles,
                                         compile,
                                         gk::cli::add_run(app, shared),
                                         gk::cli::add_tune(app, shared),
                                         gk::cli::add_prebuild(app, shared),
                                         gk::cli::add_cache(app, shared),
                                         gk::cli::add_demo(app, shared)};
  std::string help_topic;
  const CLI::App* help = add_help(app, shared, help_topic);
  // Set last, so that no command inherits it: the table is shown once, by gemmkit help env.
  app.footer("gemmkit help env lists the environment variables.");
  gk::cli::use_help_format(
      app, "usage: gemmkit <command> [options] [--json]   (gemmkit <command> --help lists its options)");

  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      std::cout << app.help();  // the chosen command's
      return 0;
    } catch (const CLI::CallForVersion& e) {
      std::cout << e.what() << "\n";
      return 0;
    } catch (const CLI::ParseError& e) {
      throw UsageError(gk::cli::usage_message(e));
    }
    const auto chosen = app.get_subcommands();
    CLI::App* command = chosen.empty() ? &app : chosen.front();
    while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
    gk::cli::refuse_leftovers(app, *command);
    if (shared.values.given("activation-parameter") && !shared.values.given("activation")) {
      throw UsageError("--activation-parameter needs --activation (leaky_relu takes it).");
    }
    if (chosen.empty()) {
      if (output.json) throw UsageError("No command; run gemmkit --help for the list.");
      std::cerr << app.help();
      return 2;
    }
    if (help->parsed()) return print_help(app, help_topic);
    refuse_conflicts(shared.values, shared.grouped, *tiles.app, plan.app->parsed() || compile.app->parsed());
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return 2;
  } catch (const std::exception& e) {
    return gk::cli::report(e, output, app);
  }
}
