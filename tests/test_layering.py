"""Import layering, read from the source with ``ast`` (nothing is imported).

- The training and pre-training modules import each other one way only: no cycle, counting the
  imports inside functions too (a function-level import must not hide a cycle).
- Serving code (the pipeline's folders ``page``, ``graph``, ``encoders``, ``model``, ``decisions``,
  ``output``, ``crawl`` and the root modules) never imports the training side (``data``,
  ``training``, ``pretraining``, ``evaluation``). The ``grownup`` command line wires the training
  commands and ``warc`` builds the pre-training corpus: both may.
- Every exception class is defined in ``errors.py`` (the other modules re-import theirs), so a
  caller finds in one place what it can catch.
"""

from __future__ import annotations

import ast
from pathlib import Path

import scrapy_grownup

ROOT = Path(scrapy_grownup.__file__).parent
PACKAGE = "scrapy_grownup"
TRAINING = ("scrapy_grownup.training", "scrapy_grownup.pretraining", "scrapy_grownup.data",
            "scrapy_grownup.evaluation")
# The tools that wire training and corpus building, allowed to import the training side.
TOOLS = ("scrapy_grownup.cli", "scrapy_grownup.warc")


def module_names() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports anywhere in its source (functions included)."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()

    def add(target: str) -> None:
        # the longest known prefix: ``pkg.mod.attr`` -> ``pkg.mod``
        parts = target.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        if parts:
            found.add(".".join(parts))

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == PACKAGE:
                module = node.module
            else:
                continue
            for alias in node.names:  # ``from . import datasets`` imports a module
                candidate = f"{module}.{alias.name}"
                add(candidate if candidate in known else module)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def is_training(name: str) -> bool:
    return any(name == t or name.startswith(t + ".") for t in TRAINING)


def is_tool(name: str) -> bool:
    return any(name == t or name.startswith(t + ".") for t in TOOLS)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "scrapy_grownup.training.loop" in graph["scrapy_grownup.training.trainer"]
    assert "scrapy_grownup.data.datasets" in graph["scrapy_grownup.training.holdout"]
    # inside a function, relative: cli's training commands
    assert "scrapy_grownup.training.trainer" in graph["scrapy_grownup.cli.main"]


def test_training_modules_import_each_other_one_way():
    graph = import_graph()
    training = {name: {m for m in deps if is_training(m)}
                for name, deps in graph.items() if is_training(name)}
    assert len(training) > 10
    assert find_cycle(training) is None, " -> ".join(find_cycle(training))


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_serving_code_never_imports_training():
    graph = import_graph()
    offenders = {name: sorted(m for m in deps if is_training(m))
                 for name, deps in graph.items()
                 if not is_training(name) and not is_tool(name)}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, offenders


def test_the_package_root_holds_a_few_modules():
    """The pipeline lives in its folders; the root keeps the public entry points."""
    root = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(root) <= 12, root


def test_exception_classes_are_defined_in_errors_only():
    import builtins

    from scrapy_grownup import errors

    kinds = {name for name, value in [*vars(builtins).items(), *vars(errors).items()]
             if isinstance(value, type) and issubclass(value, BaseException)}
    offenders = []
    for name, path in module_names().items():
        if name == "scrapy_grownup.errors":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue  # a private signal (``workers._BudgetExceeded``) is no error type
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                     for b in node.bases}
            if bases & kinds or any(b.endswith(("Error", "Exception")) for b in bases):
                offenders.append(f"{name}.{node.name}")
    assert not offenders, offenders
