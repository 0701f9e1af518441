"""Build a recipe's image for a site, tag it by content, push it and verify the pushed digest.

    gen-recipe build --site SITE --recipe NAME [--format docker|apptainer] [--tag REF] [--target STAGE]
                     [--push] [--registry HOST[/PATH]] [--builder podman|buildah|docker|ch-image|apptainer]

The tag is `<registry>/<recipe>-<site>:<version>-<12 hex>`, the hex a hash of the Dockerfile
text and of what gen-recipe puts in the build context, so an unchanged rebuild finds the tag and
does nothing. The builder's output streams to stderr, prefixed; one summary line goes to stdout.
`--push` pushes, then reads the manifest back with `skopeo inspect --raw` and checks that its
sha256 is the pushed digest. Credentials come from the environment or the builder's own login
(`podman login`, `docker login`): nothing here writes them anywhere.

This module is the command line only; the work is in `generator.images` (tags, builders, context,
base, registry, oci, sif, convert).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
from pathlib import Path

from generator.certify import sign
from generator.model import site as site_mod
from generator.recipe import catalog
from generator.errors import UsageError, shown
from generator.images.base import ensure_base_image
from generator.images.builders import (OCI_BUILDERS, PLATFORM, SIF_BUILDERS, build_argv, find_builder,
                                       sif_build_argv)
from generator.images.context import CACHE_DIR, ca_bundle, write_context
from generator.images.process import ToolMissing, stderr_progress
from generator.images.oci import build_image
from generator.images.sif import build_sif
from generator.images.tags import DEFAULT_REGISTRY, default_ref
from generator.images.convert import runtime_image
from generator.images.export import export_image
from generator.model.runtimes import PLATFORMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site", default="local", help="site name or path to a site TOML (default: local)")
    parser.add_argument("--recipe", default="pytorch", help="recipe to build (default: pytorch)")
    parser.add_argument("--format", choices=("docker", "apptainer"), default="docker",
                        help="docker: OCI image; apptainer: SIF (default: docker)")
    parser.add_argument("--tag", default=None, help="image reference (default: content-hashed, "
                        f"{DEFAULT_REGISTRY}/<recipe>-<site>:<version>-<hash>)")
    parser.add_argument("--target", default=None, help="build only up to this stage (e.g. devel)")
    parser.add_argument("--push", action="store_true", help="push to --registry and verify the pushed digest")
    parser.add_argument("--registry", default=os.environ.get("GEN_RECIPE_REGISTRY") or None,
                        help="HOST[/PATH] to push to (default: $GEN_RECIPE_REGISTRY)")
    parser.add_argument("--builder", choices=(*OCI_BUILDERS, *SIF_BUILDERS), default=None,
                        help="builder (default: the first working of docker buildx, podman, buildah, ch-image; "
                             "apptainer/singularity for --format apptainer)")
    parser.add_argument("--cache-from", default=None, help="buildx --cache-from (e.g. type=gha)")
    parser.add_argument("--cache-to", default=None, help="buildx --cache-to (e.g. type=gha,mode=max)")
    parser.add_argument("--out", type=Path, default=None, help="SIF path for --format apptainer "
                        "(default: <recipe>-<site>.sif)")
    parser.add_argument("--runtime", default=None, choices=LOCAL_RUNTIMES,
                        help="also make the image form this runtime runs (a directory image under build/images, a "
                        "user-space runtime's container): the image a local launch script names")
    parser.add_argument("--elsewhere", action="store_true",
                        help="this machine is not the site: build a SIF for a site that cannot build its own "
                        "(container.build = \"none\", e.g. LUMI)")
    parser.add_argument("--context", default=None, metavar="DIR",
                        help="write the build context (the recipe file and what it copies) to DIR instead of building, "
                        "and print the command that builds it there (apptainer build, podman build, ...)")
    parser.add_argument("--export", type=Path, default=None, metavar="FILE",
                        help="write the image as the site's runtime runs it from a file (air-gapped sites): "
                        "FILE.tar.gz for Charliecloud, FILE.sif for Apptainer/Singularity, with FILE.sha256 beside it")
    parser.add_argument("--key", type=Path, default=None, metavar="KEY",
                        help="sign the image's certificate (SBOM and provenance) with KEY (gen-recipe keygen) and attach "
                        "it to the pushed image (--push) or write it beside the --export file")
    parser.add_argument(sign.ALLOW_READABLE, action="store_true",
                        help="sign with a --key file that group or others can read (refused otherwise, as ssh refuses one)")
    parser.add_argument("--statements", type=Path, default=None, metavar="DIR",
                        help="also write the unsigned SBOM and provenance statements and predicates to DIR (for a "
                        "signer of your own, e.g. cosign attest --predicate DIR/sbom.predicate.json)")


LOCAL_RUNTIMES = tuple(n for n, p in PLATFORMS.items() if p.local_image)


def sources(table) -> str:
    return f", sources {', '.join(table.sources)}" if table.sources else ""


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _context(site, args: argparse.Namespace) -> int:
    """--context DIR: the build context written to DIR, and the command that builds it there."""
    if not args.context:
        raise UsageError("--context '' is empty: name a new or empty folder")
    recipe = catalog.load(args.recipe)
    folder = Path(args.context)
    if args.format == "apptainer":
        tool = args.builder or (site.container.runtime if site.container.runtime in SIF_BUILDERS else "apptainer")
        if tool not in SIF_BUILDERS:
            raise UsageError(f"--builder {tool} cannot build the apptainer format (use one of {', '.join(SIF_BUILDERS)})")
        argv = sif_build_argv(tool, f"{recipe.name}-{site.name}.sif", f"{recipe.name}.def",
                              fakeroot=site.container.build == "fakeroot")
    else:
        try:
            builder = find_builder("docker", args.builder)
        except ToolMissing:
            builder = args.builder or "podman"              # printed for a machine that has it
        if shutil.which(builder) and builder in ("podman", "docker"):
            ensure_base_image(site, builder=builder)        # a localhost/ base the build's FROM names
        secret = ca_bundle() if site.software.pip_cert_secret and builder != "ch-image" else None
        # the site's platform always: the command may run on a machine of another architecture
        argv = build_argv(builder, Path("."), default_ref(site, recipe), secret=secret,
                          platform=PLATFORM.get(site.host.arch, site.host.arch))
    files = write_context(site, recipe, args.format, folder, CACHE_DIR, stderr_progress)
    print(f"build context: {shown(folder)} ({len(files)} files)")
    if site.container.build == "none" and args.format == "apptainer":
        print(f"site {site.name} cannot build images (container.build = \"none\" in {shown(site.path)}"
              f"{sources(site.container)}): run this on a machine that can, then push the SIF or copy it to {site.name}")
    cd = str(folder) if folder.is_absolute() or not str(folder).startswith("-") else f"./{folder}"   # not an option
    print(f"build it there: cd {shown(shlex.quote(cd))} && {shown(shlex.join(argv))}")     # no raw control character
    return 0


def _certify(site, args: argparse.Namespace, signer, target: str, digest: str, run_ref: str, builder: str,
             started: str, fmt: str = "docker") -> None:
    """--key / --statements: the SBOM and provenance of the image just built, signed and published."""
    from generator.certify import build as cert_build, certificate

    if not args.key and not args.statements:
        return
    stderr_progress(f"reading the packages of {run_ref} for its SBOM")
    made = cert_build.statements(site, args.recipe, fmt=fmt, builder=builder, run_ref=run_ref, image=target,
                                 digest=digest, subjects=certificate.subjects_of(target, digest), started=started,
                                 finished=certificate.now(), target=args.target)
    if args.statements:
        written = certificate.write_statements(args.statements, made, target)
        print(f"statements: {', '.join(shown(p) for p in written)}")
    if signer:
        print("certificate: " + "; ".join(certificate.publish(target, made, signer, stderr_progress)))


def run(args: argparse.Namespace) -> int:
    site = site_mod.load(args.site)
    if args.key or args.statements:
        if args.context is not None or not (args.push or args.export):
            raise UsageError("--key and --statements certify an image that leaves this machine: add --push "
                             "(attached in the registry) or --export FILE (written beside the file)")
        if args.format == "apptainer" and not args.export:
            raise UsageError("--key and --statements attach to OCI images (--format docker --push) or to an "
                             "--export file")
    signer = sign.load_signer(args.key, args.allow_readable_key) if args.key else None     # refused before the build
    from generator.certify.certificate import now
    started = now()
    push = (args.registry or True) if args.push else None
    if args.context is not None:
        if args.push or args.tag or args.target or args.out or args.export or args.runtime or args.elsewhere \
                or args.cache_from or args.cache_to:
            raise UsageError("--context writes a folder to build in: leave out --push, --tag, --target, --out, "
                             "--export, --runtime, --elsewhere, --cache-from and --cache-to")
        return _context(site, args)
    if args.export:
        if args.push or args.tag or args.target or args.out:
            raise UsageError("--export writes one file: leave out --push, --tag, --target and --out")
        done = export_image(site, args.recipe, args.export, builder=args.builder)
        from generator.certify.certificate import stale_beside
        stale = stale_beside(done.path, "sha256:" + done.sha256)
        for old in stale:               # statements about the file this export replaced: no longer about FILE
            old.unlink()
        if stale:
            stderr_progress(f"removed {len(stale)} statement(s) beside {shown(done.path.name)} about the file it replaced")
        sif = done.path.name.endswith(".sif")
        tool = (site.container.runtime if site.container.runtime in SIF_BUILDERS else "apptainer") if sif \
            else find_builder("docker", args.builder)
        _certify(site, args, signer, str(done.path), "sha256:" + done.sha256,
                 str(done.path) if sif else default_ref(site, args.recipe), tool, started,
                 "apptainer" if sif else "docker")
        print(f"exported: {shown(done.path)} ({_size(done.size_bytes)}), sha256 {done.sha256} in {shown(done.path.name)}.sha256; "
              + ("copy it, the .sha256 and the .dsse.json files to the site" if args.key else "copy both to the site"))
        return 0
    if args.runtime and (args.format == "apptainer" or args.target):
        raise UsageError(f"--runtime {args.runtime} makes its image from the OCI image: leave out --format apptainer "
                         "and --target")
    if args.format == "apptainer":
        if args.tag or args.target:
            raise UsageError("--tag and --target apply to --format docker (use --out for the SIF path)")
        if site.container.build == "none" and not args.elsewhere and os.geteuid() != 0:
            if site.container.image_from == "file" or site.apptainer is None:
                runs = "copies its image in as a file" if site.container.image_from == "file" else \
                    f"runs {site.container.runtime}, not SIF files"
                raise UsageError(f"site {site.name} cannot build images (container.build = \"none\" in "
                                 f"{shown(site.path)}{sources(site.container)}) and {runs}: gen-recipe launch "
                                 f"--site {site.name} prints how its image gets there")
            raise UsageError(f"site {site.name} cannot build images (container.build = \"none\" in {shown(site.path)}"
                             f"{sources(site.container)}): push its image from where images can be built (gen-recipe build "
                             f"--site {site.name} --recipe {shlex.quote(args.recipe)} --push --registry HOST/PATH; the image workflow "
                             f"does), then gen-recipe launch --site {site.name} --registry HOST/PATH prints the line "
                             f"that pulls it there; a SIF made on a machine that is not {site.name}: --elsewhere")
        result = build_sif(site, args.recipe, out=args.out, push=push, builder=args.builder, registry=args.registry)
    else:
        result = build_image(site, args.recipe, tag=args.tag, push=push, target=args.target, builder=args.builder,
                             registry=args.registry, cache_from=args.cache_from, cache_to=args.cache_to)
    verb = "up to date" if result.cached else "built"
    pushed = ", pushed and verified" if args.push else ""
    print(f"{verb}{pushed}: {result.ref} {result.digest} {_size(result.size_bytes)} in {result.seconds:.1f} s")
    if args.format == "docker" and args.push:
        _certify(site, args, signer, f"{result.ref}@{result.digest}", result.digest,
                 args.tag or default_ref(site, args.recipe, target=args.target), find_builder("docker", args.builder),
                 started)
    if args.runtime:
        made = runtime_image(site, result.ref if not args.push else (args.tag or default_ref(site, args.recipe)),
                             args.runtime)
        print(f"{args.runtime} image: {shown(made)}")
    return 0
