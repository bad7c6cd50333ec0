"""The ``autotile`` command line: plan, run and bench models.

    autotile plan MODEL --devices 8 --batch 256 [--algorithm tofu] [--json F] [--draw F.png]
    autotile run  MODEL --devices 8 --batch 32 [--ctx cpu] [--steps N] [--init xavier] [--lr 0.1] [--inference]
    mpirun -np 8 autotile run MODEL --devices 8 --ctx mpi [--steps N] [--checkpoint DIR]
    autotile info MODEL [--batch B] [--seq S]
    autotile train MODEL --data digits|synthetic --devices K --epochs N [--lr] [--plot F.png] [--save F.params]
    autotile bench speedup|mlp|algorithms|search|memory|calibrate [--quick] [--profile NAME]

Results go to stdout, progress and errors to stderr; exit status 0 on success, 1 on a
model/plan error (message on stderr), 2 on bad usage (argparse).

One module per subcommand (:mod:`.info`, :mod:`.plan`, :mod:`.run`, :mod:`.train`; bench in
:mod:`autotile.bench_cli`), the arguments they share in :mod:`.args`.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..errors import Error
from .args import Progress  # noqa: F401  (public: autotile.cli.Progress)
from .info import model_summary  # noqa: F401
from .models import load_model  # noqa: F401
from .inputs import synthetic_inputs  # noqa: F401  (autotile.cli.synthetic_inputs, the one generator)
from .plan import compare_table  # noqa: F401


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    from ..bench_cli import add_parser as add_bench_parser
    from . import info, plan, run, train

    from .. import __version__
    from .args import HelpFormatter

    p = argparse.ArgumentParser(prog="autotile", formatter_class=HelpFormatter,
                                description="Automatic tensor partitioning for DL training: plan how to tile a "
                                            "model's training step across devices, run it, train, benchmark.")
    p.add_argument("--version", action="version", version=f"autotile {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           help="info, plan, run, train or bench (autotile COMMAND --help for its options)")
    for module in (info, plan, run, train):
        module.add_parser(sub)
    add_bench_parser(sub)
    return p


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
    """Run the ``autotile`` command with `argv` (default: sys.argv[1:]); returns the exit status."""
    args = build_parser().parse_args(argv)
    Progress.quiet = bool(getattr(args, "quiet", False))
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
