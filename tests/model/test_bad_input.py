"""Bad input: one line naming the file and the key, exit code 2, no traceback, nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.errors import SiteError
from generator.model.site import parse

from tests.helpers import run_cli

SITES = Path(__file__).resolve().parents[2] / "sites"


def _variant(tmp_path: Path, base: str, old: str, new: str) -> Path:
    text = (SITES / f"{base}.toml").read_text()
    assert re.search(old, text, flags=re.M), old
    path = tmp_path / "bad.toml"
    path.write_text(re.sub(old, lambda m: new, text, count=1, flags=re.M))
    return path


CASES = [
    # (base site, regex to replace, replacement, expected key, expected words)
    ("ifca", r'^flavour = "openmpi"', 'flavor = "openmpi"', "mpi.flavor", "did you mean 'flavour'"),
    ("ifca", r"^count_per_node = 4", 'count_per_node = "4"', "gpu.count_per_node", "expected an integer"),
    ("ifca", r'^launcher = "mpirun".*$', "", "host.launcher", "missing required key"),
    ("ifca", r'^version = "4.1.0".*$', 'version = "4.1.x"', "mpi.version", "is not a version"),
    ("ifca", r'^version = "4.1.0".*$', "version = 4.1", "mpi.version", 'quote it: version = "4.1"'),
    ("ifca", r'^flavour = "openmpi"', 'flavour = "open-mpi"', "mpi.flavour", "did you mean 'openmpi'"),
    ("frontier", r'^provider = "cxi"', 'provider = "psm2"', "fabric.provider", "psm2 cannot work on slingshot"),
    ("ifca", r'^stack = "cuda"', 'stack = "rocm"', "gpu.stack", "rocm does not fit nvidia GPUs"),
    ("supermuc", r'^kind = "omnipath"', 'kind = "infiniband"', "fabric.provider", "psm2 cannot work on infiniband"),
    ("frontier", r'^runtime = "apptainer"', 'runtime = "podman"', "container.runtime", "is not in [[runtimes]]"),
    ("ifca", r'^mpi_mode = "hybrid"', 'mpi_mode = "bind"', "container.mpi_mode", "does not support bind"),
    ("ifca", r"^cnn = \[1.0, -0.03, 0.10, \"ratio\"\]", 'cnnn = [1.0, -0.03, 0.10, "ratio"]', "tolerances.cnnn",
     "did you mean 'cnn'"),
    ("ifca", r"^cnn = \[1.0, -0.03, 0.10, \"ratio\"\]", "cnn = [1.0, 0.03]", "tolerances.cnn",
     "[reference, lower, upper, unit]"),
    ("ifca", r'^sources = \["I2"\]', 'sources = ["I9"]', "host.sources", "source 'I9' is not in [sources]"),
    ("ifca", r"^\[host\]", "[host", "line", "invalid TOML"),
    # hostile and careless input (issue: tracebacks, validation gaps)
    ("supermuc", r'^distro_version = "22.04"', 'distro_version = "18.04"', "images.none.distro_version",
     "ubuntu 18.04 is not supported"),
    ("supermuc", r'^version = "2019.12.320"', 'version = "2021"', "mpi.version", "is not an exact version"),
    ("ifca", r'^version = "4.1.0".*$', 'version = "5"', "mpi.version", "is not an exact version"),
    ("ifca", r'^version = "4.1.0".*$', 'version = "4.1.0\\n"', "mpi.version", "is not a version"),
    ("ifca", r'^mpi_modes = \["hybrid"\]', "mpi_modes = []", "runtimes[0].mpi_modes", "no MPI mode listed"),
    ("ifca", r'^name = "ifca"', 'name = "' + "x" * 3000 + '"', "name", "is not lower-case letters"),
    ("ifca", r"^cnn = \[1.0, -0.03, 0.10, \"ratio\"\]", 'cnn = [nan, -0.03, 0.10, "ratio"]', "tolerances.cnn",
     "finite numbers"),
    ("ifca", r"^cnn = \[1.0, -0.03, 0.10, \"ratio\"\]", 'cnn = [1.0, -inf, 0.10, "ratio"]', "tolerances.cnn",
     "finite numbers"),
    ("ifca", r'^description = .*$', 'description = "two\\nlines"', "description", "control or bidirectional character"),
    ("ifca", r'^description = .*$', 'description = "\\u001b[31mred"', "description", "control or bidirectional character"),
    ("ifca", r'^description = .*$', 'description = "safe\\u202eevil"', "description", "bidirectional character"),
    ("ifca", r'^mpi_mode = "hybrid"', 'mpi_mode = "hybrid"\nenv = { "$(touch X)" = "1" }', "container.env key",
     "environment variable name"),
    ("ifca", r'^\[software\]', '[software]\npython = "$(touch X)"', "software.python", "is not a path"),
    ("ifca", r"^count_per_node = 4", "count_per_node = -4", "gpu.count_per_node", "expected an integer from 0"),
    # how images reach the site and run there (issue #31)
    ("frontier", r'^LD_PRELOAD = .*$', "", "container.bind.env.MPICH_GPU_SUPPORT_ENABLED",
     "without its GTL library (libmpi_gtl_hsa)"),
    ("frontier", r'^devel = "rocm/dev-ubuntu-22.04:6.2.4"', 'devel = "rocm/dev-ubuntu-22.04:5.7.1"', "images.rocm.devel",
     "ROCm 5.7.1 and the host's ROCm 6.2.4 are more than 2 releases apart"),
    ("ifca", r'^devel = "nvidia/cuda:12.6.3-devel-ubuntu22.04"', 'devel = "nvidia/cuda:13.0.1-devel-ubuntu22.04"',
     "images.cuda.devel", "CUDA 13.0.1 needs a CUDA 13 driver"),
    ("lumi", r'^LD_LIBRARY_PATH = "/lib64:', 'MPICH_GPU_SUPPORT_ENABLED = "01"\nLD_LIBRARY_PATH = "/lib64:',
     "container.bind.env.MPICH_GPU_SUPPORT_ENABLED", "turned on (bind mode) without its GTL library"),
    ("lumi", r'^NCCL_NET_GDR_LEVEL = "PHB"', 'NCCL_NET_GDR_LEVEL = "PHB"\nMPICH_GPU_SUPPORT_ENABLED = "1"',
     "fabric.collectives.env.MPICH_GPU_SUPPORT_ENABLED", "turned on (hybrid mode)"),
    ("lumi", r'^LD_LIBRARY_PATH = "/lib64:', 'MPICH_GPU_SUPPORT_ENABLED = "1"\nLD_PRELOAD = "/x/not_libmpi_gtl_hsa.so"\n'
     'LD_LIBRARY_PATH = "/lib64:', "container.bind.env.MPICH_GPU_SUPPORT_ENABLED", "without its GTL library"),
    ("lumi", r'^devel = "rocm/dev-ubuntu-22.04:6.2.2"', 'devel = "rocm/dev-ubuntu-22.04:6.2.2"\nversion = "6.0.3"',
     "images.rocm.version", "differs from the 6.2.2 that images.rocm.devel's tag says"),
    ("lumi", r'^devel = "rocm/dev-ubuntu-22.04:6.2.2"', 'devel = "rocm/dev-ubuntu-22.04:9.1.0"', "images.rocm.devel",
     "the images' ROCm 9.1.0: not a ROCm release series this gen-recipe knows"),
    ("alps", r'^devel = "nvidia/cuda:12.8.1-devel-ubuntu22.04"', 'devel = "nvcr.io/nvidia/pytorch:24.05-py3"',
     "images.cuda.version", "write images.cuda.version"),
    ("ifca", r'^build = "none".*$', 'build = "fakeroot"', "container.build", "--fakeroot builds are Apptainer's"),
    ("ifca", r'^build = "none".*$', 'build = "sudo"', "container.build", "is not one of user, fakeroot, none"),
    ("frontier", r'\{ max_nodes = 183, max_time = "06:00:00" \}', '{ max_nodes = 50, max_time = "06:00:00" }',
     "scheduler.partitions[0].time_by_nodes[1].max_nodes", "50 does not follow the bin before (91 nodes)"),
    ("frontier", r'\{ max_nodes = 183, max_time = "06:00:00" \}', '{ max_nodes = 183, max_time = "13:00:00" }',
     "scheduler.partitions[0].time_by_nodes[1].max_time", "13:00:00 is above the partition's max_time 12:00:00"),
    ("frontier", r'\{ max_nodes = 91, max_time = "02:00:00" \}', '{ max_nodes = 91, max_time = "2h" }',
     "scheduler.partitions[0].time_by_nodes[0].max_time", "[D-]HH:MM:SS"),
]


@pytest.mark.parametrize("base,old,new,key,words", CASES)
def test_bad_site_file(tmp_path, base, old, new, key, words):
    path = _variant(tmp_path, base, old, new)
    out = tmp_path / "out"
    r = run_cli("--site", str(path), "--out", str(out))
    assert r.code == 2
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith(f"gen-recipe: {path}: {key}"), lines[0]
    assert words in lines[0]
    assert "Traceback" not in r.err
    assert not out.exists(), "no partial output on failure"


@pytest.mark.parametrize("argv,words", [
    (["--site", "frontiers"], "unknown site 'frontiers' (did you mean 'frontier'?)"),
    (["--recipe", "pytorc"], "unknown recipe 'pytorc' (did you mean 'pytorch'?)"),
    (["--format", "dock"], "invalid choice: 'dock'"),
    (["--site", "/no/such/site.toml"], "/no/such/site.toml: cannot read site file"),
    (["--site", "\x1b[2Jfrontier"], "is not a site name or path"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_arguments(tmp_path, argv, words):
    r = run_cli(*argv, "--out", str(tmp_path / "out"))
    assert r.code == 2 and r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and words in r.err
    assert not (tmp_path / "out").exists()


def test_failing_recipe_leaves_no_partial_output(tmp_path):
    """The first recipe renders, the second fails: nothing at all is written."""
    text = (SITES / "ifca.toml").read_text().replace('transformers = "4.46.3"\n', "")
    path = tmp_path / "notransformers.toml"
    path.write_text(text)
    out = tmp_path / "out"
    r = run_cli("--site", str(path), "--recipe", "pytorch", "--recipe", "llm", "--out", str(out))
    assert r.code == 2 and "software.transformers is not set" in r.err
    assert not out.exists()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_malformed_site_files_never_crash(data):
    """Mutations of real site files: parse() either returns a Site or raises SiteError — nothing else."""
    name = data.draw(st.sampled_from(sorted(p.stem for p in SITES.glob("*.toml"))))
    lines = (SITES / f"{name}.toml").read_text().splitlines()
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["delete", "duplicate", "garble", "retype", "insert"]))
        i = data.draw(st.integers(0, len(lines) - 1))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "garble":
            junk = data.draw(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12))
            pos = data.draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + junk + lines[i][pos:]
        elif op == "retype" and "=" in lines[i]:
            value = data.draw(st.sampled_from(['""', "1", "-3", "true", "[]", "{}", '"x.y"', "1.5", '[1, "a"]']))
            lines[i] = lines[i].split("=", 1)[0] + "= " + value
        else:
            lines.insert(i, data.draw(st.sampled_from(["[x]", "[[runtimes]]", "a.b = 1", "= 3", "[gpu]"])))
        if not lines:
            lines = [""]
    try:
        parse("\n".join(lines), "fuzz.toml")
    except SiteError as exc:
        message = str(exc)
        assert message.startswith("fuzz.toml: ") and "\n" not in message
