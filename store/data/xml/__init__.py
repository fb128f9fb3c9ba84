"""``store data exp`` / ``store data imp``: Artemis's XML export format
(``artemis-import-export.xsd``, reference §6, docs/cli.md), streaming, with a hardened parser.

The modules, each importing only those above it in this list:

- :mod:`.numbers` — Java's spelling of floats and doubles (``Float.toString``, …);
- :mod:`.format` — the format itself: element and attribute names, property types, base64;
- :mod:`.reader` — the hardened event reader over expat (no DTDs, no entities);
- :mod:`.document` — the document's items (bindings, messages with bodies decoded in pieces);
- :mod:`.export` — :func:`~store.data.xml.export.export_xml`, a store into a document;
- :mod:`.import_` — :func:`~store.data.xml.import_.import_xml`, a document into a store
  (``import`` is a keyword, hence the trailing underscore, PEP 8's way around one).

The package imports nothing itself, so a caller pays only for the modules it names (the
reader alone needs neither the storage manager nor a store).
"""
