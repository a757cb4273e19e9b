"""The imports run one way, and modules keep to each other's public names. Walks every
module of structgen/, server/ and benchmarks/ with `ast`, at module level and inside functions, and
fails on:
- `structgen.grammar` importing `structgen.automata` or `structgen.engine`;
- an import of another module's underscore name (dunders such as `__version__` aside);
- a cycle between modules;
- a read of an underscore attribute of anything but `self`, `cls` or `super()` (dunders
  aside, and the standard library's few in STDLIB_PRIVATE): another object's private
  state, or another module's.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

PACKAGES = ("structgen", "server", "benchmarks")
# The standard library's underscore names that are its public API:
STDLIB_PRIVATE = {
    ("os", "_exit"),  # a compile worker whose server is gone exits at once, without cleanup
}
# torch offers its packed quantized matmuls and its scaled fp8 matmul only under underscore
# names (the pinned torch fixes their signatures); models.quantization is their one user.
TORCH_PRIVATE = {
    "torch.ops.aten._weight_int8pack_mm", "torch.ops.aten._weight_int4pack_mm_for_cpu",
    "torch.ops.aten._convert_weight_to_int4pack_for_cpu", "torch._scaled_mm",
}
ATTRIBUTE_FUNCTIONS = ("getattr", "setattr", "hasattr", "delattr")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in (REPO / package).rglob("*.py")}


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) for every import in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parents + ([node.module] if node.module else []))
            if base.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append((submodule, None) if submodule in known else (base, alias.name))
    return found


def graph() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """(module -> the modules it imports, [(module, from module, underscore name)])."""
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    private = []
    for name, path in known.items():
        for target, imported in imports(name, path, known):
            if target in known:
                edges[name].add(target)
            if imported and imported.startswith("_") and not imported.startswith("__"):
                private.append((name, target, imported))
    return edges, private


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_own(node: ast.expr) -> bool:
    """`self`, `cls` or `super()`: what a method may read the private attributes of."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def private_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, expression) for each underscore attribute of something other than self or
    cls, as `x._name` or `getattr(x, "_name")`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            target, name = node.value, node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_FUNCTIONS
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            target, name = node.args[0], node.args[1].value
        else:
            continue
        if not is_private(name) or is_own(target):
            continue
        if isinstance(target, ast.Name) and (target.id, name) in STDLIB_PRIVATE:
            continue
        if ast.unparse(node) in TORCH_PRIVATE:
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


def test_grammar_never_imports_the_automata_or_the_engine():
    edges, _ = graph()
    wrong = [(name, target) for name, targets in edges.items() if name.startswith("structgen.grammar")
             for target in targets if target.startswith(("structgen.automata", "structgen.engine"))]
    assert not wrong, f"grammar/ imports automata/ or the engine: {wrong}"


def test_no_module_imports_another_modules_underscore_names():
    _, private = graph()
    assert not private, f"underscore names imported across modules: {private}"


def test_no_import_cycles():
    edges, _ = graph()
    assert cycles(edges) == []


def test_no_module_reads_another_objects_underscore_attributes():
    wrong = [f"{name}:{line}: {text}" for name, path in modules().items()
             for line, text in private_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert not wrong, "underscore attributes read from outside their object:\n" + "\n".join(wrong)


def test_the_checks_see_what_they_look_for():
    """The walk finds function-level imports, relative imports, cycles and reads of
    underscore attributes."""
    edges, _ = graph()
    assert "structgen.grammar.json_schema" in edges["structgen.compiler"]  # imported inside a function
    assert "structgen.automata.nfa" in edges["structgen.automata.languages"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []
    code = ast.parse("self._a; cls._b; super()._c; x.__len__; os._exit(0); self.d._e; f()._g; m._h\n"
                     "getattr(self, '_i'); getattr(y, '_j'); hasattr(z, '__k__'); sys._getframe()")
    assert [text for _, text in private_reads(code)] == ["self.d._e", "f()._g", "m._h", "getattr(y, '_j')",
                                                         "sys._getframe"]
