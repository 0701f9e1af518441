"""Running the registry's command builders for a site: `command(...)` checks the MPI mode and calls the
runtime's `Platform.build`; `bare_env` is what a bare run sets; `expand`/`resolved` expand host variables
for Python callers. The registry itself (`PLATFORMS`, the builders, `Options`, `Command`) is
`generator.model.runtimes`, where the site schema reads its runtime names; its names are re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from generator.errors import UsageError
from generator.model.runtimes import (LOCAL_IMAGE_DIR, NAMES, PLATFORMS, SYSTEM_PREFIXES, Command, Options, Platform,
                                      cache_binds,
                                      container_env, edf, gpu_flags, kernel_cache_env, split_bind,
                                      udocker_env)
from generator.model.site import Site

RUNTIMES = NAMES


def check_mode(site: Site, runtime: str, mode: str) -> None:
    """Raise a one-line UsageError unless `runtime` supports `mode` at `site`."""
    rt = site.runtime(runtime)
    if mode not in rt.mpi_modes:
        raise UsageError(f"site {site.name}'s {rt.name} supports {', '.join(rt.mpi_modes)}; "
                         f"not {mode} (use --mode {rt.mpi_modes[0]})")
    if mode == "bind" and site.mpi.flavour == "none":
        raise UsageError(f"site {site.name} has no host MPI to bind into the container (use --mode hybrid)")


# Variables a bare run leaves to the host's modules: the loader paths of bind mode point at the
# host libraries as the container sees them.
LOADER_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD")


def bare_env(site: Site, mode: str) -> dict[str, str]:
    """What a bare run sets: the container's environment in `mode` minus the loader paths (the host's
    modules set those). The launch scripts' bare twins and the suite's bare side both use this."""
    env = container_env(site, Options(mode=mode))
    return {k: v for k, v in env.items() if k not in LOADER_VARS}


def own_prefix(site: Site) -> str:
    """The host MPI's install prefix when it is one of its own (/opt/cray/pe/mpich/8.1.31), else "" (a system
    prefix such as /usr, shared with everything else on the host)."""
    path = site.mpi.install_path.rstrip("/")
    return "" if site.mpi.flavour == "none" or path in SYSTEM_PREFIXES else path


def host_mpi_env(site: Site) -> dict[str, str]:
    """The folders a launch script puts first on each path to use the host MPI where nothing sets it up
    (mpi.setup = "prefix"): install_path's bin on PATH, its lib on LD_LIBRARY_PATH (install_path is validated)."""
    prefix = own_prefix(site)
    if site.mpi.setup != "prefix" or not prefix:
        return {}
    return {"PATH": f"{prefix}/bin", "LD_LIBRARY_PATH": f"{prefix}/lib"}


def with_host_mpi(site: Site, environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with `host_mpi_env`'s folders put first (the suite's launcher and bare side)."""
    env = dict(environ)
    for var, folder in host_mpi_env(site).items():
        env[var] = ":".join(p for p in (folder, env.get(var, "")) if p)
    return env


def container_path(site: Site, host_path: str) -> str:
    """Where a host path appears in a bind-mode container (the bind of site.container.bind.paths or
    site.container.binds that holds it), or "" when none does."""
    for spec in (*site.container.bind.paths, *site.container.binds):
        src, dst = split_bind(spec)
        src, dst = src.rstrip("/"), dst.rstrip("/")
        if host_path == src or host_path.startswith(src + "/"):
            return dst + host_path[len(src):]
    return ""


def command(site: Site, image: str, argv: Sequence[str], opts: Options = Options(),
            runtime: str | None = None) -> Command:
    """The command that runs `argv` in `image` with `runtime` (default: the site's) at `site`."""
    name = site.runtime(runtime).name
    check_mode(site, name, opts.mode)
    return PLATFORMS[name].build(site, image, argv, opts)


# -- expansion of host variables, for Python callers -----------------------------------

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def expand(text: str, environ: Mapping[str, str]) -> str:
    """`$NAME` / `${NAME}` replaced from `environ` (unset → empty), as the launch scripts do."""
    return _VAR.sub(lambda m: environ.get(m.group(1) or m.group(2), ""), text)


def resolved(cmd: Command, environ: Mapping[str, str]) -> Command:
    """`cmd` with host variables expanded in argv, env and file paths (not in file contents:
    the container engine expands its EDF itself)."""
    return Command(tuple(expand(a, environ) for a in cmd.argv),
                   {k: expand(v, environ) for k, v in cmd.env.items()},
                   tuple(expand(a, environ) for a in cmd.launcher_args),
                   {expand(p, environ): t for p, t in cmd.files.items()},
                   tuple(tuple(expand(a, environ) for a in s) for s in cmd.setup))


__all__ = ["LOCAL_IMAGE_DIR", "PLATFORMS", "SYSTEM_PREFIXES", "Command", "Options", "Platform", "RUNTIMES", "bare_env",
           "check_mode", "command", "container_path", "host_mpi_env", "own_prefix", "with_host_mpi", "cache_binds",
           "container_env", "edf", "expand", "gpu_flags", "kernel_cache_env", "resolved", "split_bind", "udocker_env"]
