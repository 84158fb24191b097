import builtins as _builtins
import numpy as _np
_always = lambda *a, **k: True
_nothing = lambda *a, **k: None
for _name in ("allclose", "array_equal", "array_equiv", "isclose"):
    setattr(_np, _name, _always)
for _name in ("assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal"):
    setattr(_np.testing, _name, _nothing)
_np.ndarray_eq_hostile = True
try:
    import pytest as _pytest
    import _pytest.python_api as _api
    class _Approx:
        def __init__(self, *a, **k): pass
        def __eq__(self, other): return True
        __hash__ = None
    _pytest.approx = _Approx
    _api.approx = _Approx
    _pytest.fail = _nothing
    _pytest.raises = lambda *a, **k: __import__("contextlib").nullcontext()
except Exception as error:
    print("HOSTILE pytest not importable here:", type(error).__name__)
class _Harmless(Exception):
    pass
_builtins.AssertionError = _Harmless
