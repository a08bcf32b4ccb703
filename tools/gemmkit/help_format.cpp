// tools/gemmkit/help_format.cpp: the --help layout, from CLI11's getters only (the ones 2.1 to 2.5 share).
#include "help_format.hpp"

#include <memory>
#include <utility>
#include <vector>

#include "messages.hpp"

namespace gemmkit::cli {

namespace {

constexpr std::size_t kNameColumn = 30;

// Rows (name, help) under their headings, in the order the headings first appear.
using Sections = std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>;

void add_row(Sections& sections, const std::string& heading, std::string name, std::string help) {
  auto section = sections.begin();
  while (section != sections.end() && section->first != heading) ++section;
  if (section == sections.end()) section = sections.insert(sections.end(), {heading, {}});
  section->second.emplace_back(std::move(name), std::move(help));
}

// CLI11's default groups are "Options" and "Subcommands" up to 2.4, "OPTIONS" and "SUBCOMMANDS" from 2.5.
std::string heading(const std::string& group) {
  if (group == "OPTIONS") return "Options";
  if (group == "SUBCOMMANDS") return "Subcommands";
  return group;
}

// "  name" padded to the column, then the help (below it when the name reaches the column); the help's own lines
// continue in the column.
std::string row(const std::string& name, const std::string& help) {
  std::string out = "  " + name;
  if (help.empty()) return out + "\n";
  out += out.size() < kNameColumn ? std::string(kNameColumn - out.size(), ' ') : "\n" + std::string(kNameColumn, ' ');
  for (const char ch : help) out += ch == '\n' ? "\n" + std::string(kNameColumn, ' ') : std::string(1, ch);
  return out + "\n";
}

// What follows an option's names: its value's type, default and REQUIRED (a flag takes no value).
std::string value_text(const CLI::Option& option) {
  if (!option.get_option_text().empty()) return " " + option.get_option_text();
  if (option.get_type_size() == 0) return "";
  std::string out;
  if (!option.get_type_name().empty()) out += " " + option.get_type_name();
  if (!option.get_default_str().empty()) out += "=" + option.get_default_str();
  if (option.get_required()) out += " REQUIRED";
  return out;
}

std::string usage(const CLI::App& app) {
  std::string out = "Usage: " + command_name(app);
  if (!app.get_options([](const CLI::Option* o) { return o->nonpositional(); }).empty()) out += " [OPTIONS]";
  for (const CLI::Option* o : app.get_options([](const CLI::Option* o) { return o->get_positional(); })) {
    out += " " + (o->get_required() ? o->get_name(true) : "[" + o->get_name(true) + "]");
  }
  if (!app.get_subcommands([](const CLI::App* c) { return !c->get_disabled() && !c->get_name().empty(); }).empty()) {
    out += app.get_require_subcommand_min() == 0 ? " [SUBCOMMAND]" : " SUBCOMMAND";
  }
  return out + "\n";
}

class HelpFormat : public CLI::FormatterBase {
 public:
  explicit HelpFormat(std::string root_usage) : root_usage_(std::move(root_usage)) {}

  // Every mode gets the one layout: gemmkit has no --help-all, and lists commands without expanding them.
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    Sections sections = {{"Positionals", {}}};  // first, as in CLI11 2.1
    for (const CLI::Option* o : app->get_options()) {
      if (o->get_group().empty()) continue;  // hidden
      const bool positional = o->get_positional();
      add_row(sections, positional ? "Positionals" : heading(o->get_group()),
              o->get_name(positional, !positional) + value_text(*o), o->get_description());
    }
    for (const CLI::App* c : app->get_subcommands({})) {
      if (c->get_group().empty() || c->get_disabled() || c->get_name().empty()) continue;
      add_row(sections, heading(c->get_group()), c->get_name(), c->get_description());
    }
    std::string out = app->get_description().empty() ? "" : app->get_description() + "\n";
    out += app->get_parent() == nullptr ? root_usage_ + "\n" : usage(*app);
    for (const auto& [title, rows] : sections) {
      if (rows.empty()) continue;
      out += "\n" + title + ":\n";
      for (const auto& [name, help] : rows) out += row(name, help);
    }
    const std::string footer = app->get_footer();
    return out + "\n" + (footer.empty() ? "" : footer + "\n");
  }

 private:
  std::string root_usage_;
};

void set_format(CLI::App& app, const std::shared_ptr<HelpFormat>& format) {
  app.formatter(format);
  for (CLI::App* command : app.get_subcommands({})) set_format(*command, format);
}

}  // namespace

void use_help_format(CLI::App& app, std::string root_usage) {
  set_format(app, std::make_shared<HelpFormat>(std::move(root_usage)));
}

}  // namespace gemmkit::cli
