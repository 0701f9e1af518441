"""The schema engine of the project's TOML files (site files, app files): frozen dataclasses whose
field types say how a value is checked, and a `Loader` that turns parsed TOML into them or raises
one-line `SiteError`s naming the file, the dotted key and a fix.

A field's type decides its check (`Literal` = one of a fixed set, `Version` = a dotted version string,
tuples = arrays, `Mapping` = tables of values, nested dataclasses = tables); `fact(...)` gives a field
its example (for hints and templates), its one-line doc and the kind of its strings (`KINDS`). A
dataclass with a `from_array(values, key, fail)` class method may also be written as an array.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Literal, Union

from generator import errors, files
from generator.errors import UNSAFE_FOR_TERMINAL, SiteError, UsageError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


class Version(str):
    """A version string such as 4.1.0, 2021.9, 1.15.2.0 or 4.1.4-3+b1 (distro package)."""

    PATTERN = re.compile(r"^[0-9]+(\.[0-9]+){0,3}([-+~][0-9A-Za-z.+~-]+)?$")

    @property
    def parts(self) -> tuple[int, ...]:
        return tuple(int(p) for p in re.split(r"[-+~]", self, maxsplit=1)[0].split("."))

    def series(self, n: int = 2) -> str:
        """The first n numeric components: Version('8.1.31').series() == '8.1'."""
        return ".".join(str(p) for p in self.parts[:n])


# One printable character: no control character, line separator, bidirectional override or isolate, or lone
# surrogate (errors.UNSAFE_FOR_TERMINAL).
PRINTABLE = r"[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
KINDS: Mapping[str, tuple[re.Pattern, str]] = {k: (re.compile(v[0]), v[1]) for k, v in {
    "text": (PRINTABLE + "{0,2000}", "printable text without control or bidirectional characters"),
    "name": (r"[a-z0-9][a-z0-9_-]{0,63}", "lower-case letters, digits, '-' and '_' (at most 64)"),
    "word": (r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}", "letters, digits, '.', '_', '+' and '-'"),
    "module": (r"(?!.*/\.\.(?:/|$))[A-Za-z0-9][A-Za-z0-9._+/@:-]{0,127}",
               "a module name such as cray-mpich-abi/8.1.31 (no '..' part)"),
    "path": (r"[A-Za-z0-9_./*${}@+-][A-Za-z0-9_./*${}@+:=,-]{0,1023}",
             "a path (letters, digits, / . _ - + @ *, $VAR references)"),
    "relpath": (r"[A-Za-z0-9_][A-Za-z0-9_./+-]{0,255}", "a relative path of letters, digits, / . _ - +"),
    "url": (r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?", "an http(s) URL without credentials"),
    "image": (r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}", "an image reference such as rocm/dev-ubuntu-22.04:6.2.4"),
    "env": (r"[A-Za-z_][A-Za-z0-9_]{0,127}", "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"),
    "key": (r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", "letters, digits, '.', '_' and '-'"),
    "package": (r"[a-z0-9][a-z0-9.+-]{0,127}", "a distribution package name"),
    "pin": (r"[A-Za-z0-9][A-Za-z0-9.+:~-]{0,127}", "a package version such as 4.1.4-3+b1"),
    "user": (r"[a-z_][a-z0-9_-]{0,31}", "a user name (lower-case, at most 32)"),
    "tag": (r"[A-Za-z0-9_-]{1,64}", "a source tag such as F1"),
    "field": (r"[a-z_][a-z0-9_]{0,63}", "a key of this table"),
    # app files (generator/model/app.py)
    "requirement": (r"[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?(\[[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*\])?"
                    r"==[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}", "a pinned pip requirement such as numpy==2.1.3"),
    "command": (PRINTABLE + "{1,4000}", "one line of shell (no control or bidirectional characters)"),
    "arg": (PRINTABLE + "{1,1000}", "a command-line word without control or bidirectional characters"),
    "imgpath": (r"(/[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,127}){1,16}", "an absolute path in the image such as /opt/app"),
    "value": (r"[A-Za-z0-9_./:,=@%+ -]{0,1024}", "letters, digits, spaces and _ . / : , = @ % + - (no quotes, no $)"),
    "unit": (r"[A-Za-z0-9/%._ -]{1,32}", "a unit such as samples/s"),
    "option": (r"--[a-z][a-z0-9-]{0,63}(=[A-Za-z0-9_.,:/+=@-]{1,512})?", "a long option such as --network=disable_rdzv_get"),
    "walltime": (r"([0-9]{1,3}-)?[0-9]{1,3}:[0-5][0-9]:[0-5][0-9]", "a wall time [D-]HH:MM:SS such as 12:00:00 or 2-00:00:00"),
}.items()}


MAX_BYTES = 1 << 20          # a site file is a page of facts, not a megabyte


MAX_INT = 1 << 20


def fact(example, default=dataclasses.MISSING, doc: str = "", kind: str = "text", keys: str = "key"):
    """A field with an example (for hints and the template), a one-line doc and the kind of its strings
    (for mappings: `keys` is the kind of their keys, `kind` that of their values)."""
    meta = {"example": example, "doc": doc, "kind": kind, "keys": keys}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    if isinstance(default, (list, dict)):
        raise TypeError("use tuples / None for mutable defaults")
    return field(default=default, metadata=meta)


def is_optional(tp) -> tuple[bool, object]:
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return True, args[0]
    return False, tp


EXAMPLES = {"text": "a description", "name": "mysite", "word": "15.4", "module": "cray-mpich-abi/8.1.31",
            "path": "/opt/cray", "relpath": "wheels/torch.whl", "url": "https://example.org/simple",
            "image": "rocm/dev-ubuntu-22.04:6.2.4", "env": "OMP_NUM_THREADS", "key": "com.hooks.cxi.enabled",
            "package": "openmpi-bin", "pin": "4.1.4-3+b1", "user": "app", "tag": "F1", "field": "os_version",
            "requirement": "numpy==2.1.3", "command": "make -C /opt/app", "arg": "--steps",
            "imgpath": "/opt/app", "value": "1", "unit": "samples/s", "walltime": "12:00:00",
            "option": "--network=disable_rdzv_get"}


def shown(value, limit: int = 60) -> str:
    """A value as a message may echo it: one line, escapes visible, at most `limit` characters."""
    text = ascii(value) if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    return text[:limit - 4] + "...'" if isinstance(value, str) else text[:limit - 3] + "..."      # the quote a string's had


def describe(value) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
             list: "an array", dict: "a table"}
    return f"{names.get(type(value), type(value).__name__)} {shown(value)}" if not isinstance(value, (list, dict)) \
        else names[type(value)]


def example(meta) -> str:
    ex = meta.get("example")
    if isinstance(ex, str):
        return f'"{ex}"'
    if isinstance(ex, bool):
        return "true" if ex else "false"
    if isinstance(ex, tuple):
        return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else "{ ... }" for x in ex) + "]"
    return repr(ex)


class Loader:
    """Turns a parsed TOML document into dataclasses, or raises SiteError."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, problem: str, hint: str = "") -> typing.NoReturn:
        raise SiteError(self.path, key, problem, hint)

    def value(self, tp, raw, key: str, meta: Mapping):
        optional, tp = is_optional(tp)
        if raw is None and optional:
            return None
        origin = typing.get_origin(tp)
        if dataclasses.is_dataclass(tp):
            if isinstance(raw, list) and hasattr(tp, "from_array"):
                return tp.from_array(raw, key, self.fail)
            if not isinstance(raw, dict):
                self.fail(key, f"expected a table, got {describe(raw)}", f"write [{key}] with its keys")
            return self.table(tp, raw, key)
        if origin is Literal:
            choices = typing.get_args(tp)
            if not isinstance(raw, str):
                self.fail(key, f"expected one of {', '.join(choices)}, got {describe(raw)}")
            if raw not in choices:
                self.fail(key, f"{shown(raw)} is not one of {', '.join(choices)}", did_you_mean(raw, choices))
            return raw
        if tp is Version:
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                self.fail(key, f"expected a version string, got {describe(raw)}", f'quote it: {key.rsplit(".", 1)[-1]} = "{raw}"')
            if not isinstance(raw, str) or len(raw) > 64 or not Version.PATTERN.fullmatch(raw):
                self.fail(key, f"{shown(raw)} is not a version", f"write e.g. {example(meta)}")
            return Version(raw)
        if origin is tuple:
            item_tp = typing.get_args(tp)[0]
            if not isinstance(raw, list):
                self.fail(key, f"expected an array, got {describe(raw)}", f"write e.g. {key.rsplit('.', 1)[-1]} = {example(meta)}")
            if len(raw) > 256:
                self.fail(key, f"{len(raw)} items is too many", "a site lists at most 256")
            return tuple(self.value(item_tp, item, f"{key}[{i}]", meta) for i, item in enumerate(raw))
        if origin in (Mapping, dict, typing.get_origin(Mapping[str, str])):
            val_tp = typing.get_args(tp)[1]
            if not isinstance(raw, dict):
                self.fail(key, f"expected a table, got {describe(raw)}")
            if len(raw) > 256:
                self.fail(key, f"{len(raw)} entries is too many", "a site lists at most 256")
            for k in raw:
                self.check_string(k, f"{key} key", meta.get("keys", "key"))
            return types.MappingProxyType({k: self.value(val_tp, v, f"{key}.{k}", meta) for k, v in raw.items()})
        if tp is bool:
            if not isinstance(raw, bool):
                self.fail(key, f"expected true or false, got {describe(raw)}", "write true or false without quotes")
            return raw
        if tp is int:
            if isinstance(raw, bool) or not isinstance(raw, int):
                self.fail(key, f"expected an integer, got {describe(raw)}", "write a whole number without quotes")
            if not 0 <= raw <= MAX_INT:
                self.fail(key, f"expected an integer from 0 to {MAX_INT}, got {shown(raw)}")
            return raw
        if tp is float:
            if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                self.fail(key, f"expected a number, got {describe(raw)}", "write a number without quotes")
            if abs(raw) > MAX_INT or not math.isfinite(raw):         # the size first: 10**400 has no float
                self.fail(key, f"expected a finite number of at most {MAX_INT}, got {shown(raw)}", "write e.g. 0.05")
            return float(raw)
        if tp is str:
            if not isinstance(raw, str):
                self.fail(key, f"expected a string, got {describe(raw)}", f'quote it: "{shown(raw)}"')
            return self.check_string(raw, key, meta.get("kind", "text"), meta.get("example"))
        raise TypeError(f"unsupported schema type {tp!r}")  # pragma: no cover - schema bug

    def check_string(self, raw: str, key: str, kind: str, example_value: str | None = None) -> str:
        """`raw` if it is of `kind`; else a failure naming `key`, with `example_value` (the field's own example)
        or the kind's as the fix."""
        pattern, what = KINDS[kind]
        if not isinstance(raw, str) or not pattern.fullmatch(raw):
            problem = "contains a control or bidirectional character" if isinstance(raw, str) and UNSAFE_FOR_TERMINAL.search(raw) else \
                f"is not {what}" if kind != "text" else "is too long"
            ex = example_value if isinstance(example_value, str) and pattern.fullmatch(example_value) else EXAMPLES.get(kind, "x")
            self.fail(key, f"{shown(raw)} {problem}", f"write e.g. {example({'example': ex})}")
        return raw

    def table(self, cls, raw: Mapping, prefix: str):
        hints = type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
        for k in raw:
            if k not in fields:
                self.fail(f"{prefix}.{k}" if prefix else k, "unknown key", did_you_mean(k, fields))
        kwargs = {}
        for name, f in fields.items():
            key = f"{prefix}.{name}" if prefix else name
            if name in raw:
                kwargs[name] = self.value(hints[name], raw[name], key, f.metadata)
            elif f.default is dataclasses.MISSING:
                if dataclasses.is_dataclass(is_optional(hints[name])[1]):
                    kwargs[name] = self.table(hints[name], {}, key)
                else:
                    self.fail(key, "missing required key", f"add e.g. {name} = {example(f.metadata)}")
            elif f.default is None and typing.get_origin(hints[name]) is Mapping:
                kwargs[name] = types.MappingProxyType({})
            elif f.default is None and dataclasses.is_dataclass(is_optional(hints[name])[1]):
                kwargs[name] = self.table(is_optional(hints[name])[1], {}, key)
        return cls(**kwargs)


@functools.cache
def type_hints(cls) -> Mapping[str, object]:
    """The resolved field types of a schema class, read once (typing.get_type_hints evaluates every annotation
    each time: half of a site file's load)."""
    return types.MappingProxyType(typing.get_type_hints(cls))


def read_toml(text: str, path: str, what: str = "site file") -> dict:
    """The parsed TOML of a site (or app) file; size, depth and syntax problems as one-line SiteErrors."""
    if len(text) > MAX_BYTES:
        raise SiteError(path, "", f"{len(text)} characters is too large for a {what}", f"at most {MAX_BYTES}")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise SiteError(path, "", "invalid TOML: nested too deeply", f"a {what} nests tables a few levels") from None
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line ([0-9]+), column ([0-9]+)\)", msg)
        where = f"line {m.group(1)}, column {m.group(2)}" if m else "syntax"
        raise SiteError(path, where, "invalid TOML: " + re.sub(r"\s*\(at .*\)$", "", msg),
                        "fix the TOML syntax") from None
    except ValueError:                 # an integer past Python's 4,300 digits (int() refuses it)
        raise SiteError(path, "", "invalid TOML: a number of thousands of digits", f"a {what} holds numbers of a few "
                        "digits") from None


def read_file(path: Path, what: str = "site file") -> str:
    """The text of a site (or app) file through the one read path (`files.read_text`: a regular file,
    checked before it is read, of at most MAX_BYTES, UTF-8); its refusals as one-line SiteErrors."""
    try:
        return files.read_text(path, what, max_bytes=MAX_BYTES)
    except UsageError as exc:
        message = str(exc).removeprefix(f"{errors.shown(path)}: ")
        problem, _, hint = message[:-1].rpartition(" (") if message.endswith(")") else (message, "", "")
        if what == "site file" and hint == "check the path":
            hint += ", or give a site name (gen-recipe --list-sites)"
        raise SiteError(str(path), "", problem, hint) from None
