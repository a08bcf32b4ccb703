// src/jit/process.hpp: run a program without a shell and capture what it prints: nvcc for the compiler, and the CLI
// and the benchmark's child for the tests and the benchmark (gemmkit's one process runner).
#pragma once

#include <string>
#include <vector>

namespace gemmkit {

struct ProcessOptions {
  std::vector<std::string> environment;  // "NAME=value" entries set in the child on top of this process's environment
  bool capture_stderr = true;            // false: the child's stderr goes to this process's stderr
  // The child and everything it starts run in a process group of their own. While it runs, SIGINT and SIGTERM sent
  // to this process stop that group, and run_process throws InterruptedError (see interrupt_children).
  bool own_group = false;
};

struct ProcessResult {
  int exit_code = 0;   // the exit status, or 128 + signal number when a signal ended it
  std::string output;  // stdout, and stderr when captured, interleaved as written
};

// Runs argv (argv[0] is looked up on PATH when it holds no '/') with stdin from /dev/null.
// Safe to call from several threads at once. Throws ToolchainError when the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// Kills the process group of every child running with own_group, whose run_process then throws InterruptedError
// naming `signal`: the signal handler's work, also done at process exit for background compiles. With `wait`, waits
// (up to 1 s) until their run_process calls have seen them end. Async-signal-safe when `wait` is false.
void interrupt_children(int signal, bool wait);

// Whether this thread runs compiles nobody waits on (a background worker): a signal then does not keep the process
// alive for them (with the default disposition it is re-raised after their nvcc is stopped).
void set_background_thread(bool background);
bool is_background_thread();

// argv as one line a user can paste into a shell.
std::string shell_quote(const std::vector<std::string>& argv);

}  // namespace gemmkit
