// src/jit/toolchain.cpp: Toolchain::discover() — finds nvcc, the host compiler, CUTLASS and our device
// headers, and records every version that can change a compiled module.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "jit/process.hpp"
#include "jit/toolchain_detail.hpp"
#include "util/knobs.hpp"
#include "util/sha256.hpp"

#if !defined(GEMMKIT_CUTLASS_DEFAULT) || !defined(GEMMKIT_DATA_FROM_LIB)
#error "GEMMKIT_CUTLASS_DEFAULT and GEMMKIT_DATA_FROM_LIB must be defined by the build"
#endif

namespace fs = std::filesystem;

namespace gemmkit {
namespace toolchain_detail {
namespace {

constexpr int kMinCudaMajor = 12;
constexpr int kMinCudaMinor = 4;

bool is_set(const char* value) {
  return value != nullptr && *value != '\0';
}

bool is_executable_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

}  // namespace

std::string find_nvcc(const char* cuda_home, const char* path_env, const std::string& fallback) {
  if (is_set(cuda_home) && is_executable_file(fs::path(cuda_home) / "bin" / "nvcc")) {
    return fs::absolute(fs::path(cuda_home) / "bin" / "nvcc").string();
  }
  if (is_set(path_env)) {
    std::stringstream dirs{std::string(path_env)};
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty() && is_executable_file(fs::path(dir) / "nvcc"))
        return fs::absolute(fs::path(dir) / "nvcc").string();
    }
  }
  if (!fallback.empty() && is_executable_file(fallback)) return fallback;
  std::string looked = is_set(cuda_home) ? "in CUDA_HOME=" + std::string(cuda_home) + "/bin, " : "";
  throw ToolchainError("nvcc not found (looked " + looked + "on PATH and at " + fallback +
                       "); install the CUDA toolkit >= 12.4 and set CUDA_HOME to its root (or put its bin/ on PATH)");
}

NvccVersion parse_nvcc_version(const std::string& output) {
  std::smatch release;
  static const std::regex kRelease(R"(release (\d+)\.(\d+))");
  if (!std::regex_search(output, release, kRelease)) {
    throw ToolchainError("cannot read the CUDA version from `nvcc --version` (it printed: " + first_line(output) +
                         "); install the CUDA toolkit >= 12.4 and set CUDA_HOME to its root");
  }
  const int major = std::stoi(release[1]);
  const int minor = std::stoi(release[2]);
  NvccVersion out;
  out.version = release[1].str() + "." + release[2].str();
  if (major < kMinCudaMajor || (major == kMinCudaMajor && minor < kMinCudaMinor)) {
    throw ToolchainError("nvcc is CUDA " + out.version +
                         ", gemmkit needs CUDA >= 12.4; install CUDA >= 12.4 and set "
                         "CUDA_HOME to its root (or put its bin/ first on PATH)");
  }
  std::stringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Build ", 0) == 0)
      out.build = line;
    else if (out.build.empty() && line.find("release ") != std::string::npos)
      out.build = line;
  }
  return out;
}

bool is_cutlass_tree(const fs::path& root) {
  std::error_code ec;
  return fs::is_regular_file(root / "include" / "cutlass" / "cutlass.h", ec) &&
         fs::is_regular_file(root / "include" / "cutlass" / "version.h", ec) &&
         fs::is_directory(root / "tools" / "util" / "include", ec);
}

std::string find_cutlass(const char* cutlass_path_env, const std::vector<std::string>& candidates) {
  constexpr const char* kFix =
      "; run scripts/setup.sh or set CUTLASS_PATH to a CUTLASS 4.2 checkout (the folder holding include/ and "
      "tools/util/include)";
  if (is_set(cutlass_path_env)) {
    if (!is_cutlass_tree(cutlass_path_env)) {
      throw ToolchainError("CUTLASS headers not found at " + std::string(cutlass_path_env) + " (from CUTLASS_PATH)" +
                           kFix);
    }
    return fs::absolute(cutlass_path_env).lexically_normal().string();
  }
  std::string looked;
  for (const std::string& candidate : candidates) {
    if (is_cutlass_tree(candidate)) return fs::absolute(candidate).lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + candidate;
  }
  throw ToolchainError("CUTLASS headers not found at " + looked + " (the installed copy, then the configured default)" +
                       kFix);
}

std::vector<std::string> installed_data_dirs(const std::string& binary_dir, const std::string& data_from_lib) {
  if (binary_dir.empty()) return {};
  return {(fs::path(binary_dir) / data_from_lib).lexically_normal().string(), binary_dir};
}

std::string parse_cutlass_version(const std::string& version_h) {
  auto define = [&](const char* name) -> std::string {
    std::smatch match;
    const std::regex pattern(std::string(R"(#define\s+)") + name + R"(\s+(\d+))");
    return std::regex_search(version_h, match, pattern) ? match[1].str() : std::string();
  };
  const std::string major = define("CUTLASS_MAJOR"), minor = define("CUTLASS_MINOR"), patch = define("CUTLASS_PATCH");
  if (major.empty() || minor.empty() || patch.empty()) return "";
  return major + "." + minor + "." + patch;
}

std::vector<std::string> gemmkit_includes(const std::string& text) {
  static const std::regex include(R"re(^\s*#\s*include\s*["<](gemmkit/[^">]+)[">])re", std::regex::multiline);
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), include); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

std::map<std::string, Toolchain::DeviceHeader> scan_device_headers(const std::string& dir) {
  std::map<std::string, Toolchain::DeviceHeader> headers;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string contents = read_text(entry.path());
    headers[fs::relative(entry.path(), dir).generic_string()] = {sha256_hex(contents), gemmkit_includes(contents)};
  }
  return headers;
}

std::string host_compiler_command(const char* nvcc_ccbin) {
  if (!is_set(nvcc_ccbin)) return "g++";
  std::error_code ec;
  if (fs::is_directory(nvcc_ccbin, ec)) return (fs::path(nvcc_ccbin) / "g++").string();
  return nvcc_ccbin;
}

}  // namespace toolchain_detail

std::string included_headers_digest(const Toolchain& toolchain, const std::string& source_text) {
  std::map<std::string, std::string_view> included;  // include path -> its header's SHA-256, sorted by path
  std::vector<std::string> pending = toolchain_detail::gemmkit_includes(source_text);
  while (!pending.empty()) {
    std::string path = std::move(pending.back());
    pending.pop_back();
    if (included.count(path)) continue;
    const auto header = toolchain.device_headers.find(path);
    if (header == toolchain.device_headers.end()) {
      included.emplace(std::move(path), "missing");
      continue;
    }
    included.emplace(std::move(path), header->second.sha256);
    pending.insert(pending.end(), header->second.includes.begin(), header->second.includes.end());
  }
  Sha256 hash;
  for (const auto& [path, digest] : included) hash.update(path).update("\0", 1).update(digest).update("\0", 1);
  return hash.hex_digest();
}

namespace {

using namespace toolchain_detail;

// The first line the host compiler prints for `option` (--version, -dumpmachine).
std::string ask_host_compiler(const char* nvcc_ccbin, const std::string& option) {
  const std::string compiler = host_compiler_command(nvcc_ccbin);
  ProcessResult result;
  try {
    result = run_process({compiler, option});
  } catch (const ToolchainError&) {
    result.exit_code = -1;
  }
  if (result.exit_code != 0) {
    throw ToolchainError("the host compiler `" + compiler + " " + option +
                         "` did not run; install g++ (or set "
                         "NVCC_CCBIN to the host compiler nvcc should use)");
  }
  return toolchain_detail::first_line(result.output);
}

// The folder of the binary this code is linked into: libgemmkit.so, or the Python extension.
std::string own_binary_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&own_binary_dir), &info) == 0 || info.dli_fname == nullptr) return "";
  std::error_code ec;
  const fs::path file = fs::canonical(info.dli_fname, ec);
  return ec ? "" : file.parent_path().string();
}

}  // namespace

const std::vector<std::string>& toolchain_detail::own_data_dirs() {
  static const std::vector<std::string> dirs = installed_data_dirs(own_binary_dir(), GEMMKIT_DATA_FROM_LIB);
  return dirs;
}

namespace {

// GEMMKIT_ROOT, else the copy beside the library (an install's share/gemmkit, the build tree's link to device/).
std::string find_device_include_dir() {
  const std::string gemmkit_root = knobs::value("GEMMKIT_ROOT");
  std::vector<fs::path> candidates;
  if (!gemmkit_root.empty()) {
    candidates.push_back(fs::path(gemmkit_root) / "device" / "include");
  } else {
    for (const std::string& dir : own_data_dirs()) candidates.push_back(fs::path(dir) / "device" / "include");
  }
  std::error_code ec;
  for (const fs::path& dir : candidates) {
    if (fs::is_regular_file(dir / "gemmkit" / "abi.h", ec)) return fs::absolute(dir).lexically_normal().string();
  }
  std::string looked;
  for (const fs::path& dir : candidates) looked += (looked.empty() ? "" : ", ") + dir.string();
  throw ToolchainError("gemmkit's device headers not found at " + looked +
                       "; set GEMMKIT_ROOT to the gemmkit source or install folder that holds device/include");
}

}  // namespace

Toolchain Toolchain::find_headers() {
  Toolchain tc;
  // CUTLASS first: its absence is the most common set-up mistake.
  const std::string cutlass_path = knobs::value("CUTLASS_PATH");
  std::vector<std::string> cutlass_candidates;
  for (const std::string& dir : own_data_dirs()) cutlass_candidates.push_back((fs::path(dir) / "cutlass").string());
  if (!std::string_view(GEMMKIT_CUTLASS_DEFAULT).empty()) cutlass_candidates.push_back(GEMMKIT_CUTLASS_DEFAULT);
  tc.cutlass_root = find_cutlass(cutlass_path.empty() ? nullptr : cutlass_path.c_str(), cutlass_candidates);
  tc.cutlass_version = parse_cutlass_version(
      toolchain_detail::read_text(fs::path(tc.cutlass_root) / "include" / "cutlass" / "version.h"));
  if (tc.cutlass_version.empty()) {
    throw ToolchainError("cannot read CUTLASS_MAJOR/MINOR/PATCH from " + tc.cutlass_root +
                         "/include/cutlass/version.h; run scripts/setup.sh or set CUTLASS_PATH to a CUTLASS 4.2 "
                         "checkout (the folder holding include/ and tools/util/include)");
  }
  tc.device_include_dir = find_device_include_dir();
  tc.device_headers = scan_device_headers(tc.device_include_dir);
  return tc;
}

Toolchain Toolchain::discover_uncached() {
  // The headers first: they need no subprocess.
  Toolchain tc = find_headers();
  const std::string cuda_home = knobs::value("CUDA_HOME");
  tc.nvcc = find_nvcc(cuda_home.empty() ? nullptr : cuda_home.c_str(), std::getenv("PATH"), "/usr/local/cuda/bin/nvcc");
  std::error_code ec;
  const fs::path resolved = fs::canonical(tc.nvcc, ec);
  tc.cuda_home = (ec ? fs::path(tc.nvcc) : resolved).parent_path().parent_path().string();
  const ProcessResult version = run_process({tc.nvcc, "--version"});
  if (version.exit_code != 0) {
    throw ToolchainError("`" + tc.nvcc + " --version` failed (exit code " + std::to_string(version.exit_code) +
                         "): " + version.output + "; reinstall the CUDA toolkit >= 12.4 or set CUDA_HOME");
  }
  const NvccVersion nvcc = parse_nvcc_version(version.output);
  tc.nvcc_version = nvcc.version;
  tc.nvcc_build = nvcc.build;
  const std::string ccbin = knobs::value("NVCC_CCBIN");
  const char* host = ccbin.empty() ? nullptr : ccbin.c_str();
  tc.host_compiler = ask_host_compiler(host, "--version");
  tc.host_target = ask_host_compiler(host, "-dumpmachine");
  return tc;
}

const Toolchain& Toolchain::discover() {
  // A failed discovery is not cached: the user may fix the environment and call again.
  static std::mutex mutex;
  static std::optional<Toolchain> cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (!cached) cached = discover_uncached();
  return *cached;
}

}  // namespace gemmkit
