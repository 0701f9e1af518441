"""Build → push → verify → pull by digest → run, on this machine, through gen-recipe's own code:
`oci.build_image` / `gen-recipe build`, `runtimes.command`, `convert.runtime_image`, `gen-recipe launch`.

Slow the first time (the `local` pytorch image builds in about 3 minutes); the image is built
once per session and reused by every test here and by the benchmarks.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from generator.run import runtimes
from generator.images import convert, oci

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "build"

WORKLOADS = ("cnn", "gan3d", "resnet", "mnist", "llm", "mpi")
SMOKE = ("python3", "-m", "workloads.mnist", "--steps", "2", "--batch-size", "8", "--warmup", "1")
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, "
                  "application/vnd.oci.image.index.v1+json")


def gen_recipe(*argv, env=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "generator.cli.main", *argv], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=timeout)


def run(cmd: runtimes.Command, env, timeout=300):
    """Run a runtimes.Command as a launch script would: host variables expanded, its env exported."""
    cmd = runtimes.resolved(cmd, env)
    for step in cmd.setup:
        subprocess.run(step, env={**env, **cmd.env}, check=True, capture_output=True, timeout=timeout)
    return subprocess.run(cmd.standalone(), env={**env, **cmd.env}, capture_output=True, text=True, timeout=timeout)


def last_json(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    assert lines, stdout
    return json.loads(lines[-1])


@pytest.fixture(scope="session")
def pushed(local_build, local_site, registry):
    """The image pushed to the test registry (verified by build_image), then pulled back by digest."""
    result = oci.build_image(local_site, "pytorch", push=f"{registry}/gen-recipe", cache_dir=CACHE)
    by_digest = f"{result.ref.rsplit(':', 1)[0]}@{result.digest}"
    subprocess.run(["podman", "pull", "--tls-verify=false", by_digest], check=True, capture_output=True, timeout=600)
    return result, by_digest


def test_push_is_verified_independently(pushed, local_build, registry):
    result, by_digest = pushed
    assert result.cached and result.ref.startswith(f"{registry}/gen-recipe/pytorch-local:0.1.0-")
    assert result.ref.endswith(local_build.ref.rsplit(":", 1)[1])
    repo, tag = result.ref.split("/", 1)[1].rsplit(":", 1)
    req = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{tag}", headers={"Accept": MANIFEST_TYPES})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert "sha256:" + hashlib.sha256(resp.read()).hexdigest() == result.digest
    out = subprocess.run(["podman", "image", "inspect", "--format", "{{json .RepoDigests}}", by_digest],
                         capture_output=True, text=True, check=True)
    assert by_digest in json.loads(out.stdout)


def test_certificate_round_trip_build_push_attach_verify(pushed, registry, run_env, tmp_path):
    """gen-recipe build --push --key attaches the image's signed SBOM and provenance (the registry has no
    referrers API: the fallback tag); verify finds, checks and prints them. The SBOM lists Debian's Open MPI,
    torch, the wheel the context carried with its sha256, and every checked download of the Dockerfile."""
    from generator.certify import sbom, sign
    from generator.images.sif import file_sha256
    from generator.recipe import render

    result, by_digest = pushed
    private, public = sign.keygen(tmp_path / "site.key")
    made = gen_recipe("build", "--site", "local", "--recipe", "pytorch", "--push", "--registry", f"{registry}/gen-recipe",
                      "--key", str(private), env=run_env)
    assert made.returncode == 0, made.stderr[-2000:]
    assert result.digest in made.stdout and "certificate: sbom sha256:" in made.stdout
    shown = gen_recipe("verify", result.ref, "--key", str(public), env=run_env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"digest {result.digest}" in out and f"found in the tag sha256-{result.digest[7:]}" in out
    rows = {tuple(ln.split()[:3]) for ln in out.splitlines()}
    assert ("distro", "openmpi-bin", "4.1.4-3+b1") in rows and ("python", "torch", "2.13.0+cpu") in rows
    wheel = CACHE / "wheels" / Path(local_site_wheel()).name
    assert f"sha256 {file_sha256(wheel)}" in out
    site_sha = hashlib.sha256((REPO / "sites" / "local.toml").read_bytes()).hexdigest()
    assert f"file:local.toml sha256:{site_sha}" in out
    as_json = json.loads(gen_recipe("verify", by_digest, "--key", str(public), "--json", env=run_env).stdout)
    bom = next(st for st in as_json["statements"] if st["predicateType"] == "https://cyclonedx.org/bom")["predicate"]
    text = render.recipe_text(local_site_model(), "pytorch", "docker")
    built = {c["name"] for c in bom["components"]
             if {"name": "gen-recipe:built-from-source", "value": "true"} in c.get("properties", [])}
    assert built == {b.name for b in sbom.built_from_source(text)}
    assert sum(str(c.get("purl", "")).startswith("pkg:deb/debian/") for c in bom["components"]) > 100


def local_site_model():
    from generator.model import site
    return site.load("local")


def local_site_wheel() -> str:
    return local_site_model().software.torch_wheel


def test_podman_runs_the_pulled_image(pushed, local_site, run_env):
    _, ref = pushed
    listing = run(runtimes.command(local_site, ref, ("python3", "-m", "workloads"), runtime="podman"), run_env)
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert [ln.split("\t")[0] for ln in listing.stdout.splitlines()] == list(WORKLOADS)
    smoke = run(runtimes.command(local_site, ref, SMOKE, runtime="podman"), run_env)
    assert smoke.returncode == 0, smoke.stderr[-2000:]
    record = last_json(smoke.stdout)
    assert (record["workload"], record["steps"], record["torch"]) == ("mnist", 2, "2.13.0+cpu")


@pytest.fixture(scope="module")
def ch_image(pushed, local_site):
    yield convert.runtime_image(local_site, pushed[1], "charliecloud", cache_dir=CACHE / "images")
    # a second unpacked copy of the suite's image (named by digest): gone before the suite needs the disk
    convert.drop_runtime_image(local_site, pushed[1], "charliecloud", cache_dir=CACHE / "images")


def pushed_digest(path: str) -> str:
    return path.rsplit("pytorch-local-", 1)[1]


def ch_image_ref(path: str) -> str:
    return f"any.registry/gen-recipe/pytorch-local@sha256:{pushed_digest(path)}"


def test_charliecloud_runs_the_pulled_image(ch_image, local_site, run_env):
    assert ch_image.endswith("/build/images/pytorch-local-" + pushed_digest(ch_image))
    again = time.monotonic()
    assert convert.runtime_image(local_site, ch_image_ref(ch_image), "charliecloud", cache_dir=CACHE / "images") == ch_image
    assert time.monotonic() - again < 5                     # reused, not unpacked again
    listing = run(runtimes.command(local_site, ch_image, ("python3", "-m", "workloads")), run_env)
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert "mnist" in listing.stdout
    smoke = run(runtimes.command(local_site, ch_image, SMOKE), run_env)
    assert smoke.returncode == 0, smoke.stderr[-2000:]
    assert last_json(smoke.stdout)["python"].startswith("3.11")


COMPILED = ("python3", "-m", "workloads.mnist", "--compile", "--steps", "1", "--batch-size", "8", "--warmup", "1",
            "--threads", "1", "--limit-samples", "64")


def test_torch_compile_runs_in_the_read_only_image(ch_image, local_site, run_env, tmp_path):
    """A compiled model in the Charliecloud image (a read-only directory), as the non-root user: Inductor builds
    its C++ kernels with the image's compiler and keeps them in the job's cache folder outside the image."""
    caches = runtimes.kernel_cache_env(local_site, str(tmp_path / "kernels"))
    opts = runtimes.Options(env={**caches, "TMPDIR": str(tmp_path)})
    out = run(runtimes.command(local_site, ch_image, COMPILED, opts, "charliecloud"), run_env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    record = last_json(out.stdout)
    assert record["compiled"] is True and record["value"] > 0
    assert any((tmp_path / "kernels" / "inductor").rglob("*.so")), "no compiled kernel in the cache folder"
    numpy = run(runtimes.command(local_site, ch_image, ("python3", "-c", "import numpy, torch; "
                                                        "print(numpy.__version__, torch.from_numpy(numpy.ones(3)).sum().item())")),
                run_env)
    assert numpy.returncode == 0 and numpy.stdout.split()[-2:] == [local_site.software.numpy, "3.0"], numpy.stderr[-500:]


def test_the_compile_check_fails_without_the_compiler(local_build):
    """The runtime stage's compile check (blocks.libcheck.compile_commands, a build step) in the built image
    with its C++ compiler taken away: it fails, naming the compiler, as the build would."""
    from generator.recipe.blocks.libcheck import compile_commands
    script = " && ".join(compile_commands())
    for what, prefix in (("with", ""), ("without", "rm -f /usr/bin/g++* /usr/bin/c++ /usr/bin/x86_64-linux-gnu-g++* && ")):
        r = subprocess.run(["podman", "run", "--rm", "--user", "0", "--entrypoint", "sh", local_build.ref, "-c",
                            prefix + script], capture_output=True, text=True, timeout=600)
        if what == "with":
            assert r.returncode == 0 and "torch.compile and NumPy work" in r.stdout, r.stderr[-2000:]
        else:
            assert r.returncode != 0, r.stdout[-1000:]
            assert "C++ compiler" in r.stderr or "InvalidCxxCompiler" in r.stderr, r.stderr[-2000:]


def test_launch_scripts_hybrid_mpi_and_bare_twin(ch_image, run_env, tmp_path):
    """The local launch script (mpirun, 2 ranks, ch-run --join) and its bare twin both train DDP."""
    records = {}
    for bare in (False, True):
        script = tmp_path / f"job{'-bare' if bare else ''}.sh"
        extra = ["--bare"] if bare else ["--image", ch_image]
        made = gen_recipe("launch", "--site", "local", "--workload", "mnist", "--tasks-per-node", "2", *extra,
                          "--out", str(script), "--", *SMOKE[3:], env=run_env)
        assert made.returncode == 0, made.stderr
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=run_env, timeout=600,
                              cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records[bare] = last_json(proc.stdout)
    for record in records.values():
        assert (record["world_size"], record["mode"], record["launcher"]) == (2, "ddp", "openmpi")
    assert records[False]["torch"] == records[True]["torch"] == "2.13.0+cpu"


def test_the_printed_image_command_makes_what_the_script_runs(local_build, run_env, tmp_path):
    """Each local launch script's `# Image:` command, run as printed from the folder the job runs in, makes the image
    the script then runs (Charliecloud's directory, udocker's container, podman's tag)."""
    import os
    # udocker's container of the image stays (about the image's size on disk): the rehearsals and the suite's
    # udocker comparisons run this same image, and loading it again costs a minute each time
    env = {**run_env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{run_env.get('PATH', os.defpath)}"}
    for runtime, form in (("charliecloud", " --runtime charliecloud"), ("udocker", " --runtime udocker"),
                          ("podman", "")):
        script = tmp_path / f"job-{runtime}.sh"
        made = gen_recipe("launch", "--site", "local", "--runtime", runtime, "--workload", "mnist", "--out",
                          str(script), "--", *SMOKE[3:], env=env)
        assert made.returncode == 0, made.stderr
        line = next(ln for ln in script.read_text().splitlines() if ln.startswith("# Image: "))
        assert line == f"# Image: gen-recipe build --site local --recipe pytorch{form}", line
        printed = subprocess.run(["bash", "-c", line.removeprefix("# Image: ")], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=900)
        assert printed.returncode == 0, printed.stderr[-2000:]
        assert printed.stdout.startswith(f"up to date: {local_build.ref} "), printed.stdout
        proc = subprocess.run(["bash", str(script)], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=600, start_new_session=True)
        assert proc.returncode == 0, (runtime, proc.stderr[-3000:])
        assert last_json(proc.stdout)["workload"] == "mnist"


def _image_id(ref: str) -> str:
    return subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def test_the_context_folder_builds_the_same_image_with_the_command_printed_for_it(local_build, run_env, tmp_path):
    """The generated files' header names `gen-recipe build --context DIR`; the build command it prints, run as
    printed, makes the image gen-recipe build made (podman's layer cache: the same steps, the same files). The
    definition's context holds the base image as the OCI archive its `From:` names."""
    header = next(ln for ln in (REPO / "tests" / "golden" / "local" / "pytorch.Dockerfile").read_text().splitlines()
                  if "--context" in ln)
    assert header == "#   gen-recipe build --site local --recipe pytorch --format docker --context DIR", header
    before = _image_id(local_build.ref)
    made = gen_recipe(*header.removeprefix("#   gen-recipe ").replace("DIR", str(tmp_path / "ctx")).split(),
                      env=run_env)
    assert made.returncode == 0, made.stderr
    line = made.stdout.splitlines()[-1]
    assert line.startswith(f"build it there: cd {tmp_path / 'ctx'} && podman build ") and local_build.ref in line
    built = subprocess.run(["bash", "-c", line.removeprefix("build it there: ")], capture_output=True, text=True,
                           timeout=900, env=run_env)
    assert built.returncode == 0, built.stderr[-2000:]
    assert _image_id(local_build.ref) == before
    made = gen_recipe("build", "--site", "local", "--format", "apptainer", "--context", str(tmp_path / "def"),
                      env=run_env)
    assert made.returncode == 0, made.stderr
    source = re.search(r"^From: (.*)$", (tmp_path / "def" / "pytorch.def").read_text(), re.M).group(1)
    config = subprocess.run(["skopeo", "inspect", "--config", f"oci-archive:{tmp_path / 'def' / source}"],
                            capture_output=True, text=True, check=True, timeout=120).stdout
    layers = subprocess.run(["podman", "image", "inspect", "--format", "{{json .RootFS.Layers}}", "localhost/debian:bookworm"],
                            capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(config)["rootfs"]["diff_ids"] == json.loads(layers)


def test_podman_launch_script_two_ranks(pushed, run_env, tmp_path):
    """mpirun starting one podman container per rank (host namespaces, /tmp, the host user)."""
    script = tmp_path / "job-podman.sh"
    made = gen_recipe("launch", "--site", "local", "--runtime", "podman", "--workload", "mpi", "--tasks-per-node", "2",
                      "--image", pushed[1], "--out", str(script), "--", "--iters", "3", "--no-allreduce", env=run_env)
    assert made.returncode == 0, made.stderr
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=run_env, timeout=300,
                          start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = last_json(proc.stdout)
    assert (record["workload"], record["world_size"]) == ("mpi", 2)


def test_udocker_runs_the_pulled_image(pushed, local_build, local_site, run_env):
    import os
    name = convert.runtime_image(local_site, pushed[1], "udocker", cache_dir=CACHE / "images")
    for ref in (pushed[1], pushed[0].ref, local_build.ref):      # the conversion's temporary tag went, the image's names stayed
        assert subprocess.run(["podman", "image", "exists", ref], timeout=60).returncode == 0, ref
    env = {**run_env, **runtimes.udocker_env(CACHE / "images")}
    opts = runtimes.Options(allow_root=os.geteuid() == 0)
    try:
        smoke = run(runtimes.command(local_site, name, SMOKE, opts, runtime="udocker"), env)
    finally:
        convert.drop_runtime_image(local_site, pushed[1], "udocker", cache_dir=CACHE / "images")
    assert smoke.returncode == 0, smoke.stderr[-2000:]
    assert last_json(smoke.stdout)["workload"] == "mnist"
    home = CACHE / "images" / "udocker"
    assert not (home / "repos" / "localhost" / "gen-recipe-udocker" / name.lower()).exists()  # layers went after create
    assert not (home / "containers" / name).exists()                                          # the container went too


def test_second_build_is_a_cached_no_op(local_build, local_site, run_env):
    # the tree as it is now (a no-op unless someone edited the workloads since the session's build)
    current = oci.build_image(local_site, "pytorch", cache_dir=CACHE)
    proc = gen_recipe("build", "--site", "local", "--recipe", "pytorch", env=run_env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"up to date: {current.ref} sha256:")
    assert "exists: nothing to build" in proc.stderr   # no builder ran: nothing to time here


def test_one_machines_two_site_images_share_one_unpacked_tree(local_build, local_site):
    """local-slurm's pytorch image differs from local's only in its labels (useradd comes before them): the
    same layers, so its Charliecloud directory is made as hard links to local's, not by a second export."""
    from generator.model import site as site_mod

    slurm = site_mod.load("local-slurm")
    other = oci.build_image(slurm, "pytorch", cache_dir=CACHE)
    assert other.ref != local_build.ref and convert.content_of(other.ref) == convert.content_of(local_build.ref)
    first = Path(convert.runtime_image(local_site, local_build.ref, "charliecloud", cache_dir=CACHE / "images"))
    second = Path(convert.runtime_image(slurm, other.ref, "charliecloud", cache_dir=CACHE / "images"))
    assert first != second
    for rel in ("usr/bin/python3.11", "ch/environment", "opt/workloads/workloads/registry.py"):
        assert (second / rel).samefile(first / rel), rel
    assert convert.unpacked(slurm, other.ref, cache_dir=CACHE / "images") == second     # what --export tars


class _RewritingProxy(http.server.BaseHTTPRequestHandler):
    """A registry front that stores pushes unchanged but serves every manifest with one byte more:
    the pushed digest can then not be read back."""

    protocol_version = "HTTP/1.1"
    upstream: tuple[str, int] = ("127.0.0.1", 0)

    def log_message(self, *args):
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self):
        body = self._body()
        skip = ("transfer-encoding", "content-length", "connection")
        conn = http.client.HTTPConnection(*self.upstream, timeout=300)
        conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in self.headers.items():           # repeated headers (Accept) stay repeated
            if k.lower() not in skip:
                conn.putheader(k, v)
        if self.command in ("PUT", "POST", "PATCH"):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body or None)
        resp = conn.getresponse()
        data = resp.read()
        if self.command == "GET" and "/manifests/" in self.path and resp.status == 200:
            data += b"\n"
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in skip:
                self.send_header(k, v)
        length = resp.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data))
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _forward


def test_push_that_cannot_be_verified_fails_clearly(tiny_app, registry, run_env):
    host, port = registry.split(":")
    handler = type("Proxy", (_RewritingProxy,), {"upstream": (host, int(port))})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bad = f"127.0.0.1:{server.server_address[1]}/gen-recipe"
        proc = gen_recipe("build", "--site", "local", "--recipe", str(tiny_app), "--push", "--registry", bad,
                          env=run_env, timeout=600)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"gen-recipe: pushed {bad}/tiny-local:0.1.0-")
    assert re.search(r" as sha256:[0-9a-f]{64}, but the registry serves manifest sha256:[0-9a-f]{64}: ", last), last
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_export_round_trip_for_an_air_gapped_site(tiny_app, run_env, tmp_path):
    """gen-recipe build --export writes the file a Charliecloud site runs and its .sha256; the launch script
    of a site whose images arrive as files checks it, unpacks it and runs its ranks; a wrong checksum stops the
    job before anything runs. (The tiny image: how an image travels does not depend on what it holds.)"""
    from generator.certify import sign

    out = tmp_path / "tiny-local.tar.gz"
    private, public = sign.keygen(tmp_path / "site.key")
    made = gen_recipe("build", "--site", "local", "--recipe", str(tiny_app), "--export", str(out), "--key", str(private),
                      env=run_env)
    assert made.returncode == 0, made.stderr[-2000:]
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    # its certificate beside it, verified where the file arrives (no registry there)
    verified = gen_recipe("verify", str(out), "--key", str(public), env=run_env)
    assert verified.returncode == 0, verified.stderr
    assert f"digest sha256:{digest}" in verified.stdout
    assert re.search(r"What is inside \(SBOM, .*\): [1-9][0-9]* distro packages", verified.stdout), verified.stdout
    envelope = tmp_path / "tiny-local.tar.gz.provenance.dsse.json"
    kept = envelope.read_bytes()
    envelope.write_bytes(kept.replace(b'"payload":"', b'"payload":"e30K', 1))
    tampered = gen_recipe("verify", str(out), "--key", str(public), env=run_env)
    assert tampered.returncode == 1 and "tampered" in tampered.stderr, tampered.stderr
    envelope.write_bytes(kept)
    assert (tmp_path / "tiny-local.tar.gz.sha256").read_text() == f"{digest}  tiny-local.tar.gz\n"
    assert f"sha256 {digest}" in made.stdout
    checked = subprocess.run(["sha256sum", "--check", "--strict", "tiny-local.tar.gz.sha256"], cwd=tmp_path,
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    site_file = tmp_path / "airgapped.toml"
    site_file.write_text((REPO / "sites" / "local.toml").read_text().replace(
        '[container]\n', '[container]\nimage_from = "file"\n', 1))
    script = tmp_path / "job.sh"
    made = gen_recipe("launch", "--site", str(site_file), "--recipe", str(tiny_app), "--tasks-per-node", "2",
                      "--out", str(script), env=run_env)
    assert made.returncode == 0, made.stderr
    assert "image_file=tiny-local.tar.gz" in script.read_text()     # the default: <recipe>-<site>.tar.gz
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=run_env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = sorted(json.loads(ln)["rank"] for ln in proc.stdout.splitlines() if ln.startswith("{"))
    assert ranks == [0, 1], proc.stdout           # both ranks ran in the image unpacked from the file
    assert (tmp_path / f"tiny-local-{digest[:12]}" / "ch" / "environment").is_file()    # unpacked once, here
    (tmp_path / "tiny-local.tar.gz.sha256").write_text(f"{'0' * 64}  tiny-local.tar.gz\n")
    refused = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=run_env, timeout=300,
                             cwd=tmp_path)
    assert refused.returncode != 0 and "does not match" in refused.stderr
    assert not [ln for ln in refused.stdout.splitlines() if ln.startswith("{")]       # nothing ran
