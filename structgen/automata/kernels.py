"""The compiled kernels of the automata, and the one error where they are not built.

Owns: the import of the Cython extensions (`flat_kernels`, `flattener`, `token_kernels`, and
the IR's `grammar.expanded_count`, built from their .pyx files when the package is
installed: setup.py) and `require`, which every path that needs them calls before it
does. Must not hold kernel code or fall back to anything: without the extensions no mask
can be computed.
"""

from __future__ import annotations

from structgen.errors import KernelsNotBuiltError

try:
    from structgen.automata import flat_kernels, flattener, token_kernels
    from structgen.grammar import expanded_count  # noqa: F401 (ir.expanded_size imports it when it counts)
except ImportError as error:  # a checkout whose extensions were not built (or are stale)
    flat_kernels = flattener = token_kernels = None
    _MISSING: ImportError | None = error
else:
    _MISSING = None


def missing() -> bool:
    """Whether the extensions failed to import (`require` says why)."""
    return _MISSING is not None


def require() -> None:
    """Raise KernelsNotBuiltError where the extensions cannot be imported."""
    if _MISSING is not None:
        raise KernelsNotBuiltError(
            "structgen's compiled automaton kernels (structgen/automata/*.pyx) are not built or do not load "
            f"({_MISSING}): install the package from its checkout with `pip install -e .` (or run "
            "`python setup.py build_ext --inplace` there), which compiles them with Cython")
