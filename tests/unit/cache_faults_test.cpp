// tests/unit/cache_faults_test.cpp: the kernel cache when things go wrong: nvcc or gemmkit killed mid-build, a full
// disk, a read-only or unwritable cache, a path with spaces, a lock held by a dead process, two gemmkit versions in
// one folder. Each time the next call rebuilds or fails with a clear error, never loads a broken module and never
// waits on a dead lock. A fake nvcc (a shell script) stands in for the compiler; mounts are skipped where not
// permitted.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "support/process.hpp"
#include "unit/test_env.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

using testenv::read;

// A fake nvcc at <dir>/bin/nvcc: answers --version, checks that its source argument exists (a path split at a space
// would not), then runs `build` with $src and $out set.
fs::path write_nvcc(const fs::path& dir, const std::string& build) {
  const fs::path nvcc = dir / "bin" / "nvcc";
  fs::create_directories(nvcc.parent_path());
  std::ofstream(nvcc)
      << "#!/bin/sh\n"
         "if [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 13.0, V13.0.88'; exit 0; "
         "fi\n"
         "prev=; src=; out=\n"
         "for a in \"$@\"; do\n"
         "  [ \"$prev\" = -o ] && out=$a\n"
         "  case $a in *.cu) src=$a;; esac\n"
         "  prev=$a\n"
         "done\n"
         "[ -f \"$src\" ] || { echo \"fake nvcc: no source at '$src'\" >&2; exit 3; }\n"
      << build << "\n";
  fs::permissions(nvcc, fs::perms::owner_all);
  return nvcc;
}

// A module of 8 KiB that names its source.
const char* kBuilds = "printf 'module built from %s\\n' \"$src\" > \"$out\" && head -c 8192 /dev/zero >> \"$out\"";

// The rest of the toolchain stays empty: the fake nvcc ignores its include paths, and the key only needs to be stable.
Toolchain toolchain_with(const fs::path& nvcc) {
  Toolchain tc;
  tc.nvcc = nvcc.string();
  return tc;
}

KernelSource source(const std::string& name) {
  return {name, "sm_90a", "// kernel " + name + "\n"};
}

std::size_t count_children(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return 0;
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// Runs `body` in a forked process; its exit code, or -1 if it ran past `limit` (then it is killed).
int in_child(const std::function<int()>& body, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A tmpfs (or a read-only bind mount) for the length of a test; `reason` says why not when mounting is refused.
class Mount {
 public:
  Mount(const fs::path& target, const char* type, const std::string& options) : target_(target) {
    fs::create_directories(target);
    if (::mount(type, target.c_str(), type, 0, options.c_str()) != 0) reason_ = std::strerror(errno);
  }
  Mount(const fs::path& source, const fs::path& target) : target_(target) {  // read-only view of `source`
    fs::create_directories(target);
    if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      reason_ = std::strerror(errno);
    }
  }
  ~Mount() {
    if (reason_.empty()) ::umount2(target_.c_str(), MNT_DETACH);
  }
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;
  const std::string& reason() const { return reason_; }

 private:
  fs::path target_;
  std::string reason_;
};

#define SKIP_UNLESS_MOUNTED(mount)                                                                         \
  do {                                                                                                     \
    if (!(mount).reason().empty()) GTEST_SKIP() << "mounting is not permitted here: " << (mount).reason(); \
  } while (0)

class CacheFaults : public ::testing::Test {
 protected:
  testenv::TempDir dir_;
  fs::path good_nvcc_ = write_nvcc(dir_.path() / "good", kBuilds);
  // The stderr these tests read is warnings only (progress_test.cpp checks the progress lines); the CLI inherits it.
  testenv::ScopedEnv quiet_{"GEMMKIT_PROGRESS", "0"};
};

TEST_F(CacheFaults, NvccKilledMidBuildPublishesNothingAndTheNextCallRebuilds) {
  const fs::path killed = write_nvcc(dir_.path() / "killed", "head -c 100 /dev/zero > \"$out\"; kill -9 $$");
  DiskCache cache((dir_.path() / "cache").string());
  try {
    cache.get_or_build(toolchain_with(killed), source("k"));
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.exit_code, 128 + SIGKILL);
    EXPECT_NE(std::string(e.what()).find("killed by signal 9"), std::string::npos) << e.what();
  }
  const std::string key = cache.key(toolchain_with(good_nvcc_), source("k"));
  EXPECT_FALSE(cache.lookup(key).has_value());  // the 100-byte kernel.so was never published

  const CacheEntry built = cache.get_or_build(toolchain_with(good_nvcc_), source("k"));
  EXPECT_FALSE(built.hit);
  EXPECT_EQ(read(built.module_path).rfind("module built from ", 0), 0u);
  EXPECT_TRUE(cache.get_or_build(toolchain_with(good_nvcc_), source("k")).hit);
}

// gemmkit itself killed while it holds the key's lock and its nvcc runs on (orphaned): the next build neither waits
// for the dead process nor for its nvcc, and the dead build's folder is removed once it is stale.
TEST_F(CacheFaults, GemmkitKilledMidBuildLeavesNoLockToWaitOnAndItsFolderIsSweptWhenStale) {
  const fs::path pid_file = dir_.path() / "slow-nvcc.pid";
  const fs::path slow = write_nvcc(dir_.path() / "slow", "echo $$ > '" + pid_file.string() + "'\nexec sleep 60");
  const std::string root = (dir_.path() / "cache").string();
  const pid_t builder = ::fork();
  if (builder == 0) {
    try {
      DiskCache(root).get_or_build(toolchain_with(slow), source("k"));
    } catch (...) {
    }
    ::_exit(0);
  }
  for (int i = 0; i < 500 && read(pid_file).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string nvcc_pid = read(pid_file);
  ASSERT_FALSE(nvcc_pid.empty()) << "the slow nvcc never started";
  ::kill(builder, SIGKILL);  // mid-build, holding the lock
  ::waitpid(builder, nullptr, 0);

  const int rebuilt =
      in_child([&] { return DiskCache(root).get_or_build(toolchain_with(good_nvcc_), source("k")).hit ? 1 : 0; });
  ::kill(std::stoi(nvcc_pid), SIGKILL);  // the orphaned fake nvcc this test started
  EXPECT_EQ(rebuilt, 0) << (rebuilt == -1 ? "the build waited on the dead process's lock" : "no fresh build");

  const fs::path tmp = fs::path(root) / "v1" / "tmp";
  ASSERT_EQ(count_children(tmp), 1u);  // the dead build's folder: young, so perhaps still in use elsewhere
  fs::last_write_time(fs::directory_iterator(tmp)->path(), fs::file_time_type::clock::now() - std::chrono::hours(2));
  DiskCache(root).get_or_build(toolchain_with(good_nvcc_), source("other"));
  EXPECT_EQ(count_children(tmp), 0u);  // stale: swept by the next build
}

TEST_F(CacheFaults, AFullDiskFailsClearlyAndTheNextCallRebuilds) {
  const fs::path disk = dir_.path() / "disk";
  Mount tmpfs(disk, "tmpfs", "size=256k");
  SKIP_UNLESS_MOUNTED(tmpfs);
  {
    std::ofstream filler(disk / "filler", std::ios::binary);
    const std::string block(4096, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size())) && filler.flush()) {
    }
  }
  DiskCache cache((disk / "cache").string());
  const Toolchain tc = toolchain_with(good_nvcc_);
  try {
    cache.get_or_build(tc, source("k"));
    FAIL() << "expected an error on a full disk";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("No space left on device") != std::string::npos ||
                what.find("disk not full") != std::string::npos)
        << what;
    // Half-written build folders are removed (a CompileError keeps its folder for the user, by design).
    if (dynamic_cast<const CompileError*>(&e) == nullptr) {
      EXPECT_EQ(count_children(disk / "cache" / "v1" / "tmp"), 0u);
    }
    std::printf("full disk: %s\n", what.c_str());
  }
  EXPECT_FALSE(cache.lookup(cache.key(tc, source("k"))).has_value());

  fs::remove(disk / "filler");
  const CacheEntry built = cache.get_or_build(tc, source("k"));
  EXPECT_FALSE(built.hit);
  EXPECT_EQ(fs::path(built.dir).parent_path().parent_path().parent_path(), disk / "cache");
  EXPECT_TRUE(cache.get_or_build(tc, source("k")).hit);
}

// An unwritable root (a path through a regular file): kernels are built into one private temporary cache, announced
// by a single warning, and found there again by later lookups in the same process.
TEST_F(CacheFaults, AnUnwritableCacheDegradesToAPrivateCacheWithOneWarning) {
  std::ofstream(dir_.path() / "file") << "not a folder";
  const std::string root = (dir_.path() / "file" / "cache").string();
  const Toolchain tc = toolchain_with(good_nvcc_);
  ::testing::internal::CaptureStderr();
  std::vector<CacheEntry> built;
  for (const char* name : {"a", "b"}) built.push_back(DiskCache(root).get_or_build(tc, source(name)));
  built.push_back(DiskCache(root).get_or_build_many(tc, {source("c"), source("a")})[0]);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("gemmkit: warning: the kernel cache " + root + " is not writable (Not a directory)"),
            std::string::npos)
      << err;
  for (const CacheEntry& e : built) {
    EXPECT_FALSE(e.hit);
    EXPECT_TRUE(fs::exists(e.module_path));
    EXPECT_EQ(fs::path(e.dir).parent_path().parent_path().parent_path().parent_path(), fs::temp_directory_path());
  }
  EXPECT_TRUE(DiskCache(root).get_or_build(tc, source("a")).hit);
}

// The same through the CLI: the run succeeds with one warning, and the private cache is gone when the process exits.
TEST_F(CacheFaults, TheCliBuildsIntoAPrivateCacheWhenItsCacheIsUnwritable) {
  std::ofstream(dir_.path() / "file") << "not a folder";
  const auto r = testing::run_program({GEMMKIT_CLI_PATH, "compile", "--cc", "90", "--json"},
                                      {{"GEMMKIT_CACHE_DIR", (dir_.path() / "file" / "cache").string()},
                                       {"CUDA_HOME", (dir_.path() / "good").string()}});
  ASSERT_EQ(r.exit_code, 0) << r.summary();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.summary();
  EXPECT_NE(r.err.find("gemmkit: warning: the kernel cache"), std::string::npos) << r.summary();
  const auto at = r.out.find(fs::temp_directory_path().string() + "/gemmkit-cache-");
  ASSERT_NE(at, std::string::npos) << r.summary();
  const fs::path private_cache =
      r.out.substr(at, r.out.find('/', at + fs::temp_directory_path().string().size() + 1) - at);
  EXPECT_FALSE(fs::exists(private_cache)) << private_cache;
}

// A read-only bind mount of a cache: its entries still load, a damaged one is left alone (it cannot be moved), new
// kernels go to the private cache.
TEST_F(CacheFaults, AReadOnlyCacheServesItsEntriesAndBuildsElsewhere) {
  const fs::path rw = dir_.path() / "rw", ro = dir_.path() / "ro";
  const Toolchain tc = toolchain_with(good_nvcc_);
  const CacheEntry existing = DiskCache(rw.string()).get_or_build(tc, source("old"));
  const CacheEntry damaged = DiskCache(rw.string()).get_or_build(tc, source("damaged"));
  fs::resize_file(damaged.module_path, 10);
  Mount view(rw, ro);
  SKIP_UNLESS_MOUNTED(view);
  if (const int fd = ::open((ro / "probe").c_str(), O_CREAT | O_WRONLY, 0600); fd >= 0) {
    ::close(fd);
    FAIL() << "the read-only bind mount can be written";
  }

  ::testing::internal::CaptureStderr();
  DiskCache cache(ro.string());
  const CacheEntry hit = cache.get_or_build(tc, source("old"));
  const std::string quiet = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(hit.hit);
  EXPECT_EQ(fs::path(hit.dir), ro / fs::relative(existing.dir, rw));
  EXPECT_EQ(quiet, "");  // reading needs no warning

  ::testing::internal::CaptureStderr();
  const CacheEntry fresh = cache.get_or_build(tc, source("new"));
  const CacheEntry rebuilt = cache.get_or_build(tc, source("damaged"));
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(warned.begin(), warned.end(), '\n'), 1) << warned;
  EXPECT_NE(warned.find("(Read-only file system)"), std::string::npos) << warned;
  for (const CacheEntry& e : {fresh, rebuilt}) {
    EXPECT_FALSE(e.hit);
    EXPECT_EQ(fs::path(e.dir).string().rfind(fs::temp_directory_path().string(), 0), 0u) << e.dir;
    EXPECT_EQ(read(e.module_path).rfind("module built from ", 0), 0u);
  }
  EXPECT_EQ(fs::file_size(damaged.module_path), 10u);  // left where it was
}

TEST_F(CacheFaults, ACachePathWithSpacesWorksThroughTheCli) {
  const std::string root = (dir_.path() / "my cache" / "with spaces").string();
  auto compile = [&] {
    return testing::run_program({GEMMKIT_CLI_PATH, "compile", "--cc", "90", "--json"},
                                {{"GEMMKIT_CACHE_DIR", root}, {"CUDA_HOME", (dir_.path() / "good").string()}});
  };
  const auto first = compile();
  ASSERT_EQ(first.exit_code, 0) << first.summary();
  EXPECT_NE(first.out.find("\"miss\""), std::string::npos) << first.summary();
  EXPECT_NE(first.out.find(root + "/v1/"), std::string::npos) << first.summary();
  EXPECT_EQ(first.err, "");
  const auto second = compile();
  ASSERT_EQ(second.exit_code, 0) << second.summary();
  EXPECT_NE(second.out.find("\"hit\""), std::string::npos) << second.summary();
}

// Two gemmkit versions in one folder: the version is part of every key, so each reads and writes only its own
// entries; this one leaves the other's alone (whatever its manifest looks like) and lists what it can read of them.
TEST_F(CacheFaults, TwoGemmkitVersionsShareOneFolderWithoutTouchingEachOther) {
  const fs::path root = dir_.path() / "cache";
  DiskCache cache(root.string());
  const Toolchain tc = toolchain_with(good_nvcc_);
  const CacheEntry ours = cache.get_or_build(tc, source("k"));
  const std::string manifest = read(fs::path(ours.dir) / "manifest.json");
  const std::string version_field = "\"gemmkit_version\": \"";
  const auto at = manifest.find(version_field) + version_field.size();
  const std::string version = manifest.substr(at, manifest.find('"', at) - at);
  EXPECT_NE(cache.record(tc, source("k")).find("gemmkit-version: " + version + "\n"), std::string::npos);

  // The other version's entries: one in today's format, one in a format this version cannot read.
  const std::string older_key(64, 'a'), newer_key(64, 'b');
  for (const auto& [key, text] :
       {std::pair<std::string, std::string>{older_key, manifest}, {newer_key, "{\"v\": 2}"}}) {
    const fs::path dir = root / "v1" / key.substr(0, 2) / key;
    fs::create_directories(dir);
    fs::copy_file(ours.module_path, dir / "kernel.so");
    std::string other = text;
    if (const auto k = other.find(ours.key); k != std::string::npos) other.replace(k, ours.key.size(), key);
    if (const auto v = other.find(version_field + version); v != std::string::npos) {
      other.replace(v + version_field.size(), version.size(), "0.0.0-other");
    }
    std::ofstream(dir / "manifest.json") << other;
  }
  const std::string older_before = read(root / "v1" / "aa" / older_key / "manifest.json");

  EXPECT_TRUE(cache.get_or_build(tc, source("k")).hit);
  EXPECT_FALSE(cache.get_or_build(tc, source("new")).hit);
  const std::vector<CacheListing> listing = cache.list();
  ASSERT_EQ(listing.size(), 4u);  // ours twice, the older one, and the newer one (with no name this version can read)
  for (const CacheListing& item : listing) {
    if (item.key == older_key || item.key == newer_key) {
      EXPECT_EQ(item.kernel_name, item.key == older_key ? "k" : "") << item.key;
    }
  }
  EXPECT_TRUE(cache.lookup(older_key).has_value());
  EXPECT_EQ(read(root / "v1" / "aa" / older_key / "manifest.json"), older_before);
  EXPECT_TRUE(fs::exists(root / "v1" / "bb" / newer_key / "manifest.json"));
}

}  // namespace
}  // namespace gemmkit
