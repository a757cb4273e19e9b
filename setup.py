"""The build of structgen's compiled kernels (everything else is in pyproject.toml).

The grammar automaton's kernels are Cython (structgen/automata/*.pyx), and so are the
IR's position count (structgen/grammar/expanded_count.pyx) and the engine's CPU kernels
(structgen/engine/kernels/cpu_kernels.pyx, with their C in the headers beside it); all are
compiled to C extensions when the package is built (`pip install .`, `pip install -e .`, a
wheel).
"""

import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = ["flat_kernels", "flattener", "token_kernels"]
OPTIMIZE = ["/O2"] if sys.platform == "win32" else ["-O3"]
# The engine's kernels round every product and sum as they write them: no contraction into FMAs
# beyond the ones they ask for, so int8_rows.h's portable and AVX2 paths give the same bits.
EXACT_FLOAT = ["/fp:precise"] if sys.platform == "win32" else ["-ffp-contract=off"]


def openmp_flags() -> list[str]:
    """-fopenmp where this compiler can build and link with it, else none (the kernels then
    run on one thread). Built with it, the engine's kernels share torch's OpenMP pool: the
    extension names libgomp.so.1, and torch, imported first, has already loaded its own."""
    if sys.platform == "win32":
        return []
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "probe.c"
        source.write_text("#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n")
        try:
            built = subprocess.run([*compiler.split(), "-fopenmp", str(source), "-o", str(Path(folder) / "probe")],
                                   capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return []
    return ["-fopenmp"] if built.returncode == 0 else []


OPENMP = openmp_flags()

extensions = [
    Extension(
        f"structgen.automata.{name}",
        [f"structgen/automata/{name}.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=OPTIMIZE,
    )
    for name in KERNELS
] + [
    Extension("structgen.grammar.expanded_count", ["structgen/grammar/expanded_count.pyx"], extra_compile_args=OPTIMIZE),
    Extension(
        "structgen.engine.kernels.cpu_kernels",
        ["structgen/engine/kernels/cpu_kernels.pyx"],
        include_dirs=["structgen/engine/kernels"],
        depends=[str(header) for header in Path("structgen/engine/kernels").glob("*.h")],  # rebuilt when one changes
        extra_compile_args=OPTIMIZE + EXACT_FLOAT + OPENMP,
        extra_link_args=OPENMP,
    )
]

setup(ext_modules=cythonize(extensions, include_path=["."], compiler_directives={"language_level": 3}))
