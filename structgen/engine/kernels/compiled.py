"""The engine's compiled CPU kernels (cpu_kernels.pyx with the C headers beside it, built
when the package is installed), imported once for every module that calls them.

Owns the import and the refusal where it failed: `cpu_kernels` is the extension, or None
in a checkout whose extensions were not built (callers then take torch's path), and
`require` raises for the callers that have no other path. Must not call a kernel.
"""

from __future__ import annotations

from structgen.errors import KernelsNotBuiltError

try:
    from structgen.engine.kernels import cpu_kernels
except ImportError as error:  # a checkout whose extensions were not built
    cpu_kernels = None
    import_error: ImportError | None = error
else:
    import_error = None


def require() -> None:
    """Raise KernelsNotBuiltError where the compiled kernels cannot be imported."""
    if import_error is not None:
        raise KernelsNotBuiltError(
            f"structgen's compiled CPU kernels (structgen/engine/kernels/cpu_kernels.pyx) do not load ({import_error}): "
            "install the package from its checkout with `pip install -e .` (or run "
            "`python setup.py build_ext --inplace` there)")
