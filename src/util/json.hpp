// src/util/json.hpp: a small JSON value with a writer and a strict parser (cache manifests, CLI output).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gemmkit::json {

class Value {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : kind_(Kind::boolean), bool_(b) {}
  Value(double d) : kind_(Kind::number), number_(d) {}
  Value(int i) : Value(static_cast<double>(i)) {}
  Value(std::int64_t i) : Value(static_cast<double>(i)) {}
  Value(std::uint64_t i) : Value(static_cast<double>(i)) {}
  Value(std::string s) : kind_(Kind::string), string_(std::move(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  static Value array() { return Value(Kind::array); }
  static Value object() { return Value(Kind::object); }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_number() const { return kind_ == Kind::number; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }

  // Accessors throw gemmkit::Error on a kind mismatch.
  bool as_bool() const;
  double as_number() const;
  std::uint64_t as_uint() const;  // a non-negative integral number
  const std::string& as_string() const;
  const std::vector<Value>& items() const;
  const std::vector<std::pair<std::string, Value>>& members() const;

  // Arrays: append. Objects: set (replaces an existing key; keeps insertion order).
  Value& push_back(Value v);
  Value& set(const std::string& key, Value v);
  // Objects: the member named `key`, or nullptr.
  const Value* find(const std::string& key) const;

  // Two-space indented when indent is true, else compact.
  std::string dump(bool indent = true) const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}
  void dump_to(std::string& out, bool indent, int depth) const;

  Kind kind_ = Kind::null;
  bool bool_ = false;
  double number_ = 0.0;
  std::string string_;
  std::vector<Value> array_;
  std::vector<std::pair<std::string, Value>> object_;
};

// Parses one JSON document (RFC 8259); throws gemmkit::Error naming the offset of the first problem.
Value parse(std::string_view text);

// `s` as a quoted JSON string literal.
std::string quote(std::string_view s);

}  // namespace gemmkit::json
