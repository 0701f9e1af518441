"""Bind mode on this machine (docs/bind.md): the local-bind site's plan, image, launcher line and environment,
and the check of which MPI library the container's ranks loaded. Pure; suites/test_mpi.py runs it for real."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from generator.errors import RecipeError
from generator.model import site as site_mod
from generator.recipe import plan as plan_mod
from generator.recipe.blocks.stack import mount_points
from generator.recipe.render import recipe_text
from generator.run import launch, runtimes
from generator.suite.mpi import library_problem, transport_problem

HOST = "/opt/gen-recipe/mpich/5.0.2"
IMAGE_LIB = "/usr/lib/x86_64-linux-gnu/libmpich.so.12.2.2"
HOST_LIB = f"{HOST}/lib/libmpi.so.12"


@pytest.fixture(scope="module")
def bind_site():
    return site_mod.load("local-bind")


def test_the_image_carries_another_mpich_of_the_same_abi_and_says_why(bind_site):
    p = plan_mod.plan(bind_site)
    assert (p.mpi.flavour, str(p.mpi.version), p.mpi.source) == ("mpich", "4.0.2", "distro")
    assert p.mpi4py == "wheel"
    said = {d.what: d for d in p.decisions}
    assert "same ABI (libmpi.so.12)" in said["container MPI"].because
    assert "mpi.abi" in said["container MPI"].facts
    assert "python3-mpi4py is built for its default MPI, openmpi" in said["mpi4py"].because


def test_another_version_stays_refused_where_the_abi_is_the_version():
    galileo = site_mod.load("galileo")        # Open MPI built from source: the exact version or nothing
    other = dataclasses.replace(galileo, software=dataclasses.replace(galileo.software,
                                                                      mpi_version=site_mod.Version("4.1.6")))
    with pytest.raises(RecipeError, match="an image with Open MPI must carry the host's exact version"):
        plan_mod.plan(other)


def test_a_version_the_pinned_packages_do_not_have_is_refused(bind_site):
    other = dataclasses.replace(bind_site, software=dataclasses.replace(bind_site.software,
                                                                        mpi_version=site_mod.Version("3.4.3")))
    with pytest.raises(RecipeError, match=r"software.mpi_version 3.4.3 differs from software.distro_pins.mpich"):
        plan_mod.plan(other)


def test_the_image_holds_the_mount_point_only_where_a_runtime_cannot_make_it(bind_site):
    assert mount_points(bind_site) == ["/opt/gen-recipe"]
    assert mount_points(site_mod.load("frontier")) == []     # Apptainer makes its mount points
    assert mount_points(site_mod.load("local")) == []        # no bind mode
    dockerfile = recipe_text(bind_site, "pytorch", "docker")
    assert "RUN mkdir -p /opt/gen-recipe\n" in dockerfile
    assert "mpi4py==4.1.2" in dockerfile and "libmpich12=4.0.2-3+b1" in dockerfile
    assert "python3-mpi4py" not in dockerfile


@pytest.mark.parametrize(("runtime", "expected"), [("podman", ("-pmi-port",)), ("charliecloud", ()), ("", ())])
def test_hydra_listens_on_a_port_for_containers_that_drop_its_socket(bind_site, runtime, expected):
    assert launch.launcher(bind_site, 1, 2, 0, runtime=runtime) == ("mpiexec", "-n", "2", "-ppn", "2", *expected)


def test_open_mpi_launchers_take_no_pmi_port():
    local = site_mod.load("local")
    assert "-pmi-port" not in launch.launcher(local, 1, 2, 0, runtime="podman")


def test_the_host_mpi_without_a_module_is_put_on_the_paths_as_a_module_would(bind_site):
    assert runtimes.host_mpi_env(bind_site) == {"PATH": f"{HOST}/bin", "LD_LIBRARY_PATH": f"{HOST}/lib"}
    assert runtimes.with_host_mpi(bind_site, {"LD_LIBRARY_PATH": "/x"})["LD_LIBRARY_PATH"] == f"{HOST}/lib:/x"
    assert runtimes.with_host_mpi(bind_site, {"PATH": "/usr/bin"}) == {"PATH": f"{HOST}/bin:/usr/bin",
                                                                       "LD_LIBRARY_PATH": f"{HOST}/lib"}
    assert runtimes.host_mpi_env(site_mod.load("local")) == {}         # Open MPI in /usr
    assert runtimes.host_mpi_env(site_mod.load("perlmutter")) == {}    # cray-mpich in the default environment
    script = launch.script(bind_site, launch.Job(workload="mpi", tasks_per_node=2, image="img"))
    assert f'export PATH="{HOST}/bin${{PATH:+:$PATH}}"\n' in script
    assert f'export LD_LIBRARY_PATH="{HOST}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"\n' in script
    hybrid = launch.script(bind_site, launch.Job(workload="mpi", tasks_per_node=2, image="img", mode="hybrid",
                                                 runtime="charliecloud"))
    assert "export PATH=" in hybrid        # Hydra starts the hybrid ranks too: the host MPI's launcher


def test_a_host_path_as_the_container_sees_it(bind_site):
    assert runtimes.container_path(bind_site, HOST) == HOST
    moved = dataclasses.replace(bind_site, container=dataclasses.replace(
        bind_site.container, bind=dataclasses.replace(bind_site.container.bind, paths=("/opt/gen-recipe:/host",))))
    assert runtimes.container_path(moved, f"{HOST}/lib") == "/host/mpich/5.0.2/lib"
    assert runtimes.container_path(moved, "/opt/gen-recipes") == ""


def record(*paths, version="MPICH Version:      5.0.2\nMPICH Release date: ...", transport="shm"):
    return {"mpi_library_paths": list(paths), "library_version": version, "transport": transport, "network": None}


def test_bind_mode_whose_ranks_loaded_the_image_mpi_is_named(bind_site):
    loaded = record(IMAGE_LIB, version="MPICH Version:      4.0.2\n")
    problem = library_problem(bind_site, "bind", loaded)
    assert problem.startswith(f"bind mode, but the container's ranks loaded {IMAGE_LIB} (MPICH Version:      4.0.2)")
    assert "did not take" in problem and HOST in problem
    assert library_problem(bind_site, "bind", record(HOST_LIB)) is None
    assert "no MPI library" in library_problem(bind_site, "bind", record())
    mixed = library_problem(bind_site, "bind", record(HOST_LIB, IMAGE_LIB))      # one rank of two swapped
    assert IMAGE_LIB in mixed and HOST_LIB not in mixed
    assert "older than the suite's" in library_problem(bind_site, "bind", {"library_version": "MPICH"})


def test_hybrid_mode_whose_ranks_loaded_the_host_mpi_is_named(bind_site):
    assert library_problem(bind_site, "hybrid", record(IMAGE_LIB, version="MPICH Version: 4.0.2")) is None
    assert HOST_LIB in library_problem(bind_site, "hybrid", record(HOST_LIB))


def test_hybrid_mode_with_the_image_mpi_of_another_version_is_like_for_like(bind_site):
    bare = record(HOST_LIB)
    image = record(IMAGE_LIB, version="MPICH Version:      4.0.2\n")
    assert transport_problem(bare, image, bind_site, "hybrid") is None
    assert "library is" in transport_problem(bare, image, site_mod.load("local"), "hybrid")   # there: one version
    assert "did not take" in transport_problem(bare, image, bind_site, "bind")


def test_a_system_prefix_cannot_tell_host_from_image():
    local = site_mod.load("local")
    assert library_problem(local, "bind", record("/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.2")) is None


@pytest.mark.parametrize(("key", "value", "says"), [
    ("paths", '["/opt/gen-recipe:relative/dir"]', "container.bind.paths[0]"),
    ("paths", '["/opt/gen-recipe:/tmp/mpi"]', "container.bind.paths[0]"),
    ("paths", '[":/usr"]', "container.bind.paths[0]"),
    ("paths", '["/opt/gen-recipe:/opt/x:ro"]', "more than SRC:DST"),
    ("paths", '["/opt/gen-recipe:/opt/../etc"]', "container.bind.paths[0]"),
    ("install_path", '"relative/path"', "mpi.setup"),
    ("install_path", '"/usr"', "mpi.setup"),
])
def test_bad_bind_destinations_and_prefixes_are_one_line(tmp_path, key, value, says):
    src = (Path(__file__).resolve().parents[2] / "sites" / "local-bind.toml").read_text()
    if key == "paths":
        src = src.replace('paths = ["/opt/gen-recipe"]', f"paths = {value}")
    else:
        src = src.replace('install_path = "/opt/gen-recipe/mpich/5.0.2"', f"install_path = {value}")
    path = tmp_path / "local-bind.toml"
    path.write_text(src)
    with pytest.raises(site_mod.SiteError) as err:
        site_mod.load(str(path))
    assert says in str(err.value) and "\n" not in str(err.value)
