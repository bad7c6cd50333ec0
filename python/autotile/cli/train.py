"""``autotile train MODEL --data digits``: train a classifier on a data set, loss and accuracy
per epoch, optionally a plot and the trained parameters."""
from __future__ import annotations

import sys

from .args import (HelpFormatter, add_dtype_arg, add_init_args, add_quiet_arg, add_shape_arg, model_help, plot_arg,
                   positive_int, seed_arg)


def cmd_train(args) -> int:
    """Train and print the last epoch's test accuracy."""
    from ..training import train

    model = args.model
    if args.shape:  # an ONNX file's inputs sized here; train takes the Symbol
        from .models import load_model

        model = load_model(args)
    else:
        from .models import check_model_name

        check_model_name(model)
    hist = train(model, data=args.data, devices=args.devices, epochs=args.epochs, batch=args.batch,
                 lr=args.lr, init=args.init, seed=args.seed, plot=args.plot, save=args.save, dtype=args.dtype,
                 loss=args.loss, label=args.label, progress=False if args.quiet else None)
    last = hist.epochs[-1]
    print(f"{hist.model} on {hist.data}: test accuracy {100 * last.test_accuracy:.1f}% after {last.epoch} "
          f"epochs on {hist.devices} device(s)", flush=True)
    for what, path in (("plot", args.plot), ("parameters", args.save)):
        if path:
            print(f"{what} written to {path}", file=sys.stderr)
    return 0


def _train_usage(args) -> None:
    """Checks of `autotile train`'s options together (argparse checks each alone)."""
    from ..training import check_output_paths

    check_output_paths(args.plot, args.save, ("--plot", "--save"))


def add_parser(sub) -> None:
    """The ``train`` subcommand."""
    from .run import add_loss_args

    sp = sub.add_parser("train", help="train a classifier on a data set; loss and accuracy per epoch",
                        formatter_class=HelpFormatter,
                        description="Train MODEL, a classifier, on a data set with SGD (the gradient of the mean "
                                    "loss over the batch) and print loss and accuracy per epoch.")
    sp.add_argument("model", metavar="MODEL",
                    help="on --data digits: mlp, cnn (the zoo's mlp-digits, cnn-digits); else " + model_help())
    sp.add_argument("--data", default="digits", choices=["digits", "synthetic"],
                    help="digits: scikit-learn's 8x8 digits (needs scikit-learn); synthetic: Gaussian clusters")
    sp.add_argument("--devices", type=positive_int, default=1, help="devices to partition each step across")
    sp.add_argument("--epochs", type=positive_int, default=5, help="passes over the training set")
    sp.add_argument("--batch", type=positive_int, default=32, help="samples per step")
    sp.add_argument("--seed", type=seed_arg, default=0, help="seed of the weights and the shuffling")
    add_dtype_arg(sp)
    add_loss_args(sp)
    add_init_args(sp)
    add_shape_arg(sp)
    sp.add_argument("--plot", default=None, type=plot_arg, metavar="PNG", help="write loss and accuracy per epoch to this PNG")
    sp.add_argument("--save", default=None, metavar="FILE.params", help="write the trained parameters (MXNet .params)")
    add_quiet_arg(sp)
    sp.set_defaults(fn=cmd_train, usage=_train_usage, parser=sp)
