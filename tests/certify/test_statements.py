"""The statements of a certificate, made from real inputs: the listing script's output, the generated
Dockerfiles of shipped sites (their checked downloads), the project's checksum table, suite records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.certify import provenance, sbom, verdict
from generator.certify.statement import digests, statement, subject
from generator.errors import UsageError
from generator.recipe import checksums
from generator.suite.result import Result

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
DIGEST = "sha256:" + "b" * 64

LISTING = """@@os
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
ID=debian
VERSION_ID="12"
@@dpkg
Package: openmpi-bin
Status: install ok installed
Architecture: amd64
Source: openmpi (4.1.4-3)
Version: 4.1.4-3+b1

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u4
@@rpm
@@python
["torch", "2.13.0+cpu", "/opt/venv/lib/python3.11/site-packages"]
[["Torch", "2.13.0+cpu", "/opt/venv/lib/python3.11/site-packages"], ["mpi4py", "3.1.4", "/usr/lib/python3/dist-packages"]]
"""


def test_the_listing_reads_installed_packages_their_source_and_python_distributions():
    got = sbom.parse(LISTING)
    assert (got.os_id, got.os_version) == ("debian", "12")
    names = [(p.kind, p.name, p.version, p.source) for p in got.packages]
    assert ("deb", "openmpi-bin", "4.1.4-3+b1", "openmpi") in names and ("deb", "libc6", "2.36-9+deb12u4", "libc6") in names
    assert not [n for n in names if n[1] == "removed-one"]            # config files only: not installed
    assert ("pypi", "Torch", "2.13.0+cpu", "") in names and ("pypi", "mpi4py", "3.1.4", "") in names


def test_rpm_lines_and_epochs():
    got = sbom.parse("@@os\nID=\"rocky\"\nVERSION_ID=\"9.4\"\n@@rpm\n"
                     "openmpi\t0:4.1.1-7.el9\tx86_64\topenmpi-4.1.1-7.el9.src.rpm\n"
                     "perl-libs\t4:5.32.1-481.el9\tx86_64\tperl-5.32.1-481.el9.src.rpm\n"
                     "gpg-pubkey\t0:8483c65d-5ccc5b19\t(none)\t(none)\n")
    assert [(p.name, p.version, p.source) for p in got.packages] == [
        ("openmpi", "4.1.1-7.el9", "openmpi"), ("perl-libs", "4:5.32.1-481.el9", "perl")]


@pytest.mark.parametrize("site", ["frontier", "alps", "perlmutter"])
def test_every_checked_download_of_a_generated_dockerfile_is_a_component_with_its_table_sha256(site):
    text = (GOLDEN / site / "pytorch.Dockerfile").read_text()
    built = sbom.built_from_source(text)
    table = checksums.table()
    assert {"libfabric", "aws-ofi-nccl"} <= {b.name for b in built}
    for b in built:
        assert b.sha256 == table[b.name][b.version]["sha256"] and b.url in text
        assert f'echo "{b.sha256}  ' in text                # the check the build ran
    checked = set(__import__("re").findall(r'echo "([0-9a-f]{64})  ', text))
    assert checked == {b.sha256 for b in built}             # and every checked download is listed


def test_a_url_without_its_check_is_not_claimed_and_an_unpublished_one_says_why():
    entry = checksums.table()["libfabric"]["1.22.0"]
    assert sbom.built_from_source(f"RUN wget {entry['url']}\n") == ()
    url = next(iter(checksums._document()["unpublished"]))
    (b,) = sbom.built_from_source(f"RUN wget -q {url}\n")
    assert b.sha256 is None and b.note.startswith("no checksum published: ")


def test_the_document_is_cyclonedx_deterministic_and_names_the_image():
    listing = sbom.parse(LISTING)
    built = sbom.built_from_source((GOLDEN / "frontier" / "pytorch.Dockerfile").read_text())
    one = sbom.document("reg/x", DIGEST, listing, built, "2026-11-27T10:00:00Z", {"site": "frontier"})
    assert one == sbom.document("reg/x", DIGEST, listing, built, "2026-11-27T10:00:00Z", {"site": "frontier"})
    assert (one["bomFormat"], one["specVersion"]) == ("CycloneDX", "1.6")
    assert one["metadata"]["component"]["version"] == DIGEST
    purls = {c.get("purl") for c in one["components"]}
    assert "pkg:deb/debian/openmpi-bin@4.1.4-3%2Bb1?arch=amd64&distro=debian-12" in purls
    assert "pkg:pypi/torch@2.13.0%2Bcpu" in purls
    fabric = next(c for c in one["components"] if c["name"] == "libfabric")
    assert fabric["hashes"] == [{"alg": "SHA-256", "content": checksums.sha256("libfabric", "1.22.0")}]
    assert fabric["externalReferences"][0]["url"].endswith("libfabric-1.22.0.tar.bz2")


def test_provenance_names_its_inputs_by_digest(tmp_path):
    site_file, recipe_file = tmp_path / "site.toml", tmp_path / "r.py"
    site_file.write_text("x"), recipe_file.write_text("y")
    text = (GOLDEN / "frontier" / "pytorch.Dockerfile").read_text()
    b = provenance.BuildInputs(site="frontier", site_file=site_file, recipe="pytorch", recipe_file=recipe_file,
                               fmt="docker", text=text, builder="podman", builder_version="podman version 4.3.1",
                               started="2026-11-27T10:00:00Z", finished="2026-11-27T10:30:00Z",
                               context=[("workloads/a.py", "c" * 64), ("wheels/t.whl", "file:t.whl")],
                               bases={provenance.bases_of(text)[0]: DIGEST},
                               environ={"GITHUB_ACTIONS": "true", "GITHUB_WORKFLOW_REF": "o/r/.github/workflows/images.yml@refs/heads/main",
                                        "GITHUB_RUN_ID": "7", "GITHUB_REPOSITORY": "o/r"})
    p = provenance.predicate(b)
    assert p == provenance.predicate(b)
    deps = {d["name"] + ":" + d["uri"]: d for d in p["buildDefinition"]["resolvedDependencies"]}
    import hashlib
    assert deps["site file:file:site.toml"]["digest"]["sha256"] == hashlib.sha256(b"x").hexdigest()
    assert deps["build context:context:workloads/a.py"]["digest"]["sha256"] == "c" * 64
    assert [d for d in deps.values() if d["name"] == "base image"][0]["digest"]["sha256"] == "b" * 64
    assert p["runDetails"]["builder"]["id"] == "https://github.com/o/r/.github/workflows/images.yml@refs/heads/main"
    assert p["runDetails"]["metadata"]["invocationId"] == "https://github.com/o/r/actions/runs/7"
    assert p["runDetails"]["byproducts"][0]["digest"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_bases_are_the_from_images_not_the_stages():
    text = "FROM localhost/debian:bookworm AS devel\nRUN x\nFROM devel AS build\nFROM --platform=linux/amd64 rocm/dev:6 AS runtime\n"
    assert provenance.bases_of(text) == ["localhost/debian:bookworm", "rocm/dev:6"]


def record(**kw) -> Result:
    base = dict(site="local", workload="cnn", runtime="charliecloud", mode="hybrid", ratio=0.99, low=0.97, high=1.01,
                pairs=12, verdict="pass", tolerance=(1.0, -0.05, 0.1, "ratio"),
                extra={"image": "localhost/gen-recipe/pytorch-local:0.1.0-0123456789ab",
                       "environment": {"bare": {"torch": "2.13.0"}, "container": {"torch": "2.13.0"}}})
    base.update(kw)
    return Result(**base)


def test_the_verdict_predicate_has_each_comparison_of_the_image_and_both_fingerprints():
    control = record(runtime="bare-bare", extra={})
    image = "reg:5000/g/pytorch-local:0.1.0-0123456789ab"
    mine, others = verdict.about([record(), record(extra={**record().extra, "compiled": True, "nodes": 2}), control],
                                 image, DIGEST, "results.json")
    assert len(mine) == 0 and len(others) == 2                  # the control is not about any image
    with_digest = {**record().extra, "image_digests": ["sha256:" + "a" * 64, DIGEST]}
    mine, others = verdict.about([record(extra=with_digest), record(extra={**with_digest, "compiled": True, "nodes": 2}),
                                  record(extra={**record().extra, "image_digests": ["sha256:" + "c" * 64]}), control],
                                 image, DIGEST, "results.json")
    assert len(mine) == 2 and len(others) == 1
    p = verdict.predicate(mine, "results.json", "sha256:" + "d" * 64, "2026-11-27T11:00:00Z")
    assert p["schemaVersion"] == 2 and len(p["verdicts"]) == 2
    assert all(v["tolerance"]["rule"] == verdict.RULE for v in p["verdicts"])       # how outcome was decided
    e = p["verdicts"][0]
    assert e["likeForLike"]["bare"] == e["likeForLike"]["container"] == verdict.fingerprint({"torch": "2.13.0"})
    assert {(v["execution"], v["nodes"]) for v in p["verdicts"]} == {("eager", 1), ("compiled", 2)}
    assert e["tolerance"] == {"reference": 1.0, "lower": -0.05, "upper": 0.1, "unit": "ratio", "allowed": [0.95, 1.1],
                              "rule": verdict.RULE}
    assert DIGEST in e["measuredDigests"]
    with pytest.raises(UsageError, match="no comparison of an image"):
        verdict.predicate([], "results.json", "sha256:" + "d" * 64, "x")


@pytest.mark.parametrize("extra, words", [
    ({"image": "x", "nodes": "2"}, "extra.nodes: expected a node count"),
    ({"image": "x", "nodes": True}, "extra.nodes"),
    ({"image": "x", "environment": {"bare": []}}, "extra.environment: expected"),
    ({"image": "x", "environment": {"bare": {"k": "v" * 70000}}}, "larger than"),
])
def test_a_foreign_record_is_one_line_naming_the_key(extra, words):
    with pytest.raises(UsageError, match=words):
        verdict.predicate([record(extra=extra)], "results.json", "sha256:" + "d" * 64, "x")


def test_which_comparisons_measured_the_image():
    """By the digests the suite recorded; without them by the reference it ran (a digest in it, the same
    reference, the same file name)."""
    def about(image, **extra):
        return verdict.is_about(record(extra={"image": image, **extra}), "reg:5000/g/x:1", DIGEST, "r.json")

    assert about("anything", image_digests=[DIGEST]) and not about("reg:5000/g/x:1", image_digests=["sha256:" + "c" * 64])
    assert about("reg:5000/g/x:1") and not about("reg:5000/g/x:2") and not about("reg:5000/g/x:0.1.0-aaaaaaaaaaaa")
    assert about(f"docker://reg:5000/g/x@{DIGEST}") and not about(f"reg:5000/g/x@sha256:{'e' * 64}")
    with pytest.raises(UsageError, match="extra.image_digests: expected a list"):
        about("x", image_digests=["sha256:abc"])


def test_subjects_and_statements():
    st = statement([subject("reg/x", DIGEST)], "https://slsa.dev/provenance/v1", {})
    assert digests(st) == {DIGEST} and json.loads(json.dumps(st)) == st
    with pytest.raises(ValueError):
        subject("reg/x", "sha256:abc")


def test_a_git_checkout_is_a_component_without_an_archive_checksum():
    built = sbom.built_from_source((GOLDEN / "ifca" / "pytorch.Dockerfile").read_text())
    (knem,) = [b for b in built if b.name == "knem"]
    assert (knem.version, knem.sha256, knem.url) == ("knem-1.1.4", None, "https://gitlab.inria.fr/knem/knem.git")
    assert "a git ref, no archive checksum" in knem.note


def test_purls_follow_the_purl_spec():
    listing = sbom.parse("@@os\nID=rocky\nVERSION_ID=9.4\n@@rpm\nperl-libs\t4:5.32.1-481.el9\tx86_64\tperl-5.32.1-481.el9.src.rpm\n"
                         '@@python\n[["zope.interface", "6.0", "/x"], ["Typing_Extensions", "4.12", "/x"]]\n')
    doc = sbom.document("reg/x", DIGEST, listing, (), "2026-11-27T10:00:00Z")
    purls = sorted(c["purl"] for c in doc["components"])
    assert purls == ["pkg:pypi/typing-extensions@4.12", "pkg:pypi/zope.interface@6.0",
                     "pkg:rpm/rocky/perl-libs@5.32.1-481.el9?arch=x86_64&distro=rocky-9.4&epoch=4"]
    assert doc["dependencies"] == [{"ref": DIGEST, "dependsOn": sorted(c["bom-ref"] for c in doc["components"])}]
    later = sbom.document("reg/x", DIGEST, listing, (), "2026-11-27T11:00:00Z")
    assert later["serialNumber"] != doc["serialNumber"]
