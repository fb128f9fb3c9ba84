"""The ``store`` command line: a thin layer over library functions (DESIGN §10)."""
