"""Portable data: every table out to JSON and back (archive.py), into another database (dbcopy.py), and what
a stored or imported row must look like (rowcheck.py)."""
