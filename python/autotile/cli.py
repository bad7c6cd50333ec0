"""The ``autotile`` command line: plan, run and bench models.

    autotile plan MODEL --devices 8 --batch 256 [--algorithm tofu] [--json F] [--draw F.png]
    autotile run  MODEL --devices 8 --batch 32 [--ctx cpu] [--steps N] [--init xavier] [--lr 0.1] [--inference]
    mpirun -np 8 autotile run MODEL --devices 8 --ctx mpi [--steps N] [--checkpoint DIR]
    autotile info MODEL [--batch B] [--seq S]
    autotile train MODEL --data digits|synthetic --devices K --epochs N [--lr] [--plot F.png] [--save F.params]
    autotile bench speedup|mlp|algorithms|search|memory|calibrate [--quick] [--profile NAME]

Results go to stdout, progress and errors to stderr; exit status 0 on success, 1 on a
model/plan error (message on stderr), 2 on bad usage (argparse).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from typing import List, Optional

from .errors import Error


class Progress:
    """Shows '<label> ... Ns' on stderr when a step takes more than a second (TTY only)."""

    def __init__(self, label: str, enabled: Optional[bool] = None):
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._done = threading.Event()
        self._thread = None

    def __enter__(self):
        if self.enabled:
            self._start = time.perf_counter()
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def _tick(self):
        spinner = "|/-\\"
        i = 0
        if self._done.wait(1.0):
            return
        while not self._done.wait(0.2):
            elapsed = time.perf_counter() - self._start
            sys.stderr.write(f"\r{spinner[i % 4]} {self.label} {elapsed:.1f}s")
            sys.stderr.flush()
            i += 1

    def __exit__(self, *exc):
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
        return False


def _fmt_bytes(n: float) -> str:
    from .planner.plan import _fmt_bytes as fmt

    return fmt(n)


def model_summary(sym, batch: Optional[int]) -> str:
    """Nodes, inputs and parameter sizes of a model."""
    import numpy as np

    from .symbol.infer import infer_entry_shapes

    known = infer_entry_shapes(sym, {})
    nodes = sym.topo_nodes()
    ops = [n for n in nodes if not n.is_variable]
    variables = {n.name: known.get((id(n), 0)) for n in nodes if n.is_variable}
    from .autodiff.graph import default_data_names

    data_names = set(default_data_names(sym))
    data = [n for n in variables if n in data_names or n.startswith("data")]  # in the model's order
    params = {n: s for n, s in variables.items() if n not in data and s is not None}
    count = sum(int(np.prod(s)) for s in params.values())
    kinds = {}
    for n in ops:
        kinds[n.op] = kinds.get(n.op, 0) + 1
    lines = [f"model: {sym.name or 'symbol'}   ops: {len(ops)}   parameters: {count:,} "
             f"({_fmt_bytes(4 * count)} as float32)",
             "inputs: " + ", ".join(f"{n}{tuple(variables[n]) if variables[n] else ''}" for n in data),
             "ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))]
    return "\n".join(lines)


def load_model(args):
    """The Symbol of ``args.model`` sized by --batch and, for zoo models with a sequence length
    (transformers), --seq; Error when --seq is given to a model that takes none."""
    from .model_input import as_symbol

    seq = getattr(args, "seq", None)
    if seq is None:
        return as_symbol(args.model, batch=args.batch)
    import os

    from . import models

    if os.path.exists(args.model) or args.model.endswith((".onnx", ".json")):
        raise Error(f"--seq sizes zoo models; '{args.model}' is a file, whose shapes are its own")
    try:
        return models.get(args.model, batch=args.batch, seq=seq)
    except TypeError as e:
        if "seq" not in str(e):
            raise
        raise Error(f"model '{args.model}' takes no sequence length (--seq is for sequence models such as "
                    f"gpt2-small, bert-base, llama-7b)") from None


def cmd_info(args) -> int:
    sym = load_model(args)
    print(model_summary(sym, args.batch))
    return 0


def _positive_int(text):
    """argparse type of counts (--devices, --batch, --steps, --epochs, --seq): a bad one is a
    usage error (exit 2), not a model error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_float(text):
    """--lr: a positive finite number (a usage error, exit 2, like any bad flag value)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return value


def _seed_arg(text):
    """--seed: a non-negative integer (NumPy's generators take no negative seed; exit 2)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _mesh_arg(text):
    from .planner.layout_rules import check_mesh

    try:
        return check_mesh(text)
    except Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _memory_arg(text):
    from .planner.memory_fit import parse_bytes

    try:
        return parse_bytes(text, "--memory")
    except Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _plot_arg(text):
    """--plot: a file whose format matplotlib writes (exit 2 before training otherwise)."""
    from .training import check_plot_path

    try:
        return check_plot_path(text, "the plot")
    except Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _write_output(option: str, path: str, text: str) -> None:
    """Write `text` to the file `path` of `option`; an Error names both (a full disk, a
    directory that does not exist), not only the errno's words."""
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise Error(f"{option}: cannot write '{path}': {e.strerror or e}") from None


def _layout_arg(text):
    from .planner.layout_rules import parse_rule

    try:
        return parse_rule(text)
    except Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_plan(args) -> int:
    from . import planner
    sym = load_model(args)
    print(model_summary(sym, args.batch))
    print()
    bandwidths = args.bandwidths
    layout = dict(args.layout) if args.layout else None
    if args.layout_file:  # what --mesh-tf wrote; --mesh and --layout rules given here come first
        from .planner.layout_rules import read_rules

        file_mesh, file_rules = read_rules(args.layout_file)
        args.mesh = args.mesh or file_mesh
        given = layout or {}  # first: the first rule matching a tensor decides it
        layout = {**given, **{k: v for k, v in file_rules.items() if k not in given}}
    if args.mesh is not None:
        args.devices = None  # the mesh's size
    with Progress(f"planning ({args.algorithm})"):
        result = planner.plan(sym, devices=args.devices, batch=args.batch, algorithm=args.algorithm,
                              bandwidths=bandwidths, replicate_fallback=args.replicate_fallback,
                              mesh=args.mesh, layout=layout, device_memory=args.memory)
    args.devices = result.devices
    result.model = args.model
    print(result.summary())
    for fmt, path in (("dtensor", args.dtensor), ("jax", args.jax), ("mesh_tf", args.mesh_tf)):
        if path:
            _write_output(f"--{fmt.replace('_', '-')}", path, json.dumps(getattr(result, f"to_{fmt}")(), indent=1))
            print(f"{fmt} layout written to {path}", file=sys.stderr)
    if args.compare:
        print()
        print(compare_table(sym, args, result))
    if args.json:
        _write_output("--json", args.json, result.to_json())
        print(f"\nplan written to {args.json}", file=sys.stderr)
    if args.draw:
        try:
            result.draw(args.draw)
        except OSError as e:
            raise Error(f"--draw: cannot write '{args.draw}': {e.strerror or e}") from None
        print(f"picture written to {args.draw}", file=sys.stderr)
    return 0


def compare_table(sym, args, best) -> str:
    """One row per algorithm: communication, ratio to the chosen plan, search time."""
    from . import planner

    rows = []
    for algo in planner.ALGORITHMS:
        if algo == best.algorithm:
            rows.append((algo, best.comm_bytes, best.search_seconds, ""))
            continue
        if algo in ("ilp", "bruteforce"):  # exact checkers: minutes on large graphs, asked for by name
            rows.append((algo, None, None, f"exact per cut; run with --algorithm {algo}"))
            continue
        try:
            with Progress(f"planning ({algo})"):
                p = planner.plan(sym, devices=args.devices, batch=args.batch, algorithm=algo,
                                 replicate_fallback=args.replicate_fallback)
            rows.append((algo, p.comm_bytes, p.search_seconds, ""))
        except Error as e:
            rows.append((algo, None, None, str(e).split("\n")[0][:70]))
    lines = [f"{'algorithm':<11} {'comm/step':>12} {'vs ' + best.algorithm:>9} {'search':>10}"]
    for algo, comm, secs, note in rows:
        if comm is None:
            lines.append(f"{algo:<11} {'-':>12} {'-':>9} {'-':>10}  {note}")
        else:
            ratio = comm / best.comm_bytes if best.comm_bytes > 0 else float("inf") if comm > 0 else 1.0
            lines.append(f"{algo:<11} {_fmt_bytes(comm):>12} {ratio:>8.2f}x {secs * 1000:>8.1f}ms")
    return "\n".join(lines)


def cmd_run(args) -> int:
    import numpy as np

    from . import backend
    from .training import check_finite_loss, sgd_args, softmax_loss

    sym = load_model(args)
    if not args.inference:  # a model without a loss (an exported classifier) gets one, and we say which
        from .autodiff.objective import has_loss, training_objective

        if not has_loss(sym):
            sym, objective = training_objective(sym)
            print(f"objective: {objective}")
    values = synthetic_inputs(sym, args.seed, init=args.init)
    values.update({k: np.asarray(v) for k, v in sym.params.items() if k in values})  # the model's own weights
    from .autodiff.graph import default_data_names

    data_names = set(default_data_names(sym))
    params = {k: v for k, v in values.items() if k not in data_names}
    inputs = {k: v for k, v in values.items() if k not in params}
    del values  # the first step's params are params'; each update replaces them (one copy, issue 13)
    if args.dtype != "float32":  # mixed precision: the casts go in once, planned and run as they are
        from .backend.run import mixed_precision_symbol

        sym = mixed_precision_symbol(sym, args.dtype, args.ctx, {**params, **inputs})
    if args.inference and args.ctx == "mpi":
        raise Error("--inference runs on --ctx cpu or gpu (under mpirun, call at.backend.run(train=False))")
    batch = next((int(np.shape(v)[0]) for v in inputs.values() if np.ndim(v) > 0), 1)
    opt_args = sgd_args(args.lr, batch) if not args.inference else None
    if args.ctx == "mpi":  # under mpirun -np K: one device per rank, params stay sharded across steps
        from .backend.mpi_runtime import run_cli

        return run_cli(sym, inputs, params, devices=args.devices, steps=args.steps, seed=args.seed,
                       checkpoint=args.checkpoint, timeout=args.timeout, optimizer_args=opt_args)
    plan = None
    if args.devices > 1:  # plan once, run every step with it
        from . import planner

        with Progress("planning"):
            plan = planner.plan(sym, devices=args.devices, shapes={k: v.shape for k, v in inputs.items()},
                                train=not args.inference)
        print(f"plan: {args.devices} devices, {plan.comm_bytes / 1e6:.1f} MB moved per step "
              f"(search {plan.search_seconds * 1000:.1f} ms)")
    head = sym.entries[0][0]
    label = next((k for k in inputs if k.endswith("label")), None)
    states = {}
    for step in range(args.steps):
        t0 = time.perf_counter()
        res = backend.run(sym, devices=args.devices, inputs=inputs, params=params, train=not args.inference,
                          ctx=args.ctx, optimizer_args=opt_args, seed=args.seed + step, states=states,
                          **({"plan": plan} if plan is not None else {}))
        params.update(res.params)
        params.update(res.aux)  # BatchNorm statistics and optimizer state carry to the next step
        states = res.states
        out = res.outputs[0]
        if head.op == "SoftmaxOutput" and label is not None:
            loss, what = softmax_loss(out if out.ndim > 1 else out.reshape(1, -1), inputs[label])[0], "loss"
        else:
            loss, what = float(np.mean(out)), "output mean"
        print(f"step {step + 1}/{args.steps}: {what} {loss:.6f}  time {time.perf_counter() - t0:.3f}s")
        del res, out  # its gradients would otherwise stay resident through the next step
        if not args.inference:  # stop as `autotile train` does: later steps would only compute NaN
            check_finite_loss(loss, f"step {step + 1}", args.lr)
    return 0


def cmd_train(args) -> int:
    from .training import train

    hist = train(args.model, data=args.data, devices=args.devices, epochs=args.epochs, batch=args.batch,
                 lr=args.lr, init=args.init, seed=args.seed, plot=args.plot, save=args.save, dtype=args.dtype)
    last = hist.epochs[-1]
    print(f"{hist.model} on {hist.data}: test accuracy {100 * last.test_accuracy:.1f}% after {last.epoch} "
          f"epochs on {hist.devices} device(s)", flush=True)
    for what, path in (("plot", args.plot), ("parameters", args.save)):
        if path:
            print(f"{what} written to {path}", file=sys.stderr)
    return 0


#: ops that pass their first input's values on unchanged (moved, reshaped, cast): an index
#: reaches an Embedding or a take through them (``input_ids -> Reshape -> Gather``)
_VALUE_PRESERVING = {"Reshape", "reshape", "expand_dims", "squeeze", "Flatten", "flatten", "transpose", "SwapAxis",
                     "slice_axis", "slice", "broadcast_to", "tile", "Cast", "cast", "_copy", "identity"}


def _index_ranges(sym, known) -> dict:
    """Variable name -> how many rows the ids it holds index: an Embedding's input_dim, the
    size of the gathered axis of a take or gather_elements (the smallest where several use it)."""
    ranges = {}

    def source(entry):
        node = entry[0]
        while not node.is_variable and node.op in _VALUE_PRESERVING and node.inputs:
            node = node.inputs[0][0]
        return node.name if node.is_variable else None

    for n in sym.topo_nodes():
        uses = []
        if n.op == "Embedding" and n.inputs:
            uses.append((n.inputs[0], int(n.parsed_attrs()["input_dim"])))
        elif n.op in ("take", "gather_elements") and len(n.inputs) > 1:
            table = known.get((id(n.inputs[0][0]), n.inputs[0][1]))
            axis = int(n.parsed_attrs().get("axis", 0))
            if table is not None and -len(table) <= axis < len(table):
                uses.append((n.inputs[1], int(table[axis])))
        for entry, size in uses:
            name = source(entry)
            if name is not None and size > 0:
                ranges[name] = min(size, ranges.get(name, size))
    return ranges


def synthetic_inputs(sym, seed: int, init: str = "xavier"):
    """Random inputs for a model, each of its kind: labels are class ids below the output's
    width; ids that index a table (an Embedding's, a take's: ``input_ids``, ``token_type_ids``)
    are drawn below its size; other integer inputs (``attention_mask``) are ones and boolean
    ones all true, so nothing is masked out; other data are standard normal. Inputs keep the
    dtype the model declares. Parameters and auxiliary states start as MXNet's initializers set
    them (`init`: xavier, normal or uniform for weights; biases and BatchNorm beta/mean 0,
    gamma/variance 1; see :mod:`autotile.training_init`)."""
    import numpy as np

    from .autodiff.graph import default_data_names
    from .dtype_flags import dtype_name
    from .symbol.infer import infer_entry_shapes
    from .training_init import init_value

    known = infer_entry_shapes(sym, {})
    rng = np.random.default_rng(seed)
    param_rng = np.random.default_rng([seed, 1])  # the data do not depend on the initializer
    data_names = set(default_data_names(sym))
    int_range = _index_ranges(sym, known)
    classes = max(2, known.get((id(sym.entries[0][0]), 0), (0, 10))[-1])
    values = {}
    for n in sym.topo_nodes():
        if not n.is_variable:
            continue
        shape = known.get((id(n), 0))
        if shape is None:
            raise Error(f"cannot run: the shape of input '{n.name}' is unknown")
        dtype = np.dtype(dtype_name(n.attrs["__dtype__"])) if "__dtype__" in n.attrs else np.dtype(np.float32)
        if n.name.endswith("label"):
            values[n.name] = rng.integers(0, classes, size=shape).astype(np.float32)
        elif n.name in int_range:
            values[n.name] = rng.integers(0, int_range[n.name], size=shape).astype(dtype)
        elif n.name in data_names and dtype.kind in "iub":
            values[n.name] = np.ones(shape, dtype)  # masks keep every position
        elif n.name in data_names:
            values[n.name] = rng.standard_normal(shape).astype(dtype)
        else:
            values[n.name] = init_value(n.name, shape, param_rng, init)
    return values


def _bandwidths_arg(text: str) -> List[float]:
    """--bandwidths: comma-separated numbers (a bad list is a usage error, exit 2)."""
    try:
        return [float(b) for b in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, e.g. 12.5e9,300e9; got {text!r}") from None


def add_init_args(sp) -> None:
    """--init and --lr (``autotile run`` and ``autotile train``)."""
    from .training_init import INITIALIZERS

    sp.add_argument("--init", default="xavier", choices=INITIALIZERS,
                    help="weight initializer (MXNet's: xavier = Xavier(uniform, avg, 3), normal = N(0, 0.01^2), "
                         "uniform = U(-0.07, 0.07)); biases 0, BatchNorm gamma 1")
    sp.add_argument("--lr", type=_positive_float, default=0.1, help="SGD learning rate (gradients averaged over the batch)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autotile", description="Automatic tensor partitioning for DL training.")
    sub = p.add_subparsers(dest="command", required=True)

    def model_args(sp):
        sp.add_argument("model", help="zoo name (mlp, alexnet, vgg16, wresnet-152-10, rnn-10-8k), .onnx or -symbol.json")
        sp.add_argument("--batch", type=_positive_int, default=None, help="batch size")
        sp.add_argument("--seq", type=_positive_int, default=None, help="sequence length (zoo sequence models)")

    sp = sub.add_parser("info", help="print a model summary")
    model_args(sp)
    sp.set_defaults(fn=cmd_info)

    sp = sub.add_parser("plan", help="find the partition plan of a model's training step")
    model_args(sp)
    sp.add_argument("--devices", type=_positive_int, default=8)
    sp.add_argument("--algorithm", default="tofu")
    sp.add_argument("--bandwidths", default=None, type=_bandwidths_arg,
                    help="per-cut bandwidths, slowest first, e.g. 12.5e9,300e9")
    sp.add_argument("--no-compare", dest="compare", action="store_false", help="skip the table of baselines")
    sp.add_argument("--json", default=None, help="write the plan as JSON to this file")
    sp.add_argument("--draw", default=None, help="write a picture of the tiles to this PNG")
    sp.add_argument("--replicate-fallback", action="store_true", help="run ops without TDL replicated")
    sp.add_argument("--mesh", default=None, type=_mesh_arg,
                    help="named device axes instead of --devices, e.g. batch=4,model=8")
    sp.add_argument("--layout", action="append", default=None, type=_layout_arg, metavar="PATTERN:DIM=AXIS",
                    help="fix a tensor's layout (repeatable), e.g. 'fc*_weight:0=model'; the search does the rest")
    sp.add_argument("--layout-file", dest="layout_file", default=None, metavar="FILE",
                    help="fix layouts from a JSON file of rules as --mesh-tf writes (its mesh unless --mesh)")
    sp.add_argument("--memory", default=None, type=_memory_arg, metavar="SIZE",
                    help="per-device memory budget, e.g. 16GiB: the cheapest plan that fits it")
    sp.add_argument("--dtensor", default=None, metavar="FILE", help="write PyTorch DTensor placements (JSON)")
    sp.add_argument("--jax", default=None, metavar="FILE", help="write JAX PartitionSpecs (JSON)")
    sp.add_argument("--mesh-tf", dest="mesh_tf", default=None, metavar="FILE",
                    help="write layout rules reproducing the plan (JSON)")
    sp.set_defaults(fn=cmd_plan)

    sp = sub.add_parser("run", help="run training steps and print loss and timing")
    model_args(sp)
    sp.add_argument("--devices", type=_positive_int, default=1)
    sp.add_argument("--steps", type=_positive_int, default=1)
    sp.add_argument("--ctx", default="cpu", choices=["cpu", "gpu", "mpi"])
    sp.add_argument("--seed", type=_seed_arg, default=0)
    sp.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                    help="mixed precision, fp32 master weights; float16 with loss scaling (docs/mixed-precision.md)")
    sp.add_argument("--inference", action="store_true",
                    help="forward passes only (on --devices K: the forward graph planned and partitioned)")
    add_init_args(sp)
    sp.add_argument("--checkpoint", default=None, help="--ctx mpi: directory to resume from and save to every step")
    sp.add_argument("--timeout", type=_positive_float, default=None, help="--ctx mpi: seconds to wait for another rank")
    sp.set_defaults(fn=cmd_run)

    sp = sub.add_parser("train", help="train a classifier on a data set; loss and accuracy per epoch")
    sp.add_argument("model", help="zoo name (on --data digits: mlp, cnn = mlp-digits, cnn-digits) or model file")
    sp.add_argument("--data", default="digits", choices=["digits", "synthetic"],
                    help="digits: scikit-learn's 8x8 digits (needs scikit-learn); synthetic: Gaussian clusters")
    sp.add_argument("--devices", type=_positive_int, default=1)
    sp.add_argument("--epochs", type=_positive_int, default=5)
    sp.add_argument("--batch", type=_positive_int, default=32)
    sp.add_argument("--seed", type=_seed_arg, default=0)
    sp.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                    help="mixed precision, fp32 master weights; float16 with loss scaling (docs/mixed-precision.md)")
    add_init_args(sp)
    sp.add_argument("--plot", default=None, type=_plot_arg, metavar="PNG", help="write loss and accuracy per epoch to this PNG")
    sp.add_argument("--save", default=None, metavar="FILE.params", help="write the trained parameters (MXNet .params)")
    sp.set_defaults(fn=cmd_train, usage=_train_usage, parser=sp)

    from .bench_cli import add_parser as add_bench_parser

    add_bench_parser(sub)
    return p


def _train_usage(args) -> None:
    """Checks of `autotile train`'s options together (argparse checks each alone)."""
    from .training import check_output_paths

    check_output_paths(args.plot, args.save, ("--plot", "--save"))


def quiet_closed_stdout() -> None:
    """After a BrokenPipeError on stdout (``autotile ... | head -1``): point stdout at
    /dev/null, so that the interpreter's last flush at exit does not fail again and print."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced by an object without a file
        pass


#: what a process out of memory is told (NumPy's "Unable to allocate ..." says only the array)
OUT_OF_MEMORY = ("the model at this size does not fit this process's memory: plan it on more --devices, with a "
                 "smaller --batch, or within a per-device budget (autotile plan --memory)")


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "usage", None) is not None:
            try:
                args.usage(args)
            except Error as e:  # a usage error: exit 2 with the command's usage line
                args.parser.error(str(e))
        return args.fn(args)
    except Error as e:
        print(f"autotile: error: {e}", file=sys.stderr)
        return 1
    except MemoryError as e:
        print(f"autotile: error: out of memory ({e or 'MemoryError'}): {OUT_OF_MEMORY}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader has gone (| head): exit quietly, as other Unix tools do
        quiet_closed_stdout()
        return 0
    except OSError as e:  # a file that cannot be read or written (--json, --draw, model paths)
        print(f"autotile: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
