# Bindings of csrc/search: the partition search (recursive k-cuts, one-cut DP, bruteforce,
# baselines) and price_plan, the same cost model applied to a given plan.

cdef extern from "search/strategy_provider.h" namespace "autotile":
    ctypedef cbool (*CProviderCallback "autotile::ProviderCallback")(
        void*, int, const vector[vector[int64_t]]&, const vector[vector[int64_t]]&, int, COpStrategies*) noexcept
    cdef cppclass CStrategyProvider "autotile::StrategyProvider":
        pass
    CStrategyProvider c_callback_strategy_provider "autotile::callback_strategy_provider"(CProviderCallback, void*)

cdef extern from "search/plan.h" namespace "autotile":
    cdef cppclass CPlan "autotile::Plan":
        string algorithm
        int devices
        vector[int] factors
        vector[double] cut_costs
        double total_bytes
        double weighted_cost
        vector[vector[string]] tensor_tilings
        vector[vector[string]] node_strategies
        double search_seconds
        int num_groups
        int num_levels
        double model_seconds
        vector[double] cut_seconds

cdef extern from "search/external_solver.h" namespace "autotile":
    cdef cppclass CCutProblemData "autotile::CutProblemData":
        int cut
        int k
        vector[int] domain
        vector[int] var_home
        vector[int] num_options
        vector[int] node_var
        vector[vector[int]] node_var_option
        vector[vector[int]] edge_var
        vector[vector[vector[double]]] edge_cost
    cppclass CExternalSolver "autotile::ExternalCutSolver":
        pass

cdef extern from *:
    """
    #include "search/external_solver.h"
    typedef std::vector<int> (*AutotileExternalFn)(const autotile::CutProblemData&, void*);
    static autotile::ExternalCutSolver autotile_external_solver(AutotileExternalFn fn, void* ctx) {
      return [fn, ctx](const autotile::CutProblemData& p) { return fn(p, ctx); };
    }
    """
    ctypedef vector[int] (*CExternalFn "AutotileExternalFn")(const CCutProblemData&, void*) noexcept
    CExternalSolver c_external_solver "autotile_external_solver"(CExternalFn, void*)

cdef extern from *:
    """
    #include <memory>
    #include "search/time_cost.h"
    typedef double (*AutotileComputeFn)(void*, int, const std::vector<std::vector<int64_t>>&,
                                        const std::vector<std::vector<int64_t>>&, const std::vector<char>&);
    static std::shared_ptr<const autotile::TimeObjective> autotile_time_objective(
        const std::vector<double>& rate, const std::vector<double>& latency, AutotileComputeFn fn, void* ctx) {
      auto t = std::make_shared<autotile::TimeObjective>();
      t->seconds_per_byte = rate;
      t->message_seconds = latency;
      t->compute = [fn, ctx](autotile::NodeId n, const std::vector<autotile::Shape>& ins,
                             const std::vector<autotile::Shape>& outs, const std::vector<char>& read) {
        return fn(ctx, n, ins, outs, read);
      };
      return t;
    }
    """
    cppclass CTimePtr "std::shared_ptr<const autotile::TimeObjective>":
        pass
    ctypedef double (*CComputeFn "AutotileComputeFn")(void*, int, const vector[vector[int64_t]]&,
                                                      const vector[vector[int64_t]]&, const vector[char]&) noexcept
    CTimePtr c_time_objective "autotile_time_objective"(const vector[double]&, const vector[double]&, CComputeFn,
                                                        void*)

cdef extern from "search/kcuts.h" namespace "autotile":
    cdef cppclass CSearchOptions "autotile::SearchOptions":
        CExternalSolver external_solver
        cbool replicate_fallback
        CStrategyProvider provider
        int64_t bruteforce_limit
        vector[double] bandwidths
        cbool bandwidths_in_cut_order
        double memory_weight
        cbool refine
        vector[int] factors
        vector[vector[string]] pinned
        vector[int] batch_dims
        vector[pair[double, double]]* cut_check
        CTimePtr time
    CPlan c_price_plan "autotile::price_plan"(const CGraph&, int, const vector[vector[string]]&,
                                             const vector[vector[string]]&, const CSearchOptions&) except +
    vector[int] c_factorize "autotile::factorize"(int) except +

cdef extern from "search/cut_refine.h" namespace "autotile":
    CPlan c_refine_given_plan "autotile::refine_given_plan"(const CGraph&, int, const vector[vector[string]]&,
                                                           const vector[vector[string]]&, const CSearchOptions&) except +

cdef extern from "search/planner.h" namespace "autotile":
    CPlan c_plan_graph "autotile::plan_graph"(const CGraph&, int, const string&, CSearchOptions) except +

cdef extern from "search/joint_problem.h" namespace "autotile":
    cdef cppclass CJointProblem "autotile::JointProblem":
        CCutProblemData data
        vector[int] factors
        vector[int] tensor_var
        vector[vector[vector[string]]] tensor_values
        vector[vector[vector[string]]] node_values
    CJointProblem c_joint_problem "autotile::joint_problem"(const CGraph&, int, const CSearchOptions&, int) except +


cdef dict _cut_problem_dict(const CCutProblemData& p):
    """A cut problem as plain data for a solver written in Python (planner/ilp.py): per
    variable its domain size; per node its number of options, its shared strategy variable
    (-1: none) with the option each of its values selects (-1: infeasible), and its edges as
    (variable, cost matrix [option][value] in bytes; inf = not allowed)."""
    import numpy as np

    cdef size_t n, e
    edges = []
    for n in range(p.edge_var.size()):
        row = []
        for e in range(p.edge_var[n].size()):
            v = p.edge_var[n][e]
            cost = np.asarray(p.edge_cost[n][e], dtype=np.float64)
            row.append((v, cost.reshape(p.num_options[n], p.domain[v])))
        edges.append(row)
    return {"cut": p.cut, "k": p.k, "domain": list(p.domain), "var_home": list(p.var_home),
            "num_options": list(p.num_options), "node_var": list(p.node_var),
            "node_var_option": [list(p.node_var_option[n]) for n in range(p.node_var_option.size())],
            "edges": edges}


cdef vector[int] _external_trampoline(const CCutProblemData& p, void* ctx) noexcept with gil:
    box = <object>ctx
    cdef vector[int] out
    try:
        for v in box.fn(_cut_problem_dict(p)):
            out.push_back(int(v))
    except BaseException as e:  # reported after the core unwinds (the core sees no values)
        if box.error is None:
            box.error = e
        out.clear()
    return out


class _ProviderBox:
    """Holds a Python strategy provider and the first exception it raised."""

    def __init__(self, fn):
        self.fn = fn
        self.error = None


cdef cbool _provider_trampoline(void* ctx, int node, const vector[vector[int64_t]]& ins,
                                const vector[vector[int64_t]]& outs, int k, COpStrategies* out) noexcept with gil:
    box = <object>ctx
    cdef CStrategy st
    cdef CInputNeed need
    cdef COutputMake make
    cdef CInterval iv
    try:
        res = box.fn(node, [tuple(ins[i]) for i in range(ins.size())], [tuple(outs[i]) for i in range(outs.size())], k)
        strategies, elementwise = res if isinstance(res, tuple) else (res, False)
        out.elementwise = bool(elementwise)
        for s in strategies or ():
            st.inputs.clear()
            st.outputs.clear()
            st.var = _s(s["var"])
            st.reduction = bool(s.get("reduction", False))
            for item in s["inputs"]:
                need.per_worker.clear()
                need.read = True
                need.dim = -1
                if item is None:
                    need.replicate = True
                elif item == "unread":
                    need.replicate = True
                    need.read = False
                else:
                    need.replicate = False
                    need.dim = int(item[0])
                    for lo, hi in item[1]:
                        iv.lo = int(lo)
                        iv.hi = int(hi)
                        need.per_worker.push_back(iv)
                st.inputs.push_back(need)
            for item in s["outputs"]:
                make.dim = -1
                if item == "partial":
                    make.partial = True
                else:
                    make.partial = False
                    make.dim = int(item)
                st.outputs.push_back(make)
            out.strategies.push_back(st)
        return True
    except BaseException as e:  # reported after the core unwinds
        if box.error is None:
            box.error = e
        return False


cdef double _compute_trampoline(void* ctx, int node, const vector[vector[int64_t]]& ins,
                                const vector[vector[int64_t]]& outs, const vector[char]& read) noexcept with gil:
    box = <object>ctx
    try:
        return float(box.fn(node, [tuple(ins[i]) for i in range(ins.size())],
                            [tuple(outs[i]) for i in range(outs.size())], [bool(read[i]) for i in range(read.size())]))
    except BaseException as e:  # reported after the core unwinds (the core sees NaN and fails)
        if box.error is None:
            box.error = e
        return float("nan")


cdef void _set_time(CSearchOptions* opts, time_model, box) except *:
    """Sets the time objective from `time_model` ({"seconds_per_byte": [per cut],
    "message_seconds": [per cut], "compute": callable(node, in_shapes, out_shapes, read) ->
    seconds}); `box` holds the callable and its first exception."""
    cdef vector[double] rate, latency
    if time_model is None:
        return
    for x in time_model["seconds_per_byte"]:
        rate.push_back(float(x))
    for x in time_model["message_seconds"]:
        latency.push_back(float(x))
    opts.time = c_time_objective(rate, latency, _compute_trampoline, <void*>box)


cdef CSearchOptions _search_options(replicate_fallback, bandwidths, strategy_provider, box, bruteforce_limit):
    cdef CSearchOptions opts
    opts.replicate_fallback = bool(replicate_fallback)
    if bandwidths is not None:
        for b in bandwidths:
            opts.bandwidths.push_back(float(b))
    if bruteforce_limit is not None:
        opts.bruteforce_limit = int(bruteforce_limit)
    if strategy_provider is not None:
        opts.provider = c_callback_strategy_provider(_provider_trampoline, <void*>box)
    return opts


cdef dict _plan_dict(CPlan& p):
    return {
        "algorithm": _u(p.algorithm), "devices": p.devices, "factors": list(p.factors),
        "cut_costs": [float(c) for c in p.cut_costs], "total_bytes": float(p.total_bytes),
        "weighted_cost": float(p.weighted_cost),
        "tensor_tilings": [[_u(x) for x in row] for row in p.tensor_tilings],
        "node_strategies": [[_u(x) for x in row] for row in p.node_strategies],
        "search_seconds": float(p.search_seconds), "num_groups": p.num_groups, "num_levels": p.num_levels,
        "model_seconds": float(p.model_seconds) if p.model_seconds >= 0 else None,
        "cut_seconds": [float(c) for c in p.cut_seconds],
    }


_MAX_DEVICES = 4096  # AT_MAX_DEVICES of the C API (csrc/include/autotile/c_api.h)


def _check_devices(devices):
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise _AutotileError(f"devices must be a positive integer, got {devices!r}")
    if devices > _MAX_DEVICES:  # also keeps int overflow and huge allocations out of the core
        raise _AutotileError(f"devices must be at most {_MAX_DEVICES}, got {devices}")


cdef void _set_layout(CSearchOptions* opts, factors, pinned) except *:
    cdef vector[string] row
    if factors is not None:
        for f in factors:
            opts.factors.push_back(int(f))
        # a mesh's cuts come in axis order, and so do its bandwidths
        opts.bandwidths_in_cut_order = True
    if pinned is not None:
        for entry in pinned:
            row.clear()
            for x in (entry or ()):
                row.push_back(_s(x or ""))
            opts.pinned.push_back(row)


def plan_graph(Graph graph, devices, algorithm="tofu", bandwidths=None, replicate_fallback=False,
               strategy_provider=None, bruteforce_limit=None, factors=None, pinned=None, cut_solver=None,
               memory_weight=0.0, refine=True, batch_dims=None, time_model=None):
    """Plan the core graph on `devices` devices (csrc/search).

    algorithm: "tofu" (recursive k-cuts with the one-cut DP), "bruteforce" (the exhaustive
    oracle; refuses large graphs) or "data" (data-parallel baseline). bandwidths: one per cut
    (bytes/s, any order; the cheapest cut is mapped to the slowest link). strategy_provider:
    optional callable (node_id, in_shapes, out_shapes, k) -> [strategy dicts] or
    ([strategy dicts], elementwise) used instead of the TDL analysis; a strategy dict is
    {"var", "reduction", "inputs": [None (whole) | "unread" | (dim, [(lo, hi)] * k)],
    "outputs": ["partial" | dim]}. Returns a dict: algorithm, devices, factors, cut_costs,
    total_bytes, weighted_cost, tensor_tilings, node_strategies, search_seconds, num_groups,
    num_levels. factors: the cut factors in order (a named mesh; default: devices factorised,
    largest first). pinned: per tensor id, None (free) or a list over cuts of a tiling string
    or None, the layout the search must honour (tofu, bruteforce, data). cut_solver: a callable
    (cut problem dict, see _cut_problem_dict) -> value per variable, used for every cut by
    algorithm "ilp" (planner/ilp.py). memory_weight: price of a byte each device holds, against
    a byte moved (the memory-aware search, planner/memory_fit.py). refine: for "tofu", improve
    the recursive plan across its cuts afterwards (csrc/search/cut_refine.h); False gives the
    recursion's own plan. time_model: the time objective (see _set_time; csrc/search/time_cost.h):
    every cut priced in seconds; the result's model_seconds and cut_seconds give the plan's
    seconds in that model."""
    _check_devices(devices)
    if algorithm == "ilp" and cut_solver is None:
        from autotile.planner.ilp import make_cut_solver

        cut_solver = make_cut_solver()
    box = _ProviderBox(strategy_provider)
    solver_box = _ProviderBox(cut_solver)
    cdef CSearchOptions opts = _search_options(replicate_fallback, bandwidths, strategy_provider, box, bruteforce_limit)
    _set_layout(&opts, factors, pinned)
    opts.memory_weight = float(memory_weight)
    opts.refine = bool(refine)
    for d in (batch_dims or ()):
        opts.batch_dims.push_back(int(d))
    if cut_solver is not None:
        opts.external_solver = c_external_solver(_external_trampoline, <void*>solver_box)
    time_box = _ProviderBox(time_model["compute"] if time_model is not None else None)
    _set_time(&opts, time_model, time_box)
    cdef CPlan p
    try:
        p = c_plan_graph(graph.g[0], devices, _s(algorithm), opts)
    except RuntimeError as e:
        for b in (box, solver_box, time_box):
            if b.error is not None:
                raise b.error
        _raise_core(e)
    return _plan_dict(p)


def price_plan(Graph graph, devices, tensor_tilings, node_strategies, replicate_fallback=False,
               strategy_provider=None, bandwidths=None, factors=None, refine=False, time_model=None):
    """Price a given plan with the search's cost model. tensor_tilings: per tensor id, a list
    over cuts of "split(d)" | "replicate" | "partial"; node_strategies: per node id, a list
    over cuts of strategy names. Returns the same dict as plan_graph (algorithm "priced").
    refine (testing aid): the plan improved first by tofu's refinement across cuts
    (csrc/search/cut_refine.h, with its budget's floor; algorithm "refined"). time_model (see
    plan_graph): the plan's seconds in the time objective too (model_seconds, cut_seconds)."""
    _check_devices(devices)
    box = _ProviderBox(strategy_provider)
    cdef CSearchOptions opts = _search_options(replicate_fallback, bandwidths, strategy_provider, box, None)
    _set_layout(&opts, factors, None)
    time_box = _ProviderBox(time_model["compute"] if time_model is not None else None)
    _set_time(&opts, time_model, time_box)
    cdef vector[vector[string]] tt, ns
    cdef vector[string] row
    for entry in tensor_tilings:
        row.clear()
        for x in entry:
            row.push_back(_s(x))
        tt.push_back(row)
    for entry in node_strategies:
        row.clear()
        for x in entry:
            row.push_back(_s(x))
        ns.push_back(row)
    cdef CPlan p
    try:
        p = c_refine_given_plan(graph.g[0], devices, tt, ns, opts) if refine else c_price_plan(graph.g[0], devices, tt, ns, opts)
    except RuntimeError as e:
        for b in (box, time_box):
            if b.error is not None:
                raise b.error
        _raise_core(e)
    return _plan_dict(p)


def _check_cuts_against_bruteforce(Graph graph, devices, strategy_provider=None, replicate_fallback=False,
                                   bruteforce_limit=None, cut_solver=None, time_model=None):
    """Testing aid: plan with the DP and also solve every cut's problem (same prefix) by
    bruteforce, or by `cut_solver` (e.g. the ILP) when given. Returns [(dp_cost, other_cost)]
    per cut (bytes, flat totals; with `time_model`, seconds of the time objective's cut problem)."""
    _check_devices(devices)
    box = _ProviderBox(strategy_provider)
    solver_box = _ProviderBox(cut_solver)
    cdef CSearchOptions opts = _search_options(replicate_fallback, None, strategy_provider, box, bruteforce_limit)
    if cut_solver is not None:
        opts.external_solver = c_external_solver(_external_trampoline, <void*>solver_box)
    time_box = _ProviderBox(time_model["compute"] if time_model is not None else None)
    _set_time(&opts, time_model, time_box)
    cdef vector[pair[double, double]] check
    opts.cut_check = &check
    try:
        c_plan_graph(graph.g[0], devices, b"tofu", opts)
    except RuntimeError as e:
        for b in (box, solver_box, time_box):
            if b.error is not None:
                raise b.error
        _raise_core(e)
    return [(float(a), float(b)) for a, b in check]


def factorize(devices):
    """Cut factors of a device count, largest first (12 -> [3, 2, 2])."""
    _check_devices(devices)
    return list(c_factorize(devices))


def joint_problem(Graph graph, devices, replicate_fallback=False, strategy_provider=None, factors=None,
                  max_values=4096):
    """All cuts of a plan at once as plain data (csrc/search/joint_problem.h), for the joint
    integer program of planner/ilp_joint.py: the cut problem dict (see _cut_problem_dict; one
    variable per tensor, one option per strategy sequence of a node, edge costs the plan's
    final bytes) plus "factors", "tensor_var" (tensor -> variable: tied tensors share one),
    "tensor_values" [variable][value] -> tiling per cut and "node_values" [node][option] ->
    strategy per cut."""
    _check_devices(devices)
    box = _ProviderBox(strategy_provider)
    cdef CSearchOptions opts = _search_options(replicate_fallback, None, strategy_provider, box, None)
    _set_layout(&opts, factors, None)
    cdef CJointProblem jp
    try:
        jp = c_joint_problem(graph.g[0], devices, opts, int(max_values))
    except RuntimeError as e:
        if box.error is not None:
            raise box.error
        _raise_core(e)
    out = _cut_problem_dict(jp.data)
    out["factors"] = list(jp.factors)
    out["tensor_var"] = list(jp.tensor_var)
    out["tensor_values"] = [[[_u(x) for x in seq] for seq in row] for row in jp.tensor_values]
    out["node_values"] = [[[_u(x) for x in seq] for seq in row] for row in jp.node_values]
    return out
