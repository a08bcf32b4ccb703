// tools/gemmkit/command.cpp: the helpers every command uses to join the command line.
#include "command.hpp"

#include <cstdio>

#include "gemmkit/packs.hpp"

namespace gemmkit::cli {

void add_flag(CLI::App& command, const char* name, bool& value, const char* help) {
  command.add_flag(name, value, help)->disable_flag_override();
}

CLI::App* add_command(CLI::App& parent, const char* name, const char* help, Shared& shared) {
  CLI::App* command = parent.add_subcommand(name, help);
  command->allow_extras();
  add_flag(*command, "--json", shared.json, "print one JSON object (errors too)");
  return command;
}

void add_plan_options(CLI::App& command, Shared& shared, bool sized) {
  shared.values.add_to(command, plan_table());
  add_flag(command, "--grouped", shared.grouped, "a GroupedGemm: many GEMMs of different extents in one launch");
  shared.values.add_to(command, conv_table());
  if (sized) shared.values.add_to(command, sized_plan_table());
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::vector<KernelSpec> pack_of(const std::string& pack, const std::string& pack_file, const char* command) {
  if (pack.empty() == pack_file.empty()) {
    throw UsageError(std::string(command) + " needs one of --pack NAME, --pack-file FILE.");
  }
  return pack.empty() ? read_pack_file(pack_file) : pack_specs(pack);
}

}  // namespace gemmkit::cli
