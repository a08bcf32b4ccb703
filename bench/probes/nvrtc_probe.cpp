// bench/probes/nvrtc_probe.cpp: times NVRTC compiling .cu files to cubins in one process (no PCH, auto --pch,
// --create-pch then --use-pch). Build: g++ -std=c++17 -O2 -I/usr/local/cuda/include bench/probes/nvrtc_probe.cpp -o
// nvrtc_probe -L/usr/local/cuda/lib64 -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64
//
// Usage: nvrtc_probe [--mode=none|auto|explicit|ab] [--pch-file=F] [--pch-dir=D] [--heap-mb=N] [--repeat=N]
//                    [--out-dir=D] [--log-lines=N] [NVRTC options...] file.cu [file.cu...]
// Every argument that does not start with "--mode=", "--pch-file=", ... and does not end in ".cu" is passed to
// NVRTC as an option. The files are compiled in order, `repeat` times, all in this one process (an NVRTC PCH is
// only usable by the process, and the PCH heap, that created it).
//   none:     plain compiles.
//   auto:     --pch (and --pch-dir=D when given) on every compile: NVRTC decides whether to create / use a PCH.
//   explicit: the first compile gets --create-pch=F, every later one --use-pch=F.
//   ab:       the first compile gets --create-pch=F; every later file is compiled twice, without and then with
//             --use-pch=F (interleaved, so that both see the same machine load).
// Per compile it prints the wall time of nvrtcCompileProgram (and of the whole create..getCUBIN sequence), the
// PCH create status and required heap, the cubin size and the log's first lines (PCH messages included, with
// --pch-messages=true / --pch-verbose=true).
#include <nvrtc.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::string loadavg() {  // the 1-minute load average (another job may share the machine's cores)
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one;
}

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}

bool ends_with(const std::string& s, const char* p) {
  const std::string q(p);
  return s.size() >= q.size() && s.compare(s.size() - q.size(), q.size(), q) == 0;
}

const char* pch_status_name(nvrtcResult r) {
  switch (r) {
    case NVRTC_SUCCESS: return "created";
    case NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED: return "not attempted";
    case NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED: return "heap exhausted";
    case NVRTC_ERROR_PCH_CREATE: return "create error";
    default: return nvrtcGetErrorString(r);
  }
}

struct Result {
  bool ok = false;
  bool heap_exhausted = false;
  size_t heap_required = 0;
};

Result compile_one(const std::string& path, const std::vector<std::string>& pch_opts,
                   const std::vector<std::string>& opts, const std::string& out_dir, int log_lines, int index) {
  Result res;
  const std::string src = read_file(path);
  std::vector<const char*> argv;
  for (const auto& o : pch_opts) argv.push_back(o.c_str());  // PCH options must come first
  for (const auto& o : opts) argv.push_back(o.c_str());

  const std::string load0 = loadavg();
  const double c0 = cpu_s();
  const double t0 = now_s();
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, src.c_str(), path.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    std::printf("nvrtcCreateProgram: %s\n", nvrtcGetErrorString(r));
    return res;
  }
  const double t1 = now_s();
  r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  const double t2 = now_s();
  size_t cubin_size = 0;
  std::string cubin;
  if (r == NVRTC_SUCCESS && nvrtcGetCUBINSize(prog, &cubin_size) == NVRTC_SUCCESS && cubin_size > 0) {
    cubin.resize(cubin_size);
    nvrtcGetCUBIN(prog, cubin.data());
  }
  const double t3 = now_s();
  const double c3 = cpu_s();

  std::printf("[%d] %s\n    options:", index, path.c_str());
  for (const char* a : argv) std::printf(" %s", a);
  std::printf(
      "\n    compile: %s  nvrtcCompileProgram %.2f s, create..getCUBIN %.2f s wall, %.2f s CPU, cubin %zu bytes,"
      " load %s -> %s\n",
      nvrtcGetErrorString(r), t2 - t1, t3 - t0, c3 - c0, cubin_size, load0.c_str(), loadavg().c_str());
  if (!pch_opts.empty()) {
    const nvrtcResult st = nvrtcGetPCHCreateStatus(prog);
    size_t need = 0;
    const bool have_need = (st == NVRTC_SUCCESS || st == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED) &&
                           nvrtcGetPCHHeapSizeRequired(prog, &need) == NVRTC_SUCCESS;
    size_t heap = 0;
    nvrtcGetPCHHeapSize(&heap);
    std::printf("    PCH create status: %s; heap size %.1f MiB", pch_status_name(st), heap / 1048576.0);
    if (have_need) std::printf("; heap required %.1f MiB", need / 1048576.0);
    std::printf("\n");
    res.heap_exhausted = st == NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED;
    res.heap_required = need;
  }
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  if (log_size > 1) {
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    std::istringstream lines(log);
    std::string line;
    int n = 0, total = 0;
    std::printf("    log (%zu bytes):\n", log_size);
    while (std::getline(lines, line)) {
      if (n < log_lines && !line.empty()) {
        std::printf("      %s\n", line.c_str());
        ++n;
      }
      ++total;
    }
    if (total > n) std::printf("      ... (%d lines)\n", total);
  }
  if (!cubin.empty() && !out_dir.empty()) {
    const std::string out = out_dir + "/probe" + std::to_string(index) + ".cubin";
    std::ofstream(out, std::ios::binary).write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  }
  std::fflush(stdout);
  nvrtcDestroyProgram(&prog);
  res.ok = r == NVRTC_SUCCESS;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "none", pch_file = "/tmp/nvrtc_probe.pch", pch_dir, out_dir;
  int repeat = 1, log_lines = 30;
  long heap_mb = 0;
  std::vector<std::string> opts, files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (starts_with(a, "--mode="))
      mode = a.substr(7);
    else if (starts_with(a, "--pch-file="))
      pch_file = a.substr(11);
    else if (starts_with(a, "--pch-dir="))
      pch_dir = a.substr(10);
    else if (starts_with(a, "--heap-mb="))
      heap_mb = std::atol(a.c_str() + 10);
    else if (starts_with(a, "--repeat="))
      repeat = std::atoi(a.c_str() + 9);
    else if (starts_with(a, "--out-dir="))
      out_dir = a.substr(10);
    else if (starts_with(a, "--log-lines="))
      log_lines = std::atoi(a.c_str() + 12);
    else if (ends_with(a, ".cu"))
      files.push_back(a);
    else
      opts.push_back(a);
  }
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  size_t heap = 0;
  nvrtcGetPCHHeapSize(&heap);
  std::printf("NVRTC %d.%d, mode %s, default PCH heap %.1f MiB\n", major, minor, mode.c_str(), heap / 1048576.0);
  if (heap_mb > 0) {
    nvrtcSetPCHHeapSize(static_cast<size_t>(heap_mb) << 20);
    nvrtcGetPCHHeapSize(&heap);
    std::printf("PCH heap set to %.1f MiB\n", heap / 1048576.0);
  }
  int index = 0, failures = 0;
  const double start = now_s();
  for (int rep = 0; rep < repeat; ++rep) {
    for (const auto& f : files) {
      const int passes = (mode == "ab" && index > 0) ? 2 : 1;
      for (int pass = 0; pass < passes; ++pass) {
        std::vector<std::string> pch_opts;
        if (mode == "auto") {
          pch_opts.push_back("--pch");
          if (!pch_dir.empty()) pch_opts.push_back("--pch-dir=" + pch_dir);
        } else if (mode == "explicit" || (mode == "ab" && (index == 0 || pass == 1))) {
          pch_opts.push_back((index == 0 ? "--create-pch=" : "--use-pch=") + pch_file);
        }
        if (!pch_opts.empty()) {  // what NVRTC did with the PCH, into the program log
          pch_opts.push_back("--pch-messages=true");
          pch_opts.push_back("--pch-verbose=true");
        }
        Result res = compile_one(f, pch_opts, opts, out_dir, log_lines, index);
        if (res.heap_exhausted && res.heap_required > 0) {
          // The documented recovery: grow the heap to the required size, compile again with a new program. (For
          // CUTLASS that is not enough: with PCH on, the whole front end allocates from the heap; use --heap-mb.)
          nvrtcSetPCHHeapSize(res.heap_required);
          std::printf("    -> PCH heap grown to %.1f MiB, compiling again\n", res.heap_required / 1048576.0);
          res = compile_one(f, pch_opts, opts, out_dir, log_lines, index);
        }
        failures += res.ok ? 0 : 1;
        ++index;
      }
    }
  }
  std::printf("total %.2f s, %d compile(s) failed\n", now_s() - start, failures);
  return failures == 0 ? 0 : 1;
}
