// src/util/json.cpp: JSON writing and recursive-descent parsing for json::Value.
#include "util/json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gemmkit/errors.hpp"

namespace gemmkit::json {
namespace {

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::null: return "null";
    case Value::Kind::boolean: return "boolean";
    case Value::Kind::number: return "number";
    case Value::Kind::string: return "string";
    case Value::Kind::array: return "array";
    case Value::Kind::object: return "object";
  }
  return "?";
}

[[noreturn]] void kind_mismatch(Value::Kind want, Value::Kind have) {
  throw Error(std::string("JSON value is a ") + kind_name(have) + ", expected a " + kind_name(want));
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("invalid JSON at offset " + std::to_string(pos_) + ": " + what);
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }

  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end of input");
    const char c = text_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (consume_word("true")) return Value(true);
    if (consume_word("false")) return Value(false);
    if (consume_word("null")) return Value();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Value object(int depth) {
    ++pos_;
    Value out = Value::object();
    if (consume('}')) return out;
    do {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a member name");
      std::string key = string();
      expect(':');
      out.set(key, value(depth + 1));
    } while (consume(','));
    expect('}');
    return out;
  }

  Value array(int depth) {
    ++pos_;
    Value out = Value::array();
    if (consume(']')) return out;
    do {
      out.push_back(value(depth + 1));
    } while (consume(','));
    expect(']');
    return out;
  }

  Value number() {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      if (pos_ == from) fail("expected a digit");
    };
    if (text_[pos_] == '-') ++pos_;
    digits();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      digits();
    }
    const std::string literal(text_.substr(start, pos_ - start));
    return Value(std::strtod(literal.c_str(), nullptr));
  }

  std::uint32_t hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    std::uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= std::uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= std::uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= std::uint32_t(h - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return cp;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {  // a surrogate pair spells one code point above U+FFFF
            if (!consume_word("\\u")) fail("unpaired surrogate");
            const std::uint32_t low = hex4();
            if (low < 0xdc00 || low >= 0xe000) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

bool Value::as_bool() const {
  if (kind_ != Kind::boolean) kind_mismatch(Kind::boolean, kind_);
  return bool_;
}

double Value::as_number() const {
  if (kind_ != Kind::number) kind_mismatch(Kind::number, kind_);
  return number_;
}

std::uint64_t Value::as_uint() const {
  const double d = as_number();
  if (d < 0 || d != std::floor(d) || d > 9007199254740992.0) {
    throw Error("JSON number " + std::to_string(d) + " is not a non-negative integer");
  }
  return static_cast<std::uint64_t>(d);
}

const std::string& Value::as_string() const {
  if (kind_ != Kind::string) kind_mismatch(Kind::string, kind_);
  return string_;
}

const std::vector<Value>& Value::items() const {
  if (kind_ != Kind::array) kind_mismatch(Kind::array, kind_);
  return array_;
}

const std::vector<std::pair<std::string, Value>>& Value::members() const {
  if (kind_ != Kind::object) kind_mismatch(Kind::object, kind_);
  return object_;
}

Value& Value::push_back(Value v) {
  if (kind_ != Kind::array) kind_mismatch(Kind::array, kind_);
  array_.push_back(std::move(v));
  return *this;
}

Value& Value::set(const std::string& key, Value v) {
  if (kind_ != Kind::object) kind_mismatch(Kind::object, kind_);
  for (auto& [name, member] : object_) {
    if (name == key) {
      member = std::move(v);
      return *this;
    }
  }
  object_.emplace_back(key, std::move(v));
  return *this;
}

const Value* Value::find(const std::string& key) const {
  if (kind_ != Kind::object) return nullptr;
  for (const auto& [name, member] : object_) {
    if (name == key) return &member;
  }
  return nullptr;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void Value::dump_to(std::string& out, bool indent, int depth) const {
  auto newline = [&](int level) {
    if (!indent) return;
    out += '\n';
    out.append(static_cast<std::size_t>(2 * level), ' ');
  };
  switch (kind_) {
    case Kind::null: out += "null"; return;
    case Kind::boolean: out += bool_ ? "true" : "false"; return;
    case Kind::string: out += quote(string_); return;
    case Kind::number: {
      if (!std::isfinite(number_)) throw Error("JSON cannot represent the number " + std::to_string(number_));
      char buffer[32];
      const bool integral = number_ == std::floor(number_) && std::fabs(number_) < 9007199254740992.0;
      if (integral) std::snprintf(buffer, sizeof buffer, "%.0f", number_);
      else std::snprintf(buffer, sizeof buffer, "%.17g", number_);
      out += buffer;
      return;
    }
    case Kind::array: {
      out += '[';
      for (std::size_t i = 0; i < array_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        array_[i].dump_to(out, indent, depth + 1);
      }
      if (!array_.empty()) newline(depth);
      out += ']';
      return;
    }
    case Kind::object: {
      out += '{';
      for (std::size_t i = 0; i < object_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        out += quote(object_[i].first);
        out += indent ? ": " : ":";
        object_[i].second.dump_to(out, indent, depth + 1);
      }
      if (!object_.empty()) newline(depth);
      out += '}';
      return;
    }
  }
}

std::string Value::dump(bool indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

Value parse(std::string_view text) { return Parser(text).document(); }

}  // namespace gemmkit::json
