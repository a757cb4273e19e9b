"""The build of structgen's compiled kernels (everything else is in pyproject.toml).

The grammar automaton's kernels are Cython (structgen/automata/*.pyx), compiled to C
extensions when the package is built (`pip install .`, `pip install -e .`, a wheel).
"""

import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = ["flat_kernels", "token_kernels"]

extensions = [
    Extension(
        f"structgen.automata.{name}",
        [f"structgen/automata/{name}.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["/O2"] if sys.platform == "win32" else ["-O3"],
    )
    for name in KERNELS
]

setup(ext_modules=cythonize(extensions, include_path=["."], compiler_directives={"language_level": 3}))
