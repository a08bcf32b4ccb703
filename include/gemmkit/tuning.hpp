// include/gemmkit/tuning.hpp: autotuning (Gemm::tune) and the persistent tuning database run() consults.
#pragma once

#include <cuda_runtime_api.h>
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/errors.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/results.hpp"

namespace gemmkit {

void to_json(nlohmann::ordered_json& json, const TuneResult& result);

// The winner of a search: the fastest candidate that ran, if it beats the heuristic's choice (candidates[0]) by at
// least min_gain (a fraction); else the heuristic's. Candidates of one kernel read a few percent apart between runs,
// so a smaller lead is noise that the next process need not repeat.
std::size_t tuning_winner(const std::vector<TuneCandidate>& candidates, double min_gain = 0.03);

namespace tuning {

// Where a measurement was taken: entries of another GPU model, driver or gemmkit version are never used.
struct Identity {
  std::string device;           // e.g. "NVIDIA H200"
  std::string driver;           // the CUDA version the driver supports, e.g. "13.0"
  std::string gemmkit_version;  // e.g. "0.1.0"
  bool operator==(const Identity&) const = default;
};
// The identity of a CUDA device of this process (throws CudaError without one).
Identity identity_of(int device);

// Problems share an entry when each extent rounds to the same half-octave: round(2 * log2(x)), so 3000 and 3232 do
// (both 23) and 4096 (24) does not. The batch count is bucketed the same way.
int bucket_of(std::int64_t extent);

// One row of the database: the best configuration measured for a plan on one problem shape.
struct Entry {
  Identity identity;
  std::string plan;  // the plan's kernel without its tile: types, layouts, accumulator, alignments, epilogue, ...
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  std::string tile;         // the configuration, as TileDescription JSON
  std::string kernel_name;  // the kernel it names (for people; matching uses plan + tile)
  double ms = 0.0, heuristic_ms = 0.0;
  std::string created;  // UTC, ISO 8601
  bool operator==(const Entry&) const = default;
};
void to_json(nlohmann::ordered_json& json, const Entry& entry);

// The key of a plan: its kernel spec with the tile cleared.
std::string plan_key(const KernelSpec& base);
// A tile as stored in the database.
std::string tile_key(const TileDescription& tile);

// The SQLite tuning database: many processes may read and write it at once (WAL journal, busy timeout, one
// transaction per write). A file that is not a usable database is moved aside (path + ".damaged") and replaced by an
// empty one, with one warning on stderr: it holds measurements only, which `gemmkit tune` can repeat.
class Database {
 public:
  // GEMMKIT_TUNING_DB, else <kernel cache>/tuning.sqlite3; "" when GEMMKIT_TUNING_DB is "off".
  static std::string default_path();
  // Opens (creates) the database. Throws Error naming the path when it cannot be opened or created.
  explicit Database(std::string path = default_path());
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  // Inserts or replaces the entry of (identity, plan, m, n, k, batch).
  void put(const Entry& entry);
  // Every entry (of one identity when given), oldest first.
  std::vector<Entry> entries(const std::optional<Identity>& identity = std::nullopt) const;
  // The entry for this plan and shape: the exact shape, else the nearest one in the same bucket.
  std::optional<Entry> lookup(const Identity& identity, const std::string& plan, std::int64_t m, std::int64_t n,
                              std::int64_t k, std::int64_t batch = 1) const;
  std::size_t clear();

  // {"format": "gemmkit-tuning", "version": 1, "entries": [...]}: moves a database between machines.
  nlohmann::ordered_json export_json() const;
  // Adds (or replaces) every entry of an exported document in one transaction; returns how many. Throws ConfigError
  // naming the first bad field, before anything is written.
  std::size_t import_json(const nlohmann::ordered_json& document);

 private:
  std::string path_;
  void* db_ = nullptr;  // sqlite3*
};

// The entry of `entries` for this identity, plan and shape: the same rule as Database::lookup.
std::optional<Entry> best_match(const std::vector<Entry>& entries, const Identity& identity, const std::string& plan,
                                std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch);

// What run()'s tuning lookups did in this process (tests count them instead of timing).
struct Counters {
  int applied = 0;    // run()/spec_for() used a database entry
  int not_built = 0;  // an entry matched but its kernel is not in the cache: the heuristic chose instead
  int searched = 0;   // choices that searched the database (a plan's repeated problem is answered from its memo)
};
Counters counters();

}  // namespace tuning
}  // namespace gemmkit
