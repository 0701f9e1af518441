"""`gen-recipe lint`: Dockerfiles through hadolint, Apptainer definitions through our own linter
(header, sections, stages, package and download smells) and ShellCheck, and `--fix` for the
smells a mechanical rewrite can remove. See docs/lint.md.
"""

from generator.lint.engine import lint_definition, lint_dockerfile, lint_source, lint_sources, lint_text
from generator.lint.model import DEFINITION, DOCKER, Finding, LintError, Source, Target, target_of

__all__ = ["DEFINITION", "DOCKER", "Finding", "LintError", "Source", "Target", "lint_definition",
           "lint_dockerfile", "lint_source", "lint_sources", "lint_text", "target_of"]
