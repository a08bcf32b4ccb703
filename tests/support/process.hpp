// tests/support/process.hpp: running a program from a test as a user would: argv without a shell, extra environment,
// stdout and stderr kept apart, how it ended (exit code or signal), and a time limit past which it is killed.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace gemmkit::testing {

struct ProgramResult {
  int exit_code = -1;  // -1 unless it exited
  int signal = 0;      // the signal that ended it, or 0
  bool timed_out = false;
  std::string out, err;
  // How it ended, for failure messages.
  std::string summary() const {
    std::string s = timed_out ? "timed out"
                    : signal  ? "killed by signal " + std::to_string(signal)
                              : "exit " + std::to_string(exit_code);
    return s + "\nstdout: " + out + "\nstderr: " + err;
  }
};

// Runs argv[0] (a path) with the environment plus `env` (an empty value unsets a variable).
inline ProgramResult run_program(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env = {},
                                 std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (env.count(entry.substr(0, entry.find('='))) == 0) environment.push_back(entry);
  }
  for (const auto& [name, value] : env) {
    if (!value.empty()) environment.push_back(name + "=" + value);
  }
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : environment) c_env.push_back(const_cast<char*>(e.c_str()));
  c_argv.push_back(nullptr);
  c_env.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  ProgramResult result;
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return result;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(out_pipe[0]);
    close(err_pipe[0]);
    execve(c_argv[0], c_argv.data(), c_env.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_pipes = 2;
  while (open_pipes > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  for (const pollfd& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !result.timed_out) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace gemmkit::testing
