"""The optional compiled part of the package; everything else is in pyproject.toml.

``store._speedups`` is one extension module built from one C file per format: the file
journal's records (``store/_speedups_journal.c``: its per-record scan and encode), a load's
replay and the messaging layer's message records (``_speedups_load.c``), page records and
paged messages (``_speedups_pages.c``), a CRC-32 faster than zlib's (``_speedups_crc32.c``),
the slot offsets of classes with ``__slots__`` (``_speedups_slots.c``), and the module's
method table and init (``_speedups_module.c``); ``store/_speedups.h`` is what they share. It is
optional: where there is no compiler (or no zlib headers) the build goes on without it and
``store.speedups`` falls back to the pure-Python code and ``zlib.crc32``, which stay the
reference.
"""

from setuptools import Extension, setup

#: The extension's C files (scripts/_setup.sh hashes every ``store/_speedups*.[ch]`` to tell
#: when to install again).
SOURCES = [
    "store/_speedups_module.c",
    "store/_speedups_crc32.c",
    "store/_speedups_slots.c",
    "store/_speedups_journal.c",
    "store/_speedups_load.c",
    "store/_speedups_pages.c",
]

setup(
    ext_modules=[
        Extension(
            "store._speedups",
            SOURCES,
            # Not compiled on its own: a change to it rebuilds every source, and it ships in
            # the sdist with them.
            depends=["store/_speedups.h"],
            libraries=["z"],
            optional=True,
        )
    ]
)
