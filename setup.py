"""The optional compiled part of the package; everything else is in pyproject.toml.

``store.file._speedups`` is the file journal's per-record scan in C (``store/file/_speedups.c``).
It is optional: where there is no compiler (or no zlib headers) the build goes on without it
and ``store.file.reader`` uses its pure-Python loop, which stays the reference.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "store.file._speedups",
            ["store/file/_speedups.c"],
            libraries=["z"],
            optional=True,
        )
    ]
)
