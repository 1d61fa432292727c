"""The optional compiled parts, built where a C compiler is found: the event scanner
(src/cscan) and the tree walks link uses (src/ctree).

``optional=True``: where it cannot be built (no compiler, no Python headers) the install
still succeeds: traceview then reads traces with msgspec and links with numpy
(``traceview --version`` says which).
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
        ),
        Extension(
            "traceview._ctree",
            sources=["src/ctree/module.c", "src/ctree/tree.c"],
            depends=["src/ctree/tree.h"],
            include_dirs=["src/ctree"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
