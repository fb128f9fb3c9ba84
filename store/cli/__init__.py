"""The ``store`` command line: a thin layer over library functions (docs/cli.md)."""
