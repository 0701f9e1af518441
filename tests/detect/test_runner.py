"""The probe runner: missing, hanging, failing and garbage-printing commands end as "not detected",
never as a crash; the real subprocess runner with fake commands on PATH; fake runners."""

from __future__ import annotations

import time

import pytest

from generator.model import site as site_mod
from generator.detect.machine import detect, detect_site, site_toml
from generator.detect.runner import NOT_FOUND, TIMED_OUT
from generator.detect.table import PROBES

GARBAGE = "\x00\x01\x02\x7f\ufffd ☃ garbage " * 40


def script(bindir, name, body):
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def fake_machine(tmp_path):
    """A PATH with only fake commands, an empty root and a HOME that must stay untouched."""
    bindir, home, root = tmp_path / "bin", tmp_path / "home", tmp_path / "root"
    for d in (bindir, home, root):
        d.mkdir()
    script(bindir, "srun", "/bin/sleep 30 & /bin/sleep 30")          # hangs, with a child holding the pipe
    script(bindir, "mpirun", "printf '\\377\\376 garbage \\001\\n'")          # garbage, exit 0
    script(bindir, "nvidia-smi", "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; exit 9")
    script(bindir, "ch-run", "[ -n \"$USER\" ] || { echo 'error: $USER not set' >&2; exit 1; }; echo 0.31 >&2")
    script(bindir, "udocker", "/bin/mkdir -p \"$HOME/.udocker\" && echo 'version: 1.3.17'")
    script(bindir, "podman", "echo 'podman version 4.3.1'")
    env = {"PATH": str(bindir), "HOME": str(home)}  # no USER: ch-run needs one, the runner sets it
    return env, root, home


def test_missing_hanging_failing_and_garbage_commands(fake_machine):
    env, root, home = fake_machine
    start = time.monotonic()
    f = detect(root=root, env=env, timeout=0.5)
    assert time.monotonic() - start < 10, "a hanging probe (and its children) must be killed at the time limit"
    status = {o.probe.key: o.status for o in f.observations}
    assert status["srun --version"] == status["srun --mpi=list"] == "timed out after 0.5 s"
    assert status["mpirun --version"].startswith("output not understood:")
    assert status["nvidia-smi"].startswith("exit 9: NVIDIA-SMI has failed")
    assert status["apptainer --version"] == "not found"
    assert status["/etc/os-release"] == "not there"
    assert not f.get("host.scheduler").detected and "timed out" in f.get("host.scheduler").how
    assert not f.get("mpi.flavour").detected and "mpirun --version: output not understood" in f.get("mpi.flavour").how
    assert f.runtimes == {"charliecloud": "0.31", "udocker": "1.3.17", "podman": "4.3.1"}
    assert list(home.iterdir()) == [], "udocker creates ~/.udocker on every call: it runs with a scratch HOME"
    text = site_toml(f)
    site = site_mod.parse(text, "fake.toml")
    assert site.host.os == "unknown" and "os" in site.host.unverified
    assert "# not detected: internet" in text and "PLACEHOLDER" in text


def test_empty_machine_loads_with_placeholders(tmp_path):
    f = detect(runner={}, root=tmp_path, env={})
    assert all(not fact.detected for key, fact in f.facts.items()
               if key not in ("host.scheduler", "host.launcher", "gpu.vendor", "gpu.stack", "fabric.kind",
                              "fabric.provider", "fabric.providers")), \
        [k for k, v in f.facts.items() if v.detected]
    # what *is* known: no scheduler, no GPU tools or devices, no fabric devices
    assert (f.value("host.scheduler"), f.value("gpu.stack"), f.value("fabric.kind")) == ("none", "none", "ethernet")
    site = site_mod.parse(site_toml(f, "empty"), "empty.toml")
    assert site.mpi.flavour == "none" and site.runtimes[0].name == "apptainer"
    assert site.runtimes[0].unverified == ("name", "version") and site.host.unverified == ("os", "os_version")


def test_garbage_from_every_command_and_file(tmp_path):
    for path in ("etc/os-release", "proc/cpuinfo", "proc/sys/kernel/hostname", "opt/rocm/.info/version"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(GARBAGE.encode("utf-8", "surrogatepass") + b"\xff\xfe\n")
    f = detect(runner=lambda argv: (0, GARBAGE), root=tmp_path, env={"LOADEDMODULES": GARBAGE})
    bad = [o.probe.key for o in f.observations if o.ok and o.probe.key != "environment"]
    assert bad == []
    site_mod.parse(site_toml(f), "garbage.toml")


def test_function_runner_gets_argv_and_its_codes_mean_not_found_and_timed_out(tmp_path):
    seen = []

    def runner(argv):
        seen.append(tuple(argv))
        if argv[0] == "mpirun":
            return TIMED_OUT, ""
        if argv[0] == "ompi_info":
            return 0, "                Open MPI: 4.1.6\n                  Prefix: /opt/ompi\n"
        return NOT_FOUND, ""

    f = detect(runner=runner, root=tmp_path, env={}, timeout=3)
    assert ("fi_info", "-l") in seen and ("udocker", "--allow-root", "--version") in seen
    assert len(seen) == sum(1 for p in PROBES if p.argv)
    assert (f.value("mpi.flavour"), f.value("mpi.version"), f.value("mpi.install_path")) == ("openmpi", "4.1.6", "/opt/ompi")
    assert next(o.status for o in f.observations if o.probe.key == "mpirun --version") == "timed out after 3 s"


def test_gpu_devices_without_a_working_driver_tool(tmp_path):
    (tmp_path / "dev").mkdir()
    for n in range(2):
        (tmp_path / "dev" / f"nvidia{n}").write_text("")
    f = detect(runner={"nvidia-smi --query-gpu": (9, "NVIDIA-SMI has failed because it couldn't communicate with the "
                                                      "NVIDIA driver.")}, root=tmp_path, env={})
    assert (f.value("gpu.vendor"), f.value("gpu.stack"), f.value("gpu.count_per_node")) == ("nvidia", "cuda", 2)
    assert not f.get("gpu.version").detected
    site = site_mod.parse(site_toml(f), "x.toml")
    assert site.gpu.stack == "cuda" and str(site.gpu.version) == "0" and site.gpu.unverified == ("version",)


def test_detect_site_returns_a_validated_site(tmp_path):
    site = detect_site("mysite", runner={"mpirun --version": "mpirun (Open MPI) 4.1.4\n"}, root=tmp_path, env={})
    assert isinstance(site, site_mod.Site)
    assert (site.name, site.mpi.flavour, str(site.mpi.version), site.host.launcher) == ("mysite", "openmpi", "4.1.4", "mpirun")
