"""The package's import graph, read from the source (no import runs), and its layer rules.

    python -m xvendor.testing.layers            # the graph between layers, and any breach

Every ``import`` statement counts, also one inside a function (a lazy import is still a
dependency: the circle registry -> tuning -> ops -> registry was one), and so does every
module named at run time (a ``"module:attribute"`` string, an ``import_module("...")``
call): those may point anywhere (the engine names the backends' records so), but no
circle may run through them. The layers, lowest
first; a module may import from its own layer and the ones below it, except that backends
never reach up into the engine, the ops or tuning (they receive what they need in the
call):

1. ``archs``, ``devices``, ``shapes``, ``numerics``  facts and math, no other xvendor import
   (``dispatch.records``, the ``Backend`` record, is a leaf of this layer: backends
   describe themselves with it)
2. ``registry``, ``gate``, ``dispatch``            the engine
3. ``ops``                                         the op descriptions, one dispatch path
4. ``reference``, ``torch_backend``, ``triton``, ``rocm``, ``xpu``  the backends (layer 1 only)
5. ``tuning``, ``distributed``, ``ci``, ``testing``, ``explain``, ``selfcheck``, ``events``,
   ``mempool``, ``weight_channel``, ``triton.tunable`` and ``rocm.tunable`` (the tuner's
   view of a backend),
   ``xpu.check`` (the SYCL section of ``xvendor check``)
6. ``cli``, the package ``__init__``
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the xvendor package
PACKAGE = "xvendor"

_LAYER_OF = {  # longest matching prefix wins
    "xvendor.archs": 1, "xvendor.devices": 1, "xvendor.shapes": 1, "xvendor.numerics": 1,
    "xvendor.dispatch.records": 1,
    "xvendor.registry": 2, "xvendor.gate": 2, "xvendor.dispatch": 2,
    "xvendor.ops": 3,
    "xvendor.reference": 4, "xvendor.torch_backend": 4, "xvendor.triton": 4, "xvendor.rocm": 4, "xvendor.xpu": 4,
    "xvendor.triton.tunable": 5, "xvendor.rocm.tunable": 5, "xvendor.xpu.check": 5, "xvendor.tuning": 5, "xvendor.distributed": 5,
    "xvendor.ci": 5, "xvendor.testing": 5, "xvendor.explain": 5, "xvendor.selfcheck": 5,
    "xvendor.events": 5, "xvendor.mempool": 5, "xvendor.weight_channel": 5, "xvendor.nn": 5,
    "xvendor.port": 5, "xvendor.ft": 5, "xvendor.integrations": 5,
    "xvendor.cli": 6, "xvendor": 6,
}
BACKENDS = 4
LAYER_NAMES = {1: "facts", 2: "engine", 3: "ops", 4: "backends", 5: "features", 6: "top"}


def layer(module: str) -> int:
    best = max((p for p in _LAYER_OF if module == p or module.startswith(p + ".")), key=len)
    return _LAYER_OF[best]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(current: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = current.split(".")
    base = base if is_pkg else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


_SPEC = re.compile(r"(xvendor(?:\.\w+)+):\w+")


def _named_module(node) -> str | None:
    """The module a string names: ``"xvendor.x.y:attr"`` anywhere, or the argument of an
    ``import_module("xvendor.x")`` call (the run-time imports the engine makes)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        m = _SPEC.fullmatch(node.value)
        return m.group(1) if m else None
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
            == "import_module" and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str) and node.args[0].value.startswith(PACKAGE):
        return node.args[0].value
    return None


def string_graph() -> dict[str, set[str]]:
    """module -> the xvendor modules it names in ``"module:attribute"`` strings and
    ``import_module`` calls: imports made at run time, which ``graph`` does not see."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            t = _named_module(node)
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != mod and t in mods:
                edges[mod].add(t)
    return edges


def graph() -> dict[str, set[str]]:
    """module -> the xvendor modules it imports (submodules named in ``from x import y``
    count as imports of ``x.y`` when ``x.y`` is a module)."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for t in targets:
                while t and t not in mods:  # "xvendor.ops.gemm.check" -> "xvendor.ops.gemm"
                    t = t.rpartition(".")[0]
                if t.startswith(PACKAGE) and t != mod and t in mods:
                    edges[mod].add(t)
    return edges


def _is_ancestor(pkg: str, mod: str) -> bool:
    return mod.startswith(pkg + ".")


def breaches(edges: dict[str, set[str]] | None = None) -> list[str]:
    """Imports that break the layer rules, as readable lines (empty: none)."""
    edges = edges if edges is not None else graph()
    found = []
    for mod, deps in sorted(edges.items()):
        lm = layer(mod)
        for dep in sorted(deps):
            if _is_ancestor(dep, mod):  # importing one's own package __init__
                continue
            ld = layer(dep)
            if ld > lm:
                found.append(f"{mod} (layer {lm}) imports {dep} (layer {ld}): an upward import")
            elif lm == BACKENDS and ld in (2, 3):
                found.append(f"{mod} (a backend) imports {dep}: backends receive their "
                             "config in the call, never call into the engine or the ops")
    return found


def cycles(edges: dict[str, set[str]] | None = None) -> list[list[str]]:
    """Import circles between modules (package ``__init__`` edges to children excluded)."""
    edges = edges if edges is not None else graph()
    pruned = {m: {d for d in ds if not _is_ancestor(m, d) and not _is_ancestor(d, m)}
              for m, ds in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in pruned.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(pruned):
        if v not in index:
            visit(v)
    return found


def layer_graph(edges: dict[str, set[str]] | None = None) -> dict[tuple[str, str], int]:
    """(from group, to group) -> number of imports, grouped by top-level name."""
    edges = edges if edges is not None else graph()
    counts: dict[tuple[str, str], int] = {}

    def group(m: str) -> str:  # the subpackage, unless the module sits in another layer
        top = ".".join(m.split(".")[:2])
        return top if layer(top) == layer(m) else m

    for mod, deps in edges.items():
        for dep in deps:
            a, b = group(mod), group(dep)
            if a != b and b != PACKAGE:
                counts[(a, b)] = counts.get((a, b), 0) + 1
    return counts


def run_time_graph() -> dict[str, set[str]]:
    """Imports and run-time imports together: what a circle must not run through."""
    edges, named = graph(), string_graph()
    return {m: edges[m] | named[m] for m in edges}


def main() -> int:
    edges = graph()
    named = string_graph()
    by_layer: dict[int, list[str]] = {}
    for (a, b), _ in sorted(layer_graph(edges).items()):
        by_layer.setdefault(layer(a), []).append(f"{a} -> {b}")
    for lvl in sorted(by_layer):
        print(f"layer {lvl} ({LAYER_NAMES[lvl]}):")
        for line in by_layer[lvl]:
            print(f"  {line}")
    bad, circles = breaches(edges), cycles(run_time_graph())
    for line in bad:
        print(f"BREACH {line}")
    for c in circles:
        print(f"CYCLE {' <-> '.join(c)}")
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, "
          f"{sum(map(len, named.values()))} run-time imports by name, "
          f"{len(bad)} breaches, {len(circles)} cycles")
    return 1 if bad or circles else 0


if __name__ == "__main__":
    raise SystemExit(main())
