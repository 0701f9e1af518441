"""gen-recipe: site-tuned container recipes for HPC and AI workloads."""

__version__ = "0.1.0"
