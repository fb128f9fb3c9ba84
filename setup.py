"""The optional compiled part of the package; everything else is in pyproject.toml.

``store._speedups`` (``store/_speedups.c``) is the file journal's per-record scan and encode in
C, and a CRC-32 faster than zlib's. It is optional: where there is no compiler (or no zlib
headers) the build goes on without it and ``store.speedups`` falls back to the pure-Python code
and ``zlib.crc32``, which stay the reference.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "store._speedups",
            ["store/_speedups.c"],
            libraries=["z"],
            optional=True,
        )
    ]
)
