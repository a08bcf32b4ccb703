// src/jit/process.hpp: run a program without a shell and capture what it prints: nvcc for the compiler, and the CLI
// and the benchmark's child for the tests and the benchmark (gemmkit's one process runner).
#pragma once

#include <string>
#include <vector>

namespace gemmkit {

struct ProcessOptions {
  std::vector<std::string> environment;  // "NAME=value" entries set in the child on top of this process's environment
  bool capture_stderr = true;            // false: the child's stderr goes to this process's stderr
};

struct ProcessResult {
  int exit_code = 0;   // the exit status, or 128 + signal number when a signal ended it
  std::string output;  // stdout, and stderr when captured, interleaved as written
};

// Runs argv (argv[0] is looked up on PATH when it holds no '/') with stdin from /dev/null.
// Safe to call from several threads at once. Throws ToolchainError when the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// argv as one line a user can paste into a shell.
std::string shell_quote(const std::vector<std::string>& argv);

}  // namespace gemmkit
