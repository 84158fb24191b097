"""jsonschema for the harness's two schemas (assignment_schema.json, results_schema.json).

Importing jsonschema loads its optional format checkers. Where rfc3987_syntax is installed (the
instructor venv: nbgrader's jupyter_events asks for it; the Gradescope image has none), building
that module's grammars takes about a second per process, paid by every grading run. The schemas
use no `format` keyword and validation never passes a format checker, so the module is marked
absent before the import: jsonschema then leaves that one format out, as it does where it is not
installed.
"""
from __future__ import annotations

import sys
from types import ModuleType


def jsonschema() -> ModuleType:
    """The jsonschema package, imported without the rfc3987_syntax format checker."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import jsonschema as package

    return package
