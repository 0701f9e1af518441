"""Both sides of a comparison in one kind of scheduling context (#49, docs/measuring.md): the bare side's fork
server is a session, so an autogroup, of its own at the top level; podman (cgroupfs) puts every container under
`libpod_parent`, one weight shared by all running containers, and a measured container there lost CPU to its
neighbours that the bare side did not. The suite runs podman's containers with --cgroup-parent=/ where it can,
and the workloads record the context (`scheduling`) in the like-for-like fingerprint."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from generator.images import base
from generator.model import runtimes as registry
from generator.model import site as site_mod
from generator.suite.plugin import scheduling_parent
from workloads.common import scheduling_context


def test_the_context_read_from_proc_self_cgroup():
    assert scheduling_context("4:cpu:/libpod_parent/libpod-ab12\n3:cpuacct:/\n") == "under /libpod_parent"
    assert scheduling_context("12:cpu,cpuacct:/libpod-ab12\n") == "top"
    assert scheduling_context("3:cpuset:/x/y\n1:cpu:/\n") == "top"                 # cpuset is another controller
    assert scheduling_context("0::/user.slice/user-1000.slice/session-2.scope\n") == "under /user.slice"
    assert scheduling_context("0::/\n") == "top" and scheduling_context("nonsense") is None


def test_podmans_command_takes_the_parent():
    local = site_mod.load("local")
    argv = registry.oci(local, "img", ["true"], registry.Options(cgroup_parent="/", host_cgroupns=True)).argv
    assert argv[:5] == ("podman", "run", "--rm", "--cgroup-parent=/", "--cgroupns=host")
    assert not any(a.startswith("--cgroup-parent") for a in registry.oci(local, "img", ["true"], registry.Options()).argv)


@pytest.mark.skipif(not shutil.which("podman") or os.geteuid() != 0, reason="needs podman as root (cgroupfs manager)")
def test_a_container_with_the_suites_parent_is_at_the_top_as_the_bare_side():
    parent = scheduling_parent("podman")
    if not parent:
        pytest.skip("podman's cgroup manager here is not cgroupfs: the suite leaves its containers where podman puts them")
    image = base.ensure_base_image(site_mod.load("local"))

    def context(*options: str) -> str | None:
        out = subprocess.run(["podman", "run", "--rm", *options, image, "cat", "/proc/self/cgroup"], capture_output=True,
                             text=True, timeout=120, stdin=subprocess.DEVNULL, check=True).stdout
        return scheduling_context(out)

    bare = subprocess.run(["cat", "/proc/self/cgroup"], capture_output=True, text=True, check=True, start_new_session=True)
    assert context(f"--cgroup-parent={parent}", "--cgroupns=host") == scheduling_context(bare.stdout)   # CI: both "top"
    default = context("--cgroupns=host")
    assert default == "under /libpod_parent", default               # podman's own parent: not like the bare side
