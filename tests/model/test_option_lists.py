"""The site file's option lists that reach sbatch and srun are allow-lists read as the programs read them
(generator/model/options.py): `[scheduler] options`, `[fabric.collectives] sbatch`, `host.rank_binding`. An item
that names, in full, by a prefix or by an alias, an option launch writes or one its key does not take is refused at
load: one line naming the file, the key and a fix, exit 2."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys

import pytest

from generator.cli import main as cli
from generator.errors import SiteError
from generator.model import options
from generator.model import site as site_mod
from tests.model import glibc_getopt
from tests.model.test_fuzz import REPO, toml_text

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

FRONTIER = tomllib.loads((REPO / "sites" / "frontier.toml").read_text())


def frontier_with(key: str, items: list[str]) -> str:
    """frontier.toml with the option list at `key` set to `items`."""
    doc = tomllib.loads(toml_text(FRONTIER))
    table, _, name = key.rpartition(".")
    parent = doc
    for part in table.split("."):
        parent = parent.setdefault(part, {})
    parent[name] = items
    return toml_text(doc)


# the review's findings: what reached sbatch or srun past launch's checks
DEFECTS = [("fabric.collectives.sbatch", "--account=abc", "--account: gen-recipe launch writes it"),
           ("fabric.collectives.sbatch", "--time=99:00:00", "--time: gen-recipe launch writes it"),
           ("fabric.collectives.sbatch", "--nodes=1000", "--nodes: gen-recipe launch writes it"),
           ("fabric.collectives.sbatch", "--partition=extended", "--partition: gen-recipe launch writes it"),
           ("scheduler.options", "--acco=abc", "sbatch reads '--acco' as --account"),
           ("scheduler.options", "--parti=extended", "sbatch reads '--parti' as --partition"),
           ("scheduler.options", "--qo=boost", "sbatch reads '--qo' as --qos"),
           ("scheduler.options", "--ntasks-per-n=64", "sbatch reads '--ntasks-per-n' as --ntasks-per-node"),
           ("scheduler.options", "--tasks-per-node=64", "sbatch reads '--tasks-per-node' as --ntasks-per-node"),
           ("host.rank_binding", "--task-prolog=/tmp/x.sh", "--task-prolog: host.rank_binding does not take it"),
           ("host.rank_binding", "--task-prol=/tmp/x.sh", "srun reads '--task-prol' as --task-prolog"),
           ("host.rank_binding", "--prolog=/tmp/x.sh", "--prolog: host.rank_binding does not take it"),
           ("host.rank_binding", "--epilog=/tmp/x.sh", "--epilog: host.rank_binding does not take it"),
           ("host.rank_binding", "--output=/home/me/.bashrc", "--output: host.rank_binding does not take it"),
           ("host.rank_binding", "--cpu_bind=cores", "'--cpu_bind=cores' is not a long option")]      # an alias: its kind


@pytest.mark.parametrize("key, item, words", DEFECTS)
def test_an_option_the_key_does_not_take_is_refused_at_load_in_one_line(key, item, words, tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(frontier_with(key, ["--gpu-bind=closest" if key != "scheduler.options" else "--export=NONE", item]))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(["launch", "--site", str(path), "--account", "abc"])
    said = err.getvalue()
    assert code == 2 and said.count("\n") == 1 and said.startswith(f"gen-recipe: {path}: {key}[1]: {words}"), said
    assert "(remove it" in said or "(write " in said, said


@pytest.mark.parametrize("key, item, words", [
    ("scheduler.options", "--export=ALL,LD_PRELOAD=/tmp/x.so", "is not a value --export takes here"),
    ("scheduler.options", "--export", "--export needs its value in the same item"),
    ("scheduler.options", "--requeue=1", "--requeue takes no value"),
    ("scheduler.options", "--n=1", "'--n' is ambiguous to sbatch (--network, --nice"),
    ("scheduler.options", "--nosuch", "'--nosuch' is no option of sbatch"),
    ("host.rank_binding", "--cpus-per=7", "'--cpus-per' is ambiguous to srun (--cpus-per-gpu, --cpus-per-task)"),
    ("host.rank_binding", "--cpus-per-task=x", "'x' is not a value --cpus-per-task takes here"),
    ("host.rank_binding", "--mpi=pmix", "--mpi: gen-recipe launch writes it"),
    ("fabric.collectives.sbatch", "--netw=disable_rdzv_get", "which is taken by its full name only"),
    ("fabric.collectives.sbatch", "--network=a/b", "is not a value --network takes here"),
])
def test_values_forms_and_names_are_read_as_sbatch_and_srun_read_them(key, item, words):
    with pytest.raises(SiteError) as err:
        site_mod.parse(frontier_with(key, [item]), "mine.toml")
    said = str(err.value)
    assert said.startswith(f"mine.toml: {key}[0]: ") and words in said and "\n" not in said, said


def test_what_the_shipped_sites_write_is_taken_and_other_batch_systems_take_no_sbatch_options():
    for name in sorted(set(site_mod.builtin_names().values())):
        site_mod.load(name)
    hlrs = tomllib.loads((REPO / "sites" / "hlrs.toml").read_text())
    hlrs.setdefault("scheduler", {})["options"] = ["--export=NONE"]
    with pytest.raises(SiteError, match=r"scheduler.options: torque scripts take no sbatch options \(remove them\)"):
        site_mod.parse(toml_text(hlrs), "hlrs.toml")


def test_resolve_reads_every_prefix_and_alias_as_the_c_librarys_getopt_long():
    for program in ("sbatch", "srun"):
        names = options.table(program)
        words = {f"--{n[:k]}" for n in names for k in range(1, len(n) + 1)} | {"--x-y", "--cpu_", "--=1"}
        for word in sorted(words):
            canonical, arg = options.resolve(program, word)
            if arg is None:                       # unknown or ambiguous: getopt_long refuses it in every form
                assert glibc_getopt.read(program, [word]) == glibc_getopt.read(program, [word + "=1"]) == [None], word
            else:                                 # the option, with its value in the form it takes
                assert glibc_getopt.read(program, [word + ("=1" if arg else "")]) == [canonical], word


def test_each_allowed_option_is_one_of_its_program_and_takes_a_value_as_the_allow_list_says():
    for key, (program, allowed) in options.ALLOWED.items():
        for name, pattern in allowed.items():
            canonical, arg = options.resolve(program, name)
            assert canonical == name and name not in options.LAUNCH_WRITES or name in ("--cpus-per-task",), (key, name)
            assert (pattern is None) == (arg == 0), (key, name, arg)
            assert bool(pattern is not None and options.re.fullmatch(pattern, "")) == (arg == 2), (key, name, arg)
            example = f"{name}={options.EXAMPLES[name]}" if pattern is not None else name
            assert options.problem(key, example) == ("", ""), (key, example)


SHIM = r"""
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>
static int dump(const struct option *o) {
    for (; o && o->name; o++) printf("%s %d %d\n", o->name, o->has_arg, o->val);
    fflush(stdout);
    _exit(0);
}
int getopt_long(int c, char *const v[], const char *s, const struct option *o, int *i) { return dump(o); }
"""


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("sbatch") and shutil.which("srun")),
                    reason="needs gcc and Slurm's sbatch and srun")
def test_the_tables_are_the_ones_the_installed_slurm_hands_getopt_long(tmp_path):
    """The table each program passes getopt_long, printed by a wrapper preloaded in its place (which ends the
    program there: nothing is submitted); compared where the installed Slurm is the table's 22.05.8."""
    (tmp_path / "slurm.conf").write_text("ClusterName=x\nSlurmctldHost=localhost\n")
    env = {"PATH": "/usr/bin:/bin", "SLURM_CONF": str(tmp_path / "slurm.conf")}
    version = subprocess.run(["sbatch", "--version"], env=env, capture_output=True, text=True, timeout=30).stdout.split()
    if version[-1:] != ["22.05.8"]:
        pytest.skip(f"the tables are Slurm 22.05.8's; this machine has {' '.join(version) or 'another'}")
    (tmp_path / "shim.c").write_text(SHIM)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "shim.so"), str(tmp_path / "shim.c")], check=True)
    env["LD_PRELOAD"] = str(tmp_path / "shim.so")
    for program in ("sbatch", "srun"):
        rows = subprocess.run([program, "--wrap=true" if program == "sbatch" else "true"], env=env, capture_output=True,
                              text=True, timeout=30).stdout.split("\n")
        first, dumped = {}, {}
        for name, arg, val in (row.split() for row in rows if row):
            first.setdefault(val, name)
            dumped[name] = f"--{first[val]}={arg}"
        assert dumped == dict(options.table(program)), program


def test_an_option_is_listed_once():
    with pytest.raises(SiteError, match=r"mine.toml: host.rank_binding\[1\]: --cpus-per-task is listed twice"):
        site_mod.parse(frontier_with("host.rank_binding", ["--cpus-per-task=7", "--cpus-per-task=8"]), "mine.toml")
