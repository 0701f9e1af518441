"""gen-recipe new-site and new-recipe: hostile names and --out paths are one line and exit 2, nothing is
written when a check fails, and --out lands in the templates validated and shell-quoted."""

from __future__ import annotations

import contextlib
import os

from generator.errors import UsageError
from generator.recipe import catalog
from tests.helpers import run_cli


def one_line(r) -> str:
    assert r.code == 2 and r.err.count("\n") == 1 and r.err.startswith("gen-recipe: ") and "\x1b" not in r.err, r
    return r.err


def test_new_site_with_a_300_character_name_or_out_is_one_line(tmp_path):
    with contextlib.chdir(tmp_path):
        assert "is not a valid site name" in one_line(run_cli("new-site", "a" * 300))
        assert "File name too long" in one_line(run_cli("new-site", "mysite", "--out", "a" * 300))
        assert "is not a valid site name" in one_line(run_cli("new-site", "x\x1b[31m"))
        (tmp_path / "victim").write_text("mine")
        (tmp_path / "link.toml").symlink_to(tmp_path / "victim")
        err = one_line(run_cli("new-site", "mysite", "--out", "link.toml", "--force"))
        assert "symbolic link" in err and "--follow-symlinks" not in err      # new-site has no such option
        assert (tmp_path / "victim").read_text() == "mine"
        assert sorted(os.listdir(tmp_path)) == ["link.toml", "victim"]


def test_new_recipe_writes_nothing_when_its_check_fails(tmp_path, monkeypatch):
    """The templates are made and loaded as a recipe before one write_set: a failing check leaves nothing."""
    with contextlib.chdir(tmp_path):
        assert "a built-in recipe's" in one_line(run_cli("new-recipe", "pytorch"))
        def broken(spec):
            raise UsageError("broken template")

        monkeypatch.setattr(catalog, "load", broken)
        for python in ((), ("--python",)):
            assert "broken template" in one_line(run_cli("new-recipe", "myapp", *python))
        assert "a" * 300 in one_line(run_cli("new-recipe", "myapp", "--out", "a" * 300))
        assert os.listdir(tmp_path) == []


def test_new_recipe_out_is_validated_and_quoted_in_its_templates(tmp_path):
    with contextlib.chdir(tmp_path):
        for out in ('x"""y', "a\nb", "x y", "$(touch M)", "`touch M`", "a;b", "\x1b[31m"):
            assert "--out" in one_line(run_cli("new-recipe", "myapp", "--out", out))
        assert os.listdir(tmp_path) == []
        for python, main in (((), "app.toml"), (("--python",), "recipe.py")):
            r = run_cli("new-recipe", "myapp", *python, "--out", f"d{main[0]}/$HOME")
            assert r.code == 0 and r.out.startswith(f"'d{main[0]}/$HOME/{main}': edit it"), r
            text = (tmp_path / f"d{main[0]}" / "$HOME" / main).read_text()
            assert f"--recipe 'd{main[0]}/$HOME'/{main}" in text
            assert catalog.load(f"d{main[0]}/$HOME/{main}").name == "myapp"
