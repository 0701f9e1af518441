"""The site file's option lists that reach sbatch or srun: allow-lists, read the way the programs read them.

`[scheduler] options` (on every job's #SBATCH lines), `[fabric.collectives] sbatch` (after them) and
`host.rank_binding` (on the srun line of one-rank-per-GPU jobs) each accept only the options their purpose
needs, each with the values it takes. An item is read as sbatch and srun read their arguments (GNU
getopt_long, the programs' option tables in slurm_options.toml): a unique prefix of a long option is that
option (`--acco` is `--account`), so an item is taken by the option it names to the program, and only by
its full name; an option that takes a value is written `--name=VALUE` in one item (else the program would
take the next item, or the next #SBATCH line, as its value). `problem(key, item)` says why an item may not
stand in the list at `key`, with a fix; the site loader calls it for every item. Pure; nothing here runs.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_NAMES = r"[A-Za-z_][A-Za-z0-9_]*(?:,[A-Za-z_][A-Za-z0-9_]*)*"
_COUNT = r"[1-9][0-9]{0,3}"
_LAYOUT = r"[A-Za-z0-9_,:=]{1,512}"            # a binding or distribution: keywords, counts, maps and masks
_HINT = r"compute_bound|memory_bound|multithread|nomultithread"

# key → (program, {option: pattern of its value; None: it takes none; a pattern that matches "": written bare too}).
ALLOWED: Mapping[str, tuple[str, Mapping[str, str | None]]] = {
    # what every job of the site's job templates carries: the environment it starts with, node sharing, hints
    "scheduler.options": ("sbatch", {
        "--export": f"(?:ALL|NONE|NIL)(?:,{_NAMES})?|{_NAMES}",     # names only: a NAME=VALUE is container.env's
        "--get-user-env": r"(?:[0-9]{1,4})?[SL]?",
        "--exclusive": r"(?:user|mcs|topo)?",
        "--hint": _HINT,
        "--requeue": None,
        "--no-requeue": None,
        "--clusters": r"[A-Za-z0-9_-]{1,64}(?:,[A-Za-z0-9_-]{1,64})*",
        "--licenses": r"[A-Za-z0-9_.@-]{1,64}(?::[0-9]{1,6})?(?:[,|][A-Za-z0-9_.@-]{1,64}(?::[0-9]{1,6})?)*",
    }),
    # what the fabric's collectives settings need of the allocation: the network, switches, GPU binding
    "fabric.collectives.sbatch": ("sbatch", {
        "--network": r"[A-Za-z0-9_]{1,64}(?:=[A-Za-z0-9_]{1,64})?(?:,[A-Za-z0-9_]{1,64}(?:=[A-Za-z0-9_]{1,64})?)*",
        "--switches": r"[0-9]{1,6}(?:@[0-9:-]{1,16})?",
        "--gpu-bind": _LAYOUT,
        "--gres-flags": r"disable-binding|enforce-binding",
    }),
    # how each rank of a one-rank-per-GPU job is laid out: CPUs and GPUs per rank, their binding, the distribution
    "host.rank_binding": ("srun", {
        "--cpus-per-task": _COUNT,
        "--gpus-per-task": r"(?:[A-Za-z0-9_-]{1,64}:)?" + _COUNT,
        "--cpu-bind": _LAYOUT,
        "--gpu-bind": _LAYOUT,
        "--mem-bind": _LAYOUT,
        "--distribution": _LAYOUT,
        "--hint": _HINT,
        "--threads-per-core": r"[1-8]",
    }),
}

# a value of each, for the fixes
EXAMPLES = {"--export": "NONE", "--get-user-env": "L", "--exclusive": "user", "--hint": "nomultithread",
            "--clusters": "cm2", "--licenses": "scratch", "--network": "disable_rdzv_get", "--switches": "1@10:00",
            "--gpu-bind": "closest", "--gres-flags": "enforce-binding", "--cpus-per-task": "7", "--gpus-per-task": "1",
            "--cpu-bind": "cores", "--mem-bind": "local", "--distribution": "block:cyclic", "--threads-per-core": "1"}

# Options gen-recipe launch writes itself (an item naming one would override it and get round its checks): where
# each comes from.
LAUNCH_WRITES: Mapping[str, str] = {
    "--account": "launch --account", "--partition": "[[scheduler.partitions]], launch --partition",
    "--qos": "[[scheduler.qos]], launch --qos", "--constraint": "scheduler.constraint", "--nodes": "launch --nodes",
    "--time": "launch --time", "--ntasks": "launch --tasks-per-node", "--ntasks-per-node": "launch --tasks-per-node",
    "--gpus": "launch --gpus-per-node", "--gpus-per-node": "launch --gpus-per-node",
    "--cpus-per-task": "host.rank_binding, scheduler.cpus_per_gpu", "--job-name": "the script's name",
    "--mem-per-gpu": "scheduler.mem_per_gpu", "--mpi": "mpi.pmi",
}


@functools.cache
def table(program: str) -> Mapping[str, str]:
    """`program`'s long options, each name (and alias) → '--canonical=ARG' where ARG is 0, 1 or 2 (slurm_options.toml)."""
    raw = tomllib.loads((resources.files("generator.model") / "slurm_options.toml").read_text(encoding="utf-8"))[program]
    return {name: f"--{value}={raw[value]}" if isinstance(value, str) else f"--{name}={value}" for name, value in raw.items()}


def resolve(program: str, item: str) -> tuple[str, int] | tuple[str, None]:
    """The option `item` ('--name[=value]') is to `program`, as getopt_long reads it: (canonical name, 0/1/2: takes
    no value, one, an optional one); (names it could be, None) when the prefix is ambiguous or ('', None) unknown."""
    name = item[2:].partition("=")[0]
    options = table(program)
    found = {options[name]} if name in options else {v for k, v in options.items() if k.startswith(name)} if name else set()
    if len(found) != 1:
        return ", ".join(sorted(f.rpartition("=")[0] for f in found)), None
    canonical, _, arg = found.pop().rpartition("=")
    return canonical, int(arg)


def problem(key: str, item: str) -> tuple[str, str]:
    """(why `item` may not stand in the option list at site-file key `key`, a fix); ("", "") when it may."""
    program, allowed = ALLOWED[key]
    takes = f"{key} takes {', '.join(allowed)}"
    name, eq, value = item.partition("=")
    canonical, arg = resolve(program, item) if item.startswith("--") else ("", None)
    if arg is None:
        many = canonical.split(", ")
        what = f"is ambiguous to {program} ({', '.join(many[:6])}{', ...' if len(many) > 6 else ''})" if canonical \
            else f"is no option of {program}"
        return f"'{name}' {what}", f"{takes}, each written in full"
    read = f"{program} reads '{name}' as {canonical}, which" if canonical != name else f"{canonical}:"
    it = "" if canonical != name else " it"
    if canonical not in allowed:
        if canonical in LAUNCH_WRITES:
            return f"{read} gen-recipe launch writes{it} (an item would override it and get round its checks)", \
                f"remove it; {LAUNCH_WRITES[canonical]}"
        return f"{read} {key} does not take{it}", f"remove it ({takes})"
    if canonical != name:
        return f"{read} is taken by its full name only", f"write {canonical}{eq}{value}"
    pattern = allowed[canonical]
    if pattern is None and eq:
        return f"{canonical} takes no value", f"write {canonical} alone"
    if pattern is not None and not re.fullmatch(pattern, value):
        what = f"'{value[:40]}' is not a value {canonical} takes here" if eq else \
            f"{canonical} needs its value in the same item"
        return what, f"write e.g. {canonical}={EXAMPLES[canonical]}"
    return "", ""
