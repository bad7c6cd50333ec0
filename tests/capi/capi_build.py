"""Helpers of the C API tests: build a small outside CMake project against the installed
autotile package, or skip when that cannot be done here."""
import os
import shutil
import subprocess

import pytest

import autotile as at


def find_compiler(lang):
    """Path of a C ("c") or C++ ("cxx") compiler, or None."""
    names = (os.environ.get("CC"), "cc", "gcc", "clang") if lang == "c" else (
        os.environ.get("CXX"), "c++", "g++", "clang++")
    for name in names:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cmake_dir_or_skip(langs=("cxx",)):
    """autotile.get_cmake_dir(), skipping the test when cmake, a compiler or the installed
    CMake package (an in-tree development build has none) is missing."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    for lang in langs:
        if find_compiler(lang) is None:
            pytest.skip(f"no {lang} compiler")
    try:
        return at.get_cmake_dir()
    except at.Error as e:
        pytest.skip(str(e))


def run(*cmd, timeout=600):
    """Runs a command; fails the test with its output if it fails. Returns stdout."""
    env = dict(os.environ)
    for var, lang in (("CC", "c"), ("CXX", "cxx")):
        if find_compiler(lang):
            env[var] = find_compiler(lang)
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=timeout)
    assert res.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{res.stdout}\n{res.stderr}"
    return res.stdout


def cmake_build(source, build, cmake_dir):
    """Configures and builds the CMake project in `source` into `build` against autotile."""
    run("cmake", "-S", source, "-B", build, f"-Dautotile_DIR={cmake_dir}", f"-DAUTOTILE_CMAKE_DIR={cmake_dir}",
        "-DCMAKE_BUILD_TYPE=Release")
    run("cmake", "--build", build, "-j", "2")
