"""Test stand-in for torchvision: tiny models with torchvision's call signatures, so the
resnet workload's code path can be exercised where the real torchvision is unavailable."""

from . import models  # noqa: F401

__version__ = "0.0+stub"
