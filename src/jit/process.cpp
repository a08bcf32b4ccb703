// src/jit/process.cpp: posix_spawn with one pipe for stdout+stderr (close-on-exec, so parallel spawns
// never inherit each other's pipe and block end-of-file).
#include "jit/process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gemmkit/errors.hpp"

extern char** environ;

namespace gemmkit {
namespace {

class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

std::string read_all(int fd) {
  std::string out;
  char buffer[1 << 14];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return out;
    }
  }
}

// This process's environment with `overrides` ("NAME=value") set; the strings live in `storage`.
std::vector<char*> child_environment(const std::vector<std::string>& overrides, std::vector<std::string>& storage) {
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    const bool overridden = std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
      return o.compare(0, name.size() + 1, name + "=") == 0;
    });
    if (!overridden) storage.push_back(text);
  }
  storage.insert(storage.end(), overrides.begin(), overrides.end());
  std::vector<char*> out;
  for (std::string& entry : storage) out.push_back(entry.data());
  out.push_back(nullptr);
  return out;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw ToolchainError("run_process: empty command line");
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw ToolchainError("cannot create a pipe to run " + argv[0] + ": " + std::strerror(errno));
  }
  SpawnActions actions;
  posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(actions.get(), pipe_fds[1], STDOUT_FILENO);
  if (options.capture_stderr) posix_spawn_file_actions_adddup2(actions.get(), pipe_fds[1], STDERR_FILENO);

  std::vector<char*> c_argv;
  for (const std::string& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);

  std::vector<std::string> environment_storage;
  const std::vector<char*> environment = child_environment(options.environment, environment_storage);
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, c_argv[0], actions.get(), nullptr, c_argv.data(), environment.data());
  close(pipe_fds[1]);
  if (spawn_error != 0) {
    close(pipe_fds[0]);
    throw ToolchainError("cannot run " + argv[0] + ": " + std::strerror(spawn_error));
  }
  ProcessResult result;
  result.output = read_all(pipe_fds[0]);
  close(pipe_fds[0]);
  result.exit_code = wait_for(pid);
  return result;
}

std::string shell_quote(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789_-+=/.,:@%") == std::string::npos;
    if (plain) {
      line += arg;
      continue;
    }
    line += '\'';
    for (const char c : arg) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

}  // namespace gemmkit
