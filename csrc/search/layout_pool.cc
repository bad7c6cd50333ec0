#include "search/layout_pool.h"

#include <cstring>

#include "search/cost_model.h"
#include "util/error.h"

namespace autotile {

namespace {
template <typename T>
void put(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}
}  // namespace

int LayoutPool::find() const {
  auto it = index_.find(key_);
  return it == index_.end() ? -1 : it->second;
}

int LayoutPool::push(DeviceLayout layout, Shape shape) {
  int id = static_cast<int>(layouts_.size());
  layouts_.push_back(std::move(layout));
  shape_.push_back(std::move(shape));
  return id;
}

int LayoutPool::add(DeviceLayout layout, Shape shape) {
  int id = push(std::move(layout), std::move(shape));
  index_.emplace(key_, id);
  return id;
}

int LayoutPool::whole(const Shape& shape) {
  key_.assign(1, 'w');
  for (int64_t d : shape) put(key_, d);
  int id = find();
  return id >= 0 ? id : add(whole_layout(shape), shape);
}

int LayoutPool::held(int prefix, const Tiling& t, int k) {
  const Step step{prefix, k, static_cast<int>(t.kind), t.dim};
  auto it = held_index_.find(step);
  if (it != held_index_.end()) return it->second;
  // built before it is indexed: a throw (bad_alloc) leaves no entry naming layout 0
  const int id = push(extend_held(layouts_[prefix], t, k), shape_[prefix]);
  held_index_.emplace(step, id);
  return id;
}

int LayoutPool::need(int prefix, const InputNeed& need, int k) {
  // The key's bytes are written in place (appending field by field cost a call per field).
  const size_t per_worker = need.replicate ? 0 : need.per_worker.size();
  const size_t size = 1 + 2 * sizeof(int) + 2 * sizeof(bool) + (need.replicate ? 0 : sizeof(int)) +
                      per_worker * 2 * sizeof(int64_t);
  key_.resize(size);
  char* at = key_.data();
  auto write = [&at](const auto& v) {
    std::memcpy(at, &v, sizeof v);
    at += sizeof v;
  };
  *at++ = 'n';
  write(prefix);
  write(k);
  write(need.replicate);
  write(need.read);
  if (!need.replicate) {
    write(need.dim);
    for (const Interval& iv : need.per_worker) write(iv.lo), write(iv.hi);
  }
  int id = find();
  return id >= 0 ? id : add(extend_need(layouts_[prefix], need, k, shape_[prefix]), shape_[prefix]);
}

int LayoutPool::make(int prefix, const OutputMake& make, bool whole, int k) {
  const Step step = whole ? Step{prefix, k, 2, 0} : Step{prefix, k, make.partial ? 1 : 0, make.dim};
  auto it = make_index_.find(step);
  if (it != make_index_.end()) return it->second;
  const int id = push(extend_make(layouts_[prefix], make, whole, k), shape_[prefix]);
  make_index_.emplace(step, id);
  return id;
}

double LayoutPool::elements(int held, int need, const std::vector<int>& factors) {
  uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(held)) << 32 | static_cast<uint32_t>(need);
  auto it = elements_.find(key);
  if (it != elements_.end()) return it->second;
  const DeviceLayout &h = layouts_[held], &n = layouts_[need];
  if (h.num_cuts != n.num_cuts || h.num_cuts != static_cast<int>(factors.size()))
    fail("internal: pricing layouts of ", h.num_cuts, " and ", n.num_cuts, " cuts with ", factors.size(), " factors");
  double e = conversion_elements(h, n, factors);
  elements_.emplace(key, e);
  return e;
}

}  // namespace autotile
