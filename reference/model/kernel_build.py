"""The fast backend's C++ extension (kernels/: the packed-weight GEMM and the short ops of a verify
pass), compiled once per torch version, instruction set and tiling, and cached.

A build made for another CPU (an AVX-512 one run on AVX2 dies with SIGILL) is rebuilt, never
loaded: the cache folder is keyed by what `-march=native` means here. `tiling="avx2"` builds the
8-float tiling on an AVX-512 CPU too (`-mno-avx512f`), so benchmarks can measure the AVX2 kernel on
a machine that is not one. docs/fast-backend.md.
"""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path

import torch

from specdec.errors import SpecdecError
from specdec.paths import cache_dir

KERNELS = Path(__file__).with_name("kernels")
SOURCES = (KERNELS / "small_gemm.cpp", KERNELS / "short_ops.cpp")
HEADERS = (KERNELS / "vec.h",)
FLAGS = ("-O3", "-march=native")  # a build runs only on CPUs with its instruction set: see build_dir
# at::parallel_for is inline OpenMP: without -fopenmp the kernel ran on one thread. The library
# it links is libgomp.so.1, the one torch ships and has already loaded (one thread pool).
OPENMP = ("-fopenmp",)
TILINGS = {"native": (), "avx2": ("-mno-avx512f",)}  # extra flags: the 8-float tiling on an AVX-512 CPU


@lru_cache(maxsize=1)
def native_isa() -> str:
    """What `-march=native` means on this CPU, as the C++ compiler torch builds with resolves
    it: its `-march=` value and every target option it enables, one a line (sorted). A
    compiler that cannot list them (not GCC, or none) gives the CPU's flags instead."""
    compiler = os.environ.get("CXX", "c++")  # what torch.utils.cpp_extension runs
    try:
        listing = subprocess.run([compiler, "-march=native", "-Q", "--help=target"], capture_output=True,
                                 text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        listing = ""
    fields = [line.split() for line in listing.splitlines()]
    lines = sorted(" ".join(f) for f in fields if f and (f[0] == "-march=" or f[-1] == "[enabled]"))
    return "\n".join(lines) if any(line.startswith("-march= ") for line in lines) else _cpu_flags()


def _cpu_flags() -> str:
    """The machine name and the CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    info = Path("/proc/cpuinfo")
    text = info.read_text() if info.is_file() else ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "\n".join([f"machine {platform.machine()}", *sorted(flags)])


def isa_key(description: str) -> str:
    """A folder-name key for an ISA description (`native_isa`): the `-march` name and a hash
    of the whole description, e.g. "znver2-3f9a1c0b2d"."""
    march = next((line.split()[1] for line in description.splitlines() if line.startswith("-march= ")), "cpu")
    return f"{march}-{hashlib.sha1(description.encode()).hexdigest()[:10]}"


def build_dir(description: str | None = None, tiling: str = "native") -> Path:
    """Where the kernel is built and cached: one folder per torch version, instruction set and
    tiling. description: an ISA description (default: this CPU's)."""
    key = isa_key(native_isa() if description is None else description)
    suffix = "" if tiling == "native" else f"-{tiling}"
    return cache_dir() / "torch_extensions" / f"small_gemm-{torch.__version__}-{key}{suffix}"


def kernel(tiling: str = "native"):
    """The compiled extension (built on first use, about a minute, then loaded from the cache)."""
    if tiling not in TILINGS:
        raise SpecdecError(f"unknown kernel tiling {tiling!r}: choose one of {', '.join(TILINGS)}")
    return _load(tiling)


@lru_cache(maxsize=None)
def _load(tiling: str):
    from torch.utils.cpp_extension import load

    build = build_dir(tiling=tiling)
    build.mkdir(parents=True, exist_ok=True)
    name = "specdec_small_gemm" + ("" if tiling == "native" else f"_{tiling}")
    # the files' hash as a flag: torch rebuilds when sources or flags change, and a header is neither.
    # Lists built here: load() appends its own flags to the lists it is given.
    flags = [*FLAGS, *OPENMP, *TILINGS[tiling], f"-DSPECDEC_KERNEL_FILES={build_hash()}"]
    return load(name=name, sources=[str(s) for s in SOURCES], extra_cflags=flags, extra_ldflags=list(OPENMP),
                build_directory=str(build), verbose=False)


def build_hash() -> str:
    """The kernel's files and its compiler flags, hashed: what a recorded measurement measured."""
    digest = hashlib.sha1(b"".join(f.read_bytes() for f in SOURCES + HEADERS) + " ".join(FLAGS + OPENMP).encode())
    return digest.hexdigest()[:10]
