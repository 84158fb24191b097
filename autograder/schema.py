"""jsonschema for the two schemas: assignment_schema.json (beside this file) and the harness's
results_schema.json.

Importing jsonschema imports its optional format checkers, each only where its package is
installed. In the instructor venv (nbgrader's jupyter_events asks for jsonschema's format extras)
they cost every grading process about 0.3 s: rfc3987_syntax builds grammars at import (about a
second before it was left out), isoduration imports arrow and dateutil, rfc3986_validator
compiles its regular expressions. The schemas use no `format` keyword and validation never passes
a format checker, so these modules are marked absent before the import: jsonschema then leaves
their formats out, as it does on the Gradescope image, where none is installed. Only modules that
nothing else in the grader imports are marked (idna and jsonpointer are left alone: httpx needs
idna).
"""
from __future__ import annotations

import sys
from types import ModuleType

UNUSED_FORMAT_CHECKERS = ("rfc3987_syntax", "rfc3987", "rfc3986_validator", "rfc3339_validator", "isoduration",
                          "uri_template", "webcolors", "fqdn")


def jsonschema() -> ModuleType:
    """The jsonschema package, imported without the format checkers the harness does not use."""
    if "jsonschema" not in sys.modules:
        for name in UNUSED_FORMAT_CHECKERS:
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    import jsonschema as package

    return package
