// src/api/types.cpp: names and parsing of element types, layouts and opcode classes.
#include "gemmkit/types.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

namespace gemmkit {
namespace {

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

std::string_view to_string(DataType type) {
  switch (type) {
    case DataType::f16: return "f16";
    case DataType::bf16: return "bf16";
    case DataType::f32: return "f32";
    case DataType::tf32: return "tf32";
    case DataType::f64: return "f64";
    case DataType::s8: return "s8";
    case DataType::u8: return "u8";
    case DataType::s32: return "s32";
    case DataType::void_t: return "void";
  }
  return "?";
}

std::string_view to_string(Layout layout) { return layout == Layout::RowMajor ? "RowMajor" : "ColumnMajor"; }

std::string_view to_string(OpClass opclass) { return opclass == OpClass::TensorOp ? "TensorOp" : "Simt"; }

char layout_letter(Layout layout) { return layout == Layout::RowMajor ? 't' : 'n'; }

int bits_of(DataType type) {
  switch (type) {
    case DataType::f16:
    case DataType::bf16: return 16;
    case DataType::f32:
    case DataType::tf32:
    case DataType::s32: return 32;
    case DataType::f64: return 64;
    case DataType::s8:
    case DataType::u8: return 8;
    case DataType::void_t: return 0;
  }
  return 0;
}

bool is_integer(DataType type) { return type == DataType::s8 || type == DataType::u8 || type == DataType::s32; }

std::optional<DataType> parse_data_type(std::string_view text) {
  static const std::pair<std::string_view, DataType> kNames[] = {
      {"f16", DataType::f16},     {"float16", DataType::f16},   {"half", DataType::f16},
      {"bf16", DataType::bf16},   {"bfloat16", DataType::bf16}, {"f32", DataType::f32},
      {"float32", DataType::f32}, {"float", DataType::f32},     {"tf32", DataType::tf32},
      {"f64", DataType::f64},     {"float64", DataType::f64},   {"double", DataType::f64},
      {"s8", DataType::s8},       {"int8", DataType::s8},       {"u8", DataType::u8},
      {"uint8", DataType::u8},    {"s32", DataType::s32},       {"int32", DataType::s32},
      {"void", DataType::void_t},
  };
  const std::string key = lowercase(text);
  for (const auto& [name, type] : kNames) {
    if (key == name) return type;
  }
  return std::nullopt;
}

std::optional<Layout> parse_layout(std::string_view text) {
  const std::string key = lowercase(text);
  if (key == "row" || key == "rowmajor" || key == "row_major" || key == "t") return Layout::RowMajor;
  if (key == "col" || key == "column" || key == "columnmajor" || key == "column_major" || key == "n") {
    return Layout::ColumnMajor;
  }
  return std::nullopt;
}

std::optional<OpClass> parse_opclass(std::string_view text) {
  const std::string key = lowercase(text);
  if (key == "tensorop" || key == "tensor_op") return OpClass::TensorOp;
  if (key == "simt") return OpClass::Simt;
  return std::nullopt;
}

const std::vector<DataType>& operand_data_types() {
  static const std::vector<DataType> kTypes = {DataType::f16, DataType::bf16, DataType::f32, DataType::f64,
                                               DataType::s8,  DataType::u8,   DataType::s32};
  return kTypes;
}

}  // namespace gemmkit
