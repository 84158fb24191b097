"""Console tables for the lecture demos and the benches' reports.

`format_table(title, headers, rows)` returns the table as a string. Cells are formatted per column
(a format spec such as ",d" or ".3g", or a function such as `human_bytes`); by default ints get
thousands separators, floats 4 significant digits, bools "yes"/"no", None "-". A column whose
values are all numbers is right-aligned, any other column left-aligned, unless `align` says
otherwise. The humanizers write sizes and counts the way the lectures quote them: bytes in binary
units ("128.0 KiB"), FLOPs, seconds and ratios with 3 significant digits ("1.23 TFLOP").
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from numbers import Integral, Number, Real
from typing import Any, Union

import numpy as np

Format = Union[str, Callable[[Any], str], None]

_SEPARATOR = "  "


def _is_number(value: Any) -> bool:
    """Python and numpy numbers, not bools (Python's bool is a `Number`; numpy's is not)."""
    return isinstance(value, Number) and not isinstance(value, bool)


def format_value(value: Any, fmt: Format = None) -> str:
    """One cell: `fmt` applied to `value` (None is always "-"), or the default formatting."""
    if value is None:
        return "-"
    if callable(fmt):
        return fmt(value)
    if fmt is not None:
        return format(value, fmt)
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, Integral):
        return f"{int(value):,}"
    if isinstance(value, Real):
        return f"{float(value):.4g}"
    return str(value)


def format_table(
    title: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    formats: Sequence[Format] | None = None,
    align: Sequence[str | None] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The table as text: the title, the header row, a rule, one line per row, then `notes`.

    `formats[i]` formats column i (see `format_value`); `align[i]` is "<", ">" or "^" for column i,
    None for the default (right if every value in the column is a number, else left). Columns are
    separated by two spaces; there is no trailing whitespace.
    """
    rows = [list(row) for row in rows]
    n = len(headers)
    for row in rows:
        if len(row) != n:
            raise ValueError(f"row {row!r} has {len(row)} cells; the table has {n} columns")
    formats = list(formats) if formats is not None else [None] * n
    align = list(align) if align is not None else [None] * n
    if len(formats) != n or len(align) != n:
        raise ValueError(f"formats and align need one entry per column ({n})")
    cells = [[format_value(value, formats[i]) for i, value in enumerate(row)] for row in rows]
    sides = []
    for i in range(n):
        values = [row[i] for row in rows if row[i] is not None]
        default = ">" if values and all(_is_number(v) for v in values) else "<"
        sides.append(align[i] or default)
    widths = [max([len(headers[i])] + [len(row[i]) for row in cells]) for i in range(n)]

    def line(texts: Sequence[str]) -> str:
        return _SEPARATOR.join(f"{t:{side}{w}}" for t, side, w in zip(texts, sides, widths)).rstrip()

    out = [title, line(headers), _SEPARATOR.join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    out += list(notes)
    return "\n".join(out)


def _scaled(value: float, units: Sequence[str]) -> tuple[float, str]:
    """`value` in the largest unit (powers of 1000) in which it still shows 3 significant digits."""
    x = float(value)
    for unit in units[:-1]:
        if abs(x) < 999.5:  # what would round to "1000" moves up a unit
            return x, unit
        x /= 1000
    return x, units[-1]


def _three_digits(x: float) -> str:
    """3 significant digits (0, 1.23, 12.3, 123), whole numbers with separators from 1000 up."""
    if x == 0:
        return "0"
    decimals = 2 if abs(x) < 9.995 else 1 if abs(x) < 99.95 else 0
    return f"{x:,.{decimals}f}"


def human_bytes(n: float) -> str:
    """Bytes in binary units with one decimal: 512 -> "512 B", 131072 -> "128.0 KiB"."""
    if abs(n) < 1024:
        return f"{int(n)} B"
    x = float(n) / 1024
    units = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    for unit in units[:-1]:
        if abs(x) < 1023.95:  # what would print as "1024.0" moves up a unit
            return f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} {units[-1]}"


def human_flops(n: float) -> str:
    """FLOPs with SI prefixes and 3 significant digits: 1.23e12 -> "1.23 TFLOP"."""
    x, unit = _scaled(n, ("", "k", "M", "G", "T", "P", "E"))
    return f"{_three_digits(x)} {unit}FLOP"


def human_seconds(seconds: float) -> str:
    """Seconds with 3 significant digits in s, ms, us or ns: 0.00495 -> "4.95 ms"."""
    x, unit = float(seconds), "s"
    for smaller in ("ms", "us", "ns"):
        if abs(x) >= 0.9995 or x == 0:
            break
        x, unit = x * 1000, smaller
    return f"{_three_digits(x)} {unit}"


def human_ratio(x: float) -> str:
    """A ratio with 3 significant digits (whole numbers from 100 up): "1.20x", "43.2x", "4,006x"."""
    return f"{_three_digits(x)}x"
