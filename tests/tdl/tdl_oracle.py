"""Brute-force oracle for TDL interval analysis, written independently of csrc/tdl.

It reads TDL text with regular expressions and bracket matching (no shared code with the C++
parser), evaluates every index expression with Python on NumPy grids of the variables'
values (`/` becomes floor division `//`), and derives the strategies of a k-way cut by
enumerating each worker's share of the index space: per input, the raw min/max of each
access's index along the split dim, clipped to [0, dim), empty intervals dropped, hulled
over accesses (docs/tdl.md, "What the analysis derives").
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

REDUCERS = ("sum", "max", "min", "prod")
_TOKEN = re.compile(r"\s*(->|[A-Za-z_]\w*|\d+\.\d*(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?|\.\d+|<=|>=|==|!=|\S)")


def tokenize(text: str) -> List[str]:
    text = re.sub(r"#[^\n]*", "", text)
    return [t for t in _TOKEN.findall(text) if t.strip()]


@dataclass
class OAccess:
    name: str
    indices: Optional[List[str]]  # None: bare name (whole tensor); ':' or a Python expression


@dataclass
class OStatement:
    output: str
    out_vars: List[str]
    red_vars: List[str] = field(default_factory=list)  # every reduction variable
    top_vars: List[str] = field(default_factory=list)
    top_reducer: Optional[str] = None
    accesses: List[OAccess] = field(default_factory=list)
    has_reduction: bool = False


@dataclass
class OProgram:
    inputs: List[str]
    outputs: List[str]
    statements: List[OStatement]


def _match(tokens: List[str], i: int, open_: str, close: str) -> int:
    """Index of the token closing the bracket opened at tokens[i]."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j] == open_:
            depth += 1
        elif tokens[j] == close:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {open_}")


def _reduction_at(tokens: List[str], i: int) -> Optional[Tuple[List[str], int, int]]:
    """If a reduction starts at tokens[i]: (vars, index of '{', index of matching '}')."""
    if tokens[i] not in REDUCERS or i + 1 >= len(tokens) or tokens[i + 1] != "(":
        return None
    close = _match(tokens, i + 1, "(", ")")
    inner = tokens[i + 2:close]
    if close + 1 >= len(tokens) or tokens[close + 1] != "{":
        return None
    names = inner[0::2]
    if not names or any(not re.fullmatch(r"[A-Za-z_]\w*", n) for n in names) or any(c != "," for c in inner[1::2]):
        return None
    return names, close + 1, _match(tokens, close + 1, "{", "}")


def _split_top(tokens: List[str], seps: Sequence[str]) -> List[Tuple[str, List[str]]]:
    """Splits at depth-0 binary separators; returns (separator before, tokens) pieces."""
    pieces, cur, depth, sep = [], [], 0, "+"
    for j, t in enumerate(tokens):
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        # '+'/'-' after an operand are binary (else unary); ',' always separates.
        binary = t == "," or (cur and (re.fullmatch(r"[\w.]+", cur[-1]) or cur[-1] in ")]}"))
        if depth == 0 and t in seps and binary:
            pieces.append((sep, cur))
            sep, cur = t, []
            continue
        cur.append(t)
    pieces.append((sep, cur))
    return pieces


def _top_level(tokens: List[str]) -> Tuple[Optional[str], List[str]]:
    """(reducer, variables) of the statement's top-level reduction, if any."""
    if any(t in ("<", ">", "<=", ">=", "==", "!=") for t in _split_depth0(tokens)):
        return None, []
    terms = _split_top(tokens, ("+", "-"))
    reds = []
    for sign, term in terms:
        while term and term[0] == "(" and _match(term, 0, "(", ")") == len(term) - 1:
            term = term[1:-1]
        r = _reduction_at(term, 0) if term else None
        if r is not None and r[2] == len(term) - 1:
            reds.append((sign, term, r))
    if len(reds) != 1 or reds[0][0] != "+":
        return None, []
    _, term, (names, lb, rb) = reds[0]
    reducer = term[0]
    if len(terms) > 1 and reducer in ("sum", "prod"):  # a term outside would count k times
        return None, []
    out = list(names)
    body = term[lb + 1:rb]
    while body:  # directly nested reductions with the same reducer merge
        r = _reduction_at(body, 0)
        if r is None or r[2] != len(body) - 1 or body[0] != reducer:
            break
        out += r[0]
        body = body[r[1] + 1:r[2]]
    return reducer, out


def _split_depth0(tokens):
    depth, out = 0, []
    for t in tokens:
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif depth == 0:
            out.append(t)
    return out


def parse(text: str) -> OProgram:
    tokens = tokenize(text)
    arrow = tokens.index("->")
    colon = tokens.index(":", arrow)
    inputs = [t for t in tokens[:arrow] if t != ","]
    outputs = [t for t in tokens[arrow + 1:colon] if t != ","]
    body = tokens[colon + 1:]
    stmts, cur = [], []
    for t in body + [";"]:
        if t == ";":
            if cur:
                stmts.append(cur)
            cur = []
        else:
            cur.append(t)
    statements = []
    for st in stmts:
        close = _match(st, 1, "[", "]")
        s = OStatement(output=st[0], out_vars=[t for t in st[2:close] if t != ","])
        expr = st[close + 2:]
        s.top_reducer, s.top_vars = _top_level(expr)
        i = 0
        while i < len(expr):
            t = expr[i]
            red = _reduction_at(expr, i)
            if red is not None:
                s.red_vars += red[0]
                s.has_reduction = True
                i = red[1] + 1
                continue
            if t in inputs and i + 1 < len(expr) and expr[i + 1] == "[":
                end = _match(expr, i + 1, "[", "]")
                inner = expr[i + 2:end]
                idx = [" ".join(piece) for _, piece in _split_top(inner, (",",))] if inner else []
                idx = [p.replace("/", "//") for p in idx]
                # _split_top keeps ',' pieces without the separator; empty access has no index
                s.accesses.append(OAccess(t, idx))
                i = end + 1
                continue
            if t in inputs and not (i + 1 < len(expr) and expr[i + 1] in "(["):
                s.accesses.append(OAccess(t, None))
            i += 1
        statements.append(s)
    return OProgram(inputs, outputs, statements)


# ----------------------------------------------------------------------------- evaluation

def _grid(names: Sequence[str], ranges: Dict[str, Tuple[int, int]]) -> Dict[str, np.ndarray]:
    """Each variable as an int64 array along its own axis (NumPy broadcasting = product)."""
    n = len(names)
    out = {}
    for a, v in enumerate(names):
        lo, hi = ranges[v]
        shape = [1] * n
        shape[a] = max(hi - lo, 0)
        out[v] = np.arange(lo, hi, dtype=np.int64).reshape(shape)
    return out


def eval_bounds(expr: str, names: Sequence[str], ranges: Dict[str, Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    """Exact (min, max) of an index expression over the box; None when the box is empty."""
    used = [v for v in names if re.search(rf"\b{re.escape(v)}\b", expr)]
    if any(ranges[v][1] <= ranges[v][0] for v in used):
        return None
    grid = _grid(used, ranges)
    value = np.asarray(eval(expr, {"__builtins__": {}}, dict(grid)), dtype=np.int64)  # noqa: S307
    return int(value.min()), int(value.max())


def _uses(expr: Optional[str], var: str) -> bool:
    return expr is not None and expr != ":" and re.search(rf"\b{re.escape(var)}\b", expr) is not None


def _divided(expr: str, var: str) -> bool:
    """Whether `var` occurs inside a floor division of the index (docs/tdl.md: the extent rule
    takes r with coefficient 1 outside any division, as in `G * (c / G) + r`)."""
    import ast

    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv)
               and any(isinstance(m, ast.Name) and m.id == var for m in ast.walk(n))
               for n in ast.walk(ast.parse(expr, mode="eval")))


def extents(prog: OProgram, st: OStatement, in_shapes, out_shape) -> Dict[str, int]:
    """Variable extents: output shape; a reduction var from the dim it indexes alone, else
    dim minus the span of the rest of an index where it has coefficient 1."""
    ext = {v: out_shape[d] for d, v in enumerate(st.out_vars)}
    shape_of = dict(zip(prog.inputs, in_shapes))
    for r in st.red_vars:
        for a in st.accesses:
            for d, e in enumerate(a.indices or []):
                if e.strip() == r:
                    ext.setdefault(r, shape_of[a.name][d])
    for _ in range(len(st.red_vars)):
        for r in st.red_vars:
            if r in ext:
                continue
            for a in st.accesses:
                for d, e in enumerate(a.indices or []):
                    if r in ext or not _uses(e, r) or _divided(e, r):
                        continue
                    others = [v for v in st.out_vars + st.red_vars if v != r and _uses(e, v)]
                    if any(v not in ext for v in others):
                        continue
                    env0 = {v: 0 for v in others}
                    slope = eval(e, {}, {**env0, r: 1}) - eval(e, {}, {**env0, r: 0})  # noqa: S307
                    if slope != 1:
                        continue
                    b = eval_bounds(e, others + [r], {**{v: (0, ext[v]) for v in others}, r: (0, 1)})
                    ext[r] = shape_of[a.name][d] - (b[1] - b[0])
    return ext


def strategies(text: str, in_shapes, out_shapes, k: int) -> Dict[str, dict]:
    """What analyze_tdl must return, by brute force: var -> {"reduction", "inputs", "outputs"}
    in the Python binding's format (per_worker as (lo, hi) half-open)."""
    prog = parse(text)
    out_shape_of = dict(zip(prog.outputs, out_shapes))
    shape_of = dict(zip(prog.inputs, in_shapes))
    ext = [extents(prog, st, in_shapes, out_shape_of[st.output]) for st in prog.statements]
    candidates = []
    for st in prog.statements:
        candidates += [v for v in st.out_vars if v not in candidates]
    for st in prog.statements:
        candidates += [v for v in st.top_vars if v not in candidates]
    result = {}
    for v in candidates:
        if any(v not in st.out_vars and v not in st.top_vars for st in prog.statements):
            continue
        sizes = {e[v] for e in ext}
        if len(sizes) != 1:
            continue
        extent = sizes.pop()
        if extent <= 0 or extent % k:
            continue
        inputs, ok = [], True
        for name in prog.inputs:
            accs = [(si, a) for si, st in enumerate(prog.statements) for a in st.accesses if a.name == name]
            read = bool(accs)
            dims = {d for _, a in accs for d, e in enumerate(a.indices or []) if _uses(e, v)}
            if len(dims) > 1:
                ok = False
                break
            if not dims:
                inputs.append({"replicate": True, "read": read, "dim": -1, "per_worker": []})
                continue
            dim = dims.pop()
            dim_ext = shape_of[name][dim]
            per = []
            for j in range(k):
                hull = None
                for si, a in accs:
                    st = prog.statements[si]
                    ranges = {u: (0, ext[si][u]) for u in st.out_vars + st.red_vars}
                    ranges[v] = (extent // k * j, extent // k * (j + 1))
                    e = None if a.indices is None else a.indices[dim]
                    if e is None or e.strip() == ":":
                        b = (0, dim_ext - 1)
                    else:
                        b = eval_bounds(e, st.out_vars + st.red_vars, ranges)
                        if b is None:
                            continue
                        b = (max(b[0], 0), min(b[1], dim_ext - 1))
                    if b[0] > b[1]:
                        continue
                    hull = b if hull is None else (min(hull[0], b[0]), max(hull[1], b[1]))
                per.append((0, 0) if hull is None else (hull[0], hull[1] + 1))
            inputs.append({"replicate": False, "read": True, "dim": dim, "per_worker": per})
        if not ok:
            continue
        outputs = [None] * len(prog.outputs)
        reduction = False
        for st in prog.statements:
            o = prog.outputs.index(st.output)
            if v in st.out_vars:
                outputs[o] = {"partial": False, "reducer": None, "dim": st.out_vars.index(v)}
            else:
                outputs[o] = {"partial": True, "reducer": st.top_reducer, "dim": -1}
                reduction = True
        result[v] = {"var": v, "reduction": reduction, "inputs": inputs, "outputs": outputs}
    return result


def elementwise(text: str, in_shapes, out_shapes) -> bool:
    """No reduction; every access reads the output's own variables (a suffix for broadcast
    inputs, index 0 on size-1 dims); all outputs of one shape."""
    prog = parse(text)
    if any(tuple(s) != tuple(out_shapes[0]) for s in out_shapes):
        return False
    shape_of = dict(zip(prog.inputs, in_shapes))
    for st in prog.statements:
        if st.has_reduction:
            return False
        out_shape = out_shapes[prog.outputs.index(st.output)]
        for a in st.accesses:
            if a.indices is None or len(a.indices) > len(st.out_vars):
                return False
            off = len(st.out_vars) - len(a.indices)
            for d, e in enumerate(a.indices):
                e = e.replace(" ", "")
                if e == "0":
                    if shape_of[a.name][d] != 1:
                        return False
                elif e != st.out_vars[off + d] or shape_of[a.name][d] != out_shape[off + d]:
                    return False
    return True
