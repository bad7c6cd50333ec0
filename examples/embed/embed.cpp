// Embedding autotile without Python: describe two training graphs (a 4-layer MLP and a
// small CNN) through the C API's C++ wrapper, plan them for k devices, build the per-device
// execution graphs and print the plans.
//
//   embed [--devices 8] [--algorithm tofu] [--json out.json]
//
// --json writes both graphs (tensors, ops with TDL, links) and what the library returned
// (plan, execution-graph summary), which tests/capi/test_embed_example.py replans through
// the Python API and compares.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <autotile/autotile.hpp>

#include "models.hpp"
#include "recorder.hpp"

namespace {

using autotile::api::ExecGraph;
using autotile::api::Plan;
using embed::GraphRecorder;

struct DeviceCounts {
  std::vector<int64_t> compute, fetch, arena;
};

DeviceCounts count_ops(const ExecGraph& eg) {
  DeviceCounts c;
  for (int32_t d = 0; d < eg.devices(); ++d) {
    int64_t compute = 0, fetch = 0;
    for (int32_t op : eg.schedule(d)) (eg.op(op).kind == AT_OP_COMPUTE ? compute : fetch) += 1;
    c.compute.push_back(compute);
    c.fetch.push_back(fetch);
    c.arena.push_back(eg.arena_bytes(d));
  }
  return c;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

void print_plan(const std::string& name, const GraphRecorder& g, const Plan& plan, const DeviceCounts& counts,
                int64_t bytes_moved) {
  std::vector<int32_t> factors = plan.factors();
  std::vector<double> costs = plan.cut_costs();
  std::printf("== %s: %d ops, %d tensors, %d devices, algorithm %s\n", name.c_str(), g.graph.num_nodes(),
              g.graph.num_tensors(), plan.devices(), plan.algorithm().c_str());
  std::printf("communication per step: %.3f MB (execution graph moves %.3f MB), search %.1f ms\n",
              plan.total_bytes() / 1e6, bytes_moved / 1e6, plan.search_seconds() * 1e3);
  for (size_t c = 0; c < factors.size(); ++c)
    std::printf("  cut %zu (%d-way): %.3f MB\n", c + 1, factors[c], costs[c] / 1e6);
  std::printf("  %-14s %-18s %s\n", "parameter", "shape", "tiling per cut");
  for (int32_t t = 0; t < g.graph.num_tensors(); ++t) {
    if (!g.graph.is_param(t)) continue;
    std::printf("  %-14s %-18s %s\n", g.graph.tensor_name(t).c_str(), shape_str(g.graph.tensor_shape(t)).c_str(),
                plan.tiling(t).c_str());
  }
  for (size_t d = 0; d < counts.compute.size(); ++d)
    std::printf("  device %zu: %lld compute ops, %lld fetch ops, arena %.2f MB\n", d,
                static_cast<long long>(counts.compute[d]), static_cast<long long>(counts.fetch[d]),
                counts.arena[d] / 1e6);
}

std::string graph_json(const std::string& name, const GraphRecorder& g, const Plan& plan, const ExecGraph& eg,
                       const DeviceCounts& counts) {
  using embed::json_list;
  using embed::json_str;
  using embed::json_strings;
  std::string j = "{\"name\": " + json_str(name) + ",\n \"tensors\": [";
  for (int32_t t = 0; t < g.graph.num_tensors(); ++t) {
    j += std::string(t ? ",\n  " : "\n  ") + "{\"name\": " + json_str(g.graph.tensor_name(t)) +
         ", \"shape\": " + json_list(g.graph.tensor_shape(t)) +
         ", \"is_param\": " + (g.graph.is_param(t) ? "true" : "false") + "}";
  }
  j += "],\n \"ops\": [";
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const embed::OpRecord& o = g.ops[i];
    static const char* roles[] = {"forward", "backward", "update"};
    std::string attrs = "{";
    for (size_t a = 0; a < o.attrs.size(); ++a)
      attrs += (a ? ", " : "") + json_str(o.attrs[a].first) + ": " + json_str(o.attrs[a].second);
    j += std::string(i ? ",\n  " : "\n  ") + "{\"name\": " + json_str(o.name) + ", \"op\": " + json_str(o.op) +
         ", \"inputs\": " + json_list(o.inputs) + ", \"outputs\": " + json_list(o.outputs) +
         ", \"tdl\": " + json_str(o.tdl) + ", \"role\": \"" + roles[o.role] + "\"" +
         ", \"backward_of\": " + std::to_string(o.backward_of) + ", \"attrs\": " + attrs + "}}";
  }
  j += "],\n \"gradients\": [";
  for (size_t i = 0; i < g.gradients.size(); ++i)
    j += (i ? ", " : "") + json_list(std::vector<int32_t>{g.gradients[i].first, g.gradients[i].second});
  j += "],\n \"outputs\": " + json_list(g.outputs) + ",\n \"plan\": {\"algorithm\": " + json_str(plan.algorithm()) +
       ", \"devices\": " + std::to_string(plan.devices()) + ", \"factors\": " + json_list(plan.factors()) +
       ", \"cut_costs\": " + json_list(plan.cut_costs()) + ", \"total_bytes\": " + json_list(std::vector<double>{
                                                                                     plan.total_bytes()}) +
       ",\n  \"tensor_tilings\": [";
  const int32_t cuts = plan.num_cuts();
  for (int32_t t = 0; t < plan.num_tensors(); ++t) {
    std::vector<std::string> row;
    for (int32_t c = 0; c < cuts; ++c) row.push_back(plan.tiling(t, c));
    j += (t ? ", " : "") + json_strings(row);
  }
  j += "],\n  \"node_strategies\": [";
  for (int32_t n = 0; n < plan.num_nodes(); ++n) {
    std::vector<std::string> row;
    for (int32_t c = 0; c < cuts; ++c) row.push_back(plan.strategy(n, c));
    j += (n ? ", " : "") + json_strings(row);
  }
  j += "]},\n \"exec\": {\"num_ops\": " + std::to_string(eg.num_ops()) +
       ", \"num_buffers\": " + std::to_string(eg.num_buffers()) + ", \"bytes_moved\": " +
       std::to_string(eg.bytes_moved()) + ", \"compute_ops\": " + json_list(counts.compute) +
       ", \"fetch_ops\": " + json_list(counts.fetch) + ", \"arena_bytes\": " + json_list(counts.arena) + "}}";
  return j;
}

int run(int devices, const std::string& algorithm, const std::string& json_path) {
  std::string json = "{\"graphs\": [\n";
  const char* names[] = {"mlp", "cnn"};
  for (int i = 0; i < 2; ++i) {
    GraphRecorder g;
    if (i == 0)
      embed::build_mlp(g, /*batch=*/64, /*layers=*/4, /*hidden=*/8192);
    else
      embed::build_cnn(g, /*batch=*/32, /*classes=*/64);
    Plan plan = g.graph.search(devices, algorithm);
    ExecGraph eg(g.graph, plan);
    DeviceCounts counts = count_ops(eg);
    print_plan(names[i], g, plan, counts, eg.bytes_moved());
    json += (i ? ",\n" : "") + graph_json(names[i], g, plan, eg, counts);
  }
  json += "\n]}\n";
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << json;
    if (!out) {
      std::fprintf(stderr, "embed: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 8;
  std::string algorithm = "tofu", json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--devices" && i + 1 < argc) {
      devices = std::atoi(argv[++i]);
    } else if (a == "--algorithm" && i + 1 < argc) {
      algorithm = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--devices N] [--algorithm NAME] [--json PATH]\n", argv[0]);
      return 2;
    }
  }
  std::printf("autotile %s (C API %d)\n", at_version(), AT_API_VERSION);
  try {
    return run(devices, algorithm, json_path);
  } catch (const autotile::api::Error& e) {
    // The library's message names the op, tensor or argument at fault.
    std::fprintf(stderr, "embed: %s (%s)\n", e.what(), at_status_name(e.status()));
    return 1;
  }
}
