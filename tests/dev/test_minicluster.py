"""`gen-recipe minicluster`: the config it writes, and the real cluster (slurmctld, two slurmd, munged)."""

from __future__ import annotations

import argparse
import dataclasses
import contextlib
import io
import json
import re
import subprocess
from pathlib import Path

import pytest

from generator.cli import minicluster as minicluster_cli
from generator.dev import minicluster
from generator.errors import CheckFailed

from .conftest import REPO


def test_conf_keeps_everything_under_the_state_directory():
    lay = minicluster.Layout(Path("/srv/mc"))
    local = dataclasses.replace(minicluster.shape_named(None), nodes=tuple(
        dataclasses.replace(n, cpus=4) for n in minicluster.shape_named(None).nodes))
    conf = minicluster.slurm_conf(lay, "alice", local)
    paths = re.findall(r"=(/[^\s]*)", conf)
    assert len(paths) == 8 and sum(p.startswith("/srv/mc/") for p in paths) == 7
    assert "AuthInfo=socket=/srv/mc/munge/munge.socket.2" in conf
    assert "ClusterName=local_slurm" in conf and "AccountingStorageType=accounting_storage/none" in conf
    assert "PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP" in conf
    # one PMIx step directory per node, under /tmp (which containers share), named after the state directory
    assert re.search(r"^TmpFS=/tmp/gen-recipe-minicluster-[0-9a-f]{8}/tmp-%n$", conf, re.M)
    assert lay.tmp_root != minicluster.Layout(Path("/srv/mc2")).tmp_root
    assert "SlurmUser=alice" in conf
    p = minicluster.ports(lay.root)
    assert f"NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={p['n1']} CPUs=4 State=UNKNOWN" in conf
    assert f"NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={p['n2']} CPUs=4 State=UNKNOWN" in conf
    assert conf == minicluster.slurm_conf(lay, "alice", local)


def test_ports_are_fixed_per_directory_and_apart_between_directories():
    a, b = minicluster.ports(Path("/x/build/minicluster")), minicluster.ports(Path("/y/build/minicluster"))
    assert a == minicluster.ports(Path("/x/build/minicluster"))
    assert len(set(a.values())) == 5 and not set(a.values()) & set(b.values())     # controller, 2 nodes, dbd, db
    assert all(1024 < port < 32768 for port in (*a.values(), *b.values()))


def test_state_directory_default_and_override(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert minicluster.layout(environ={}).root == tmp_path / "build" / "minicluster"
    assert minicluster.layout(environ={minicluster.ENV_VAR: "/srv/mc"}).root == Path("/srv/mc")
    assert minicluster.layout("/opt/mc", environ={minicluster.ENV_VAR: "/srv/mc"}).root == Path("/opt/mc")


def test_start_commands():
    lay = minicluster.Layout(Path("/srv/mc"))
    slurmd = minicluster.start_argv(lay, "slurmd-n2")
    assert slurmd[:4] == ["unshare", "--mount", "--propagation", "private"]     # its own /dev/shm
    assert slurmd[-7:] == ["env", "PMIX_MCA_gds=hash", "slurmd", "-f", "/srv/mc/slurm.conf", "-N", "n2"]   # PMIx: hash
    assert minicluster.start_argv(lay, "slurmctld")[:2] == ["slurmctld", "-c"]
    munged = minicluster.start_argv(lay, "munged")
    assert "--socket=/srv/mc/munge/munge.socket.2" in munged and "--key-file=/srv/mc/munge.key" in munged
    ctld = minicluster.start_argv(lay, "slurmctld", accounting=True)        # sees /srv/mc/munge at /run/munge
    assert ctld[:4] == ["unshare", "--mount", "--propagation", "private"] and "/srv/mc/munge" in ctld


def _cli(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    minicluster_cli.add_arguments(parser)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = minicluster_cli.run(parser.parse_args(list(argv)))
    return code, out.getvalue()


def test_status_of_a_stopped_cluster(tmp_path):
    code, out = _cli("status", "--dir", str(tmp_path / "none"))
    assert code == 1
    assert out.count(" stopped\n") == 4 and f"export SLURM_CONF={tmp_path / 'none' / 'slurm.conf'}" in out


# -- the real cluster ------------------------------------------------------------------------------

def test_up_is_idempotent(cluster):
    assert cluster.up and set(cluster.nodes) == {"n1", "n2"}
    again = minicluster.up(cluster.root)
    assert again.pids == cluster.pids
    code, out = _cli("status", "--dir", str(cluster.root))
    assert code == 0 and "slurmd-n2  running" in out and out.rstrip().endswith(f"SLURM_CONF={cluster.root}/slurm.conf")


def test_srun_reaches_both_nodes(slurm_env):
    proc = subprocess.run(["srun", "-N2", "-n2", "bash", "-c", "echo $SLURMD_NODENAME $SLURM_PROCID"],
                          env=slurm_env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["n1 0", "n2 1"]


def test_each_node_has_its_own_dev_shm(slurm_env):
    proc = subprocess.run(["srun", "-N2", "-n2", "bash", "-c",
                           'touch /dev/shm/probe-$SLURMD_NODENAME && sleep 1 && echo $SLURMD_NODENAME $(ls /dev/shm)'
                           ' && rm /dev/shm/probe-$SLURMD_NODENAME'],
                          env=slurm_env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["n1 probe-n1", "n2 probe-n2"]
    assert not list(Path("/dev/shm").glob("probe-n*"))


@pytest.mark.parametrize("nodes", [1, 2])
def test_pmix_open_mpi_on_one_and_two_nodes(slurm_env, nodes):
    code = ("import json, os; from mpi4py import MPI; c = MPI.COMM_WORLD; "
            "print(json.dumps([c.Get_rank(), c.Get_size(), os.environ['SLURMD_NODENAME'], c.allreduce(1)]))")
    proc = subprocess.run(["srun", "--mpi=pmix", f"-N{nodes}", "-n2", "python3", "-c", code],
                          env=slurm_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ranks = sorted(json.loads(ln) for ln in proc.stdout.splitlines())
    assert [r[0] for r in ranks] == [0, 1] and all(r[1] == 2 and r[3] == 2 for r in ranks)
    assert {r[2] for r in ranks} == ({"n1"} if nodes == 1 else {"n1", "n2"})


def test_a_second_cluster_comes_up_beside_and_goes_down_leaving_nothing(cluster):
    other = REPO / "build" / "minicluster-tests-2"
    try:
        st = minicluster.up(other)
        assert st.up and not set(st.pids.values()) & set(cluster.pids.values())
    finally:
        stopped = minicluster.down(other)
    assert {"munged", "slurmctld", "slurmd-n1", "slurmd-n2"} <= set(stopped)
    assert not any(minicluster.status(other).pids.values())
    assert minicluster.down(other) == []
    assert minicluster.status(cluster.root).up          # the session's cluster is untouched


def test_tmp_root_must_be_a_directory_of_ours(tmp_path):
    minicluster._own_dir(tmp_path / "mine")
    assert (tmp_path / "mine").is_dir() and minicluster._is_own_dir(tmp_path / "mine")
    minicluster._own_dir(tmp_path / "mine")                 # idempotent
    (tmp_path / "link").symlink_to(tmp_path / "mine")        # a link planted in /tmp is refused
    with pytest.raises(CheckFailed, match="not a directory of ours"):
        minicluster._own_dir(tmp_path / "link")
