"""Run student code in an isolated worker process and reach it through proxies.

The trusted grading process never imports student code and never unpickles anything from the
worker; see `sandbox.Sandbox` for the API and `isolation` for what is enforced where.
"""
from .errors import ProtocolError, StudentCrash, StudentException, WorkerDied, WorkerTimeout
from .sandbox import Limits, Proxy, Sandbox

__all__ = [
    "Limits",
    "ProtocolError",
    "Proxy",
    "Sandbox",
    "StudentCrash",
    "StudentException",
    "WorkerDied",
    "WorkerTimeout",
]
