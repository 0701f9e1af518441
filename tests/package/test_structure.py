"""The package's shape (docs/architecture.md): no import cycle among the project's modules, counting
imports inside functions; a few modules directly in generator/, the rest in layers; one place per
runtime, workload and lint rule (their names quoted in few files)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("generator", "recipes", "workloads")
# Modules that import a package's modules by computed name (importlib): they depend on all of them.
DYNAMIC = {"generator.recipe.catalog": "recipes"}


def _modules(root: Path = REPO) -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the project's modules it imports, at any depth of the file (functions too), and those it
    names in a string (importlib.import_module("generator.cli.generate"), a table of subcommands)."""
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                targets = [node.value]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                # `from package import module` depends on the module; names that are not modules come from `base`
                subs = [f"{base}.{a.name}" for a in node.names]
                targets = [s for s in subs if s in modules] + ([base] if any(s not in modules for s in subs) else [])
            else:
                continue
            found |= {t for t in targets if t in modules and t != name}
        if name in DYNAMIC:
            found |= {m for m in modules if m.startswith(DYNAMIC[name] + ".")}
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle_through_a_function_import(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_sees_function_level_and_named_imports(tmp_path):
    (tmp_path / "generator" / "cli").mkdir(parents=True)
    (tmp_path / "generator" / "__init__.py").write_text("")
    (tmp_path / "generator" / "cli" / "__init__.py").write_text("")
    (tmp_path / "generator" / "a.py").write_text("def f():\n    from generator import b\n")
    (tmp_path / "generator" / "b.py").write_text("import importlib\nimportlib.import_module('generator.cli.main')\n")
    (tmp_path / "generator" / "cli" / "main.py").write_text("from generator.a import f\n")
    graph = imports(_modules(tmp_path))
    assert graph["generator.a"] == {"generator.b"} and graph["generator.b"] == {"generator.cli.main"}
    assert cycles(graph) == [["generator.a", "generator.b", "generator.cli.main"]]


def test_no_import_cycle_counting_imports_inside_functions():
    found = cycles(imports(_modules()))
    assert not found, "import cycles: " + "; ".join(" ↔ ".join(c) for c in found)


def test_few_modules_directly_in_generator():
    top = sorted(p.name for p in (REPO / "generator").glob("*.py"))
    assert len(top) <= 5, f"generator/ holds {top}: put modules in the layer they belong to (docs/architecture.md)"


def _quoted_in(pattern: str) -> list[str]:
    """The non-test Python files of the project that quote `pattern`."""
    regex = re.compile(pattern)
    return sorted(str(p.relative_to(REPO)) for package in (*PACKAGES, "suites") for p in (REPO / package).rglob("*.py")
                  if regex.search(p.read_text(encoding="utf-8")))


def test_udocker_and_gan3d_are_named_in_at_most_three_files():
    assert len(_quoted_in(r"\budocker\b")) <= 3, _quoted_in(r"\budocker\b")
    assert len(_quoted_in(r"\bgan3d\b")) <= 3, _quoted_in(r"\bgan3d\b")


def test_each_lint_rule_id_is_quoted_in_one_file():
    ids = sorted(set(re.findall(r"\bGR\d{3}\b", "".join(p.read_text(encoding="utf-8")
                                                       for p in (REPO / "generator" / "lint").rglob("*.py")))))
    assert ids, "no lint rule ids found"
    spread = {i: _quoted_in(rf"\b{i}\b") for i in ids}
    assert all(len(files) == 1 for files in spread.values()), {i: f for i, f in spread.items() if len(f) != 1}


def _imported(path: Path, *, top_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module or "")
    return names


def test_suites_holds_only_test_collections():
    extra = sorted(p.name for p in (REPO / "suites").glob("*.py") if not p.name.startswith("test_") and p.name != "__init__.py")
    assert not extra, f"suites/ keeps only test collections; {extra} belong in generator/suite/"
    for test in (REPO / "suites").glob("test_*.py"):
        own = {n for n in _imported(test) if n == "suites" or n.startswith("suites.")}
        assert not own, f"{test.name} imports {own}: shared code belongs in generator/suite/"


def test_the_pytest_plugin_imports_nothing_of_the_project_at_load():
    """An installed gen-recipe loads the plugin in every pytest session (pytest11): its module level must
    not import the project (hpccm's cost; a project's own `workloads` package would shadow ours)."""
    own = {n for n in _imported(REPO / "generator" / "suite" / "plugin.py", top_level_only=True)
           if n.split(".")[0] in (*PACKAGES, "suites")}
    assert not own, f"generator/suite/plugin.py imports {own} at module level: import them inside the hooks"
