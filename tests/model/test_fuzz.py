"""The site-file fuzzer: mutated real site files (types, values, nesting, unicode, control characters,
deleted keys, broken TOML) through `gen-recipe --site FILE` and `gen-recipe launch`. Every case must end
with exit 0, or one line on stderr naming the file and exit 2 — never a traceback. 2,000 cases here,
20,000 with --fuzz-long (README, Hostile input). The option lists that reach sbatch and srun have a fuzzer of
their own (random long options and abbreviations, read back with the C library's getopt_long): 300 cases here,
20,000 with --fuzz-long."""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import shlex
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main as cli
from generator.errors import SiteError
from generator.model import options
from generator.model import site as site_mod
from generator.run import launch
from tests.model import glibc_getopt

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
SITES = sorted((REPO / "sites").glob("*.toml"))
RAW = [tomllib.loads(p.read_text()) for p in SITES]
TEXTS = [p.read_text() for p in SITES]
CASES = 20_000 if "--fuzz-long" in sys.argv else 2_000
OPTION_CASES = 20_000 if "--fuzz-long" in sys.argv else 300      # the option lists' fuzzer (below)


class Deep(int):
    """An array nested this many levels deep (written as text: no recursion in the test itself)."""


def toml_value(v) -> str:
    if isinstance(v, Deep):
        return "[" * v + '"x"' + "]" * v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_text(doc: dict) -> str:
    """A TOML document for `doc` (every table inline, so any nesting writes)."""
    return "\n".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in doc.items()) + "\n"


def paths(doc, prefix=()):
    """Every (path, value) in a parsed document."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield prefix + (k,), v
        yield from paths(v, prefix + (k,))


PAYLOADS = ["$(touch /tmp/gen-recipe-fuzz)", "`id`", "a\nb", "EOF", "\x1b[31mred", "\u2028", "x" * 3000, "",
            "../../etc/passwd", "2021", "5", "18.04", "4.1.0\n", " 4.1.0", "\x00", "ünïcødé ☃", "-1"]
scalars = st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=40), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.lists(st.sampled_from(PAYLOADS + ["hybrid", "bind", "x86_64"]), max_size=3),
                    st.dictionaries(st.sampled_from(PAYLOADS[:6] + ["OMP_NUM_THREADS", "cnn"]),
                                    st.sampled_from(PAYLOADS[:6] + ["1"]), max_size=2),
                    st.integers(min_value=1, max_value=2000).map(Deep))


def mutate(draw, raw: dict, text: str, keys=("flavor", "extra", "name", "\x07")) -> str:
    """A TOML text: `text` broken (1 in 10), or `raw` with 1-3 values set, deleted or added."""
    if draw(st.integers(0, 9)) == 0:                       # broken text: truncated, spliced
        cut = draw(st.integers(0, len(text)))
        return text[:cut] + draw(st.text(max_size=20)) + text[cut + draw(st.integers(0, 40)):]
    doc = json.loads(json.dumps(raw))           # a copy
    for _ in range(draw(st.integers(1, 3))):
        found = list(paths(doc))
        path, _ = found[draw(st.integers(0, len(found) - 1))]
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        action = draw(st.sampled_from(["set", "set", "set", "delete", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(keys))] = draw(scalars)
        else:
            parent[path[-1]] = draw(scalars)
    return toml_text(doc)


@st.composite
def mutated(draw):
    i = draw(st.integers(0, len(SITES) - 1))
    return mutate(draw, RAW[i], TEXTS[i])


APP = REPO / "examples" / "trainer"
APP_TEXT = (APP / "app.toml").read_text()


@st.composite
def mutated_app(draw):
    return mutate(draw, tomllib.loads(APP_TEXT), APP_TEXT, ("base", "files", "src", "workdir", "\x07"))


def run(*argv: str):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, err.getvalue()


@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(text=mutated())
def test_mutated_site_files_give_exit_0_or_one_line(text, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    site = folder / "fuzzed.toml"
    site.write_text(text, encoding="utf-8", errors="surrogatepass")
    for argv in (("--site", str(site), "--recipe", "pytorch", "--out", str(folder / "out"), "-q"),
                 ("launch", "--site", str(site), "--workload", "mnist", "--nodes", "2")):
        code, err = run(*argv)
        assert code == 0 or (code == 2 and err.count("\n") == 1 and err.startswith("gen-recipe: ")
                             and "fuzzed.toml" in err and "\x1b" not in err), (code, err[:500])
    assert not Path("/tmp/gen-recipe-fuzz").exists()


@settings(max_examples=CASES // 4, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(text=mutated_app())
def test_mutated_app_files_give_exit_0_or_one_line(text, tmp_path_factory):
    """The same for app files (examples/trainer/app.toml mutated): generate and launch."""
    import shutil

    folder = tmp_path_factory.mktemp("fuzzapp")
    shutil.copytree(APP / "src", folder / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(APP / "requirements.txt", folder)
    app = folder / "fuzzed.toml"
    app.write_text(text, encoding="utf-8", errors="surrogatepass")
    for argv in (("--site", "local", "--recipe", str(app), "--out", str(folder / "out"), "-q"),
                 ("launch", "--site", "frontier", "--account", "ABC123", "--recipe", str(app), "--nodes", "2")):
        code, err = run(*argv)
        assert code == 0 or (code == 2 and err.count("\n") == 1 and err.startswith("gen-recipe: ")
                             and "fuzzed.toml" in err and "\x1b" not in err), (code, err[:500])
    assert not Path("/tmp/gen-recipe-fuzz").exists()


# -- the option lists that reach sbatch and srun ---------------------------------------------------------------------

OPTION_SITES = ("frontier", "lumi", "leonardo", "perlmutter", "odo")     # Slurm and srun, one rank per GPU
OPTION_RAW = {name: tomllib.loads((REPO / "sites" / f"{name}.toml").read_text()) for name in OPTION_SITES}
VALUES = ("", "", "=1", "=7", "=NONE", "=ALL", "=ALL,LD_PRELOAD=/tmp/gen-recipe-fuzz.so", "=/tmp/gen-recipe-fuzz.sh",
          "=closest", "=disable_rdzv_get", "=99:00:00", "=abc", "=L", "=10L", "=user", "=cores", "=v,mask_cpu=0xfe,0x1",
          "=block:cyclic", "=1@10:00", "=nomultithread", "=enforce-binding", "==", "=a=b", "=--account=x")
# what launch writes itself on the #SBATCH lines and on the srun line (each once)
LAUNCH_SBATCH = {"--job-name", "--nodes", "--ntasks-per-node", "--time", "--gpus-per-node", "--account", "--partition",
                 "--qos", "--constraint", "--cpus-per-task", "--mem-per-gpu"}
LAUNCH_SRUN = {"--nodes", "--ntasks-per-node", "--cpus-per-task", "--gpus-per-node", "--mpi"}


@st.composite
def option_lists(draw):
    """(site name, {key: items}): one to three of the site's option lists set to random long options of the
    program each reaches (any of its options or aliases, in full or a prefix, with or without a value), the key's
    own options and random text."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    hostile = rnd.choice((0.0, 0.1, 0.5))           # the share of hostile items: a third of the cases have none
    lists = {}
    for key in rnd.sample(sorted(options.ALLOWED), rnd.randint(1, 3)):
        program, allowed = options.ALLOWED[key]
        names = [f"--{n}" for n in options.table(program)] + list(allowed) * 6
        items = []
        for _ in range(rnd.randint(1, 4)):
            name = rnd.choice(list(allowed))
            if rnd.random() >= hostile:             # one the key takes, with a value it takes
                items.append(name if allowed[name] is None else f"{name}={options.EXAMPLES[name]}")
            elif rnd.random() < 0.1:
                items.append("".join(rnd.choice("-abcdeinoprstu_=,:/.@01") for _ in range(rnd.randint(1, 20))))
            else:                                   # any option of the program or alias, in full or a prefix
                name = rnd.choice(names)
                cut = len(name) if rnd.random() < 0.6 else rnd.randint(3, len(name))
                items.append(name[:cut] + rnd.choice(VALUES))
        lists[key] = items
    return rnd.choice(OPTION_SITES), lists


def sbatch_and_srun_words(script: str) -> tuple[list[str], list[str]]:
    """The words of a script's #SBATCH lines (as sbatch reads them) and of its srun line after `srun`."""
    sbatch = [w for line in script.splitlines() if line.startswith("#SBATCH ") for w in line.split()[1:]]
    srun = next(line for line in script.replace("\\\n", " ").splitlines() if line.startswith("srun "))
    return sbatch, shlex.split(srun)[1:]


@settings(max_examples=OPTION_CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=option_lists())
def test_option_lists_reach_sbatch_and_srun_only_as_options_their_keys_allow(case):
    """Random long options and abbreviations in [scheduler] options, [fabric.collectives] sbatch and
    host.rank_binding: a site file is refused in one line naming the file and the key, or every item is, as the C
    library's getopt_long reads it, an option its key allows written in full; and in the script launch writes,
    sbatch and srun read only launch's own options (each once) and those. Never a traceback."""
    name, lists = case
    doc = json.loads(json.dumps(OPTION_RAW[name]))
    for key, items in lists.items():
        table, _, field = key.rpartition(".")
        parent = doc
        for part in table.split("."):
            parent = parent.setdefault(part, {})
        parent[field] = items
    try:
        site = site_mod.parse(toml_text(doc), "fuzzed.toml")
    except SiteError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(tuple(f"fuzzed.toml: {k}" for k in lists)), str(exc)
        return
    for key, items in lists.items():
        program, allowed = options.ALLOWED[key]
        for item in items:
            assert glibc_getopt.read(program, [item]) == [item.partition("=")[0]], (key, item)
            assert item.partition("=")[0] in allowed, (key, item)
    script = launch.script(site, launch.Job(account="p1", image="img.sif"))
    sbatch, srun = sbatch_and_srun_words(script)
    for program, words, own, others in (
            ("sbatch", sbatch, LAUNCH_SBATCH, {*options.ALLOWED["scheduler.options"][1],
                                               *options.ALLOWED["fabric.collectives.sbatch"][1]}),
            ("srun", srun, LAUNCH_SRUN, set(options.ALLOWED["host.rank_binding"][1]))):
        read = glibc_getopt.read(program, words)
        assert None not in read and set(read) <= own | others, (program, words, read)
        assert all(read.count(o) <= 1 for o in own), (program, read)
