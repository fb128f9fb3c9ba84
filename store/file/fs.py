"""Moved to :mod:`store.fs` (the file-system seam serves every back-end's file parts: journal
files, large messages, page files). This alias keeps ``store.store`` and ``store.perf``
importing until their own import lines name ``store.fs``; nothing else may import it, and it
goes once they do.
"""

from store.fs import FileHandle, FileSystem, OsFileHandle, OsFileSystem, copy_file

__all__ = ["FileHandle", "FileSystem", "OsFileHandle", "OsFileSystem", "copy_file"]
