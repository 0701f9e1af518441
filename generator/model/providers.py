"""The fabric provider registry: one `FabricProvider` entry per provider a site's `fabric.provider` may name,
carrying everything the project knows about it: the fabrics it runs on, how `gen-recipe detect` prefers it,
the libfabric providers the images build for it and the distribution packages those need. The site schema
(`Provider`, `PROVIDERS_OF_FABRIC`), detection, the build plan and the libfabric block read this table.
Adding a provider is one entry here plus its tests (docs/architecture.md).

This module imports nothing of the project (the site model imports it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class FabricProvider:
    name: str
    fabrics: tuple[str, ...]          # the fabric kinds it runs on
    preference: int = 0               # order among the providers of a fabric (lowest first): the schema's hint, detect's pick
    fallback: bool = False            # runs anywhere: detect picks it only on a fabric with nothing else
    libfabric: tuple[str, ...] = ()   # libfabric providers the images build for it (its own tcp/shm/udp come with any build)
    devel: tuple[str, ...] = ()       # Debian/Ubuntu packages to build libfabric's provider of this name
    runtime: tuple[str, ...] = ()     # and to run it


FABRIC_PROVIDERS: Mapping[str, FabricProvider] = {p.name: p for p in (
    FabricProvider(name="cxi", fabrics=("slingshot",), libfabric=("cxi",),
                   devel=("libcurl4-openssl-dev", "libjson-c-dev", "libnl-3-dev", "libnl-route-3-dev", "libnuma-dev"),
                   runtime=("libcurl4", "libjson-c5", "libnl-3-200", "libnl-route-3-200", "libnuma1")),
    FabricProvider(name="psm2", fabrics=("omnipath",), libfabric=("psm2", "opx"),
                   devel=("libnuma-dev", "libpsm2-dev"), runtime=("libnuma1", "libpsm2-2")),
    FabricProvider(name="opx", fabrics=("omnipath",), preference=1, libfabric=("opx", "psm2"),
                   devel=("libnuma-dev", "linux-libc-dev", "uuid-dev"), runtime=("libnuma1", "libuuid1")),
    FabricProvider(name="verbs", fabrics=("infiniband",), preference=1, libfabric=("verbs",),
                   devel=("libibverbs-dev", "librdmacm-dev"), runtime=("ibverbs-providers", "libibverbs1", "librdmacm1")),
    FabricProvider(name="ucx", fabrics=("infiniband",)),
    FabricProvider(name="tcp", fabrics=("slingshot", "omnipath", "infiniband", "ethernet"), preference=9, fallback=True),
)}
NAMES: tuple[str, ...] = tuple(FABRIC_PROVIDERS)
# libfabric providers the images can build, with the packages each needs (blocks.fabric.libfabric).
LIBFABRIC_BUILT: tuple[str, ...] = tuple(dict.fromkeys(x for p in FABRIC_PROVIDERS.values() for x in p.libfabric))
PACKAGES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    n: {"devel": FABRIC_PROVIDERS[n].devel, "runtime": FABRIC_PROVIDERS[n].runtime} for n in LIBFABRIC_BUILT}


def on_fabric(fabric: str) -> tuple[str, ...]:
    """The providers that run on `fabric`, preferred first."""
    return tuple(sorted((p.name for p in FABRIC_PROVIDERS.values() if fabric in p.fabrics),
                        key=lambda n: FABRIC_PROVIDERS[n].preference))


def preferred(fabric: str) -> tuple[str, ...]:
    """What `gen-recipe detect` picks from on `fabric`, in order: its own providers, else the fallback."""
    found = on_fabric(fabric)
    return tuple(n for n in found if not FABRIC_PROVIDERS[n].fallback) or found
