// src/jit/process.cpp: posix_spawn with one pipe for stdout+stderr (close-on-exec, so parallel spawns
// never inherit each other's pipe and block end-of-file), and the interrupt handling of long-running children: each
// runs in a process group of its own, listed in a fixed table the signal handler reads.
#include "jit/process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>

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

class SpawnAttributes {
 public:
  SpawnAttributes() { posix_spawnattr_init(&attributes_); }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attributes_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  posix_spawnattr_t* get() { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
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

// ---- interrupts ---------------------------------------------------------------------------------------------

constexpr int kGroupSlots = 256;
std::atomic<pid_t> g_groups[kGroupSlots];  // process groups of live own-group children (0: a free slot)
std::atomic<int> g_caught{0};              // the signal that arrived while own-group children ran (0: none)
std::atomic<int> g_foreground{0};          // own-group children of threads someone waits on
std::mutex g_install_mutex;                // guards the fields below
int g_live = 0;                            // own-group children running
constexpr int kSignals[2] = {SIGINT, SIGTERM};
struct sigaction g_previous[2];
bool g_installed[2] = {false, false};
thread_local bool t_background = false;

void on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  // Read before the children stop: their waiters then unwind and leave, and a late read would take a compile that
  // was waited on for one nobody waits on, and end the process.
  const bool waited_on = g_foreground.load() != 0;
  interrupt_children(sig, false);
  const struct sigaction& previous = g_previous[sig == SIGINT ? 0 : 1];
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(sig, info, context);  // e.g. Python's own handler
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  } else if (previous.sa_handler == SIG_DFL && !waited_on) {
    // Only compiles nobody waits on were running: the process ends as it would have without them.
    ::signal(sig, SIG_DFL);
    ::raise(sig);  // delivered when this handler returns
  }
  errno = saved_errno;
}

// Counts one own-group child for its lifetime; the first installs the handlers, the last restores the previous ones
// (a disposition of SIG_IGN is kept: a program that ignores the signal is not interrupted by it).
class ChildScope {
 public:
  ChildScope() : foreground_(!t_background) {
    std::lock_guard<std::mutex> lock(g_install_mutex);
    if (foreground_) ++g_foreground;
    if (g_live++ > 0) return;
    g_caught.store(0);
    for (int i = 0; i < 2; ++i) {
      struct sigaction action {};
      action.sa_sigaction = on_signal;
      action.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&action.sa_mask);
      sigaction(kSignals[i], nullptr, &g_previous[i]);
      g_installed[i] = (g_previous[i].sa_flags & SA_SIGINFO) != 0 || g_previous[i].sa_handler != SIG_IGN;
      if (g_installed[i]) sigaction(kSignals[i], &action, nullptr);
    }
  }
  ~ChildScope() {
    std::lock_guard<std::mutex> lock(g_install_mutex);
    if (foreground_) --g_foreground;
    if (--g_live > 0) return;
    for (int i = 0; i < 2; ++i) {
      if (g_installed[i]) sigaction(kSignals[i], &g_previous[i], nullptr);
      g_installed[i] = false;
    }
  }
  ChildScope(const ChildScope&) = delete;
  ChildScope& operator=(const ChildScope&) = delete;

 private:
  bool foreground_;
};

int register_group(pid_t pid) {
  for (int i = 0; i < kGroupSlots; ++i) {
    pid_t free = 0;
    if (g_groups[i].compare_exchange_strong(free, pid)) return i;
  }
  return -1;  // more children than slots: this one is not stopped by a signal (never with the job cap)
}

[[noreturn]] void throw_interrupted(int sig, const std::string& program) {
  throw InterruptedError(std::string("interrupted (") +
                             (sig == SIGINT    ? "SIGINT"
                              : sig == SIGTERM ? "SIGTERM"
                                               : "a signal") +
                             ") while " + program + " ran; it was stopped and its temporary files removed",
                         sig);
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
  std::optional<ChildScope> scope;
  SpawnAttributes attributes;
  if (options.own_group) {
    scope.emplace();
    if (const int sig = g_caught.load(); sig != 0) {
      close(pipe_fds[0]);
      close(pipe_fds[1]);
      throw_interrupted(sig, argv[0]);  // an interrupt is being handled: start nothing new
    }
    posix_spawnattr_setflags(attributes.get(), POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(attributes.get(), 0);  // a group of its own, led by the child
  }
  pid_t pid = 0;
  const int spawn_error =
      posix_spawnp(&pid, c_argv[0], actions.get(), attributes.get(), c_argv.data(), environment.data());
  close(pipe_fds[1]);
  if (spawn_error != 0) {
    close(pipe_fds[0]);
    throw ToolchainError("cannot run " + argv[0] + ": " + std::strerror(spawn_error));
  }
  const int slot = options.own_group ? register_group(pid) : -1;
  if (options.own_group && g_caught.load() != 0) ::kill(-pid, SIGKILL);  // the signal came before the slot was set
  ProcessResult result;
  result.output = read_all(pipe_fds[0]);
  close(pipe_fds[0]);
  result.exit_code = wait_for(pid);
  if (slot >= 0) g_groups[slot].store(0);
  if (options.own_group) {
    ::kill(-pid, SIGKILL);  // whatever the child left running in its group (ESRCH when nothing)
    if (const int sig = g_caught.load(); sig != 0) throw_interrupted(sig, argv[0]);
  }
  return result;
}

void interrupt_children(int signal, bool wait) {
  if (signal != 0) g_caught.store(signal);
  for (std::atomic<pid_t>& group : g_groups) {
    if (const pid_t pid = group.load(); pid > 0) ::kill(-pid, SIGKILL);
  }
  if (!wait) return;
  for (int round = 0; round < 100; ++round) {  // up to 1 s for their waiters to reap them
    if (std::none_of(std::begin(g_groups), std::end(g_groups), [](const auto& g) { return g.load() != 0; })) return;
    ::usleep(10000);
  }
}

void set_background_thread(bool background) {
  t_background = background;
}

bool is_background_thread() {
  return t_background;
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
