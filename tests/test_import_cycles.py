"""No import cycle in the package (issue 31), counting the imports inside functions too: a
deferred import hides a cycle from Python, not from a reader of the layout."""
import ast
from pathlib import Path

import solutions_lib

PKG = Path(solutions_lib.__file__).resolve().parent


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere in its file. `from . import x` of a
    submodule x is an edge to x, not to the package that holds it."""
    graph = {}
    for path in sorted(PKG.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        mod, deps = _module(path), set()
        here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Import):
                deps |= {a.name for a in n.names if a.name.startswith("solutions_lib")}
            elif isinstance(n, ast.ImportFrom):
                base = ".".join(here[:len(here) - n.level + 1] + ([n.module] if n.module else [])) if n.level \
                    else (n.module or "")
                if not base.startswith("solutions_lib"):
                    continue
                for a in n.names:
                    sub = PKG.parent / (base.replace(".", "/") + f"/{a.name}.py")
                    deps.add(f"{base}.{a.name}" if sub.exists() else base)
        graph[mod] = deps - {mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root] & graph.keys())))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph[w] & graph.keys()))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert {"solutions_lib.attention", "solutions_lib.course.config", "solutions_lib.dist.launch"} <= graph.keys()
    assert "solutions_lib.attention_inputs" in graph["solutions_lib.attention_triton"]
    assert cycles(graph) == []
