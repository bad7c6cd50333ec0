"""Data sets for ``autotile train``: scikit-learn's bundled digits and a synthetic one.

``digits``: the 1,797 8x8 grey images of ``sklearn.datasets.load_digits`` (shipped with
scikit-learn, no download), split into train and test sets stratified by class, pixels
standardised with the training set's mean and standard deviation. ``synthetic``: Gaussian
clusters, one per class around a random centre, in whatever input shape the model takes
(learnable, so the loss falls, unlike labels drawn at random).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import Error, install_hint

#: data set names ``autotile train --data`` accepts
DATASETS = ("digits", "synthetic")


@dataclass
class Dataset:
    """Train and test arrays: x float32 shaped (n, *sample_shape), y float32 class ids."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int


def load_digits_split(test_fraction: float = 0.25, seed: int = 0):
    """(x_train, y_train, x_test, y_test) of scikit-learn's digits, x as (n, 64) float32 in 0..16."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        raise Error("--data digits needs scikit-learn, which ships the digits data set: "
                    f"{install_hint('train')}") from None
    digits = load_digits()
    x, y = digits.data.astype(np.float32), digits.target.astype(np.float32)
    return train_test_split(x, y, test_size=test_fraction, random_state=seed, stratify=y)


def digits(sample_shape: Sequence[int], classes: int, test_fraction: float = 0.25, seed: int = 0) -> Dataset:
    """The digits split, each image reshaped to `sample_shape` (64 values: (64,), (1, 8, 8), (8, 8))."""
    sample_shape = tuple(int(d) for d in sample_shape)
    if int(np.prod(sample_shape)) != 64:
        raise Error(f"--data digits has 8x8 images (64 values per sample); the model's data input takes "
                    f"{sample_shape} per sample (use mlp-digits or cnn-digits)")
    if classes < 10:
        raise Error(f"--data digits has 10 classes; the model's output has {classes}")
    x_train, x_test, y_train, y_test = load_digits_split(test_fraction, seed)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std[std == 0] = 1.0  # border pixels that are always 0

    def prep(x):
        return ((x - mean) / std).astype(np.float32).reshape((-1, *sample_shape))

    return Dataset("digits", prep(x_train), y_train, prep(x_test), y_test, 10)


def synthetic(sample_shape: Sequence[int], classes: int, train_size: int, test_size: int, seed: int = 0) -> Dataset:
    """Gaussian clusters: class c's samples are centre_c + N(0, 1) noise, centres N(0, 1) per value."""
    rng = np.random.default_rng(seed)
    sample_shape = tuple(int(d) for d in sample_shape)
    centres = rng.standard_normal((classes, *sample_shape)).astype(np.float32)

    def draw(n):
        y = rng.integers(0, classes, size=n)
        x = centres[y] + rng.standard_normal((n, *sample_shape)).astype(np.float32)
        return x.astype(np.float32), y.astype(np.float32)

    x_train, y_train = draw(train_size)
    x_test, y_test = draw(test_size)
    return Dataset("synthetic", x_train, y_train, x_test, y_test, classes)


#: samples of the digits training split (1,797 images, a quarter held out for testing)
DIGITS_TRAIN = 1347
#: the most bytes the synthetic data set may take (train and test, float32)
MAX_SYNTHETIC_BYTES = 1 << 30


def synthetic_sizes(batch: int):
    """(train, test) sample counts of the synthetic data set for `batch`."""
    train_size = max(16 * batch, 512)
    return train_size, max(train_size // 4, batch)


def check_size(name: str, sample_shape: Sequence[int], batch: int) -> None:
    """Error, before anything is allocated, when `batch` cannot be trained on data set `name`:
    larger than the digits training split, or a synthetic set of more than 1 GiB."""
    if name == "digits" and batch > DIGITS_TRAIN:
        raise Error(f"batch {batch} is larger than the {DIGITS_TRAIN} training samples of 'digits'")
    if name == "synthetic":
        samples = sum(synthetic_sizes(batch))
        size = samples * 4 * math.prod(int(d) for d in sample_shape)
        if size > MAX_SYNTHETIC_BYTES:
            raise Error(f"batch {batch} needs a synthetic data set of {samples} samples of shape "
                        f"{tuple(sample_shape)} ({size / 2 ** 30:.1f} GiB, 16 batches to train on), more than "
                        f"its {MAX_SYNTHETIC_BYTES >> 30} GiB bound: use a smaller batch")


def load(name: str, sample_shape: Sequence[int], classes: int, batch: int, seed: int = 0) -> Dataset:
    """Data set `name` shaped for a model taking `sample_shape` per sample with `classes` outputs."""
    if name == "digits":
        return digits(sample_shape, classes, seed=seed)
    if name == "synthetic":
        train_size, test_size = synthetic_sizes(batch)
        return synthetic(sample_shape, classes, train_size, test_size, seed=seed)
    raise Error(f"unknown data set '{name}' (known: {', '.join(DATASETS)})")
