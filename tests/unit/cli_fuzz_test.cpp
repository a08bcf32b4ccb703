// tests/unit/cli_fuzz_test.cpp: the gemmkit binary under bad arguments, as a black box: every bad value of every
// option, misspelt options, options of another command, repeated options, single-dash forms and missing values exit
// non-zero with a message naming the option (on stderr, or as a JSON error object with --json) and run nothing (a fake
// nvcc records any build): exit 2 for a usage error, 1 for what only the plan can refuse. Seeded random command lines
// never crash or hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.hpp"
#include "unit/test_env.hpp"

namespace fs = std::filesystem;
using gemmkit::testing::ProgramResult;

namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w == "''" ? "" : w);  // '' stands for an empty argument
  return out;
}

// The CLI with a private cache and a fake toolkit whose nvcc answers --version and records any build.
class CliFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path nvcc = dir_.path() / "cuda" / "bin" / "nvcc";
    fs::create_directories(nvcc.parent_path());
    std::ofstream(nvcc) << "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 13.0, V13.0.88'; "
                           "exit 0; fi\n"
                           "touch '"
                        << built_.string() << "'\necho 'fake nvcc: no builds here' >&2\nexit 1\n";
    fs::permissions(nvcc, fs::perms::owner_all);
  }
  ProgramResult run(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {GEMMKIT_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return gemmkit::testing::run_program(
        argv, {{"GEMMKIT_CACHE_DIR", (dir_.path() / "cache").string()}, {"CUDA_HOME", (dir_.path() / "cuda").string()}},
        std::chrono::seconds(30));
  }
  // Nothing was built or cached.
  bool ran_nothing() const { return !fs::exists(built_) && !fs::exists(dir_.path() / "cache" / "v1"); }

  gemmkit::testenv::TempDir dir_;
  fs::path built_ = dir_.path() / "nvcc-ran";
};

// A refused command line: the arguments, what the message must contain (the option, or the value) and the exit
// status: 2 for a usage error (the parser's checks), 1 for a ConfigError (the plan's rules).
struct Bad {
  std::string args;
  std::string names;
  int exit = 2;
};

std::vector<Bad> bad_cases() {
  std::vector<Bad> out;
  for (const char* size : {"m", "n", "k", "batch", "repeat"}) {
    for (const char* value :
         {"-5", "0", "-1", "99999999999999999999", "2147483648", "abc", "1.5", "8x", "0x10", "''"}) {
      out.push_back({std::string("run --cc 90 --") + size + " " + value, std::string("--") + size});
    }
    out.push_back({std::string("run --cc 90 --") + size + "=", std::string("--") + size});
  }
  out.push_back({"run --cc 90 --repeat 1000001", "--repeat"});
  // Each size fits, their product does not: every operand holds at most 2^31-1 elements.
  out.push_back({"run --cc 90 --m 65536 --n 65536", "--m, --n"});
  out.push_back({"run --cc 90 --m 1 --k 2147483647 --n 2", "--k, --n"});
  out.push_back({"run --cc 90 --m 1024 --k 1024 --batch 4096", "--batch"});
  for (const char* real : {"alpha", "beta"}) {
    for (const char* value : {"abc", "nan", "inf", "-inf", "1e999", "1.5.2", "''"}) {
      out.push_back({std::string("run --cc 90 --") + real + " " + value, std::string("--") + real});
    }
  }
  // Plan options, for every command that builds a plan (compile must not reach nvcc).
  for (const char* command : {"plan", "tiles", "compile", "run"}) {
    const std::string c = std::string(command) + " ";
    for (const char* value : {"abc", "99999999999", "''", "-5", "0"}) out.push_back({c + "--cc " + value, "--cc"});
    out.push_back({c + "--cc 75", "got cc 75", 1});
    out.push_back({c + "--cc 100", "Compute capability 100", 1});
    out.push_back({c + "--cc 90 --kernel-cc x", "--kernel-cc"});
    out.push_back({c + "--cc 90 --kernel-cc 70", "--kernel-cc 70", 1});
    for (const char* option : {"element", "element-a", "element-b", "element-c", "element-d", "element-accumulator"}) {
      for (const char* value : {"f17", "int4", "''"}) {
        out.push_back({c + "--cc 90 --" + option + " " + value, std::string("--") + option + ":"});
      }
    }
    for (const char* option : {"layout", "layout-a", "layout-b", "layout-c"}) {
      out.push_back({c + "--cc 90 --" + option + " diagonal", std::string("--") + option + ":"});
    }
    out.push_back({c + "--cc 90 --opclass gpu", "--opclass"});
    out.push_back({c + "--cc 90 --swizzle Zigzag", "--swizzle"});
    out.push_back({c + "--cc 90 --swizzle HorizontalSwizzle", "--swizzle HorizontalSwizzle", 1});
    out.push_back({c + "--cc 90 --activation swish", "--activation"});
    out.push_back({c + "--cc 90 --bias diagonal", "--bias"});
    out.push_back({c + "--cc 90 --raster-order sideways", "--raster-order"});
    out.push_back({c + "--cc 80 --raster-order AlongN", "--raster-order AlongN", 1});
    for (const char* value : {"3", "0", "16", "abc"})
      out.push_back({c + "--cc 90 --max-swizzle-size " + value, "--max-swizzle-size"});
    out.push_back({c + "--cc 80 --max-swizzle-size 2", "--max-swizzle-size 2", 1});
    out.push_back({c + "--cc 90 --activation leaky_relu --activation-parameter abc", "--activation-parameter"});
    out.push_back({c + "--cc 90 --activation leaky_relu --activation-parameter nan", "--activation-parameter"});
    out.push_back({c + "--cc 90 --activation-parameter 0.2", "--activation-parameter"});  // without --activation
    for (const char* value : {"-1", "abc", "99999999999999999999"})
      out.push_back({c + "--cc 90 --tile " + value, "--tile"});
    out.push_back({c + "--cc 90 --tile 999", "--tile", 1});
    // Misspelt and unknown options, flags given a value, options missing their value.
    for (const char* option :
         {"--tiel 3", "--elemnt f16", "--M 5", "--jsonx", "--check=yes", "--print-source=1", "--json=1"}) {
      const std::string word = words(option)[0];
      out.push_back({c + "--cc 90 " + option, word.substr(0, word.find('='))});
    }
    for (const char* option : {"cc", "element", "layout", "tile", "activation"}) {
      out.push_back({c + "--cc 90 --" + option, std::string("--") + option});
    }
    // The next option taken as a missing value.
    out.push_back({c + "--element --cc 90", "--element"});
    out.push_back({c + "--tile --cc 90", "--tile"});
    // Repeated options: refused rather than one of the values silently winning.
    out.push_back({c + "--cc 90 --cc 80", "--cc"});
    out.push_back({c + "--cc 90 --element f16 --element f32", "--element"});
    // Single-dash forms, words after the options, words after `--`.
    out.push_back({c + "-cc 90", "-cc"});
    out.push_back({c + "--cc 90 -tile 1", "-tile"});
    out.push_back({c + "--cc 90 extra words", "'extra'"});
    out.push_back({c + "--cc 90 -- --tile 1", "--tile"});
    out.push_back({c + "--cc 90 -- x", "'x'"});
  }
  // Options of another command.
  for (const char* command : {"plan", "tiles", "compile"}) {
    const std::string c = std::string(command) + " --cc 90 ";
    out.push_back({c + "--repeat 5", "--repeat is an option of gemmkit run"});
    out.push_back({c + "-m 5", "options take two dashes, --m"});
    // A GEMM's problem: all of --m --n --k for plan and compile, none for tiles.
    out.push_back({c + "--m 5", std::string(command) == "tiles" ? "tiles lists them all" : "go together"});
    out.push_back({c + "--alpha nan", "--alpha"});
    out.push_back({c + "--check", "--check"});
  }
  out.push_back({"run --cc 90 -m 5", "options take two dashes, --m"});
  out.push_back({"tiles --cc 90 --print-source", "--print-source is an option of gemmkit plan"});
  out.push_back({"cache ls --element f17", "--element is an option of gemmkit plan"});
  out.push_back({"cache info --cc 90", "--cc"});
  out.push_back({"demo --m 5", "--m"});
  out.push_back({"frobnicate", "frobnicate"});
  out.push_back({"cache frob", "frob"});
  out.push_back({"cache", "ls, info, clear"});
  out.push_back({"cache ls extra", "'extra'"});
  out.push_back({"help frob", "frob"});
  return out;
}

// Whether stdout is a JSON error object, however it is spaced: {"error": "<kind>", "message": "...", ...}.
bool json_error(const std::string& out) {
  std::string compact;
  bool in_string = false, escaped = false;
  for (const char ch : out) {
    if (in_string) {
      escaped = !escaped && ch == '\\';
      if (ch == '"' && !escaped) in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (std::isspace(static_cast<unsigned char>(ch))) {
      continue;
    }
    compact += ch;
  }
  return compact.rfind("{\"error\":\"", 0) == 0 && compact.find(",\"message\":\"") != std::string::npos &&
         compact.back() == '}';
}

std::string joined(const std::vector<std::string>& args) {
  std::string line;
  for (const auto& a : args) line += (line.empty() ? "" : " ") + (a.empty() ? std::string("''") : a);
  return line;
}

}  // namespace

TEST_F(CliFuzz, EveryBadValueExitsNonZeroNamingTheOptionAndRunsNothing) {
  int checked = 0;
  for (const Bad& bad : bad_cases()) {
    const std::vector<std::string> args = words(bad.args);
    const ProgramResult plain = run(args);
    EXPECT_EQ(plain.exit_code, bad.exit) << bad.args << ": " << plain.summary();
    EXPECT_TRUE(plain.out.empty()) << bad.args << ": " << plain.summary();
    EXPECT_EQ(plain.err.rfind("gemmkit: ", 0), 0u) << bad.args << ": " << plain.summary();
    EXPECT_NE(plain.err.find(bad.names), std::string::npos)
        << bad.args << " should name '" << bad.names << "': " << plain.summary();
    // With --json (right after the command, so no option takes it as its value): a JSON error object on stdout.
    std::vector<std::string> with_json = args;
    with_json.insert(with_json.begin() + 1, "--json");
    const ProgramResult json = run(with_json);
    EXPECT_EQ(json.exit_code, bad.exit) << joined(with_json) << ": " << json.summary();
    EXPECT_TRUE(json_error(json.out)) << joined(with_json) << ": " << json.summary();
    EXPECT_NE(json.out.find(bad.names), std::string::npos) << joined(with_json) << ": " << json.summary();
    EXPECT_TRUE(ran_nothing()) << bad.args;
    ++checked;
  }
  std::printf("cli fuzz: %d bad command lines, each plain and with --json\n", checked);
}

// What the hand-written parser let through (an option of another command, a repeated option, a single-dash word,
// extra words) is refused with a message that says what to write instead, and nothing runs.
TEST_F(CliFuzz, TheOldParsersGapsAreClosedWithMessagesThatSayWhatToWrite) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"plan --cc 90 --repeat 5",
       "Unknown option --repeat for gemmkit plan: --repeat is an option of gemmkit run, not of gemmkit plan."},
      {"plan --cc 90 --alpha nan", "Unknown option --alpha for gemmkit plan: --alpha is an option of gemmkit run"},
      {"plan --cc 90 --activation-parameter abc", "--activation-parameter: expects a finite number; got 'abc'."},
      {"plan --cc 90 --activation-parameter 0.5", "--activation-parameter needs --activation"},
      {"plan --cc 90 extra words", "Unexpected argument 'extra' for gemmkit plan: it takes options only"},
      {"plan --cc 90 -m 5", "Unknown option -m for gemmkit plan: options take two dashes, --m."},
      {"run --cc 90 -m 5", "Unknown option -m for gemmkit run: options take two dashes, --m."},
      {"plan --cc 90 --cc 80", "--cc is given more than once; give it once."},
      {"cache ls --element f17",
       "Unknown option --element for gemmkit cache ls: --element is an option of gemmkit plan"},
      {"plan --cc 90 --element", "--element needs a value."},
      {"plan --cc 90 --print-source=yes", "--print-source is a flag: it takes no value."},
  };
  for (const auto& [line, message] : refused) {
    const ProgramResult r = run(words(line));
    EXPECT_EQ(r.exit_code, 2) << line << ": " << r.summary();
    EXPECT_EQ(r.err.rfind("gemmkit: UsageError: ", 0), 0u) << line << ": " << r.summary();
    EXPECT_NE(r.err.find(message), std::string::npos) << line << ": " << r.summary();
  }
  EXPECT_TRUE(ran_nothing());
}

// What stays accepted, and why: `--` alone ends the options (POSIX; whatever follows it is refused above), a flag
// given twice means what it means once, a flag may say =true, and -h is CLI11's short form of --help.
TEST_F(CliFuzz, ConventionalFormsStayAccepted) {
  const ProgramResult plain = run(words("plan --cc 90"));
  ASSERT_EQ(plain.exit_code, 0) << plain.summary();
  for (const char* line :
       {"plan --cc 90 --", "plan --cc=90", "plan --cc 90 --json --json", "plan --json=true --cc 90"}) {
    const ProgramResult r = run(words(line));
    EXPECT_EQ(r.exit_code, 0) << line << ": " << r.summary();
    EXPECT_EQ(r.err, "") << line;
  }
  EXPECT_EQ(run(words("plan --cc 90 --")).out, plain.out);
  EXPECT_EQ(run(words("plan --cc=90")).out, plain.out);
  const ProgramResult help = run(words("plan -h"));
  EXPECT_EQ(help.exit_code, 0) << help.summary();
  EXPECT_EQ(help.out, run(words("plan --help")).out);
  EXPECT_NE(help.out.find("Usage: gemmkit plan"), std::string::npos) << help.summary();
  EXPECT_TRUE(ran_nothing());
}

// Seeded random command lines: some valid options, some bad values, misspelt options and dangling option names.
// Never a crash or a hang; a line with a bad token fails naming one of them and builds nothing; a valid plan or
// tiles line succeeds.
TEST_F(CliFuzz, RandomCommandLinesNeverCrashAndNameTheirBadToken) {
  struct Option {
    const char* name;
    std::vector<const char*> good, bad;
  };
  const std::vector<Option> plan_options = {
      {"element", {"f16", "f32"}, {"f17", "''", "half-ish"}},
      {"element-accumulator", {"f32"}, {"f99"}},
      {"layout", {"row", "col"}, {"diagonal", "''"}},
      {"opclass", {"tensorop"}, {"gpu"}},
      {"swizzle", {"IdentitySwizzle1"}, {"Zigzag"}},
      {"activation", {"relu", "gelu", "identity"}, {"swish"}},
      {"tile", {"0", "1"}, {"-1", "999", "x"}},
      {"max-swizzle-size", {"1", "2"}, {"3", "0"}},
  };
  const std::vector<Option> run_options = {
      {"m", {"64", "1"}, {"0", "-5", "99999999999999999999"}},
      {"n", {"64"}, {"0", "abc"}},
      {"k", {"64"}, {"-1"}},
      {"batch", {"1", "2"}, {"0"}},
      {"repeat", {"1"}, {"-1", "0"}},
      {"alpha", {"1", "-0.5"}, {"nan", "inf", "x"}},
      {"beta", {"0", "2"}, {"1e999"}},
  };
  std::mt19937_64 rng(20261130);
  auto pick = [&](std::size_t n) {
    return static_cast<std::size_t>(std::uniform_int_distribution<std::size_t>(0, n - 1)(rng));
  };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  int failures = 0, lines = 0, bad_lines = 0, succeeded = 0;
  for (int i = 0; i < 150 && failures < 10; ++i) {
    const char* commands[] = {"plan", "tiles", "compile", "run"};
    const std::string command = commands[pick(4)];
    std::vector<std::string> args = {command, "--cc", chance(0.9) ? "90" : "80"};
    std::vector<std::string> bad_names;  // what the message may name
    const bool json = chance(0.3);
    if (json) args.push_back("--json");
    std::vector<Option> options = plan_options;
    if (command == "run") options.insert(options.end(), run_options.begin(), run_options.end());
    std::shuffle(options.begin(), options.end(), rng);  // each option once: a repeated one is refused
    const std::size_t count = pick(5);
    for (std::size_t o = 0; o < count; ++o) {
      const Option& option = options[o];
      args.push_back(std::string("--") + option.name);
      if (chance(0.75)) {
        args.push_back(option.good[pick(option.good.size())]);
      } else {
        args.push_back(option.bad[pick(option.bad.size())]);
        bad_names.push_back(std::string("--") + option.name);
        if (args.back() == "''") args.back() = "";
      }
    }
    if (chance(0.15)) {  // a misspelt option
      args.insert(args.begin() + 1 + static_cast<long>(pick(args.size() - 1)), "--tiel");
      bad_names.push_back("--tiel");
    }
    if (chance(0.1) && !json) {  // an option name without its value, last
      args.push_back("--element");
      bad_names.push_back("--element");
    }
    const ProgramResult r = run(args);
    ++lines;
    bad_lines += bad_names.empty() ? 0 : 1;
    succeeded += r.exit_code == 0 ? 1 : 0;
    std::string problem;
    if (r.timed_out || r.signal != 0 || r.exit_code < 0 || r.exit_code > 2)
      problem = "ended badly";
    else if (r.exit_code == 2 && bad_names.empty())
      problem = "a usage error on a line without a bad token";
    else if (r.exit_code == 0 && (!bad_names.empty() || r.out.empty()))
      problem = "succeeded with a bad token";
    else if (r.exit_code != 0 && (json ? !json_error(r.out) : r.err.empty()))
      problem = "no message";
    else if (!bad_names.empty()) {
      bool named = false;
      for (const auto& name : bad_names) named |= (json ? r.out : r.err).find(name) != std::string::npos;
      if (!named) problem = "the message names none of the bad options";
      if (fs::exists(built_)) problem = "nvcc ran although the line is bad";
    } else if ((command == "plan" || command == "tiles") && r.exit_code != 0) {
      problem = "a valid plan line failed";
    }
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << problem << ": gemmkit " << joined(args) << "\n" << r.summary();
    }
    std::error_code ec;
    fs::remove(built_, ec);
  }
  std::printf("cli random fuzz: %d command lines, %d with a bad token, %d succeeded\n", lines, bad_lines, succeeded);
  EXPECT_GT(bad_lines, lines / 4);
  EXPECT_GT(succeeded, lines / 5);
}
