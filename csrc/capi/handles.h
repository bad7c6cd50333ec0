// Internals of the C API: the handle registry, the objects behind handles, and the guard
// that turns every exception into a status code plus a thread-local message.
//
// Handles are registry keys (a never-reused 64-bit counter cast to a pointer type), not
// pointers: a freed or forged handle is simply absent from the registry, so using it is an
// error code instead of a use-after-free. Lookups hand out shared_ptr copies, so an object
// freed by one thread stays alive until a call already using it on another thread returns.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <utility>

#include "autotile/c_api.h"
#include "exec/exec_graph.h"
#include "graph/graph.h"
#include "search/plan.h"
#include "util/error.h"

namespace autotile {
namespace capi {

/// \brief Kind of object behind a handle (a handle of the wrong kind is rejected).
enum class Kind : uint8_t { kGraph = 1, kPlan = 2, kExec = 3 };

/// \brief Base of every object a handle refers to.
struct Object {
  explicit Object(Kind k) : kind(k) {}
  virtual ~Object() = default;
  Kind kind;
};

/// \brief A graph handle: the IR plus a lock serializing mutation with concurrent reads.
struct GraphObject : Object {
  GraphObject() : Object(Kind::kGraph) {}
  Graph graph;
  std::shared_mutex mutex;
};

/// \brief A plan handle (immutable after creation).
struct PlanObject : Object {
  PlanObject() : Object(Kind::kPlan) {}
  Plan plan;
};

/// \brief An execution-graph handle (immutable after creation).
struct ExecObject : Object {
  ExecObject() : Object(Kind::kExec) {}
  ExecGraph exec;
};

/// \brief An API-level failure: the status to return and its message.
struct ApiError {
  AT_Status status;
  std::string message;
};

/// \brief Throws ApiError(status, concatenated args).
template <typename... Args>
[[noreturn]] void api_fail(AT_Status status, const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  throw ApiError{status, os.str()};
}

/// \brief Registers `obj` and returns its new key (never 0, never reused).
uintptr_t register_object(std::shared_ptr<Object> obj);
/// \brief Removes a key; false if it was not registered or is of another kind.
bool unregister_object(uintptr_t key, Kind kind);
/// \brief The object of `key` if registered and of kind `kind`; throws ApiError otherwise.
std::shared_ptr<Object> lookup(uintptr_t key, Kind kind, const char* arg);

/// \brief The graph behind a handle, or ApiError(AT_ERR_INVALID_HANDLE).
std::shared_ptr<GraphObject> get_graph(const AT_Graph* handle);
/// \brief The plan behind a handle, or ApiError(AT_ERR_INVALID_HANDLE).
std::shared_ptr<PlanObject> get_plan(const AT_Plan* handle);
/// \brief The execution graph behind a handle, or ApiError(AT_ERR_INVALID_HANDLE).
std::shared_ptr<ExecObject> get_exec(const AT_ExecGraph* handle);

/// \brief Records the failure message of this thread's current call.
void set_last_error(const char* function, const std::string& message) noexcept;
/// \brief Clears this thread's message (a call succeeded).
void clear_last_error() noexcept;

/// \brief Runs `body`; maps ApiError, autotile::Error, bad_alloc and anything else to a
/// status and message. Nothing escapes: this is what keeps exceptions out of C callers.
template <typename F>
AT_Status guard(const char* function, F&& body) noexcept {
  try {
    body();
    clear_last_error();
    return AT_OK;
  } catch (const ApiError& e) {
    set_last_error(function, e.message);
    return e.status;
  } catch (const Error& e) {
    set_last_error(function, e.what());
    return AT_ERR_INVALID_INPUT;
  } catch (const std::bad_alloc&) {
    set_last_error(function, "out of memory");
    return AT_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(function, std::string("internal error: ") + e.what());
    return AT_ERR_INTERNAL;
  } catch (...) {
    set_last_error(function, "internal error: unknown exception");
    return AT_ERR_INTERNAL;
  }
}

/// \brief Requires a non-NULL pointer argument.
template <typename T>
void need(const T* p, const char* arg) {
  if (p == nullptr) api_fail(AT_ERR_NULL_ARGUMENT, arg, " is NULL");
}

/// \brief Requires 0 <= index < count.
void check_index(int64_t index, int64_t count, const char* what);

/// \brief The core dtype of a C enum value; ApiError(AT_ERR_INVALID_ARGUMENT) if invalid.
DType to_dtype(AT_DType dtype);
/// \brief The core role of a C enum value; ApiError(AT_ERR_INVALID_ARGUMENT) if invalid.
NodeRole to_role(AT_Role role);

/// \brief Copies `text` into a caller buffer with the at_graph_tensor_name rules.
void copy_string(const std::string& text, char* buf, size_t capacity, size_t* out_len);

}  // namespace capi
}  // namespace autotile
