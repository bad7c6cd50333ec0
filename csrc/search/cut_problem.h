// One cut as a discrete optimisation problem: variables (tensor tilings, shared strategies),
// their domains, and per-node cost terms built from per-edge cost tables.
//
// A node's cost given the tilings of its tensors is min over its strategies of the sum of its
// edges' conversion costs (Soybean eq. 2 generalised), so a node is one factor over the
// variables of its tensors (plus its shared strategy variable, for merged RNN steps).
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "search/coarsen.h"
#include "search/constraint.h"
#include "search/search_state.h"
#include "search/strategy_provider.h"

namespace autotile {

/// \brief The per-cut search problem.
struct CutProblem {
  int cut = 0;
  int k = 2;
  std::vector<int> domain;                          ///< per variable
  std::vector<std::vector<Tiling>> var_tilings;     ///< per variable (tiling variables)
  std::vector<std::vector<std::string>> var_names;  ///< per variable (strategy variables)
  std::vector<int> var_home;                        ///< a tensor (>= 0) or ~node owning the variable
  std::vector<int> tensor_var;                      ///< tensor -> variable
  std::vector<std::vector<NodeOption>> options;     ///< per node
  std::vector<int> node_var;                        ///< node -> shared strategy variable or -1
  std::vector<std::vector<int>> node_var_option;    ///< [node][value of node_var] -> option or -1
  /// One edge of a node: its tensor's variable and cost[option * domain + value] in bytes.
  struct Edge {
    int var;
    std::vector<double> cost;
  };
  std::vector<std::vector<Edge>> edges;  ///< per node: inputs, then outputs

  int num_vars() const { return static_cast<int>(domain.size()); }
  /// \brief Cost of node n when variable v has value value[v]; *best gets the cheapest option.
  double node_cost(NodeId n, const std::vector<int>& value, int* best = nullptr) const;
};

/// \brief What node_options reads of the graph alone (the same at every cut): the nodes that
/// may also run whole, the split variables each node's kernel refuses (its attribute
/// "__no_split__", null without one) and an id of each node's TDL text (equal texts, equal ids;
/// -1: none).
struct NodeFacts {
  std::vector<char> may_run_whole;           ///< per node: it may also run whole (replicated)
  std::vector<const std::string*> no_split;  ///< per node: its "__no_split__" attribute, null without one
  std::vector<int> tdl_id;                   ///< per node: id of its TDL text (equal texts, equal ids; -1: none)
};
/// \brief The NodeFacts of `g` (valid while `g` is).
NodeFacts node_facts(const Graph& g);

/// \brief What node_options keeps from one cut to the next of one search.
struct OptionsMemo {
  /// \brief An empty memo for searches of `g` (its NodeFacts derived once).
  explicit OptionsMemo(const Graph& g) : facts(node_facts(g)) {}
  NodeFacts facts;  ///< node_facts of the searched graph
  /// The provider is the TDL one, whose strategies depend only on the TDL text, the shapes and
  /// k: they are asked for once per distinct (text, shapes, k) and kept here.
  bool tdl_provider = false;
  /// \brief Hash of a `strategies` key.
  struct KeyHash {
    /// \brief Hash of the ids `v`.
    size_t operator()(const std::vector<int64_t>& v) const;
  };
  /// The TDL provider's strategies (with tdl_provider) keyed by (TDL text id, k, the number of
  /// inputs, each input's rank and dims, the number of outputs, each output's rank and dims).
  std::unordered_map<std::vector<int64_t>, OpStrategies, KeyHash> strategies;
  /// The last cut's options, handed back after the cut: the next cut's are written over them,
  /// which reuses their storage.
  std::vector<std::vector<NodeOption>> spare;
  /// Per node, from the last node_options call: nodes with equal ids (>= 0) have equal options
  /// (the same strategies of the TDL provider, filtered alike); -1: not known (a constraint).
  std::vector<int> list_id;
};

/// \brief Candidate options of every node for a k-way cut (provider, constraint, fallback);
/// `elementwise` receives the provider's element-wise flags. `memo` (may be null) is the
/// search's OptionsMemo.
std::vector<std::vector<NodeOption>> node_options(const Graph& g, const SearchState& s, int k, int cut,
                                                  const StrategyProvider& provider, const PlanConstraint& constraint,
                                                  bool replicate_fallback, std::vector<char>* elementwise,
                                                  OptionsMemo* memo = nullptr);

/// \brief Builds the problem of cut `cut` (k-way) from the state after the previous cuts.
/// `list_id` (may be null): OptionsMemo::list_id of `options`. `spare_edges` (may be null): the
/// last cut's CutProblem::edges, whose storage the new tables are written into.
CutProblem build_cut_problem(const Graph& g, const SearchState& s, int k, int cut,
                             std::vector<std::vector<NodeOption>> options, const Coarsening& c,
                             const PlanConstraint& constraint, const std::vector<int>* list_id = nullptr,
                             std::vector<std::vector<CutProblem::Edge>>* spare_edges = nullptr);

}  // namespace autotile
