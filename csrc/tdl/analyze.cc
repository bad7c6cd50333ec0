// analyze_tdl: concrete instantiation of the symbolic interval analysis (Tofu Sec 4.2).
// The parsed Program holds every index as an affine normal form over the statement's
// variables (the symbolic part, cached by text); here each worker's variable ranges are
// plugged in and the forms evaluated to the input regions it needs.
#include "tdl/analyze.h"

#include <algorithm>
#include <sstream>

#include "tdl/tdl_parser.h"
#include "util/error.h"

namespace autotile {

namespace {

using tdl::Access;
using tdl::Bounds;
using tdl::Program;
using tdl::Statement;

std::string header_of(const Program& p) {
  std::string h;
  for (size_t i = 0; i < p.inputs.size(); ++i) h += (i ? ", " : "") + p.inputs[i];
  h += " -> ";
  for (size_t i = 0; i < p.outputs.size(); ++i) h += (i ? ", " : "") + p.outputs[i];
  return "TDL '" + h + "'";
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

void check_shapes(const Program& p, const std::vector<Shape>& in, const std::vector<Shape>& out) {
  if (in.size() != p.inputs.size())
    fail(header_of(p), ": the header names ", p.inputs.size(), " input(s) but ", in.size(), " input shape(s) were given");
  if (out.size() != p.outputs.size())
    fail(header_of(p), ": the header names ", p.outputs.size(), " output(s) but ", out.size(),
         " output shape(s) were given");
  for (size_t i = 0; i < in.size(); ++i) {
    for (int64_t d : in[i])
      if (d < 0) fail(header_of(p), ": input '", p.inputs[i], "' has a negative dimension in shape ", shape_str(in[i]));
    int arity = p.input_arity[i];
    if (arity >= 0 && static_cast<size_t>(arity) != in[i].size())
      fail(header_of(p), ": input '", p.inputs[i], "' has rank ", in[i].size(), " (shape ", shape_str(in[i]),
           ") but is accessed with ", arity, " indices");
  }
  for (size_t o = 0; o < out.size(); ++o) {
    for (int64_t d : out[o])
      if (d < 0) fail(header_of(p), ": output '", p.outputs[o], "' has a negative dimension in shape ", shape_str(out[o]));
    const Statement& st = p.statements[p.statement_of[o]];
    if (static_cast<size_t>(st.rank) != out[o].size())
      fail(header_of(p), ": output '", p.outputs[o], "' has rank ", out[o].size(), " (shape ", shape_str(out[o]),
           ") but its statement has ", st.rank, " index variables");
  }
}

// Extents of every variable of `st`: output vars from the output shape, reduction vars from
// the input dim they index alone, else from an index `r + rest` (r's extent is the dim minus
// the span of rest, exact for unpadded windows).
std::vector<int64_t> var_extents(const Program& p, const Statement& st, const std::vector<Shape>& in,
                                 const Shape& out) {
  const size_t n = st.vars.size();
  std::vector<int64_t> ext(n, -1);
  for (int d = 0; d < st.rank; ++d) ext[d] = out[d];
  // Which access/dim fixed each extent (for the inconsistency message).
  std::vector<std::pair<int, int>> source(n, {-1, -1});
  for (const Access& a : st.accesses) {
    if (a.whole) continue;
    for (size_t d = 0; d < a.indices.size(); ++d) {
      const auto& ix = a.indices[d];
      if (ix.full || ix.form.vars.size() != 1 || !ix.form.floors.empty() || ix.form.constant != 0) continue;
      int id = ix.form.vars[0].first;
      if (ix.form.vars[0].second != 1 || st.vars[id].out_dim >= 0) continue;
      int64_t e = in[a.input][d];
      if (ext[id] < 0) {
        ext[id] = e;
        source[id] = {a.input, static_cast<int>(d)};
      } else if (ext[id] != e) {
        fail(header_of(p), ": reduction variable '", st.vars[id].name, "' indexes dims of different extents: '",
             p.inputs[source[id].first], "' dim ", source[id].second, " (", ext[id], ") and '", p.inputs[a.input],
             "' dim ", d, " (", e, ")");
      }
    }
  }
  bool progress = true;
  std::vector<Bounds> box(n);
  std::vector<int> used;
  while (progress) {
    progress = false;
    for (size_t r = 0; r < n; ++r) {
      if (ext[r] >= 0) continue;
      for (const Access& a : st.accesses) {
        if (a.whole || ext[r] >= 0) continue;
        for (size_t d = 0; d < a.indices.size() && ext[r] < 0; ++d) {
          const auto& f = a.indices[d].form;
          if (a.indices[d].full || f.coefficient(static_cast<int>(r)) != 1) continue;
          bool ok = true;
          for (const auto& fl : f.floors) ok = ok && !fl.second.num->involves(static_cast<int>(r));
          used.clear();
          f.collect_vars(&used);
          for (int id : used) ok = ok && (id == static_cast<int>(r) || ext[id] >= 0);
          if (!ok) continue;
          for (int id : used) box[id] = Bounds{0, ext[id] - 1};
          box[r] = Bounds{0, 0};
          Bounds rest = f.eval(box);
          if (rest.empty()) continue;  // a variable of extent 0: says nothing
          // In 128 bits: saturated bounds of hostile constants must not overflow here.
          __int128 span = static_cast<__int128>(rest.hi) - rest.lo;
          __int128 wide = static_cast<__int128>(in[a.input][d]) - span;
          int64_t e = wide < 1 ? 0 : static_cast<int64_t>(wide);
          if (e < 1)
            fail(header_of(p), ": reduction variable '", st.vars[r].name, "' gets no valid range from '",
                 p.inputs[a.input], "' dim ", d, " (extent ", in[a.input][d], ", index ",
                 f.str(st.var_names()), ")");
          ext[r] = e;
          progress = true;
        }
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    if (ext[r] < 0)
      fail(header_of(p), ": cannot determine the range of reduction variable '", st.vars[r].name,
           "' (it must index some input dim alone, or with coefficient 1 next to variables of known range)");
  }
  return ext;
}

bool is_elementwise(const Program& p, const std::vector<Shape>& in, const std::vector<Shape>& out) {
  for (size_t o = 1; o < out.size(); ++o)
    if (out[o] != out[0]) return false;
  for (const Statement& st : p.statements) {
    if (!st.elementwise_form) return false;
    const Shape& os = out[st.output];
    for (const Access& a : st.accesses) {
      const Shape& s = in[a.input];
      size_t off = os.size() - s.size();
      for (size_t d = 0; d < s.size(); ++d) {
        bool zero = a.indices[d].form.is_constant();
        if (zero ? s[d] != 1 : s[d] != os[off + d]) return false;
      }
    }
  }
  return true;
}

// Interval of dim `d` that access `a` reads under `box`, clipped to [0, extent); empty if
// it reads nothing there.
Bounds touched(const Access& a, size_t d, int64_t extent, const std::vector<Bounds>& box) {
  if (a.whole || a.indices[d].full) return Bounds{0, extent - 1};
  // An access inside a reduction of extent 0 reads nothing.
  Bounds b = a.indices[d].form.eval(box);
  if (b.empty()) return b;
  return Bounds{std::max<int64_t>(b.lo, 0), std::min<int64_t>(b.hi, extent - 1)};
}

}  // namespace

OpStrategies analyze_tdl(const std::string& text, const std::vector<Shape>& in_shapes,
                         const std::vector<Shape>& out_shapes, int k) {
  if (k < 1) fail("analyze_tdl: the number of workers k must be at least 1 (got ", k, ")");
  std::shared_ptr<const Program> prog = tdl::parse_cached(text);
  const Program& p = *prog;
  check_shapes(p, in_shapes, out_shapes);

  const size_t ns = p.statements.size();
  std::vector<std::vector<int64_t>> ext(ns);
  std::vector<std::vector<Bounds>> full(ns);
  for (size_t s = 0; s < ns; ++s) {
    const Statement& st = p.statements[s];
    ext[s] = var_extents(p, st, in_shapes, out_shapes[st.output]);
    full[s].resize(ext[s].size());
    for (size_t v = 0; v < ext[s].size(); ++v) full[s][v] = Bounds{0, ext[s][v] - 1};
  }

  OpStrategies result;
  result.elementwise = is_elementwise(p, in_shapes, out_shapes);

  for (size_t c = 0; c < p.split_names.size(); ++c) {
    const std::vector<int>& ids = p.split_ids[c];
    // The variable must exist in every statement with one extent that k divides.
    int64_t extent = -1;
    bool ok = true;
    for (size_t s = 0; s < ns && ok; ++s) {
      if (ids[s] < 0) ok = false;
      else if (extent < 0) extent = ext[s][ids[s]];
      else ok = ext[s][ids[s]] == extent;
    }
    if (!ok || extent <= 0 || extent % k != 0) continue;

    Strategy strat;
    strat.var = p.split_names[c];
    strat.inputs.resize(p.inputs.size());
    for (size_t i = 0; i < p.inputs.size() && ok; ++i) {
      InputNeed& need = strat.inputs[i];
      need.read = p.input_read[i];
      // The one dim of this input that the variable indexes, over all its accesses.
      int dim = -1;
      for (size_t s = 0; s < ns && ok; ++s) {
        for (const Access& a : p.statements[s].accesses) {
          if (a.input != static_cast<int>(i) || a.whole) continue;
          for (size_t d = 0; d < a.indices.size(); ++d) {
            if (a.indices[d].full || !a.indices[d].form.involves(ids[s])) continue;
            if (dim >= 0 && dim != static_cast<int>(d)) ok = false;  // 2+ dims: not a strategy
            dim = static_cast<int>(d);
          }
        }
      }
      if (!ok || dim < 0) continue;
      need.replicate = false;
      need.dim = dim;
      const int64_t dim_extent = in_shapes[i][dim];
      need.per_worker.resize(k);
      for (int j = 0; j < k; ++j) {
        Bounds hull;  // empty
        for (size_t s = 0; s < ns; ++s) {
          std::vector<Bounds>& box = full[s];
          const Bounds saved = box[ids[s]];
          box[ids[s]] = Bounds{extent / k * j, extent / k * (j + 1) - 1};
          for (const Access& a : p.statements[s].accesses) {
            if (a.input != static_cast<int>(i)) continue;
            Bounds b = touched(a, dim, dim_extent, box);
            if (b.empty()) continue;
            if (hull.empty()) hull = b;
            else hull = Bounds{std::min(hull.lo, b.lo), std::max(hull.hi, b.hi)};
          }
          box[ids[s]] = saved;
        }
        need.per_worker[j] = hull.empty() ? Interval{0, 0} : Interval{hull.lo, hull.hi + 1};
      }
    }
    if (!ok) continue;
    strat.outputs.resize(p.outputs.size());
    for (size_t s = 0; s < ns; ++s) {
      const Statement& st = p.statements[s];
      OutputMake& make = strat.outputs[st.output];
      const tdl::Var& v = st.vars[ids[s]];
      if (v.out_dim >= 0) {
        make.dim = v.out_dim;
      } else {
        make.partial = true;
        make.reducer = st.top_reducer;
        strat.reduction = true;
      }
    }
    result.strategies.push_back(std::move(strat));
  }
  return result;
}

}  // namespace autotile
