"""The optional compiled event scanner (src/cscan): built where a C compiler is found.

``optional=True``: where it cannot be built (no compiler, no Python headers) the install
still succeeds, and traceview reads traces with msgspec (``traceview --version`` says which).
Everything else about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "traceview.read._cscan",
            sources=["src/cscan/module.c", "src/cscan/scan.c"],
            depends=["src/cscan/scan.h"],
            include_dirs=["src/cscan"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
