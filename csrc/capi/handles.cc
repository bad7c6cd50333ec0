#include "capi/handles.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

namespace autotile {
namespace capi {
namespace {

struct Registry {
  std::mutex mutex;
  std::unordered_map<uintptr_t, std::shared_ptr<Object>> objects;
  // Keys start well above 0 and small integers so that NULL and accidental small casts
  // are never valid; they only grow, so a freed key is never handed out again.
  uintptr_t next = 0x10000;
};

// Leaked on purpose: handles still alive at exit must not be destroyed in an unknown order
// against other static objects (an engine may free them from its own static destructors).
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kGraph: return "graph";
    case Kind::kPlan: return "plan";
    case Kind::kExec: return "execution graph";
  }
  return "unknown";
}

thread_local std::string last_error;

}  // namespace

uintptr_t register_object(std::shared_ptr<Object> obj) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  uintptr_t key = r.next++;
  r.objects.emplace(key, std::move(obj));
  return key;
}

bool unregister_object(uintptr_t key, Kind kind) {
  Registry& r = registry();
  std::shared_ptr<Object> doomed;  // destroyed after the lock is released
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.objects.find(key);
    if (it == r.objects.end() || it->second->kind != kind) return false;
    doomed = std::move(it->second);
    r.objects.erase(it);
  }
  return true;
}

std::shared_ptr<Object> lookup(uintptr_t key, Kind kind, const char* arg) {
  if (key == 0) api_fail(AT_ERR_INVALID_HANDLE, arg, " is NULL");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.objects.find(key);
  if (it == r.objects.end())
    api_fail(AT_ERR_INVALID_HANDLE, arg, " is not a live ", kind_name(kind), " handle (freed or never created)");
  if (it->second->kind != kind)
    api_fail(AT_ERR_INVALID_HANDLE, arg, " is a ", kind_name(it->second->kind), " handle, expected a ",
             kind_name(kind), " handle");
  return it->second;
}

std::shared_ptr<GraphObject> get_graph(const AT_Graph* handle) {
  return std::static_pointer_cast<GraphObject>(lookup(reinterpret_cast<uintptr_t>(handle), Kind::kGraph, "graph"));
}

std::shared_ptr<PlanObject> get_plan(const AT_Plan* handle) {
  return std::static_pointer_cast<PlanObject>(lookup(reinterpret_cast<uintptr_t>(handle), Kind::kPlan, "plan"));
}

std::shared_ptr<ExecObject> get_exec(const AT_ExecGraph* handle) {
  return std::static_pointer_cast<ExecObject>(lookup(reinterpret_cast<uintptr_t>(handle), Kind::kExec, "exec"));
}

void set_last_error(const char* function, const std::string& message) noexcept {
  try {
    last_error.assign(function);
    last_error.append(": ");
    last_error.append(message);
  } catch (...) {
    // No memory even for the message: keep whatever fits in the existing capacity.
    last_error.clear();
  }
}

void clear_last_error() noexcept { last_error.clear(); }

void check_index(int64_t index, int64_t count, const char* what) {
  if (index < 0 || index >= count)
    api_fail(AT_ERR_OUT_OF_RANGE, what, " ", index, " out of range (", count == 0 ? "there are none" : "0..",
             count == 0 ? "" : std::to_string(count - 1), ")");
}

void copy_string(const std::string& text, char* buf, size_t capacity, size_t* out_len) {
  need(out_len, "out_len");
  if (buf == nullptr && capacity != 0) api_fail(AT_ERR_NULL_ARGUMENT, "buf is NULL but capacity is ", capacity);
  *out_len = text.size();
  if (buf == nullptr) return;  // a length query
  if (capacity < text.size() + 1)
    api_fail(AT_ERR_BUFFER_TOO_SMALL, "buffer of ", capacity, " bytes is too small for '", text, "' (needs ",
             text.size() + 1, ")");
  std::memcpy(buf, text.c_str(), text.size() + 1);
}

}  // namespace capi
}  // namespace autotile

extern "C" const char* at_last_error(void) { return autotile::capi::last_error.c_str(); }
