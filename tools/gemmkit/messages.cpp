// tools/gemmkit/messages.cpp: usage errors, the library's errors in command-line spelling, and printing them.
#include "messages.hpp"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <regex>
#include <set>
#include <utility>
#include <vector>

namespace gemmkit::cli {

namespace {

const char* error_kind(const std::exception& e) {
  if (dynamic_cast<const UsageError*>(&e)) return "UsageError";
  if (dynamic_cast<const ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const TensorError*>(&e)) return "TensorError";
  if (dynamic_cast<const ToolchainError*>(&e)) return "ToolchainError";
  if (dynamic_cast<const CompileError*>(&e)) return "CompileError";
  if (dynamic_cast<const InterruptedError*>(&e)) return "InterruptedError";
  if (dynamic_cast<const CudaError*>(&e)) return "CudaError";
  return "Error";
}

// The command-line spelling of a library option: element_accumulator -> --element-accumulator, layout_A -> --layout-a.
std::string option_of(std::string field) {
  for (char& ch : field) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return "--" + field;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substituted = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substituted});
    }
  }
  return row[b.size()];
}

bool takes_option(const CLI::App& command, const std::string& name) {
  const auto options = command.get_options();
  return std::any_of(options.begin(), options.end(), [&](const CLI::Option* o) { return o->check_lname(name); });
}

// Why `command` does not take the option word `word`: another command's option, a single dash, a conv size under
// its GEMM letter, or the nearest of its own.
std::string unknown_option(const CLI::App& app, const CLI::App& command, const std::string& word) {
  const std::string given = word.substr(0, word.find('='));
  const std::string name = given.substr(std::min(given.find_first_not_of('-'), given.size()));
  const std::string usage = "Unknown option " + given + " for " + command_name(command);
  if (given.rfind("--", 0) != 0 && takes_option(command, name))
    return usage + ": options take two dashes, --" + name + ".";
  if (!takes_option(command, name)) {
    if (const std::string conv = conv_spelling(name); !conv.empty() && takes_option(command, conv)) {
      return usage + ": " + given + " is --" + conv + " for conv (with --conv KIND).";
    }
    for (const CLI::App* other : app.get_subcommands({})) {
      if (other != &command && takes_option(*other, name)) {
        return usage + ": --" + name + " is an option of " + command_name(*other) + ", not of " +
               command_name(command) + ".";
      }
    }
  }
  std::string nearest;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& known : option->get_lnames()) {
      if (nearest.empty() || edit_distance(name, known) < edit_distance(name, nearest)) nearest = known;
    }
  }
  return usage + "; did you mean --" + nearest + "? (" + command_name(command) + " --help lists them)";
}

// The nearest combination the library found, as this command line would ask for it.
std::string nearest_options(const std::vector<ConfigError::Setting>& nearest) {
  std::string out;
  for (const auto& s : nearest) out += (out.empty() ? "" : " ") + option_of(s.option) + " " + s.value;
  return out;
}

void long_names(const CLI::App& command, std::set<std::string>& names) {
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) names.insert(name);
  }
  for (const CLI::App* sub : command.get_subcommands({})) long_names(*sub, names);
}

bool word_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
}

}  // namespace

void Output::print(const Json& value, const std::string& text) const {
  if (json) {
    std::cout << value.dump(2) << "\n";
  } else {
    std::cout << text;
  }
}

std::string command_name(const CLI::App& command) {
  return command.get_parent() == nullptr ? "gemmkit" : command_name(*command.get_parent()) + " " + command.get_name();
}

void refuse_leftovers(const CLI::App& app, const CLI::App& command) {
  for (const std::string& word : app.remaining(true)) {
    if (word.size() > 1 && word[0] == '-') throw UsageError(unknown_option(app, command, word));
    if (!command.get_subcommands({}).empty()) {
      std::string names;
      for (const CLI::App* sub : command.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
      throw UsageError("Unknown command '" + word + "' for " + command_name(command) + "; use one of: " + names + ".");
    }
    throw UsageError("Unexpected argument '" + word + "' for " + command_name(command) + ": it takes options only (" +
                     command_name(command) + " --help lists them).");
  }
}

std::string usage_message(const CLI::ParseError& e) {
  const std::string text = e.what();
  const std::string option = text.substr(0, text.find(':'));
  if (text.find(": At Most 1 required but received ") != std::string::npos) {
    return option + " is given more than once; give it once.";
  }
  if (e.get_name() == "ArgumentMismatch" && text.size() > 8 && text.compare(text.size() - 8, 8, " missing") == 0) {
    return option + " needs a value.";
  }
  const std::string flag_override = " was given a disallowed flag override";
  if (text.size() > flag_override.size() &&
      text.compare(text.size() - flag_override.size(), flag_override.size(), flag_override) == 0) {
    return "--" + text.substr(0, text.size() - flag_override.size()) + " is a flag: it takes no value.";
  }
  return text;
}

std::string conv_spelling(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> renamed = {
      {"n", "batch"},        {"h", "height"},        {"w", "width"},       {"c", "channels"},
      {"k", "out-channels"}, {"r", "filter-height"}, {"s", "filter-width"}};
  for (const auto& [letter, option] : renamed) {
    if (letter == name) return option;
  }
  return "";
}

std::string cli_spelling(const std::string& message, const CLI::App& app) {
  std::set<std::string> names;
  long_names(app, names);
  // Where the library names a line of its own source (CudaError): gemmkit's internals, not the user's to act on.
  static const std::regex location(R"( at \S+\.(cpp|hpp|cu|cuh|h):[0-9]+)");
  const std::string text = std::regex_replace(message, location, "");
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const bool word_start = std::isalpha(static_cast<unsigned char>(text[i])) &&
                            (i == 0 || (!word_char(text[i - 1]) && text[i - 1] != '-'));
    if (!word_start) {
      out += text[i++];
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && word_char(text[end])) ++end;
    const std::string word = text.substr(i, end - i), option = option_of(word);
    i = end;
    if (names.count(option.substr(2)) == 0) {
      out += word;
      continue;
    }
    // A setting, name=value or name = value: the option and its value, as typed on the command line.
    std::size_t value = std::string::npos;
    if (text.compare(end, 1, "=") == 0) value = end + 1;
    if (text.compare(end, 3, " = ") == 0) value = end + 3;
    if (value != std::string::npos) {
      std::size_t value_end = value;
      while (value_end < text.size() &&
             (word_char(text[value_end]) || text[value_end] == '/' || text[value_end] == '.'))
        ++value_end;
      while (value_end > value && text[value_end - 1] == '.') --value_end;  // the sentence's full stop
      if (value_end > value) {
        out += option + " " + text.substr(value, value_end - value);
        i = value_end;
        continue;
      }
    }
    // A bare snake_case name is the library's spelling of the option; a plain word (tile, layout) is English.
    out += word.find('_') != std::string::npos ? option : word;
  }
  return out;
}

int report(const std::exception& e, const Output& output, const CLI::App& app) {
  const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
  std::string message = usage ? std::string(e.what()) : cli_spelling(e.what(), app);
  Json out = {{"error", error_kind(e)}, {"message", ""}};
  if (auto* ce = dynamic_cast<const ConfigError*>(&e); ce != nullptr && !ce->nearest.empty()) {
    const std::string nearest = nearest_options(ce->nearest);
    if (message.find(nearest) == std::string::npos) message += " On the command line: " + nearest + ".";
    for (const auto& s : ce->nearest) out["nearest"][option_of(s.option)] = s.value;
  }
  if (auto* ce = dynamic_cast<const CompileError*>(&e)) out["source_path"] = ce->source_path;
  out["message"] = message;
  if (output.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cerr << "gemmkit: " << error_kind(e) << ": " << message << "\n";
  }
  if (auto* ie = dynamic_cast<const InterruptedError*>(&e)) return 128 + ie->signal;  // as if the signal ended us
  return usage ? 2 : 1;
}

}  // namespace gemmkit::cli
