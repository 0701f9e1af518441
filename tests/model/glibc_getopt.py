"""An oracle for the option lists' tests: the C library's own getopt_long (through ctypes) over sbatch's and
srun's option tables (generator/model/slurm_options.toml), reading words as the programs read them."""

from __future__ import annotations

import ctypes
import functools

from generator.model import options


class _Option(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("has_arg", ctypes.c_int), ("flag", ctypes.c_void_p), ("val", ctypes.c_int)]


_LIBC = ctypes.CDLL(None)
_LIBC.getopt_long.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p, ctypes.POINTER(_Option),
                              ctypes.POINTER(ctypes.c_int)]
_OPTIND = ctypes.c_int.in_dll(_LIBC, "optind")
_OPTERR = ctypes.c_int.in_dll(_LIBC, "opterr")


@functools.cache
def _table(program: str):
    """The program's struct option array (aliases share their option's getopt value, as in Slurm) and its names."""
    table = options.table(program)
    names = sorted({v.rpartition("=")[0] for v in table.values()})
    array = (_Option * (len(table) + 1))()
    keep = [name.encode() for name in table]
    for i, value in enumerate(table.values()):
        canonical, _, arg = value.rpartition("=")
        array[i] = _Option(keep[i], int(arg), None, 256 + names.index(canonical))
    return array, names, keep


def read(program: str, words: list[str]) -> list[str | None]:
    """What getopt_long makes of `words` as `program`'s arguments, up to the first that is not an option ('+'):
    each option's canonical name, None where getopt_long refuses one (unknown, ambiguous, a value missing or not
    allowed)."""
    array, names, _ = _table(program)
    encoded = [program.encode(), *(w.encode("utf-8", "surrogateescape") for w in words)]
    argv = (ctypes.c_char_p * (len(encoded) + 1))(*encoded, None)
    _OPTIND.value, _OPTERR.value = 0, 0                 # optind 0: getopt starts afresh
    out = []
    while (r := _LIBC.getopt_long(len(encoded), argv, b"+:", array, None)) != -1:
        out.append(names[r - 256] if r >= 256 else None)
    return out
