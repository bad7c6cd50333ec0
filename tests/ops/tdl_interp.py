"""A small, independent reading of TDL text (docs/tdl.md) used as a test oracle for op
descriptions: a parser that enforces the grammar and the arity rules, an evaluator for
exact descriptions (no ':' and no opaque calls), and a dependency check that the op's
kernel reads nothing outside the regions a description claims (for any description).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

REDUCERS = {"sum", "max", "min", "prod"}
_TOKEN = re.compile(r"\s*(?:(->|==|!=|<=|>=)|([A-Za-z_][A-Za-z_0-9]*)|(\d+)|(.))")


_COMPARISONS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
                "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


class TdlSyntaxError(Exception):
    pass


class NotEvaluable(Exception):
    pass


@dataclass
class Num:
    value: int


@dataclass
class Var:
    name: str


@dataclass
class Colon:
    pass


@dataclass
class Access:
    name: str
    index: list


@dataclass
class Call:
    fn: str
    args: list


@dataclass
class Bin:
    op: str
    lhs: object
    rhs: object


@dataclass
class Neg:
    arg: object


@dataclass
class Reduce:
    reducer: str
    vars: List[str]
    body: object


@dataclass
class Statement:
    output: str
    vars: List[str]
    expr: object


@dataclass
class Description:
    inputs: List[str]
    outputs: List[str]
    statements: List[Statement]


def tokenize(text: str) -> List[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise TdlSyntaxError(f"cannot tokenize at {text[pos:]!r}")
        out.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text):
        self.toks = tokenize(text)
        self.pos = 0
        self.text = text

    def peek(self, k=0):
        return self.toks[self.pos + k] if self.pos + k < len(self.toks) else None

    def take(self, want=None):
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise TdlSyntaxError(f"expected {want!r}, got {tok!r} at token {self.pos} in {self.text!r}")
        self.pos += 1
        return tok

    def ident(self):
        tok = self.take()
        if not re.fullmatch(r"[A-Za-z_]\w*", tok):
            raise TdlSyntaxError(f"expected a name, got {tok!r} in {self.text!r}")
        return tok

    def names(self, closer):
        out = []
        if self.peek() == closer:
            return out
        out.append(self.ident())
        while self.peek() == ",":
            self.take(",")
            out.append(self.ident())
        return out

    def description(self):
        inputs = [self.ident()]
        while self.peek() == ",":
            self.take(",")
            inputs.append(self.ident())
        self.take("->")
        outputs = [self.ident()]
        while self.peek() == ",":
            self.take(",")
            outputs.append(self.ident())
        self.take(":")
        stmts = [self.statement()]
        while self.peek() == ";":
            self.take(";")
            stmts.append(self.statement())
        if self.peek() is not None:
            raise TdlSyntaxError(f"trailing tokens {self.toks[self.pos:]} in {self.text!r}")
        return Description(inputs, outputs, stmts)

    def statement(self):
        out = self.ident()
        self.take("[")
        vs = self.names("]")
        self.take("]")
        self.take("=")
        return Statement(out, vs, self.expr())

    def expr(self):
        """A sum, or a comparison of two sums (1.0 where it holds, else 0.0; lowest precedence,
        as in the core's parser: FullyConnected's and Convolution's (k == 0) * bias)."""
        node = self.additive()
        if self.peek() in _COMPARISONS:
            op = self.take()
            node = Bin(op, node, self.additive())
        return node

    def additive(self):
        node = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = Bin(op, node, self.product())
        return node

    def product(self):
        node = self.term()
        while self.peek() in ("*", "/", "%"):
            op = self.take()
            node = Bin(op, node, self.term())
        return node

    def term(self):
        tok = self.peek()
        if tok is None:
            raise TdlSyntaxError(f"unexpected end of {self.text!r}")
        if tok == "-":
            self.take()
            return Neg(self.term())
        if tok == "(":
            self.take()
            node = self.expr()
            self.take(")")
            return node
        if tok.isdigit():
            self.take()
            return Num(int(tok))
        name = self.ident()
        if name in REDUCERS and self.peek() == "(" and self._is_reduction():
            self.take("(")
            vs = self.names(")")
            self.take(")")
            self.take("{")
            body = self.expr()
            self.take("}")
            return Reduce(name, vs, body)
        if self.peek() == "[":
            self.take("[")
            idx = [] if self.peek() == "]" else [self.index()]  # x[] reads a rank-0 input
            while idx and self.peek() == ",":
                self.take(",")
                idx.append(self.index())
            self.take("]")
            return Access(name, idx)
        if self.peek() == "(":
            self.take("(")
            args = []
            if self.peek() != ")":
                args.append(self.expr())
                while self.peek() == ",":
                    self.take(",")
                    args.append(self.expr())
            self.take(")")
            return Call(name, args)
        return Var(name)

    def _is_reduction(self):
        k = 1
        while self.peek(k) not in (")", None):
            k += 1
        return self.peek(k + 1) == "{"

    def index(self):
        if self.peek() == ":":
            self.take()
            return Colon()
        return self.expr()


def _linear(node, variables):
    """{var or 1: coef} of an affine integer expression; TdlSyntaxError if not affine."""
    if isinstance(node, Num):
        return {1: node.value}
    if isinstance(node, Var):
        if node.name not in variables:
            raise TdlSyntaxError(f"unknown index variable {node.name!r}")
        return {node.name: 1}
    if isinstance(node, Neg):
        return {k: -v for k, v in _linear(node.arg, variables).items()}
    if isinstance(node, Bin) and node.op in "+-":
        a, b = _linear(node.lhs, variables), _linear(node.rhs, variables)
        sign = 1 if node.op == "+" else -1
        for k, v in b.items():
            a[k] = a.get(k, 0) + sign * v
        return a
    if isinstance(node, Bin) and node.op == "*":
        a, b = _linear(node.lhs, variables), _linear(node.rhs, variables)
        if set(a) == {1}:
            return {k: a[1] * v for k, v in b.items()}
        if set(b) == {1}:
            return {k: b[1] * v for k, v in a.items()}
        raise TdlSyntaxError("product of two variables in an index")
    raise TdlSyntaxError(f"not an affine index: {node}")


def _check_index(node, variables):
    """An index is affine, with floor division by positive constants anywhere (nestable)."""
    if isinstance(node, Colon):
        return
    if isinstance(node, Bin) and node.op == "/":
        den = _linear(node.rhs, variables)
        if set(den) != {1} or den[1] <= 0:
            raise TdlSyntaxError("index divided by something other than a positive constant")
        _check_index(node.lhs, variables)
    elif isinstance(node, Bin) and node.op == "*":
        const = [side for side in (node.lhs, node.rhs) if _has_no_vars(side)]
        if not const:
            raise TdlSyntaxError("product of two variables in an index")
        _linear(const[0], variables)
        _check_index(node.rhs if const[0] is node.lhs else node.lhs, variables)
    elif isinstance(node, Bin) and node.op in "+-":
        _check_index(node.lhs, variables)
        _check_index(node.rhs, variables)
    elif isinstance(node, Neg):
        _check_index(node.arg, variables)
    else:
        _linear(node, variables)


def _has_no_vars(node):
    return not isinstance(node, Var) and all(_has_no_vars(c) for c in _children(node))


def parse(text: str, in_shapes: Sequence[Sequence[int]], out_shapes: Sequence[Sequence[int]]) -> Description:
    """Parses `text` and checks it against the grammar and the shapes: one statement per
    output with one variable per output dim, accesses only to header inputs with the
    input's rank, affine indices over declared variables, distinct variable names."""
    desc = _Parser(text).description()
    if len(desc.inputs) != len(in_shapes):
        raise TdlSyntaxError(f"header names {len(desc.inputs)} inputs, op has {len(in_shapes)}")
    if len(desc.outputs) != len(out_shapes):
        raise TdlSyntaxError(f"header names {len(desc.outputs)} outputs, op has {len(out_shapes)}")
    if len(set(desc.inputs + desc.outputs)) != len(desc.inputs) + len(desc.outputs):
        raise TdlSyntaxError("duplicate tensor names in the header")
    if sorted(s.output for s in desc.statements) != sorted(desc.outputs):
        raise TdlSyntaxError("need exactly one statement per output")
    ranks = dict(zip(desc.inputs, (len(s) for s in in_shapes)))
    for st in desc.statements:
        rank = len(out_shapes[desc.outputs.index(st.output)])
        if len(st.vars) != rank:
            raise TdlSyntaxError(f"{st.output} has rank {rank} but {len(st.vars)} variables")
        if len(set(st.vars)) != len(st.vars):
            raise TdlSyntaxError(f"repeated variable in {st.vars}")
        _check_expr(st.expr, set(st.vars), ranks, set(desc.inputs) | set(desc.outputs))
    return desc


def _check_expr(node, variables, ranks, tensors):
    if isinstance(node, Access):
        if node.name not in ranks:
            raise TdlSyntaxError(f"access to {node.name!r}, which is not an input")
        if len(node.index) != ranks[node.name]:
            raise TdlSyntaxError(f"{node.name} has rank {ranks[node.name]}, accessed with {len(node.index)} indices")
        for i in node.index:
            _check_index(i, variables)
    elif isinstance(node, Reduce):
        if set(node.vars) & variables or len(set(node.vars)) != len(node.vars) or set(node.vars) & tensors:
            raise TdlSyntaxError(f"reduction variables {node.vars} clash")
        _check_expr(node.body, variables | set(node.vars), ranks, tensors)
    elif isinstance(node, Bin):
        _check_expr(node.lhs, variables, ranks, tensors)
        _check_expr(node.rhs, variables, ranks, tensors)
    elif isinstance(node, Neg):
        _check_expr(node.arg, variables, ranks, tensors)
    elif isinstance(node, Call):
        for a in node.args:
            _check_expr(a, variables, ranks, tensors)
    elif isinstance(node, Var):
        if node.name not in variables:
            raise TdlSyntaxError(f"unknown variable {node.name!r}")


# ----------------------------------------------------------------------------- evaluation

def _eval_index(node, env):
    if isinstance(node, Colon):
        raise NotEvaluable(":")
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Var):
        return env[node.name]
    if isinstance(node, Neg):
        return -_eval_index(node.arg, env)
    a, b = _eval_index(node.lhs, env), _eval_index(node.rhs, env)
    return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[node.op]


def _reduction_ranges(node: Reduce, arrays) -> List[int]:
    """Extent of each reduction variable: the input dim it indexes alone, else one where it
    appears with coefficient 1 (docs/tdl.md)."""
    alone, coef1 = {}, {}

    def visit(n):
        if isinstance(n, Access):
            for d, i in enumerate(n.index):
                if isinstance(i, Var):
                    alone.setdefault(i.name, arrays[n.name].shape[d])
                elif not isinstance(i, Colon):
                    try:
                        lin = _linear(i.lhs if isinstance(i, Bin) and i.op == "/" else i, _AnyVars())
                    except TdlSyntaxError:  # nested division: the variables outside it
                        lin = _outer_coefs(i)
                    for v, c in lin.items():
                        if c == 1:
                            coef1.setdefault(v, arrays[n.name].shape[d])
        for child in _children(n):
            visit(child)

    visit(node.body)
    out = []
    for v in node.vars:
        if v in alone:
            out.append(alone[v])
        elif v in coef1:
            out.append(coef1[v])
        else:
            raise NotEvaluable(f"no range for reduction variable {v}")
    return out


def _outer_coefs(node):
    """{var: coef} of the variables of an index outside any floor division (G * (c / G) + j
    gives {j: 1}); divisions and products of non-constants count as opaque terms."""
    if isinstance(node, Var):
        return {node.name: 1}
    if isinstance(node, Neg):
        return {k: -v for k, v in _outer_coefs(node.arg).items()}
    if isinstance(node, Bin) and node.op in "+-":
        a, sign = dict(_outer_coefs(node.lhs)), 1 if node.op == "+" else -1
        for k, v in _outer_coefs(node.rhs).items():
            a[k] = a.get(k, 0) + sign * v
        return a
    if isinstance(node, Bin) and node.op == "*":
        for const, other in ((node.lhs, node.rhs), (node.rhs, node.lhs)):
            if isinstance(const, Num):
                return {k: const.value * v for k, v in _outer_coefs(other).items()}
    return {}


class _AnyVars:
    def __contains__(self, item):
        return True


def _children(n):
    if isinstance(n, Access):
        return [i for i in n.index if not isinstance(i, Colon)]
    if isinstance(n, Bin):
        return [n.lhs, n.rhs]
    if isinstance(n, Neg):
        return [n.arg]
    if isinstance(n, Call):
        return n.args
    if isinstance(n, Reduce):
        return [n.body]
    return []


def _eval(node, env, arrays, fns):
    if isinstance(node, Num):
        return float(node.value)
    if isinstance(node, Var):
        return float(env[node.name])
    if isinstance(node, Access):
        arr = arrays[node.name]
        idx = tuple(_eval_index(i, env) for i in node.index)
        if any(not 0 <= i < s for i, s in zip(idx, arr.shape)):
            return 0.0  # out-of-range reads are padding (zero)
        return float(arr[idx])
    if isinstance(node, Neg):
        return -_eval(node.arg, env, arrays, fns)
    if isinstance(node, Bin):
        a, b = _eval(node.lhs, env, arrays, fns), _eval(node.rhs, env, arrays, fns)
        # only the operator at hand is computed: a / 0 must not fail a '*' node
        if node.op in _COMPARISONS:
            return float(_COMPARISONS[node.op](a, b))
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                "%": lambda: a % b}[node.op]()
    if isinstance(node, Call):
        if node.fn not in fns:
            raise NotEvaluable(f"opaque function {node.fn}")
        return fns[node.fn](*[_eval(a, env, arrays, fns) for a in node.args])
    if isinstance(node, Reduce):
        ranges = _reduction_ranges(node, arrays)
        vals = []
        for point in itertools.product(*[range(r) for r in ranges]):
            env2 = dict(env, **dict(zip(node.vars, point)))
            vals.append(_eval(node.body, env2, arrays, fns))
        fn = {"sum": sum, "max": max, "min": min, "prod": lambda v: float(np.prod(v))}[node.reducer]
        return fn(vals)
    raise NotEvaluable(str(node))


def evaluate(desc: Description, inputs: Sequence[np.ndarray], out_shapes, fns: Optional[Dict[str, Callable]] = None):
    """Values of every output computed from the description by brute force."""
    arrays = dict(zip(desc.inputs, inputs))
    outs = []
    for name, shape in zip(desc.outputs, out_shapes):
        st = next(s for s in desc.statements if s.output == name)
        out = np.zeros(shape)
        for point in np.ndindex(*shape):
            out[point] = _eval(st.expr, dict(zip(st.vars, point)), arrays, fns or {})
        outs.append(out)
    return outs


# ----------------------------------------------------------------------------- dependency regions

def read_masks(desc: Description, st: Statement, point, in_shapes) -> Dict[str, np.ndarray]:
    """Boolean mask per input of the elements the description reads for output element `point`."""
    masks = {n: np.zeros(s, dtype=bool) for n, s in zip(desc.inputs, in_shapes)}
    shapes = dict(zip(desc.inputs, in_shapes))
    fake = {n: np.zeros(s) for n, s in shapes.items()}

    def visit(node, env):
        if isinstance(node, Access):
            per_dim = []
            for d, i in enumerate(node.index):
                if isinstance(i, Colon):
                    per_dim.append(list(range(shapes[node.name][d])))
                else:
                    v = _eval_index(i, env)
                    per_dim.append([v] if 0 <= v < shapes[node.name][d] else [])
            for p in itertools.product(*per_dim):
                masks[node.name][p] = True
            for i in node.index:
                if not isinstance(i, Colon):
                    visit(i, env)
        elif isinstance(node, Reduce):
            ranges = _reduction_ranges(node, fake)
            for vals in itertools.product(*[range(r) for r in ranges]):
                visit(node.body, dict(env, **dict(zip(node.vars, vals))))
        else:
            for c in _children(node):
                visit(c, env)

    visit(st.expr, dict(zip(st.vars, point)))
    # header inputs no statement accesses are read in full (docs/tdl.md)
    accessed = set()

    def names(node):
        if isinstance(node, Access):
            accessed.add(node.name)
        for c in _children(node):
            names(c)

    for s in desc.statements:
        names(s.expr)
    for n in desc.inputs:
        if n not in accessed:
            masks[n][...] = True
    return masks


def check_reads(desc: Description, kernel: Callable, inputs: Sequence[np.ndarray], out_shapes,
                perturb: Optional[Dict[str, Callable]] = None, samples: int = 40, seed: int = 0):
    """Asserts the kernel's output elements depend only on the regions the description reads:
    re-randomizing every input element outside the region leaves the element unchanged."""
    rng = np.random.default_rng(seed)
    base = kernel(list(inputs))
    perturb = perturb or {}
    for o, (name, shape) in enumerate(zip(desc.outputs, out_shapes)):
        st = next(s for s in desc.statements if s.output == name)
        points = list(np.ndindex(*shape))
        if len(points) > samples:
            points = [points[i] for i in rng.choice(len(points), samples, replace=False)]
        for point in points:
            masks = read_masks(desc, st, point, [x.shape for x in inputs])
            changed = []
            for n, x in zip(desc.inputs, inputs):
                new = perturb[n](rng, x.shape) if n in perturb else rng.standard_normal(x.shape) * 10 + 3
                changed.append(np.where(masks[n], x, new).astype(x.dtype))
            got = kernel(changed)[o][point]
            assert np.allclose(got, base[o][point]), (
                f"{name}{list(point)} changed when inputs outside the described regions changed: {desc}")


# ----------------------------------------------------------------------------- one op

def check_op_tdl(op_name: str, inputs: Sequence[np.ndarray], attrs=None, exact: bool = False,
                 fns: Optional[Dict[str, Callable]] = None, perturb=None, samples: int = 40) -> str:
    """Checks the registered op's TDL description on concrete inputs: it parses and fits
    the shapes; its reads cover everything the kernel reads; and, when `exact`, evaluating
    it by brute force gives the kernel's outputs. Returns the text."""
    import autotile as at
    from autotile.ops.registry import KernelContext, format_value

    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {k: format_value(v) for k, v in (attrs or {}).items()}, "op")
    in_shapes, out_shapes = op.infer_shape(parsed, [tuple(x.shape) for x in inputs])[:2]
    text = op.tdl(parsed, in_shapes, out_shapes)
    desc = parse(text, in_shapes, out_shapes)

    def kernel(xs):
        return op.forward(parsed, xs, KernelContext(is_train=True))

    if exact:
        got = evaluate(desc, inputs, out_shapes, fns)
        for g, want in zip(got, kernel(list(inputs))):
            np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-10, err_msg=f"TDL of {op_name}: {text}")
    check_reads(desc, kernel, inputs, out_shapes, perturb, samples)
    return text
