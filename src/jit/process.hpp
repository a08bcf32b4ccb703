// src/jit/process.hpp: run a program without a shell and capture what it prints.
#pragma once

#include <string>
#include <vector>

namespace gemmkit {

struct ProcessResult {
  int exit_code = 0;   // the exit status, or 128 + signal number when a signal ended it
  std::string output;  // stdout and stderr, interleaved as written
};

// Runs argv (argv[0] is looked up on PATH when it holds no '/') with stdin from /dev/null.
// Safe to call from several threads at once. Throws ToolchainError when the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv);

// argv as one line a user can paste into a shell.
std::string shell_quote(const std::vector<std::string>& argv);

}  // namespace gemmkit
