// include/gemmkit/types.hpp: element types, layouts, opcode classes and their names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gemmkit {

enum class DataType { f16, bf16, f32, tf32, f64, s8, u8, s32, void_t };
enum class Layout { RowMajor, ColumnMajor };
enum class OpClass { TensorOp, Simt };

// Short names as the reference prints them: "f16", "bf16", "f32", "tf32", "f64", "s8", "u8", "s32", "void".
std::string_view to_string(DataType type);
// "RowMajor" / "ColumnMajor".
std::string_view to_string(Layout layout);
// "TensorOp" / "Simt".
std::string_view to_string(OpClass opclass);

// Layout letter used in kernel names: RowMajor = 't', ColumnMajor = 'n'.
char layout_letter(Layout layout);

int bits_of(DataType type);
bool is_integer(DataType type);

// Accept the short names plus common aliases ("float16", "half", "float32", "float", "int8", "int32", ...).
std::optional<DataType> parse_data_type(std::string_view text);
// Accept "row", "rowmajor", "t", "col", "column", "columnmajor", "n" (case-insensitive).
std::optional<Layout> parse_layout(std::string_view text);
// Accept "tensorop", "tensor_op", "simt" (case-insensitive).
std::optional<OpClass> parse_opclass(std::string_view text);

// Every DataType a plan accepts as an operand, for help texts and errors.
const std::vector<DataType>& operand_data_types();

}  // namespace gemmkit
