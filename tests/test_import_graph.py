"""The import graph between broker's packages, read from the source with `ast` (every import
statement, also those inside functions or under TYPE_CHECKING): the controller decides
for the cluster and imports nothing of the broker process (broker/server/), directly or
through another package, so server/ and controller/ are never in one import cycle
(docs/architecture.md)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from broker.processes import ROOT

BROKER = ROOT / "broker"


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """The broker modules a file under `root` imports (absolute names; relative imports
    resolved)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            # `from broker.x import y` may name a module y as well as a name in x
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {m for m in found if m == "broker" or m.startswith("broker.")}


def package_of(module: str) -> str:
    """The top-level package (or module) of broker a module belongs to: broker.server.x ->
    server, broker.cluster -> cluster."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def module_edges() -> dict[str, set[str]]:
    edges = {}
    for path in BROKER.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        edges[module.removesuffix(".__init__")] = imported_modules(path)
    return edges


def package_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for module, imports in module_edges().items():
        source = package_of(module)
        edges[source].update(package_of(m) for m in imports if package_of(m) not in ("", source))
    return edges


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_graph_is_read():
    # Guards the assertions below against reading nothing: edges known to exist are found.
    edges = package_edges()
    assert "server" in edges["cli"]
    assert "controller" in edges["server"]
    assert {"zk", "cluster"} <= edges["controller"]


def test_the_controller_imports_nothing_of_the_server():
    offenders = {
        module: sorted(m for m in imports if package_of(m) == "server")
        for module, imports in module_edges().items()
        if package_of(module) == "controller"
    }
    assert {m: found for m, found in offenders.items() if found} == {}


def test_no_import_cycle_between_server_and_controller():
    edges = package_edges()
    assert "server" not in reachable(edges, "controller")
    # Neither do the packages both use reach back into the broker process.
    for shared in ("cluster", "zk", "inter_broker", "util"):
        assert "server" not in reachable(edges, shared), shared
        assert "controller" not in reachable(edges, shared), shared


def test_relative_imports_resolve(tmp_path):
    source = tmp_path / "broker" / "server" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text("from .purgatory import Purgatory\nfrom ..cluster import Node\n")
    assert imported_modules(source, tmp_path) == {
        "broker.server.purgatory",
        "broker.server.purgatory.Purgatory",
        "broker.cluster",
        "broker.cluster.Node",
    }
