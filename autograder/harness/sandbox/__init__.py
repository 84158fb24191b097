"""Run student code in an isolated worker process and reach it through proxies.

The trusted grading process never imports student code and never unpickles anything from the
worker; see `sandbox.Sandbox` for the API, `config.SandboxConfig` for what a course tells it (the
sandbox itself names no course), and `isolation` for what is enforced where.
"""
from .config import ColumnCodec, SandboxConfig
from .errors import (
    BadReply,
    BadValue,
    ProtocolError,
    StaleObject,
    StudentCrash,
    StudentException,
    TooBig,
    WorkerDied,
    WorkerTimeout,
)
from .isolation import NoSafeIdentity
from .limits import Limits
from .proxy import Proxy
from .sandbox import Sandbox, recording

__all__ = [
    "BadReply",
    "BadValue",
    "ColumnCodec",
    "Limits",
    "NoSafeIdentity",
    "ProtocolError",
    "Proxy",
    "Sandbox",
    "SandboxConfig",
    "StaleObject",
    "StudentCrash",
    "StudentException",
    "TooBig",
    "WorkerDied",
    "WorkerTimeout",
    "recording",
]
