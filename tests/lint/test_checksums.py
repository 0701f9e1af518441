"""generator/checksums.toml: one sha256 per downloaded version, each with its URL and source, and
a checksum for every source tarball and key the generated recipes download."""

from __future__ import annotations

import re

import pytest
from hpccm.primitives.shell import shell

from generator.model import site
from generator.recipe import checksums
from generator.recipe.blocks.clean import render_item
from generator.recipe.blocks.verify import UNCHECKED_DOWNLOAD_RULE, checked_commands, download
from generator.recipe.context import hpccm_context

from .helpers import matrix_sources

URL = re.compile(r"(?:wget|curl)\b[^\n]*?\s(https://\S+?\.(?:tar\.gz|tar\.bz2|tgz|PUB))\b")


def downloads() -> set[str]:
    return {u for source, _ in matrix_sources() for u in URL.findall(source.text)}


def test_table_entries_are_complete():
    for package, versions in checksums.table().items():
        for version, entry in versions.items():
            assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]), (package, version)
            assert version in entry["url"] and entry["source"], (package, version)
            assert checksums.sha256(package, version) == entry["sha256"]
            assert checksums.for_url(entry["url"]) == entry["sha256"]


def test_missing_checksum_is_one_line():
    with pytest.raises(checksums.ChecksumError) as err:
        checksums.sha256("ucx", "0.0.1")
    assert "\n" not in str(err.value) and "no sha256 for ucx 0.0.1" in str(err.value)
    assert err.value.exit_code == 2


def test_every_download_has_a_checksum_or_a_reason():
    found = downloads()
    assert found, "the generated recipes download nothing?"
    missing = sorted(u for u in found if checksums.for_url(u) is None and checksums.unpublished(u) is None)
    assert not missing, f"no sha256 in generator/checksums.toml for: {', '.join(missing)}"


UNPUBLISHED = sorted(u for u in downloads() if checksums.for_url(u) is None)


@pytest.mark.xfail(strict=True, reason="no published checksum for: " + ", ".join(UNPUBLISHED))
def test_every_download_has_a_checksum():
    assert not UNPUBLISHED


def test_generated_recipes_check_every_recorded_download():
    """Each download with a recorded sha256 is followed by its check, in both formats."""
    for source, _ in matrix_sources():
        for url in set(URL.findall(source.text)):
            sha = checksums.for_url(url)
            if sha:
                assert f'echo "{sha}  ' in source.text and "sha256sum -c" in source.text, (source.name, url)
            else:
                assert f"ignore={UNCHECKED_DOWNLOAD_RULE}" in source.text and "(generator/checksums.toml)" in source.text, (source.name, url)


def _rendered(commands, fmt: str) -> str:
    """A shell primitive with the commands `commands()` makes, made and rendered as a block's are, in format `fmt`."""
    with hpccm_context(site.load("local"), fmt):
        return render_item(shell(commands=commands()))


def test_downloads_carry_the_check_a_reason_or_a_note():
    url = "https://github.com/ofiwg/libfabric/releases/download/v1.22.0/libfabric-1.22.0.tar.bz2"
    sha = checksums.for_url(url)
    hpccm_line = f"mkdir -p /var/tmp && wget -q -nc -P /var/tmp {url} && \\\n    tar -x -f x"    # as hpccm joins them
    docker = _rendered(lambda: checked_commands([hpccm_line]), "docker")
    assert f'echo "{sha}  /var/tmp/libfabric-1.22.0.tar.bz2" > /var/tmp/libfabric-1.22.0.tar.bz2.sha256 && ' \
           "sha256sum -c /var/tmp/libfabric-1.22.0.tar.bz2.sha256" in docker and docker.endswith("tar -x -f x")
    definition = _rendered(lambda: [*download(url, outfile="/var/tmp/l.tbz"), "tar -x -f /var/tmp/l.tbz"], "apptainer")
    assert f'    echo "{sha}  /var/tmp/l.tbz" | sha256sum -c -\n    tar' in definition
    key = "https://apt.repos.intel.com/intel-gpg-keys/GPG-PUB-KEY-INTEL-SW-PRODUCTS-2019.PUB"
    pragma = _rendered(lambda: download(key, outfile="/var/tmp/intel.pub"), "docker").splitlines()
    assert pragma[1] == f"# hadolint ignore={UNCHECKED_DOWNLOAD_RULE}" and "no checksum" in pragma[0]
    assert pragma[2].startswith("RUN wget")
    for fmt, make in (("docker", lambda: checked_commands(["wget -q -P /var/tmp https://example.org/x-1.tgz"])),
                      ("apptainer", lambda: download("https://example.org/x-1.tgz", directory="/var/tmp"))):
        with pytest.raises(checksums.ChecksumError, match="no sha256 for x-1.tgz .https://example.org/x-1.tgz."):
            _rendered(make, fmt)                 # nothing is downloaded unverified: the generation stops


def test_every_image_mpich_a_cray_mpich_can_select_has_its_checksum():
    """plan.CRAY_MPICH_TO_MPICH: each Cray MPICH series maps to an MPICH the images build from source."""
    from generator.recipe.plan import CRAY_MPICH_TO_MPICH
    for series, version in CRAY_MPICH_TO_MPICH.items():
        assert re.fullmatch(r"[0-9a-f]{64}", checksums.sha256("mpich", version)), (series, version)


def test_a_frontier_copy_on_todays_pair_generates_checked_and_an_unknown_version_stops_in_one_line(tmp_path):
    """OLCF's recommended cpe/25.09 pair (cray-mpich-abi/9.0.1, rocm/6.4.2) in a copy of frontier.toml: the image's
    MPICH 4.1.2 download is checked; an Open MPI version the table lacks (4.0.7 in a copy of ifca.toml) stops with one line."""
    from tests.conftest import REPO
    from tests.helpers import run_cli
    text = (REPO / "sites" / "frontier.toml").read_text(encoding="utf-8")
    copy = tmp_path / "frontier-2509.toml"
    copy.write_text(text.replace("8.1.31", "9.0.1").replace("6.2.4", "6.4.2"), encoding="utf-8")
    r = run_cli("--site", str(copy), "--recipe", "osu", "--format", "docker", "--out", str(tmp_path / "out"))
    assert r.code == 0, r.err
    out = (tmp_path / "out" / "frontier" / "osu.Dockerfile").read_text(encoding="utf-8")
    assert f'echo "{checksums.sha256("mpich", "4.1.2")}  /var/tmp/mpich-4.1.2.tar.gz"' in out
    ifca = tmp_path / "ifca-407.toml"
    ifca.write_text((REPO / "sites" / "ifca.toml").read_text(encoding="utf-8").replace('version = "4.1.0"', 'version = "4.0.7"', 1),
                    encoding="utf-8")
    r = run_cli("--site", str(ifca), "--recipe", "osu", "--format", "docker", "--out", str(tmp_path / "out2"))
    assert r.code == 2 and r.err.count("\n") == 1 and "no sha256 for openmpi-4.0.7.tar.bz2" in r.err, r.err
    assert not (tmp_path / "out2" / "ifca").exists()
