"""What the tests share, in one place: the reference model of the journal contract (``model``),
the back-end fixtures (``backends`` for every back-end, ``db_backends`` for the database
servers), the fault-injecting file system (``faultfs``) and the crash simulation on it
(``crashsim``), and the parser of the ``Offset | Size | Field`` tables in format docstrings
(``doctables``). Test modules import from here; nothing here is a test."""
