"""`gen-recipe`: the command-line front.

    gen-recipe [--site SITE] [--recipe NAME ...] [--format docker|apptainer|all] [--out DIR]
               [--list-sites] [--list-recipes] [--check] [--explain]
    gen-recipe new-site NAME [--out FILE] [--force]
    gen-recipe new-recipe NAME [--python] [--out DIR] [--force]
    gen-recipe SUBCOMMAND ...   (lint, build, launch, detect, report, minicluster, keygen, certify, verify: see `gen-recipe SUBCOMMAND --help`)

Errors are one line on stderr (`gen-recipe: ...`) with exit code 2 (bad input) or 1 (a check
failed); never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import signal
import sys
import threading
from collections.abc import Sequence

from generator.errors import GenRecipeError, UsageError, shown

# Subcommands living in their own modules: name → module with add_arguments(parser) and run(args).
SUBCOMMANDS = {
    "new-site": "generator.cli.new_site",
    "new-recipe": "generator.cli.new_recipe",
    "lint": "generator.cli.lint",
    "build": "generator.cli.build",
    "launch": "generator.cli.launch",
    "detect": "generator.cli.detect",
    "report": "generator.cli.report",
    "minicluster": "generator.cli.minicluster",
    "keygen": "generator.cli.keygen",
    "certify": "generator.cli.certify",
    "verify": "generator.cli.verify",
}


class _Parser(argparse.ArgumentParser):
    """The one argument rule of every command: an option's value is given ('' and a lone '-' are none) and is not
    an option (it does not start with '--'). argparse takes `--opt=VALUE` as it stands, `--opt VALUE` for any VALUE
    that does not start with '-', and `--opt=--` as no value at all (it stores [] where a string was meant): each
    is refused here, as one line, before any command runs. Positional arguments after `--` are the command's own."""

    def error(self, message: str):  # one line, exit 2, no usage dump
        raise UsageError(f"{message} (see {self.prog} --help)")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]):   # every option's value passes here
        if action.option_strings:
            option = "/".join(action.option_strings)
            for value in arg_strings:
                if value in ("", "-", "--"):
                    self.error(f"argument {option}: {shown(repr(value))} is no value: give one, or leave the option out")
                if value.startswith("--"):
                    self.error(f"argument {option}: {shown(repr(value))} is an option, not a value: give a value "
                               "(a file of that name: ./" + shown(value) + ")")
        return super()._get_values(action, arg_strings)


def _run(module_name: str, prog: str, argv: Sequence[str], description: str) -> int:
    module = importlib.import_module(module_name)
    parser = _Parser(prog=prog, description=description or (module.__doc__ or "").strip().splitlines()[0])
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


class _Ended(SystemExit):
    """SIGTERM or SIGHUP (a closed terminal or ssh session): unwinds like Ctrl-C, so temporary files are
    removed and child processes (linters, builders) ended."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.name = signal.Signals(signum).name


def _terminate(signum, frame):
    raise _Ended(signum)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
        if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:       # nohup's SIG_IGN is kept
            signal.signal(signal.SIGHUP, _terminate)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return _run(SUBCOMMANDS[argv[0]], f"gen-recipe {argv[0]}", argv[1:], "")
        return _run("generator.cli.generate", "gen-recipe", argv, "Generate site-tuned Dockerfiles and Apptainer "
                    "definitions from HPCCM recipes. Subcommands: " + ", ".join(SUBCOMMANDS) + ".")
    except GenRecipeError as exc:
        print(f"gen-recipe: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gen-recipe: interrupted", file=sys.stderr)
        return 130
    except _Ended as exc:
        with contextlib.suppress(OSError):      # after SIGHUP the terminal may be gone
            print(f"gen-recipe: ended by {exc.name}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        return 0
    except OSError as exc:          # standard output on a full disk, a closed terminal
        if exc.errno not in (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EROFS):
            raise
        print(f"gen-recipe: cannot write the output: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
