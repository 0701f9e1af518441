"""Two-spirals MLP trainer on the site's PyTorch stack: the Python variant of app.toml.

    gen-recipe --site frontier --recipe examples/trainer/recipe.py

It builds the same image as app.toml with generator.api, the API the built-in recipes use; a Python
recipe can decide more from the site than an app file can (here: more threads on CPU-only sites).
"""

from __future__ import annotations

from pathlib import Path

from generator import api

NAME = "trainer-py"
FILES = {"src": "/opt/trainer"}                 # local path (relative to this file) = path in the image
PINS = api.requirements_file(Path(__file__).with_name("requirements.txt"))    # read here, written into the recipe
ENV = {"OMP_NUM_THREADS": "1"}
WORKDIR = "/opt/trainer"
WORKLOAD = api.workload(command=["python3", "/opt/trainer/train.py", "--steps", "600", "--warmup", "20", "--threads", "1"],
                        json_key="samples_per_s", unit="samples/s", tolerance=0.15)


def python(site: api.Site) -> api.PythonSpec:
    """The site's torch and mpi4py, then the pins of requirements.txt."""
    return api.python_spec(site, api.plan(site), app=PINS)


def build(site: api.Site) -> list:
    p = api.plan(site)
    threads = "1" if site.gpu.stack != "none" else str(max(1, min(site.host.cores_per_node, 8)))
    return api.two_stage(site, NAME, p,
                         keep=[*api.comm_stack(site, p), api.python_env(site, python(site)), api.app_files(FILES)],
                         command=["python3", "/opt/trainer/train.py", "--threads", threads], env=ENV, workdir=WORKDIR,
                         labels={"org.opencontainers.image.description": "Two-spirals MLP trainer"})
