"""@NAME@ on the site's PyTorch stack (a Python recipe: gen-recipe's docs/apps.md explains the API).

    gen-recipe --site frontier --recipe @DIR@/recipe.py
    gen-recipe build --site local --recipe @DIR@/recipe.py
    pytest suites/ --site=local --recipe @DIR@/recipe.py
"""

from __future__ import annotations

from generator import api

NAME = "@NAME@"                                  # the image is @NAME@-<site>
FILES = {"src": "/opt/@NAME@"}                   # local path (relative to this file) = path in the image
ENV = {"OMP_NUM_THREADS": "1"}
WORKDIR = "/opt/@NAME@"
WORKLOAD = api.workload(command=["python3", "/opt/@NAME@/main.py", "--steps", "100"], json_key="items_per_s",
                        unit="items/s", tolerance=0.10)


def python(site: api.Site) -> api.PythonSpec:
    """The site's torch and mpi4py, then your own pins (the suite's bare twin installs the same)."""
    return api.python_spec(site, api.plan(site), app=[])


def build(site: api.Site) -> list:
    p = api.plan(site)             # what the site's facts decide: MPI, fabric, GPU stack (gen-recipe --explain)
    return api.two_stage(site, NAME, p,
                         keep=[*api.comm_stack(site, p), api.python_env(site, python(site)), api.app_files(FILES)],
                         command=["python3", "/opt/@NAME@/main.py"], env=ENV, workdir=WORKDIR)
