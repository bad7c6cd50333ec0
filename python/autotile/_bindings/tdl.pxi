# Bindings of csrc/tdl: TDL parsing and interval analysis (docs/tdl.md).

cdef extern from "tdl/strategy.h" namespace "autotile":
    cdef cppclass CInterval "autotile::Interval":
        int64_t lo
        int64_t hi

    cdef enum class CReducer "autotile::Reducer":
        kSum "autotile::Reducer::kSum"
        kMax "autotile::Reducer::kMax"
        kMin "autotile::Reducer::kMin"
        kProd "autotile::Reducer::kProd"

    cdef cppclass CInputNeed "autotile::InputNeed":
        cbool replicate
        cbool read
        int dim
        vector[CInterval] per_worker

    cdef cppclass COutputMake "autotile::OutputMake":
        cbool partial
        CReducer reducer
        int dim

    cdef cppclass CStrategy "autotile::Strategy":
        string var
        cbool reduction
        vector[CInputNeed] inputs
        vector[COutputMake] outputs

    cdef cppclass COpStrategies "autotile::OpStrategies":
        vector[CStrategy] strategies
        cbool elementwise

cdef extern from "tdl/analyze.h" namespace "autotile":
    COpStrategies c_analyze_tdl "autotile::analyze_tdl"(const string&, const vector[vector[int64_t]]&,
                                                        const vector[vector[int64_t]]&, int) except + nogil

cdef extern from "tdl/tdl_ast.h" namespace "autotile::tdl":
    cdef cppclass CTdlVar "autotile::tdl::Var":
        string name
        int out_dim
        cbool top_level

    cdef cppclass CTdlStatement "autotile::tdl::Statement":
        int output
        vector[CTdlVar] vars
        int rank
        cbool has_reduction
        cbool has_top
        CReducer top_reducer
        cbool elementwise_form

    cdef cppclass CTdlProgram "autotile::tdl::Program":
        vector[string] inputs
        vector[string] outputs
        vector[CTdlStatement] statements
        vector[int] input_arity
        vector[string] split_names

cdef extern from "tdl/tdl_parser.h" namespace "autotile::tdl":
    cdef cppclass CProgramPtr "std::shared_ptr<const autotile::tdl::Program>":
        const CTdlProgram* get()
    CProgramPtr c_parse_tdl "autotile::tdl::parse_cached"(const string&) except +
    size_t c_parse_cache_size "autotile::tdl::parse_cache_size"()
    void c_clear_parse_cache "autotile::tdl::clear_parse_cache"()


_REDUCER_NAMES = {int(CReducer.kSum): "sum", int(CReducer.kMax): "max", int(CReducer.kMin): "min",
                  int(CReducer.kProd): "prod"}


cdef vector[vector[int64_t]] _shape_list(object shapes, str what) except *:
    cdef vector[vector[int64_t]] out
    try:
        for shape in shapes:
            out.push_back([int(d) for d in shape])
    except (TypeError, ValueError, OverflowError) as e:
        raise _AutotileError(f"analyze_tdl: {what} must be a sequence of integer shapes ({e})") from None
    return out


def analyze_tdl(text, in_shapes, out_shapes, k):
    """Partition strategies of the op described by TDL `text` for a k-way cut.

    Returns {"elementwise": bool, "strategies": [{"var", "reduction", "inputs", "outputs"}]}
    where each input is {"replicate", "read", "dim", "per_worker": [(lo, hi), ...]} (half-open
    intervals along "dim", one per worker) and each output is {"partial", "reducer", "dim"}
    (reducer: "sum" | "max" | "min" | "prod" when partial, else None). Raises autotile.Error
    on malformed text or shapes that do not match the description."""
    cdef int ck
    try:
        ck = k.__index__()
    except (AttributeError, TypeError, OverflowError):
        raise _AutotileError(f"analyze_tdl: k must be an integer number of workers (got {k!r})") from None
    cdef string ctext = _s(text)
    cdef vector[vector[int64_t]] ins = _shape_list(in_shapes, "in_shapes")
    cdef vector[vector[int64_t]] outs = _shape_list(out_shapes, "out_shapes")
    cdef COpStrategies res
    try:
        with nogil:
            res = c_analyze_tdl(ctext, ins, outs, ck)
    except RuntimeError as e:
        _raise_core(e)
    strategies = []
    for st in res.strategies:
        inputs = []
        for need in st.inputs:
            inputs.append({"replicate": need.replicate, "read": need.read, "dim": need.dim,
                           "per_worker": [(iv.lo, iv.hi) for iv in need.per_worker]})
        outputs = []
        for make in st.outputs:
            outputs.append({"partial": make.partial,
                            "reducer": _REDUCER_NAMES[int(make.reducer)] if make.partial else None,
                            "dim": make.dim})
        strategies.append({"var": _u(st.var), "reduction": st.reduction, "inputs": inputs, "outputs": outputs})
    return {"elementwise": res.elementwise, "strategies": strategies}


def parse_tdl(text):
    """Parses TDL `text` (cached) and describes it: {"inputs", "outputs", "statements",
    "split_vars"}; each statement is {"output", "vars", "reduction_vars", "top_reducer",
    "elementwise_form"}. Raises autotile.Error naming the position and the offending token
    when the text is malformed."""
    cdef CProgramPtr prog
    try:
        prog = c_parse_tdl(_s(text))
    except RuntimeError as e:
        _raise_core(e)
    cdef const CTdlProgram* p = prog.get()
    cdef size_t i, v
    statements = []
    for i in range(p.statements.size()):
        outs, reds, top = [], [], []
        for v in range(p.statements[i].vars.size()):
            name = _u(p.statements[i].vars[v].name)
            if p.statements[i].vars[v].out_dim >= 0:
                outs.append(name)
            else:
                reds.append(name)
            if p.statements[i].vars[v].top_level:
                top.append(name)
        statements.append({"output": _u(p.outputs[p.statements[i].output]), "vars": outs, "reduction_vars": reds,
                           "top_reduction_vars": top,
                           "top_reducer": (_REDUCER_NAMES[int(p.statements[i].top_reducer)]
                                           if p.statements[i].has_top else None),
                           "elementwise_form": p.statements[i].elementwise_form})
    return {"inputs": [_u(p.inputs[i]) for i in range(p.inputs.size())],
            "outputs": [_u(p.outputs[i]) for i in range(p.outputs.size())],
            "statements": statements,
            "split_vars": [_u(p.split_names[i]) for i in range(p.split_names.size())],
            "input_arity": [p.input_arity[i] for i in range(p.input_arity.size())]}


def tdl_cache_size():
    """Number of TDL programs in the core's parse cache."""
    return c_parse_cache_size()


def clear_tdl_cache():
    """Empties the core's TDL parse cache."""
    c_clear_parse_cache()
