"""One argument rule for every command (generator/cli/main.py, `_Parser`): every option of every subcommand,
found by asking the parsers themselves, given `--OPTION=--` and the other values that are none ('', a lone '-',
a value that is an option) in each form argparse reads: one line on stderr, exit 2, no traceback, nothing
written, and no command runs."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
from pathlib import Path

import pytest

from generator.cli import main as cli

# what each command needs besides the option tried (its positional arguments), so that only the option is wrong
POSITIONALS = {"": (), "new-site": ("x",), "new-recipe": ("x",), "lint": ("Dockerfile",), "build": (), "launch": (),
               "detect": (), "report": ("results.json",), "minicluster": ("status",), "keygen": (),
               "certify": ("results.json", "--image", "x.sif"), "verify": ("x.sif",)}
ODD = ("--", "", "-", "--x", "--help", "--site=frontier")


def commands() -> dict[str, argparse.ArgumentParser]:
    parsers = {}
    for command, module in (("", "generator.cli.generate"), *cli.SUBCOMMANDS.items()):
        parser = cli._Parser(prog=f"gen-recipe {command}".strip())
        importlib.import_module(module).add_arguments(parser)
        parsers[command] = parser
    return parsers


def options() -> list[tuple[str, str]]:
    """(command, option) for every long option of every command that takes a value."""
    return [(command, name) for command, parser in commands().items() for action in parser._actions
            if action.nargs != 0 for name in action.option_strings if name.startswith("--")]


def test_every_command_is_seen_and_options_are_many():
    assert set(POSITIONALS) == {"", *cli.SUBCOMMANDS}
    assert len(options()) > 50


@pytest.mark.parametrize("command, option", options())
def test_an_option_without_a_value_is_one_line_and_exit_2(command, option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for module in {"generator.cli.generate", *cli.SUBCOMMANDS.values()}:     # nothing may run: the parser refuses
        monkeypatch.setattr(importlib.import_module(module), "run", lambda args: pytest.fail(f"ran with {args}"))
    for value in ODD:
        for argv in ([f"{option}={value}"], [option, value]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main([*([command] if command else []), *POSITIONALS[command], *argv])
            said = err.getvalue()
            assert code == 2 and out.getvalue() == "", (argv, code, said)
            assert said.startswith(f"gen-recipe: argument {option}") and said.count("\n") == 1, (argv, said)
            assert "Traceback" not in said and list(Path(".").iterdir()) == [], (argv, said)


def test_the_defects_of_the_review_are_one_line_and_run_nothing(tmp_path, monkeypatch):
    """`launch --time=--` and friends raised tracebacks (argparse stores [] for `--opt=--`), `build --export=--`
    built without exporting."""
    monkeypatch.chdir(tmp_path)
    for argv in (("launch", "--time=--"), ("launch", "--runtime=--"), ("launch", "--recipe=--"), ("launch", "--site=--"),
                 ("verify", "x.sif", "--key=--"), ("certify", "r.json", "--image", "x", "--key=--"), ("lint", "--target=--"),
                 ("minicluster", "status", "--dir=--"), ("build", "--export=--"), ("--site=--",)):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = cli.main(list(argv))
        assert code == 2 and err.getvalue().count("\n") == 1 and "is no value" in err.getvalue(), (argv, err.getvalue())
    assert list(tmp_path.iterdir()) == []


def test_values_that_are_values_still_pass():
    """A value starting with one '-' (a folder named -dash), a value after `--` for the command's own arguments."""
    parser = commands()["launch"]
    args = parser.parse_args(["--image=-dash", "--", "--steps", "2"])
    assert args.image == "-dash" and args.workload_args == ["--steps", "2"]
    assert commands()["lint"].parse_args(["--", "-file"]).paths == [Path("-file")]
