// tools/gemmkit/options.hpp: the command line's one option model: each option a row (name, value, help, the check
// CLI11 runs on its value as it parses it, default), the tables of rows the commands share, and their values.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/enums.hpp"
#include "gemmkit/errors.hpp"

namespace gemmkit::cli {

template <class Enum>
std::string one_of() {
  return "one of: " + enum_names<Enum>();
}

// A whole word in decimal, or nullopt.
std::optional<std::int64_t> parse_integer(const std::string& text);
// A whole word that is a finite number, or nullopt.
std::optional<double> parse_real(const std::string& text);

// CLI11 takes the word after an option as its value even when that word is the next option.
std::string got(const std::string& text);

// A check CLI11 runs on an option's value as it parses it: "" for a good value, else why not (after "--option: ").
CLI::Validator value_check(std::function<std::string(const std::string&)> why_not);
CLI::Validator integer_check(std::int64_t min, std::int64_t max);
CLI::Validator integer_one_of(const std::vector<std::int64_t>& allowed);
CLI::Validator real_check();
CLI::Validator text_check(const std::string& what);

template <class Enum>
CLI::Validator enum_check() {
  return value_check([](const std::string& text) -> std::string {
    if (parse_enum<Enum>(text)) return "";
    const std::string what(EnumTable<Enum>::what);
    if (text.rfind("--", 0) == 0) return "expects " + what + " (" + one_of<Enum>() + "); " + got(text) + ".";
    return "unknown " + what + " '" + text + "'; use " + one_of<Enum>() + ".";
  });
}

constexpr std::int64_t kInt32Max = INT32_MAX;

// One option: its name (without --), value name, help, the check of its value, and its value when not given ("":
// none; the library decides).
struct OptionRow {
  std::string name, value, help;
  CLI::Validator check;
  std::string default_value = {};
};

// The plan's configuration: every command that builds a plan takes these.
std::vector<OptionRow> plan_table();
// The problem of gemmkit run and tune (--m --n --k --batch, with defaults).
std::vector<OptionRow> problem_table();
// --conv KIND and the Conv2d problem and options that go with it.
std::vector<OptionRow> conv_table();
// The sizes of conv_table's problem (with --batch, the images).
const std::vector<std::string>& conv_size_names();
// The problem plan and compile show and build run()'s kernel for (--m --n --k --batch, no defaults).
std::vector<OptionRow> sized_plan_table();

// The options' values as given, checked by CLI11 as it parsed them; shared by every command that takes them.
class Values {
 public:
  void add_to(CLI::App& command, const std::vector<OptionRow>& table);

  bool given(const std::string& name) const {
    const auto& options = options_.at(name);
    return std::any_of(options.begin(), options.end(), [](const CLI::Option* o) { return o->count() > 0; });
  }
  // The value given, else the option's default, else nullopt.
  std::optional<std::string> text(const std::string& name) const {
    if (given(name)) return given_.at(name);
    if (!defaults_.at(name).empty()) return defaults_.at(name);
    return std::nullopt;
  }
  std::optional<std::int64_t> integer(const std::string& name) const { return typed(name, parse_integer); }
  std::optional<double> real(const std::string& name) const { return typed(name, parse_real); }
  template <class Enum>
  std::optional<Enum> enumerator(const std::string& name) const {
    return typed(name, [](const std::string& t) { return parse_enum<Enum>(t); });
  }

 private:
  template <class Parse>
  auto typed(const std::string& name, Parse parse) const -> decltype(parse(std::string())) {
    const std::optional<std::string> value = text(name);
    if (!value) return std::nullopt;
    if (auto parsed = parse(*value)) return parsed;
    throw Error("internal error: --" + name + " '" + *value + "' passed its check but does not parse");
  }

  // Node-based maps: CLI11 keeps pointers to the strings.
  std::map<std::string, std::string> given_, defaults_;
  std::map<std::string, std::vector<CLI::Option*>> options_;
};

}  // namespace gemmkit::cli
