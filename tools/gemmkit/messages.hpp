// tools/gemmkit/messages.hpp: what the gemmkit command line tells its user: usage errors, the library's errors in
// command-line spelling, and how either is printed (text or --json).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <exception>
#include <string>

#include "gemmkit/errors.hpp"

namespace gemmkit::cli {

using Json = nlohmann::ordered_json;

// A command line gemmkit cannot take: an unknown command or option, a missing or bad value. Exits 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

struct Output {
  bool json = false;
  void print(const Json& value, const std::string& text) const;
};

// "gemmkit", "gemmkit cache export": the command as the user types it.
std::string command_name(const CLI::App& command);

// Words CLI11 did not take (an unknown option, an argument no command takes) as a UsageError that says what to write.
void refuse_leftovers(const CLI::App& app, const CLI::App& command);

// CLI11's parse errors in gemmkit's words, each naming the option.
std::string usage_message(const CLI::ParseError& e);

// The conv problem option that replaced a GEMM-style letter (--h: "height"), or "" when `name` is none of them.
std::string conv_spelling(const std::string& name);

// A library message in command-line spelling: kernel_cc=80 -> --kernel-cc 80, `swizzle = X` -> --swizzle X,
// split_k_slices -> --split-k-slices, for the long options `app` takes; CudaError's source location dropped.
std::string cli_spelling(const std::string& message, const CLI::App& app);

// Prints the error (on stderr, or as one JSON object on stdout) and returns the exit status: 2 for a UsageError, 1 for
// the library's errors, 128 + signal for an interrupt.
int report(const std::exception& e, const Output& output, const CLI::App& app);

}  // namespace gemmkit::cli
