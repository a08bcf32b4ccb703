// src/tuning/database.cpp: the tuning database in SQLite: schema, multi-process-safe writes, lookup, export/import.
#include "tuning/sqlite_api.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>

#include "gemmkit/cache.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/tuning.hpp"
#include "tuning/choice.hpp"
#include "util/knobs.hpp"
#include "util/utc_time.hpp"

namespace fs = std::filesystem;

namespace gemmkit::tuning {
namespace {

constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 30000;  // a writer waits this long for another process's transaction

sqlite3* handle(void* db) {
  return static_cast<sqlite3*>(db);
}

[[noreturn]] void fail(sqlite3* db, const std::string& path, const std::string& what) {
  throw Error("tuning database " + path + ": " + what + " failed: " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

// One prepared statement, finalized on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail(db, path, std::string("preparing ") + sql);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Statement& bind(int i, double v) {
    check(sqlite3_bind_double(stmt_, i, v));
    return *this;
  }
  // True while there is a row.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail(db_, path_, "a statement");
    return false;
  }
  std::string text(int column) const {
    const auto* p = sqlite3_column_text(stmt_, column);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  std::int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
  double real(int column) const { return sqlite3_column_double(stmt_, column); }

 private:
  void check(int rc) const {
    if (rc != SQLITE_OK) fail(db_, path_, "binding a value");
  }
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

void exec(sqlite3* db, const std::string& path, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string text = message ? message : sqlite3_errmsg(db);
    sqlite3_free(message);
    throw Error("tuning database " + path + ": " + sql + " failed: " + text);
  }
}

// BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy timeout), so two writers never deadlock.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) { exec(db, path, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    exec(db_, path_, "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  const std::string& path_;
  bool committed_ = false;
};

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
  device TEXT NOT NULL, driver TEXT NOT NULL, gemmkit_version TEXT NOT NULL, plan TEXT NOT NULL,
  bucket_m INTEGER NOT NULL, bucket_n INTEGER NOT NULL, bucket_k INTEGER NOT NULL, bucket_batch INTEGER NOT NULL,
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL, batch INTEGER NOT NULL,
  tile TEXT NOT NULL, kernel_name TEXT NOT NULL, ms REAL NOT NULL, heuristic_ms REAL NOT NULL, created TEXT NOT NULL,
  PRIMARY KEY (device, driver, gemmkit_version, plan, m, n, k, batch));
CREATE INDEX IF NOT EXISTS entries_by_bucket
  ON entries (device, driver, gemmkit_version, plan, bucket_m, bucket_n, bucket_k, bucket_batch);
)sql";

constexpr const char* kColumns =
    "device, driver, gemmkit_version, plan, m, n, k, batch, tile, kernel_name, ms, heuristic_ms, created";

Entry read_entry(const Statement& s) {
  Entry e;
  e.identity = {s.text(0), s.text(1), s.text(2)};
  e.plan = s.text(3);
  e.m = s.integer(4);
  e.n = s.integer(5);
  e.k = s.integer(6);
  e.batch = s.integer(7);
  e.tile = s.text(8);
  e.kernel_name = s.text(9);
  e.ms = s.real(10);
  e.heuristic_ms = s.real(11);
  e.created = s.text(12);
  return e;
}

// Opens and prepares the schema; throws Error. `damaged` is set when the file is not a usable database.
sqlite3* open_database(const std::string& path, bool& damaged) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw Error("tuning database " + path + ": cannot open or create it (" + message +
                "); set GEMMKIT_TUNING_DB to a writable path, or to off");
  }
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  try {
    // WAL: readers never block the writer; the journal mode is a property of the file, set once by whoever comes first.
    exec(db, path, "PRAGMA journal_mode=WAL");
    Transaction transaction(db, path);  // the schema, once, even when many processes open a new file at once
    exec(db, path, kSchema);
    std::string version;
    {
      Statement read(db, path, "SELECT value FROM meta WHERE name = 'schema'");
      if (read.step()) version = read.text(0);
    }
    if (version.empty()) {
      exec(db, path, "INSERT INTO meta (name, value) VALUES ('schema', '1')");
    } else if (version != std::to_string(kSchemaVersion)) {
      throw Error("tuning database " + path + " has schema version " + version + "; this gemmkit reads " +
                  std::to_string(kSchemaVersion));
    }
    transaction.commit();
  } catch (const Error&) {
    const int code = sqlite3_errcode(db);
    sqlite3_close(db);
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
      damaged = true;
      return nullptr;
    }
    throw;
  }
  return db;
}

// How far apart two shapes are, in octaves summed over the extents.
double distance(const Entry& e, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch) {
  auto d = [](std::int64_t a, std::int64_t b) {
    return std::fabs(std::log2(static_cast<double>(a)) - std::log2(static_cast<double>(b)));
  };
  return d(e.m, m) + d(e.n, n) + d(e.k, k) + d(e.batch, batch);
}

bool same_bucket(const Entry& e, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch) {
  return bucket_of(e.m) == bucket_of(m) && bucket_of(e.n) == bucket_of(n) && bucket_of(e.k) == bucket_of(k) &&
         bucket_of(e.batch) == bucket_of(batch);
}

// INSERT OR REPLACE of one entry (inside the caller's transaction).
void insert(sqlite3* db, const std::string& path, const Entry& e) {
  Statement s(db, path,
              "INSERT OR REPLACE INTO entries (device, driver, gemmkit_version, plan, bucket_m, bucket_n, bucket_k, "
              "bucket_batch, m, n, k, batch, tile, kernel_name, ms, heuristic_ms, created) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, e.identity.device).bind(2, e.identity.driver).bind(3, e.identity.gemmkit_version).bind(4, e.plan);
  s.bind(5, std::int64_t{bucket_of(e.m)}).bind(6, std::int64_t{bucket_of(e.n)}).bind(7, std::int64_t{bucket_of(e.k)});
  s.bind(8, std::int64_t{bucket_of(e.batch)}).bind(9, e.m).bind(10, e.n).bind(11, e.k).bind(12, e.batch);
  s.bind(13, e.tile).bind(14, e.kernel_name).bind(15, e.ms).bind(16, e.heuristic_ms);
  s.bind(17, e.created.empty() ? utc_now_iso8601() : e.created);
  s.step();
}

}  // namespace

int bucket_of(std::int64_t extent) {
  if (extent <= 1) return 0;
  return static_cast<int>(std::lround(2.0 * std::log2(static_cast<double>(extent))));
}

std::string Database::default_path() {
  const std::string knob = knobs::value("GEMMKIT_TUNING_DB");
  if (knob == "off") return "";
  if (!knob.empty()) return knob;
  return (fs::path(DiskCache::default_root()) / "tuning.sqlite3").string();
}

Database::Database(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw ConfigError("The tuning database is off (GEMMKIT_TUNING_DB=off); unset it to tune.");
  std::error_code ec;
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  bool damaged = false;
  db_ = open_database(path_, damaged);
  if (damaged) {
    const std::string aside = path_ + ".damaged";
    std::cerr << "gemmkit: warning: the tuning database " << path_ << " is not a usable SQLite database; moved it to "
              << aside << " and started an empty one\n";
    for (const char* suffix : {"", "-wal", "-shm"}) fs::rename(path_ + suffix, aside + suffix, ec);
    damaged = false;
    db_ = open_database(path_, damaged);
    if (damaged) throw Error("tuning database " + path_ + ": still damaged after moving the old file aside");
  }
}

Database::~Database() {
  sqlite3_close(handle(db_));
}

void Database::put(const Entry& e) {
  sqlite3* db = handle(db_);
  Transaction transaction(db, path_);
  insert(db, path_, e);
  transaction.commit();
  forget_snapshot();
}

std::vector<Entry> Database::entries(const std::optional<Identity>& identity) const {
  std::string sql = std::string("SELECT ") + kColumns + " FROM entries";
  if (identity) sql += " WHERE device = ? AND driver = ? AND gemmkit_version = ?";
  sql += " ORDER BY created, rowid";
  Statement s(handle(db_), path_, sql.c_str());
  if (identity) s.bind(1, identity->device).bind(2, identity->driver).bind(3, identity->gemmkit_version);
  std::vector<Entry> out;
  while (s.step()) out.push_back(read_entry(s));
  return out;
}

std::optional<Entry> Database::lookup(const Identity& identity, const std::string& plan, std::int64_t m, std::int64_t n,
                                      std::int64_t k, std::int64_t batch) const {
  const std::string sql = std::string("SELECT ") + kColumns +
                          " FROM entries WHERE device = ? AND driver = ? AND gemmkit_version = ? AND plan = ? AND "
                          "bucket_m = ? AND bucket_n = ? AND bucket_k = ? AND bucket_batch = ?";
  Statement s(handle(db_), path_, sql.c_str());
  s.bind(1, identity.device).bind(2, identity.driver).bind(3, identity.gemmkit_version).bind(4, plan);
  s.bind(5, std::int64_t{bucket_of(m)}).bind(6, std::int64_t{bucket_of(n)}).bind(7, std::int64_t{bucket_of(k)});
  s.bind(8, std::int64_t{bucket_of(batch)});
  std::vector<Entry> found;
  while (s.step()) found.push_back(read_entry(s));
  return best_match(found, identity, plan, m, n, k, batch);
}

std::size_t Database::clear() {
  sqlite3* db = handle(db_);
  Transaction transaction(db, path_);
  exec(db, path_, "DELETE FROM entries");
  const auto removed = static_cast<std::size_t>(sqlite3_changes(db));
  transaction.commit();
  forget_snapshot();
  return removed;
}

nlohmann::ordered_json Database::export_json() const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Entry& e : entries()) list.push_back(e);
  return {{"format", "gemmkit-tuning"}, {"version", kSchemaVersion}, {"entries", list}};
}

std::size_t Database::import_json(const nlohmann::ordered_json& document) {
  auto bad = [](const std::string& what) {
    throw ConfigError("Not a gemmkit tuning export: " + what + " (expected the output of gemmkit tune --export).");
  };
  if (!document.is_object() || document.value("format", "") != "gemmkit-tuning")
    bad("\"format\" is not gemmkit-tuning");
  if (document.value("version", 0) != kSchemaVersion) bad("\"version\" is not " + std::to_string(kSchemaVersion));
  if (!document.contains("entries") || !document.at("entries").is_array()) bad("no \"entries\" list");
  std::vector<Entry> entries;
  for (const auto& item : document.at("entries")) {
    const std::string where = "entry " + std::to_string(entries.size());
    Entry e;
    try {
      e.identity = {item.at("device").get<std::string>(), item.at("driver").get<std::string>(),
                    item.at("gemmkit_version").get<std::string>()};
      e.plan = item.at("plan").get<std::string>();
      e.m = item.at("m").get<std::int64_t>();
      e.n = item.at("n").get<std::int64_t>();
      e.k = item.at("k").get<std::int64_t>();
      e.batch = item.at("batch").get<std::int64_t>();
      e.tile = item.at("tile").dump();
      e.kernel_name = item.at("kernel_name").get<std::string>();
      e.ms = item.at("ms").get<double>();
      e.heuristic_ms = item.at("heuristic_ms").get<double>();
      e.created = item.at("created").get<std::string>();
    } catch (const nlohmann::json::exception& error) {
      bad(where + ": " + error.what());
    }
    if (e.m < 1 || e.n < 1 || e.k < 1 || e.batch < 1) bad(where + ": m, n, k and batch must be positive");
    if (!item.at("tile").is_object()) bad(where + ": \"tile\" is not an object");
    entries.push_back(e);
  }
  sqlite3* db = handle(db_);
  {
    Transaction transaction(db, path_);
    for (const Entry& e : entries) insert(db, path_, e);
    transaction.commit();
  }
  forget_snapshot();
  return entries.size();
}

std::optional<Entry> best_match(const std::vector<Entry>& entries, const Identity& identity, const std::string& plan,
                                std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch) {
  const Entry* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const Entry& e : entries) {
    if (e.identity != identity || e.plan != plan || !same_bucket(e, m, n, k, batch)) continue;
    const double d = distance(e, m, n, k, batch);
    if (d < best_distance) {
      best = &e;
      best_distance = d;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

void to_json(nlohmann::ordered_json& json, const Entry& e) {
  json = {{"device", e.identity.device},
          {"driver", e.identity.driver},
          {"gemmkit_version", e.identity.gemmkit_version},
          {"plan", e.plan},
          {"m", e.m},
          {"n", e.n},
          {"k", e.k},
          {"batch", e.batch},
          {"tile", nlohmann::ordered_json::parse(e.tile, nullptr, false)},
          {"kernel_name", e.kernel_name},
          {"ms", e.ms},
          {"heuristic_ms", e.heuristic_ms},
          {"created", e.created}};
}

}  // namespace gemmkit::tuning
