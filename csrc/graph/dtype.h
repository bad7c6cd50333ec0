// Element types of tensors and their sizes in bytes (the cost model counts real bytes).
#pragma once
#include <cstdint>
#include <string>

namespace autotile {

/// \brief Element type of a tensor.
enum class DType : uint8_t { kFloat32 = 0, kFloat64, kFloat16, kInt32, kInt64, kInt8, kUInt8, kBool, kBFloat16 };

/// \brief Size of one element in bytes.
int dtype_size(DType t);
/// \brief Name of the type as NumPy spells it ("float32", ...).
const char* dtype_name(DType t);
/// \brief Parses a NumPy-style name; throws Error on an unknown name.
DType dtype_from_name(const std::string& name);

}  // namespace autotile
