// src/tuning/sqlite_api.hpp: the part of SQLite's C API the tuning database uses, bound at run time to the system's
// libsqlite3.so.0 (which every Linux with Python has), so that building gemmkit needs no SQLite headers.
#pragma once

#include <dlfcn.h>

#include <string>

#include "gemmkit/errors.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace gemmkit::tuning {

// SQLite's stable C ABI: result codes, open flags and the "copy the text" destructor.
constexpr int SQLITE_OK = 0, SQLITE_CORRUPT = 11, SQLITE_NOTADB = 26, SQLITE_ROW = 100, SQLITE_DONE = 101;
constexpr int SQLITE_OPEN_READWRITE = 0x2, SQLITE_OPEN_CREATE = 0x4, SQLITE_OPEN_FULLMUTEX = 0x10000;
using sqlite3_destructor_type = void (*)(void*);
inline const sqlite3_destructor_type SQLITE_TRANSIENT = reinterpret_cast<sqlite3_destructor_type>(-1);

// The library, opened once; a missing one is an error that says what to install.
inline void* sqlite_symbol(const char* name) {
  static void* library = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    throw Error(
        "the tuning database needs SQLite's shared library libsqlite3.so.0, which was not found; install it "
        "(Debian/Ubuntu: apt-get install libsqlite3-0) or set GEMMKIT_TUNING_DB=off.");
  }
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) throw Error(std::string("libsqlite3.so.0 lacks ") + name + "; it is too old.");
  return symbol;
}

// Each function forwards to the library's symbol of the same name, looked up on first use.
#define GK_SQLITE_FUNCTION(result, name, parameters, arguments)                    \
  inline result name parameters {                                                  \
    using Function = result(*) parameters;                                         \
    static const auto function = reinterpret_cast<Function>(sqlite_symbol(#name)); \
    return function arguments;                                                     \
  }

GK_SQLITE_FUNCTION(int, sqlite3_open_v2, (const char* file, sqlite3** db, int flags, const char* vfs),
                   (file, db, flags, vfs))
GK_SQLITE_FUNCTION(int, sqlite3_close, (sqlite3 * db), (db))
GK_SQLITE_FUNCTION(int, sqlite3_busy_timeout, (sqlite3 * db, int ms), (db, ms))
GK_SQLITE_FUNCTION(int, sqlite3_exec,
                   (sqlite3 * db, const char* sql, int (*callback)(void*, int, char**, char**), void* context,
                    char** error),
                   (db, sql, callback, context, error))
GK_SQLITE_FUNCTION(void, sqlite3_free, (void* memory), (memory))
GK_SQLITE_FUNCTION(int, sqlite3_errcode, (sqlite3 * db), (db))
GK_SQLITE_FUNCTION(const char*, sqlite3_errmsg, (sqlite3 * db), (db))
GK_SQLITE_FUNCTION(int, sqlite3_changes, (sqlite3 * db), (db))
GK_SQLITE_FUNCTION(int, sqlite3_prepare_v2,
                   (sqlite3 * db, const char* sql, int bytes, sqlite3_stmt** statement, const char** tail),
                   (db, sql, bytes, statement, tail))
GK_SQLITE_FUNCTION(int, sqlite3_step, (sqlite3_stmt * statement), (statement))
GK_SQLITE_FUNCTION(int, sqlite3_finalize, (sqlite3_stmt * statement), (statement))
GK_SQLITE_FUNCTION(int, sqlite3_bind_double, (sqlite3_stmt * statement, int index, double value),
                   (statement, index, value))
GK_SQLITE_FUNCTION(int, sqlite3_bind_text,
                   (sqlite3_stmt * statement, int index, const char* text, int bytes, sqlite3_destructor_type free),
                   (statement, index, text, bytes, free))
GK_SQLITE_FUNCTION(double, sqlite3_column_double, (sqlite3_stmt * statement, int column), (statement, column))
GK_SQLITE_FUNCTION(const unsigned char*, sqlite3_column_text, (sqlite3_stmt * statement, int column),
                   (statement, column))

GK_SQLITE_FUNCTION(int, sqlite3_bind_int64, (sqlite3_stmt * statement, int index, long long value),
                   (statement, index, value))
GK_SQLITE_FUNCTION(long long, sqlite3_column_int64, (sqlite3_stmt * statement, int column), (statement, column))

#undef GK_SQLITE_FUNCTION

}  // namespace gemmkit::tuning
