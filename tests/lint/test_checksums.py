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
    unknown = _rendered(lambda: checked_commands(["wget -q -P /var/tmp https://example.org/x-1.tgz"]), "docker")
    assert unknown.startswith("# no sha256 for x-1.tgz in generator/checksums.toml") and "sha256sum" not in unknown
    assert _rendered(lambda: download("https://example.org/x-1.tgz", directory="/var/tmp"), "apptainer") \
        .startswith("%post\n    cd /\n    # no sha256 for x-1.tgz in generator/checksums.toml")
