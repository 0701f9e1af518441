"""The example application on this machine, end to end through the user's commands: `gen-recipe build
--recipe examples/trainer/app.toml`, its image run with every local runtime, `gen-recipe launch --recipe`
executed, and `pytest suites/ --site=local --recipe ...` giving a verdict for its workload."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pytest

from generator.run import runtimes
from generator.images import convert
from generator.suite import report
from generator.suite.plugin import confined

from test_integration import CACHE, REPO, gen_recipe, last_json, run  # tests/images is on sys.path (rootdir import)

APP = "examples/trainer/app.toml"
SHORT = ("python3", "/opt/trainer/train.py", "--steps", "5", "--warmup", "1")


@pytest.fixture(scope="module")
def app_image(tools, local_base_image, local_build, local_site):
    """The trainer image, built by the CLI as a user would (after the pytorch image: its layers are reused)."""
    r = gen_recipe("build", "--site", "local", "--recipe", APP)
    assert r.returncode == 0, r.stderr[-3000:]
    found = re.search(r"(localhost/gen-recipe/trainer-local:\S+)", r.stdout)
    assert found, r.stdout
    again = gen_recipe("build", "--site", "local", "--recipe", APP)
    assert again.stdout.startswith("up to date: ") and found.group(1) in again.stdout
    yield found.group(1)
    # its udocker container goes (nothing after this module runs it); its Charliecloud directory stays for the
    # verdict below, which ./scripts/test runs in the part that measures (unpacking it again costs a minute)
    convert.drop_runtime_image(local_site, found.group(1), "udocker", cache_dir=CACHE / "images")


@pytest.mark.parametrize("runtime", ["charliecloud", "podman", "udocker"])
def test_app_image_runs_with_every_local_runtime(app_image, local_site, run_env, runtime):
    image = convert.runtime_image(local_site, app_image, runtime, cache_dir=CACHE / "images")
    opts = runtimes.Options(mode="hybrid", allow_root=os.geteuid() == 0)
    run_env = {**run_env, **runtimes.PLATFORMS[runtime].local_env()}     # where the locally made images are
    out = run(runtimes.command(local_site, image, SHORT, opts, runtime), run_env)
    assert out.returncode == 0, out.stderr[-2000:]
    record = last_json(out.stdout)
    assert record["samples_per_s"] > 0 and record["steps"] == 5
    env = run(runtimes.command(local_site, image, ("python3", "-c", "import os, tqdm; print(os.environ['OMP_NUM_THREADS'], "
                                                   "tqdm.__version__)"), opts, runtime), run_env)
    assert env.stdout.split()[-2:] == ["1", "4.67.1"], env.stdout + env.stderr[-500:]


def test_app_image_compiles_with_torch(app_image, local_site, run_env, tmp_path):
    """An app on the pytorch base carries what torch.compile needs: a compiled function runs in it (podman, as
    the image's user), its kernels in the cache folder given."""
    caches = runtimes.kernel_cache_env(local_site, "/tmp/kernels")
    code = ("import numpy, torch; f = torch.compile(lambda x: x.cos() * 3); x = torch.from_numpy(numpy.ones(4)); "
            "print('compiled', f(x).sum().item())")
    tmp_path.chmod(0o1777)                   # the image's user writes there, as in a node's /tmp
    r = subprocess.run(["podman", "run", "--rm", "-v", f"{tmp_path}:/tmp", *(f"--env={k}={v}" for k, v in caches.items()),
                        app_image, "python3", "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    word, value = r.stdout.split()[-2:]
    assert word == "compiled" and abs(float(value) - 12 * math.cos(1)) < 1e-6, r.stdout
    assert any((tmp_path / "kernels" / "inductor").rglob("*.so"))


def test_app_launch_script_runs(app_image, tmp_path, run_env):
    script = tmp_path / "run.sh"
    r = gen_recipe("launch", "--site", "local", "--recipe", APP, "--runtime", "podman", "--out", str(script), "--", "--steps", "5")
    assert r.returncode == 0, r.stderr
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=run_env, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert last_json(done.stdout)["steps"] == 5


@pytest.mark.measures          # ./scripts/test runs it with the suite, on one CPU of its own
def test_suite_gives_a_verdict_for_the_apps_workload(app_image, run_env, cpu_pin, tmp_path):
    """One runtime here (the three runtimes run above), a fixed 3 pairs (the fewest --rounds takes): the suite
    measures the app's workload on both sides and records an honest verdict. Its statistics are the built-in
    workloads' (their tests decide pass/fail); 3 pairs of this single-threaded trainer may not decide, so
    "inconclusive" is a verdict here too, and only a verdict of "fail" or no verdict fails this test."""
    out = tmp_path / "results.json"
    r = subprocess.run([sys.executable, "-m", "pytest", "suites/", "--site=local", "--recipe", APP, "--runtime",
                        "charliecloud", "--rounds", "3", "--benchmark-enable", f"--benchmark-json={out}",
                        "-p", "no:cacheprovider", "-q"], capture_output=True, text=True, cwd=REPO, env=run_env,
                       timeout=1200, preexec_fn=confined(cpu_pin))     # the nested suite on this worker's CPU
    # the suite's summary table: "OUTCOME  message" (a failing test's own line also names the workload)
    verdicts = [ln for ln in r.stdout.splitlines()
                if ln.split(" ", 1)[0] in ("PASS", "FAIL", "INCONCLUSIVE") and "trainer (charliecloud)" in ln]
    assert verdicts and out.is_file(), r.stdout[-3000:]
    records = report.rows(json.loads(out.read_text()))         # read back as `gen-recipe report` reads it
    assert [(rec.workload, rec.runtime, rec.pairs) for rec in records] == [("trainer", "charliecloud", 3)]
    rec = records[0]
    assert len(rec.bare) == len(rec.container) == 3 and min(rec.bare + rec.container) > 0
    assert rec.low <= rec.ratio <= rec.high and rec.extra["unit"] == "samples/s"
    assert verdicts[-1].split()[0] == rec.verdict.upper(), verdicts
    assert rec.verdict in ("pass", "inconclusive"), rec.message
    failed = [ln for ln in r.stdout.splitlines() if ln.startswith("FAILED ")]
    expect = [] if rec.verdict == "pass" else ["FAILED suites/test_app.py::test_app_overhead[charliecloud]"]
    assert [ln.split(" - ")[0] for ln in failed] == expect and r.returncode == (0 if not expect else 1), r.stdout[-3000:]
    assert "deselected" in r.stdout       # the built-in workloads' measurements are not run with --recipe


def test_an_app_with_its_own_wheel_builds_and_imports_it(tools, local_base_image, tmp_path, run_env):
    """[python] wheels: a wheel made here goes into the image's environment (and nowhere else in it). On the base
    image alone (base "none": a Python environment for the wheel, no torch stack), built in seconds; on the torch
    stack the wheel gets the same layer after the stack's (tests/run/test_image_delivery.py, its build context)."""
    pkg = tmp_path / "pkg"
    (pkg / "mypkg").mkdir(parents=True)
    (pkg / "mypkg" / "__init__.py").write_text("VALUE = 42\n")
    (pkg / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                                        '[project]\nname = "mypkg"\nversion = "1.0"\n')
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    (app / "src" / "main.py").write_text("import json, mypkg\nprint(json.dumps({'value': mypkg.VALUE}))\n")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(app / "dist"), str(pkg)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (app / "app.toml").write_text('schema = 1\nname = "wheelapp"\nbase = "none"\n[python]\n'
                                  'wheels = ["dist/mypkg-1.0-py3-none-any.whl"]\n[files]\n"src" = "/opt/wheelapp"\n'
                                  '[run]\ncommand = ["python3", "/opt/wheelapp/main.py"]\n')
    r = gen_recipe("build", "--site", "local", "--recipe", str(app / "app.toml"))
    assert r.returncode == 0, r.stderr[-3000:]
    ref = re.search(r"(localhost/gen-recipe/wheelapp-local:\S+)", r.stdout).group(1)
    out = subprocess.run(["podman", "run", "--rm", ref], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and last_json(out.stdout) == {"value": 42}, out.stderr[-1000:]
    leftovers = subprocess.run(["podman", "run", "--rm", ref, "sh", "-c", "ls /app-wheels /opt/wheels 2>&1; true"],
                               capture_output=True, text=True, timeout=300)
    assert "No such file" in leftovers.stdout and ".whl" not in leftovers.stdout
    subprocess.run(["podman", "rmi", ref], capture_output=True, timeout=120)
