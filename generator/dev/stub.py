"""What stands in, in a rehearsal (generator.dev.rehearsal), for a program a site has and this machine has not:
a container runtime (Apptainer, Singularity, podman-hpc, Sarus), the CSCS container engine's `srun
--environment`, an MPI launcher of another family (Intel MPI's Hydra `mpiexec`), or the site MPI's
`python3` of a bare twin. It checks the command line it was given against the program's documented options
(`generator/model/runtime_cli.toml`, read from each program's source at the site's version), prints one JSON
line saying what it stood in for, and exits 0; a command line the program would refuse is one line on
stderr naming the option and the source, exit 2.

    python -m generator.dev.stub TOOL VERSION [ARGS...]        (the rehearsal's stub scripts call this)
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from generator.model import runtimes


class Refused(Exception):
    """The program would refuse this command line."""


def check_runtime(tool: str, version: str, argv: list[str]) -> dict:
    """`tool SUBCOMMAND [OPTIONS] IMAGE COMMAND...` against the documented options of `tool` at `version`."""
    cli = runtimes.documented_cli(tool, version)
    if cli is None:
        raise Refused(f"{tool} {version}: no documented options here to check against (generator/model/runtime_cli.toml)")
    words = list(argv)
    words = _options(words, cli.global_options, f"{tool} {version}", cli.source)
    if not words or words[0] != cli.subcommand:
        raise Refused(f"{tool} {version}: expected the subcommand {cli.subcommand}, got {words[:1]} ({cli.source})")
    rest = _options(words[1:], cli.options, f"{tool} {version} {cli.subcommand}", cli.source)
    if not rest:
        raise Refused(f"{tool} {version} {cli.subcommand}: no image given ({cli.source})")
    sources = bind_sources(cli, words[1:len(words) - len(rest)], os.environ)
    check_sources(sources, f"{tool} {version}")
    return {"image": rest[0], "command": rest[1:], "binds": len(sources)}     # a count: ranks write side by side


def bind_sources(cli: runtimes.Cli, options: list[str], environ) -> list[str]:
    """The host side of every bind mount in `options` (the subcommand's, before the image) and in the runtime's
    bind variables of `environ`."""
    values = [environ[name] for name in cli.bind_env if environ.get(name)]
    for i, word in enumerate(options):
        name, eq, value = word.partition("=")
        if name in cli.bind_options:
            values.append(value if eq else options[i + 1] if i + 1 < len(options) else "")
    out = []
    for value in values:
        if value.startswith("type="):                    # Sarus: type=bind,source=SRC,destination=DST
            fields = dict(f.partition("=")[::2] for f in value.split(","))
            out.append(fields.get("source") or fields.get("src", ""))
        else:
            out += [item.split(":", 1)[0] for item in value.split(",") if item]
    return out


def check_sources(sources: list[str], what: str) -> None:
    """Each bind source exists on this node, or under the rehearsal cluster's site root (the site's bind
    sources as folders: GEN_RECIPE_REHEARSAL_ROOT), as the runtime needs before it starts the container."""
    root = os.environ.get("GEN_RECIPE_REHEARSAL_ROOT", "")
    for src in sources:
        if not src.startswith("/"):
            raise Refused(f"{what}: bind source {src!r} is not an absolute path (the runtime resolves it against "
                          "the job's working directory; the site's scripts name absolute ones)")
        if not os.path.exists(src) and not (root and os.path.exists(root + src)):
            raise Refused(f"{what}: bind source {src} does not exist on this node, nor in the site's bind sources "
                          f"({root or 'GEN_RECIPE_REHEARSAL_ROOT unset'}); the runtime stops: mount source {src} "
                          "doesn't exist")


def _options(words: list[str], known: dict[str, bool], what: str, source: str) -> list[str]:
    """Consume leading options of `words` that `known` documents (name -> takes a value); the rest."""
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        name, eq, _ = words[i].partition("=")
        if name not in known:
            raise Refused(f"{what}: unknown option {name} (not among its documented options; {source})")
        if known[name] and not eq:
            if i + 1 >= len(words):
                raise Refused(f"{what}: {name} needs a value ({source})")
            i += 1
        elif eq and not known[name]:
            raise Refused(f"{what}: {name} takes no value ({source})")
        i += 1
    return words[i + 1:] if i < len(words) and words[i] == "--" else words[i:]


def check_hydra(argv: list[str]) -> dict:
    """Hydra's `mpiexec -n N -ppn M [-genv K V] COMMAND...` (Intel MPI's launcher)."""
    known = {"-n": 1, "-np": 1, "-ppn": 1, "-perhost": 1, "-genv": 2, "-genvall": 0, "-genvnone": 0,
             "-genvlist": 1, "-f": 1, "-hostfile": 1, "-hosts": 1, "-bootstrap": 1, "-l": 0}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] not in known:
            raise Refused(f"mpiexec (Hydra): unknown option {argv[i]} (Intel MPI Library Developer Reference, mpiexec.hydra)")
        i += 1 + known[argv[i]]
    if i >= len(argv):
        raise Refused("mpiexec (Hydra): no command to start")
    return {"command": argv[i:]}


def check_ce(argv: list[str]) -> dict:
    """The container engine's step: `--environment=NAME` names ~/.edf/NAME.toml, an EDF with an image."""
    env = next((a.split("=", 1)[1] for a in argv if a.startswith("--environment=")), None)
    if not env:
        raise Refused("srun --environment: no environment named")
    path = Path(env) if "/" in env else Path(os.environ.get("HOME", "~")).expanduser() / ".edf" / f"{env}.toml"
    try:
        import tomllib
    except ImportError:                                  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        edf = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Refused(f"srun --environment={env}: {path} is not a readable EDF ({exc})") from None
    keys = runtimes.edf_keys()
    unknown = sorted(set(edf) - set(keys))
    if unknown or "image" not in edf:
        raise Refused(f"srun --environment={env}: {path}: " + (f"unknown keys {unknown}" if unknown else "no image")
                      + " (CSCS Container Engine, EDF reference)")
    sources = [expand(str(m).split(":", 1)[0], f"srun --environment={env}: {path}: mounts") for m in edf.get("mounts", [])]
    check_sources(sources, f"srun --environment={env}")
    return {"image": edf["image"], "edf": str(path), "binds": len(sources)}


def expand(value: str, what: str) -> str:
    """`value` with its `${VAR}`/`$VAR` references replaced from the environment, as the container engine
    expands an EDF's values (its EDF reference: mounts = ["${SCRATCH}:${SCRATCH}"]); an unset one is refused."""
    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name not in os.environ:
            raise Refused(f"{what}: ${{{name}}} is not set in the job's environment")
        return os.environ[name]
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", one, value)


def ce_srun(version: str, argv: list[str]) -> int:
    """`srun [OPTIONS] --environment=NAME COMMAND...`: the real srun (GEN_RECIPE_REAL_SRUN) with the same
    options, each task running the container engine's stub on the command (Slurm's srun here has no such
    plugin option). The options of the generated launcher lines are all `--name=value` or `--flag`."""
    cut = next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))
    options, command = argv[:cut], argv[cut:]
    env = [a for a in options if a.startswith("--environment=")]
    real = os.environ.get("GEN_RECIPE_REAL_SRUN", "srun")
    os.execvp(real, [real, *(a for a in options if a not in env), sys.executable, "-m", "generator.dev.stub", "ce",
                     version, *env, *command])
    return 2                                              # pragma: no cover - execvp does not return


def check_python(argv: list[str]) -> dict:
    """A bare twin's `python3 -m workloads.W ...`: the workloads package must be where the script put it."""
    if argv[:1] != ["-m"] or len(argv) < 2 or not argv[1].startswith("workloads."):
        raise Refused(f"python3 {' '.join(argv[:2])}: a bare twin runs python3 -m workloads.NAME")
    found = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p and (Path(p) / "workloads" / "__init__.py").is_file()]
    if not found:
        raise Refused("python3 -m workloads...: no workloads package on PYTHONPATH (GEN_RECIPE_WORKLOADS)")
    return {"workload": argv[1].removeprefix("workloads."), "workloads": found[0]}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m generator.dev.stub TOOL VERSION [ARGS...]", file=sys.stderr)
        return 2
    tool, version, rest = args[0], args[1], args[2:]
    try:
        if tool == "ce-srun":                # the container engine's srun: the real one, a stub in every task
            return ce_srun(version, rest)
        if tool == "mpiexec":
            found = check_hydra(rest)
        elif tool == "ce":
            found = check_ce(rest)
        elif tool == "python3":
            found = check_python(rest)
        else:
            found = check_runtime(tool, version, rest)
    except Refused as exc:
        print(f"stub {tool}: {exc}", file=sys.stderr)
        return 2
    record = {"rehearsal": "stub", "tool": tool, "version": version, "rank": os.environ.get("SLURM_PROCID", "0"),
              "node": os.environ.get("SLURMD_NODENAME", ""), **found}
    print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
