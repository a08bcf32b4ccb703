// tools/gemmkit/help_format.hpp: gemmkit's --help text, laid out here rather than by CLI11, whose layout changed in 2.5
// (headings, columns, wrapping): the same text on every CLI11 the CLI builds with.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace gemmkit::cli {

// Gives `app` and every command under it CLI11 2.1's help layout: the description, "Usage: gemmkit plan [OPTIONS]"
// (`root_usage` for `app` itself), then "Positionals:", "Options:" and "Subcommands:", each row a 30-column name and
// its help, then the footer. Call it once every command is added.
void use_help_format(CLI::App& app, std::string root_usage);

}  // namespace gemmkit::cli
