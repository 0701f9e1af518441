"""Images: tags, builders, build contexts, base images, pushes, SIFs and per-runtime conversions.

`gen-recipe build` (generator/cli/build.py) is their command line; the suite uses `oci.build_image` and
`convert.runtime_image`.
"""
