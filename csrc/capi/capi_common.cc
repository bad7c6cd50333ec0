// C API: version, status names, dtypes and the list of search algorithms.
#include "capi/handles.h"
#include "graph/dtype.h"
#include "search/planner.h"

#ifndef AUTOTILE_VERSION
#define AUTOTILE_VERSION "unknown"  // CMake passes the version from pyproject.toml
#endif

using namespace autotile;
using namespace autotile::capi;

namespace {

// The C enum mirrors autotile::DType value for value (checked here, not assumed).
static_assert(static_cast<int>(DType::kFloat32) == AT_FLOAT32 && static_cast<int>(DType::kFloat64) == AT_FLOAT64 &&
                  static_cast<int>(DType::kFloat16) == AT_FLOAT16 && static_cast<int>(DType::kInt32) == AT_INT32 &&
                  static_cast<int>(DType::kInt64) == AT_INT64 && static_cast<int>(DType::kInt8) == AT_INT8 &&
                  static_cast<int>(DType::kUInt8) == AT_UINT8 && static_cast<int>(DType::kBool) == AT_BOOL &&
                  static_cast<int>(DType::kBFloat16) == AT_BFLOAT16,
              "AT_DType must mirror autotile::DType");

static_assert(static_cast<int>(NodeRole::kForward) == AT_ROLE_FORWARD &&
                  static_cast<int>(NodeRole::kBackward) == AT_ROLE_BACKWARD &&
                  static_cast<int>(NodeRole::kUpdate) == AT_ROLE_UPDATE,
              "AT_Role must mirror autotile::NodeRole");

}  // namespace

namespace autotile {
namespace capi {

DType to_dtype(AT_DType dtype) {
  // Read as an int first: a C caller can pass any value through an enum parameter.
  int v = static_cast<int>(dtype);
  if (v < AT_FLOAT32 || v > AT_BFLOAT16) api_fail(AT_ERR_INVALID_ARGUMENT, "invalid dtype code ", v);
  return static_cast<DType>(v);
}

NodeRole to_role(AT_Role role) {
  int v = static_cast<int>(role);
  if (v < AT_ROLE_FORWARD || v > AT_ROLE_UPDATE)
    api_fail(AT_ERR_INVALID_ARGUMENT, "invalid role code ", v, " (AT_ROLE_FORWARD, AT_ROLE_BACKWARD, AT_ROLE_UPDATE)");
  return static_cast<NodeRole>(v);
}

}  // namespace capi
}  // namespace autotile

extern "C" {

const char* at_version(void) { return AUTOTILE_VERSION; }

const char* at_status_name(AT_Status status) {
  switch (status) {
    case AT_OK: return "AT_OK";
    case AT_ERR_NULL_ARGUMENT: return "AT_ERR_NULL_ARGUMENT";
    case AT_ERR_INVALID_HANDLE: return "AT_ERR_INVALID_HANDLE";
    case AT_ERR_OUT_OF_RANGE: return "AT_ERR_OUT_OF_RANGE";
    case AT_ERR_INVALID_ARGUMENT: return "AT_ERR_INVALID_ARGUMENT";
    case AT_ERR_INVALID_INPUT: return "AT_ERR_INVALID_INPUT";
    case AT_ERR_BUFFER_TOO_SMALL: return "AT_ERR_BUFFER_TOO_SMALL";
    case AT_ERR_OUT_OF_MEMORY: return "AT_ERR_OUT_OF_MEMORY";
    case AT_ERR_INTERNAL: return "AT_ERR_INTERNAL";
    default: break;
  }
  return "unknown status";
}

AT_Status at_dtype_from_name(const char* name, AT_DType* out) {
  return guard("at_dtype_from_name", [&] {
    need(name, "name");
    need(out, "out");
    DType t;
    try {
      t = dtype_from_name(name);
    } catch (const Error& e) {
      api_fail(AT_ERR_INVALID_ARGUMENT, e.what());
    }
    *out = static_cast<AT_DType>(t);
  });
}

AT_Status at_dtype_name(AT_DType dtype, const char** out) {
  return guard("at_dtype_name", [&] {
    need(out, "out");
    *out = dtype_name(to_dtype(dtype));
  });
}

AT_Status at_dtype_size(AT_DType dtype, int32_t* out) {
  return guard("at_dtype_size", [&] {
    need(out, "out");
    *out = dtype_size(to_dtype(dtype));
  });
}

AT_Status at_num_algorithms(int32_t* out) {
  return guard("at_num_algorithms", [&] {
    need(out, "out");
    *out = static_cast<int32_t>(search_algorithms().size());
  });
}

AT_Status at_algorithm_name(int32_t index, const char** out) {
  return guard("at_algorithm_name", [&] {
    need(out, "out");
    const auto& names = search_algorithms();
    check_index(index, static_cast<int64_t>(names.size()), "algorithm index");
    *out = names[static_cast<size_t>(index)].c_str();
  });
}

}  // extern "C"
