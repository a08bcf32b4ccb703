// src/tuning/choice.cpp: run()'s tuning lookup: a per-process snapshot of the database, matched against the plan's
// configurations, used only when the chosen kernel needs no compile.
#include "tuning/choice.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "runtime/kernel_module.hpp"

#ifndef GEMMKIT_VERSION
#error "GEMMKIT_VERSION must be defined by the build"
#endif

namespace gemmkit::tuning {
namespace {

std::atomic<int> g_applied{0}, g_not_built{0}, g_searched{0};

// What this process knows of the database: read at the first lookup and again after each write of this process.
struct Snapshot {
  std::mutex mutex;
  bool loaded = false;
  std::vector<Entry> entries;
  std::map<int, Identity> identities;  // per device
  std::map<std::string, bool> built;   // KernelSpec::canonical() -> in the kernel cache
};

Snapshot& snapshot() {
  static Snapshot s;
  return s;
}

enum State { kUnknown, kEmpty, kHasEntries };
std::atomic<int> g_state{kUnknown};          // lets run() skip everything while the database is empty or absent
std::atomic<std::uint64_t> g_snapshot{1};    // changes whenever the snapshot may have: LookupMemo answers expire
constexpr std::size_t kMemoProblems = 4096;  // a plan run at ever new shapes starts its memo afresh beyond this

// Reads every entry; a lookup never creates the file, and a database that cannot be read is ignored (one warning).
void load(Snapshot& s) {
  s.loaded = true;
  s.entries.clear();
  const std::string path = Database::default_path();
  std::error_code ec;
  if (!path.empty() && std::filesystem::exists(path, ec)) {
    try {
      s.entries = Database(path).entries();
    } catch (const Error& e) {
      std::cerr << "gemmkit: warning: run() ignores the tuning database: " << e.what() << "\n";
    }
  }
  g_snapshot.fetch_add(1, std::memory_order_acq_rel);
  g_state.store(s.entries.empty() ? kEmpty : kHasEntries, std::memory_order_release);
}

}  // namespace

Identity identity_of(int device) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) {
    cudaGetLastError();
    throw CudaError("cudaDriverGetVersion failed: the tuning database needs the CUDA driver's version",
                    static_cast<int>(cudaErrorNoDevice));
  }
  return {device_info(device).name, std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10),
          GEMMKIT_VERSION};
}

std::string plan_key(const KernelSpec& base) {
  KernelSpec spec = base;
  spec.tile = TileDescription{};
  return spec.canonical();
}

std::string tile_key(const TileDescription& tile) {
  return nlohmann::ordered_json(tile).dump();
}

Counters counters() {
  return {g_applied.load(), g_not_built.load(), g_searched.load()};
}

bool kernel_built(const KernelSpec& spec) {
  const DiskCache cache;
  const std::vector<std::string> keys = cache.keys(Toolchain::discover(), render(spec));
  return std::all_of(keys.begin(), keys.end(), [&](const std::string& key) { return cache.lookup(key).has_value(); });
}

void forget_snapshot() {
  Snapshot& s = snapshot();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.loaded = false;
  s.entries.clear();
  s.built.clear();
  g_snapshot.fetch_add(1, std::memory_order_acq_rel);
  g_state.store(kUnknown, std::memory_order_release);
}

std::optional<std::size_t> choose(const std::vector<Entry>& entries, const Identity& identity, const KernelSpec& base,
                                  const std::vector<TileDescription>& tiles, const Problem& problem,
                                  const std::function<bool(const KernelSpec&)>& built) {
  const auto entry = best_match(entries, identity, plan_key(base), problem.m, problem.n, problem.k, problem.batch);
  if (!entry) return std::nullopt;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    if (tile_key(tiles[i]) != entry->tile) continue;
    KernelSpec spec = base;
    spec.tile = tiles[i];
    if (!built(spec)) {
      ++g_not_built;
      return std::nullopt;
    }
    ++g_applied;
    return i;
  }
  return std::nullopt;  // a configuration this plan does not offer (another CUTLASS or gemmkit build)
}

namespace {

// The database's answer for this problem on the current device, without the memo: reads the snapshot (loading it
// first), then matches entries and tiles by their JSON keys.
std::optional<std::size_t> search_database(const KernelSpec& base, const std::vector<TileDescription>& tiles,
                                           const Problem& problem) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {  // no GPU (spec_for on a build machine): nothing was measured here
    cudaGetLastError();
    return std::nullopt;
  }
  Snapshot& s = snapshot();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.loaded) load(s);
  if (s.entries.empty()) return std::nullopt;
  ++g_searched;
  auto identity = s.identities.find(device);
  if (identity == s.identities.end()) identity = s.identities.emplace(device, identity_of(device)).first;
  return choose(s.entries, identity->second, base, tiles, problem, [&](const KernelSpec& spec) {
    const std::string key = spec.canonical();
    auto known = s.built.find(key);
    if (known == s.built.end()) known = s.built.emplace(key, kernel_built(spec)).first;
    return known->second;
  });
}

}  // namespace

std::optional<std::size_t> tuned_choice(const KernelSpec& base, const std::vector<TileDescription>& tiles,
                                        const Problem& problem, LookupMemo& memo) {
  if (g_state.load(std::memory_order_acquire) == kEmpty) return std::nullopt;
  const std::array<std::int64_t, 4> key{problem.m, problem.n, problem.k, problem.batch};
  const std::uint64_t snapshot_before = g_snapshot.load(std::memory_order_acquire);
  {
    std::lock_guard<std::mutex> lock(memo.mutex);
    if (memo.snapshot == snapshot_before) {
      if (auto found = memo.choices.find(key); found != memo.choices.end()) {
        if (found->second) ++g_applied;  // counted per choice, as the lookup does
        return found->second;
      }
    }
  }
  const std::optional<std::size_t> chosen = search_database(base, tiles, problem);
  // Filed under the snapshot it was read from (a first lookup loads one: it is redone once, then kept).
  std::lock_guard<std::mutex> lock(memo.mutex);
  if (memo.snapshot != snapshot_before || memo.choices.size() >= kMemoProblems) {
    memo.choices.clear();
    memo.snapshot = snapshot_before;
  }
  memo.choices.emplace(key, chosen);
  return chosen;
}

}  // namespace gemmkit::tuning
