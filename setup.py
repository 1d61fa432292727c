"""The optional compiled parts, built where a C compiler is found: the event scanner
(src/cscan) and the tree walks link uses (src/ctree).

``optional=True``: where it cannot be built (no compiler, no Python headers) the install
still succeeds: traceview then reads traces with msgspec and links with numpy
(``traceview --version`` names the decoder).
Everything else about the package is in pyproject.toml.
"""

from setuptools import Extension, setup


def optional_extension(name: str, folder: str, core: str) -> Extension:
    """src/FOLDER: module.c (the CPython face) and CORE.c/.h (pure C, also fuzzed)."""
    return Extension(
        name,
        sources=[f"src/{folder}/module.c", f"src/{folder}/{core}.c"],
        depends=[f"src/{folder}/{core}.h"],
        include_dirs=[f"src/{folder}"],
        extra_compile_args=["-O2"],
        optional=True,
    )


setup(
    ext_modules=[
        optional_extension("traceview.read._cscan", "cscan", "scan"),
        optional_extension("traceview._ctree", "ctree", "tree"),
    ]
)
