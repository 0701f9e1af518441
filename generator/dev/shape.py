"""A site's Slurm as this machine rehearses it (pure): the partitions, node features, GPUs, node sharing,
accounts and QOS of the site's `[scheduler]` facts as slurm.conf lines, accounting commands, a
job_submit.lua for the rules slurm.conf cannot say, and the site's modules as Lmod modulefiles.

`generator.dev.minicluster` runs what these functions write: `gen-recipe minicluster up --shape SITE`.
What cannot be had here is named, not faked silently: GPUs are counted GRES whose device files are links
to /dev/null (Slurm 22.05 drops a GPU without a file), nodes declare the site's CPU count
(`SlurmdParameters=config_overrides`), and a site that names no partition gets one default partition,
`main`.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from generator.model.site import Qos, Site, wall_seconds

FALLBACK_PARTITION = "main"          # a site that names no partition: one default partition of this name
NO_ALLOCATION = "noalloc"            # where accounts are required: the users' default account, no jobs allowed
REHEARSAL_ACCOUNT = "rehearsal"      # the account jobs name where the site gives no example of one


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    gpus: int
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class PartitionLine:
    name: str
    nodes: tuple[str, ...]
    default: bool = False
    max_time: str = ""
    max_nodes: int = 0
    exclusive: bool = False
    time_by_nodes: tuple[tuple[int, int], ...] = ()    # (largest job in nodes, its limit in minutes): job_submit.lua


@dataclass(frozen=True)
class Shape:
    """One site's scheduler as the rehearsal cluster has it."""

    site: str
    cluster: str                          # Slurm's ClusterName (the accounting database's too)
    nodes: tuple[Node, ...]
    partitions: tuple[PartitionLine, ...]
    qos: tuple[Qos, ...] = ()
    default_qos: str = ""
    account: str = ""                     # the account the site's jobs name ("" where none is needed)
    account_required: bool = False
    constraint: str = ""                  # a node feature every job must ask for (job_submit.lua)
    constraint_message: str = ""
    modules: tuple[str, ...] = ()         # every module the site's scripts may load
    binds: tuple[str, ...] = ()           # host folders the site's scripts mount (bind_sources)
    libraries: tuple[str, ...] = ()       # host files bind mode mounts one by one
    variables: tuple[str, ...] = ()       # the user's variables the binds name (${SCRATCH}): folders of their own

    @property
    def accounting(self) -> bool:
        """Accounts or QOS to enforce: slurmdbd (with MariaDB) behind the controller."""
        return bool(self.qos) or self.account_required

    @property
    def submit_rules(self) -> bool:
        """Rules slurm.conf cannot say (a constraint, wall-time limits by job size): job_submit.lua."""
        return bool(self.constraint) or any(p.time_by_nodes for p in self.partitions)

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @property
    def gres(self) -> bool:
        return any(n.gpus for n in self.nodes)


def cluster_name(site: str) -> str:
    """Slurm's ClusterName for a site: lower-case letters, digits and '_' (it names database tables)."""
    return re.sub(r"[^a-z0-9_]", "_", site.lower())[:40] or "minicluster"


def modules_of(site: Site) -> tuple[str, ...]:
    """Every module a launch script of `site` may load, in order, once each."""
    names = [*site.scheduler.setup, *site.host.modules, *site.mpi.modules]
    for rt in site.runtimes:
        names += [*rt.modules, *rt.bind_modules]
    return tuple(dict.fromkeys(names))


def shape_of(site: Site, cpus_here: int = 2, account: str = "") -> Shape:
    """The rehearsal cluster of `site`: two nodes of the kind its jobs use (n1, n2: with the site's GPUs
    and its constraint as a feature) and, where the site has partitions of the other kind, two more
    (c1, c2 without GPUs, or g1, g2 with them); each partition on the nodes of its kind. `account`: the one
    jobs name (default: the site's example of one, else `rehearsal`)."""
    sched, gpus = site.scheduler, site.gpu.count_per_node
    cpus = (site.host.cores_per_node * site.host.threads_per_core) or max(cpus_here, gpus)
    features = (sched.constraint,) if sched.constraint else ()
    nodes = [Node("n1", cpus, gpus, features), Node("n2", cpus, gpus, features)]
    other = [p for p in sched.partitions if p.gpus != bool(gpus)]
    if other:
        prefix, other_gpus = ("c", 0) if gpus else ("g", max(gpus, 1))
        nodes += [Node(f"{prefix}1", cpus, other_gpus, features), Node(f"{prefix}2", cpus, other_gpus, features)]
    parts = [PartitionLine(p.name, tuple(n.name for n in nodes if bool(n.gpus) == p.gpus), p.default, p.max_time,
                           p.max_nodes, exclusive=not p.shared,
                           time_by_nodes=tuple((b.max_nodes, -(-wall_seconds(b.max_time) // 60)) for b in p.time_by_nodes))
             for p in sched.partitions]
    if not parts:
        parts = [PartitionLine(FALLBACK_PARTITION, ("n1", "n2"), default=True)]
    required = sched.account == "required"
    account = (account or sched.account_example or REHEARSAL_ACCOUNT).lower() if required or sched.qos else ""
    default_qos = next((q.name for q in sched.qos if q.default), "")
    message = sched.refusals.get("constraint", "") or (f"jobs at {site.name} must ask for the node feature "
                                                       f"{sched.constraint} (--constraint={sched.constraint})")
    return Shape(site=site.name, cluster=cluster_name(site.name), nodes=tuple(nodes), partitions=tuple(parts),
                 qos=sched.qos, default_qos=default_qos, account=account, account_required=required,
                 constraint=sched.constraint, constraint_message=message if sched.constraint else "",
                 modules=modules_of(site), binds=bind_sources(site.container.bind.paths + site.container.binds),
                 libraries=bind_sources(site.container.bind.libraries),
                 variables=bind_variables(site.container.bind.paths + site.container.binds))


SHELL_SET = frozenset({"PWD", "HOME", "USER"})     # variables every job's shell has
# variables a job's start-up depends on: a bind naming one is rehearsed with the value the job has
KEPT = frozenset({"PATH", "SHELL", "TMPDIR", "IFS", "ENV", "BASH_ENV", "MODULEPATH", "LANG", "TERM"})
KEPT_PREFIXES = ("SLURM_", "LD_", "PYTHON", "GEN_RECIPE_", "OMPI_", "PMIX_", "LMOD", "BASH_")


def bind_variables(specs: tuple[str, ...]) -> tuple[str, ...]:
    """The variables the host side of bind specifications names that a job does not have by itself (a site's
    login environment sets them: `${SCRATCH}`): the rehearsal cluster gives each a folder of its own."""
    names = [m.group(1) or m.group(2) for spec in specs
             for m in re.finditer(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", spec.split(":", 1)[0])]
    return tuple(n for n in dict.fromkeys(names) if n not in SHELL_SET | KEPT and not n.startswith(KEPT_PREFIXES))


def bind_sources(specs: tuple[str, ...]) -> tuple[str, ...]:
    """The host side of bind specifications (SRC[:DST]) that name no variable, normalised, once each: what
    the rehearsal cluster makes under its site root (`${SCRATCH}`, `${PWD}` are the user's, set where the job
    runs)."""
    out = []
    for spec in specs:
        src = spec.split(":", 1)[0]
        if src.startswith("/") and "$" not in src:
            out.append(posixpath.normpath(src))
    return tuple(dict.fromkeys(out))


# -- slurm.conf ------------------------------------------------------------------------------------------

def node_lines(shape: Shape, ports: dict[str, int]) -> list[str]:
    out = []
    for n in shape.nodes:
        extra = (f" Gres=gpu:{n.gpus}" if n.gpus else "") + (f" Features={','.join(n.features)}" if n.features else "")
        out.append(f"NodeName={n.name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports[n.name]} CPUs={n.cpus}"
                   f"{extra} State=UNKNOWN")
    return out


def partition_lines(shape: Shape) -> list[str]:
    out = []
    for p in shape.partitions:
        limits = (f" MaxTime={p.max_time}" if p.max_time else " MaxTime=INFINITE") + \
            (f" MaxNodes={p.max_nodes}" if p.max_nodes else "")
        out.append(f"PartitionName={p.name} Nodes={','.join(p.nodes)} Default={'YES' if p.default else 'NO'}{limits}"
                   f"{' OverSubscribe=EXCLUSIVE' if p.exclusive else ''} State=UP")
    return out


def gres_conf(shape: Shape, devices: str) -> str:
    """gres.conf: each node's GPUs as files `devices`/gpuN (links to /dev/null, made by the cluster)."""
    lines = ["# Written by gen-recipe minicluster: counted GPUs, no devices behind them (links to /dev/null)"]
    for n in shape.nodes:
        if n.gpus:
            lines.append(f"NodeName={n.name} Name=gpu File={devices}/gpu[0-{n.gpus - 1}]" if n.gpus > 1 else
                         f"NodeName={n.name} Name=gpu File={devices}/gpu0")
    return "\n".join(lines) + "\n"


# -- accounting ------------------------------------------------------------------------------------------

def accounting_commands(shape: Shape, user: str) -> list[list[str]]:
    """sacctmgr commands (run with -i) that give the cluster the site's QOS and accounts: where an account is
    required, the user's default account takes no jobs, so a job that names none is refused by Slurm's own
    association limits (LUMI documents that very message)."""
    cmds = [["add", "cluster", shape.cluster]]
    for q in shape.qos:
        cmds.append(["add", "qos", q.name])
        cmds.append(["modify", "qos", "where", f"name={q.name}", "set",
                     f"MaxWall={q.max_time or -1}", f"MaxTRESPerJob=node={q.max_nodes or -1}",
                     f"MaxSubmitJobsPerUser={q.max_jobs or -1}"])
    names = ",".join(["normal", *(q.name for q in shape.qos if q.name != "normal")])
    qos = [f"QOS={names}", *([f"DefaultQOS={shape.default_qos}"] if shape.default_qos else [])]
    if shape.account_required:
        cmds.append(["add", "account", NO_ALLOCATION, f"cluster={shape.cluster}", "MaxSubmitJobs=0"])
        cmds.append(["add", "user", user, f"account={NO_ALLOCATION}", f"DefaultAccount={NO_ALLOCATION}",
                     f"cluster={shape.cluster}"])
    if shape.account:
        cmds.append(["add", "account", shape.account, f"cluster={shape.cluster}"])
        cmds.append(["add", "user", user, f"account={shape.account}", f"cluster={shape.cluster}",
                     *([] if shape.account_required else [f"DefaultAccount={shape.account}"])])
        cmds.append(["modify", "user", "where", f"name={user}", f"cluster={shape.cluster}", "set", *qos])
    return cmds


# -- job_submit.lua ---------------------------------------------------------------------------------------

def lua_string(text: str) -> str:
    """`text` as a Lua long string whose brackets the text cannot close."""
    level = 0
    while f"]{'=' * level}]" in text or level == 0 and text.endswith("]"):     # "a]" + "]]" would close at "]]"
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


TIME_REFUSAL = "Requested time limit is invalid (missing or exceeds some limit)"     # Slurm's own, for MaxTime


def job_submit_lua(shape: Shape) -> str:
    """The site's rules that slurm.conf cannot say: a node feature every job must ask for, and wall-time limits
    that fall with the job's size (a partition's time_by_nodes)."""
    out = [f"-- Written by gen-recipe minicluster for site {shape.site}: its rules that slurm.conf cannot say.",
           "function slurm_job_submit(job_desc, part_list, submit_uid)"]
    binned = [p for p in shape.partitions if p.time_by_nodes]
    if binned:
        default = next((p.name for p in shape.partitions if p.default), "")
        out += ["  local bins = {"]
        out += [f"    [ {lua_string(p.name)} ] = {{{', '.join(f'{{{n}, {m}}}' for n, m in p.time_by_nodes)}}},"
                for p in binned]
        out += ["  }",
                f"  local part = job_desc.partition or {lua_string(default) if default else 'nil'}",
                "  local nodes = job_desc.min_nodes",
                "  if nodes == nil or nodes == slurm.NO_VAL or nodes < 1 then nodes = 1 end",
                "  local limit = job_desc.time_limit",
                "  if part ~= nil and bins[part] ~= nil and limit ~= nil and limit ~= slurm.NO_VAL then",
                "    for _, bin in ipairs(bins[part]) do",
                "      if nodes <= bin[1] then",
                "        if limit > bin[2] then",
                f"          slurm.log_user(\"%s: %d minutes for %d nodes, at most %d\", {lua_string(TIME_REFUSAL)}, limit, "
                "nodes, bin[2])",
                "          return slurm.ERROR",
                "        end",
                "        break",
                "      end",
                "    end",
                "  end"]
    if shape.constraint:
        out += [f"  local wanted = {lua_string(shape.constraint)}",
                "  local asked = job_desc.features or \"\"",
                "  for word in string.gmatch(asked, \"[%w_.+-]+\") do",
                "    if word == wanted then return slurm.SUCCESS end",
                "  end",
                f"  slurm.log_user(\"%s\", {lua_string(shape.constraint_message)})",
                "  return slurm.ERROR"]
    else:
        out.append("  return slurm.SUCCESS")
    out += ["end", "", "function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)",
            "  return slurm.SUCCESS", "end"]
    return "\n".join(out) + "\n"


# -- Lmod -------------------------------------------------------------------------------------------------

def modulefile(site: str, name: str, programs: str = "") -> str:
    """An Lmod modulefile that stands for the site's module `name`: loading it succeeds, says so and, as a
    site's modules put the site's programs on PATH, puts `programs` (the rehearsal's stubs) there."""
    path = f"prepend_path(\"PATH\", {lua_string(programs)})\n" if programs else ""
    return (f"-- Written by gen-recipe minicluster: site {site}'s module {name}, as a name only\n"
            f"whatis({lua_string(f'gen-recipe rehearsal of {site}: {name}')})\n"
            f"setenv({lua_string('GEN_RECIPE_MODULE_' + re.sub(r'[^A-Za-z0-9]', '_', name).upper())}, \"loaded\")\n{path}")
