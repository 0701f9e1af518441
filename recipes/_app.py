"""App files (`app.toml`, generator.model.app) as recipes: the site's stack per `base`, then the
application. Built with the public recipe API only, as a user's Python recipe is."""

from __future__ import annotations

import hpccm

from generator import api
from generator.model.app import App


def python_spec(app: App, site: api.Site) -> api.PythonSpec | None:
    """The image's (and the bare twin's) Python environment; None when the app has none."""
    p = api.plan(site)
    if app.base in ("pytorch", "llm"):
        extra = api.llm_requirements(site) if app.base == "llm" else []
        return api.python_spec(site, p, extra, app=app.pins, app_wheels=app.python.wheels)
    if app.pins or app.python.wheels:
        return api.python_spec(site, p, torch=False, mpi4py=app.base == "mpi", app=app.pins, app_wheels=app.python.wheels)
    return None


def stages(app: App, site: api.Site) -> list[hpccm.Stage]:
    """The app's two stages for `site`: the site's stack (per `base`), then the application."""
    p = api.plan(site)
    spec = python_spec(app, site)
    keep = [*api.comm_stack(site, p)] if app.base != "none" else []
    if spec is not None:
        keep.append(api.python_env(site, spec))
    if app.base == "llm":
        keep += api.llm_engine(site)
    if app.files or app.build.commands:
        keep.append(api.app_files(app.files, commands=app.build.commands, keep=app.build.keep))
    return api.two_stage(site, app.name, p, keep=keep, build_packages=app.build.packages,
                         runtime_packages=app.run.packages, command=app.command, env=app.run.env,
                         workdir=app.run.workdir, labels=app.run.labels,
                         distro_mpi4py=bool(spec and spec.system_site_packages))
