#include "graph/dtype.h"

#include "util/error.h"

namespace autotile {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
  int size;
};
constexpr DTypeInfo kInfos[] = {
    {DType::kFloat32, "float32", 4}, {DType::kFloat64, "float64", 8}, {DType::kFloat16, "float16", 2},
    {DType::kInt32, "int32", 4},     {DType::kInt64, "int64", 8},     {DType::kInt8, "int8", 1},
    {DType::kUInt8, "uint8", 1},     {DType::kBool, "bool", 1},      {DType::kBFloat16, "bfloat16", 2},
};
}  // namespace

int dtype_size(DType t) { return kInfos[static_cast<int>(t)].size; }
const char* dtype_name(DType t) { return kInfos[static_cast<int>(t)].name; }

DType dtype_from_name(const std::string& name) {
  for (const auto& info : kInfos)
    if (name == info.name) return info.type;
  fail("unknown dtype '", name, "' (expected one of float32, float64, float16, int32, int64, int8, uint8, bool, bfloat16)");
}

}  // namespace autotile
