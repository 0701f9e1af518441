"""Every host path a script binds passes one rule (generator/model/site.py, `bind_problem`): absolute (or a whole
$VAR first), normalised, not /, not a system folder, and inside one only where its key allows. `host.local_tmp = "/"`
bound the host's root into the container."""

from __future__ import annotations

import pytest

from generator.errors import SiteError
from generator.model import site as site_mod
from tests.model.test_fuzz import REPO
from tests.model.test_option_lists import frontier_with

KEYS = ("host.local_tmp", "container.binds", "container.bind.paths", "container.bind.libraries", "fabric.devices")


@pytest.mark.parametrize("path, problem", [
    ("/", "is the host's root folder"), ("/etc", "is a system folder"), ("/usr", "is a system folder"),
    ("/usr/lib64", "is a system folder"), ("/lib64", "is a system folder"), ("/libx32", "is a system folder"),
    ("/var", "is a system folder"), ("/root", "is a system folder"), ("/proc/self", "is inside /proc, a system folder"),
    ("/sys/fs/cgroup", "is inside /sys"), ("/dev/shm", "is inside /dev"), ("/boot/efi", "is inside /boot"),
    ("/root/.ssh", "is inside /root"), ("/tmp/", "is not normalised"), ("/opt/../etc", "is not normalised"),
    ("//etc", "is not normalised"), ("/opt/./x", "is not normalised"), ("relative/dir", "is not an absolute path"),
    ("${SCRATCH}x", "is not an absolute path"), ("$HOME/../..", "is not normalised"),
])
def test_the_rule_refuses(path, problem):
    assert site_mod.bind_problem(path).startswith(problem), (path, site_mod.bind_problem(path))


@pytest.mark.parametrize("path", ["/tmp", "/lustre/orion", "${SCRATCH}", "$HOME/data", "/opt/cray", "/etc/hosts",
                                  "/usr/lib64/libcxi.so.1", "/lib64/libtinfo.so.6", "/var/spool/slurmd", "/run/munge",
                                  "/usr/share/libdrm"])
def test_the_rule_takes_what_sites_bind(path):
    assert site_mod.bind_problem(path) == ""


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", ["/", "/etc", "/proc/1", "/opt/../root"])
def test_every_key_that_becomes_a_bind_refuses_the_root_and_system_folders(key, value):
    text = frontier_with(key, value if key == "host.local_tmp" else [value])
    with pytest.raises(SiteError) as err:
        site_mod.parse(text, "mine.toml")
    said = str(err.value)
    assert said.startswith(f"mine.toml: {key}") and "\n" not in said and "(write " in said, said


def test_what_a_key_may_hold_inside_system_folders_is_its_own():
    """Bind mode mounts files of /etc, /usr, /lib64, /var; the kernel caches may be in /var/tmp and nowhere else of
    the system's; devices are in /dev and nowhere else."""
    for key, value in (("host.local_tmp", "/var/tmp"), ("container.bind.paths", ["/etc/hosts"]),
                       ("container.bind.libraries", ["/lib64/libtinfo.so.6"]), ("fabric.devices", ["/dev/cxi*"]),
                       ("container.binds", ["${SCRATCH}:/scratch"])):
        site_mod.parse(frontier_with(key, value), "mine.toml")
    for key, value, said in (("host.local_tmp", "/usr/local/tmp", "is inside /usr"), ("host.local_tmp", "/dev/shm", "inside /dev"),
                             ("fabric.devices", ["/opt/cxi0"], "is not inside /dev"),
                             ("container.binds", ["/dev/cxi0"], "inside /dev"),
                             ("container.binds", ["/lustre:/usr"], "DST is a system folder"),
                             ("container.bind.libraries", ["/a:/b"], "has more than a path"),
                             ("container.bind.paths", ["/opt/x:/tmp/y"], "bind mode's destination")):
        with pytest.raises(SiteError, match=said):
            site_mod.parse(frontier_with(key, value), "mine.toml")


def test_local_tmp_at_the_root_is_refused_and_nothing_binds_it(tmp_path):
    """The review's finding: host.local_tmp = "/" bound the host's root into podman and udocker containers."""
    text = (REPO / "sites" / "local.toml").read_text()
    path = tmp_path / "root.toml"
    path.write_text(text.replace("[host]\n", '[host]\nlocal_tmp = "/"\n', 1))
    with pytest.raises(SiteError, match=r"root.toml: host.local_tmp: '/' is the host's root folder"):
        site_mod.load(str(path))


def test_the_shipped_sites_pass():
    for name in sorted(set(site_mod.builtin_names().values())):
        site = site_mod.load(name)
        specs = (*site.container.binds, *site.container.bind.paths, *site.container.bind.libraries)
        assert all(not site_mod.bind_problem(p) for s in specs for p in s.split(":")), name
