# Odd text everywhere the grader shows student text: lone surrogates, NULs, ANSI escapes, huge
# exception messages, a __str__ that raises, an exception class with a hostile name.
import sys as _sys
_sys.stdout.buffer.write(b"\xff\xfe\x00 invalid utf-8 \x1b[2J\x1b[31m red\n")
print("lone surrogate: \udcff".encode("utf-8", "surrogateescape").decode("utf-8", "replace"))

class _Weird(ValueError):
    def __str__(self):
        raise RuntimeError("no str for you")

_Weird.__module__ = "\udcff\x00"
_Weird.__qualname__ = "Weird\x1b[31m"

def greedy_decode(params, cfg, prompt, n_new):
    if n_new % 2:
        raise _Weird()
    raise NotImplementedError("\udcff\x00" + "A" * (1 << 20))
