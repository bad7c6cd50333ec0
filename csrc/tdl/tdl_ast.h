// A parsed TDL description (docs/tdl.md), reduced to what the interval analysis needs:
// per statement, its index variables, its top-level reduction and every input access with
// its indices in affine normal form. Arithmetic around accesses is opaque and not kept.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tdl/affine.h"
#include "tdl/strategy.h"

namespace autotile {
namespace tdl {

/// \brief One index of an access: ':' (whole dim) or an affine form of statement variables.
struct Index {
  bool full = false;
  LinearForm form;
};

/// \brief One read of an input tensor inside a statement.
struct Access {
  int input = -1;       ///< position of the tensor in the header's input list
  bool whole = false;   ///< bare name without brackets: the whole tensor is read
  std::vector<Index> indices;
  size_t pos = 0;       ///< offset of the access in the text (messages)
};

/// \brief One index variable of a statement.
struct Var {
  std::string name;
  int out_dim = -1;     ///< output dim it indexes, or -1 for a reduction variable
  bool top_level = false;  ///< reduction variable of the statement's top-level reduction
  size_t pos = 0;
};

/// \brief `out[v...] = expr`: one statement, one output.
struct Statement {
  int output = -1;                ///< position of the output in the header's output list
  std::vector<Var> vars;          ///< ids: output vars 0..rank-1 first, then reduction vars
  int rank = 0;                   ///< number of output variables
  bool has_reduction = false;     ///< any reduction anywhere in the expression
  bool has_top = false;           ///< the expression is (or adds to) one reduction
  Reducer top_reducer = Reducer::kSum;
  std::vector<Access> accesses;
  /// Structurally element-wise: no reduction, every access indexes a suffix of the output
  /// variables in order, constant 0 allowed (a broadcast size-1 dim, checked against shapes).
  bool elementwise_form = false;
  size_t pos = 0;

  /// \brief Names of the statement's variables (for LinearForm::str).
  std::vector<std::string> var_names() const;
  /// \brief Id of the output variable or top-level reduction variable called `name`, or -1
  /// (nested reduction variables in sibling scopes may share names; these two kinds may not).
  int find_split_var(const std::string& name) const;
};

/// \brief A whole description. Immutable once parsed; shared by the parse cache.
struct Program {
  std::string text;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<Statement> statements;  ///< in text order
  std::vector<int> statement_of;      ///< output position -> statement position
  std::vector<int> input_arity;       ///< indices per access of each input, -1 if never indexed
  std::vector<bool> input_read;       ///< whether the body mentions the input at all
  /// Candidate split variables, matched by name across statements: output variables in
  /// order of first appearance, then top-level reduction variables.
  std::vector<std::string> split_names;
  /// split_ids[c][s]: id of candidate c in statement s, or -1 where s lacks it.
  std::vector<std::vector<int>> split_ids;
};

}  // namespace tdl
}  // namespace autotile
