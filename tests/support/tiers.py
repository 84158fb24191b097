"""The two tiers of the repository's tests, and batches that grade only what was selected.

`make test` runs `pytest -m "not full"`, the everyday tier; `make test-all` (CI) runs every test.
A test of the full tier carries the `full` mark (pyproject.toml): the whole catalogs, corpora and
hostile campaigns in every mode, and the rates aggregated over them. The everyday tier still grades
a fixed sample of each (`sample`: the first entry of each group), so every kind of check runs.

The batches (a fixture grading many submissions before its tests read them) grade what the
session's selected tests read (`selected`): `-k`, `-m` and node ids choose the gradings too.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

import pytest

FULL = pytest.mark.full

T = TypeVar("T")


def sample(values: Iterable[T], group: Callable[[T], Hashable], *, args: Callable[[T], tuple[Any, ...]] = lambda v: (v,),
           ids: Callable[[T], str] | None = None) -> list[Any]:
    """`values` as pytest params (`args(value)` each), all marked `full` but the first of each
    `group`: the everyday tier's fixed sample."""
    seen: set[Hashable] = set()
    params = []
    for value in values:
        key = group(value)
        everyday = key not in seen
        seen.add(key)
        params.append(pytest.param(*args(value), marks=() if everyday else (FULL,), id=ids(value) if ids else None))
    return params


def by_family(values: Iterable[T], families: dict[str, tuple[str, ...]], folder: Callable[[T], str], *,
              default: Callable[[T], bool], ids: Callable[[T], str]) -> list[Any]:
    """`values` (hostile cases) as pytest params, all marked `full` but the everyday tier's: one per
    payload family, the case of the family's first folder graded in the `default` way."""
    first = {folders[0] for folders in families.values()}
    return [pytest.param(value, id=ids(value), marks=() if folder(value) in first and default(value) else (FULL,))
            for value in values]


def unfamilied(folders: Iterable[str], families: dict[str, tuple[str, ...]]) -> list[str]:
    """The folders of `folders` in no family of `families`, or in more than one."""
    counts = {folder: sum(folder in members for members in families.values()) for folder in folders}
    return sorted(folder for folder, n in counts.items() if n != 1)


def selected(request: pytest.FixtureRequest, fixture: str) -> list[pytest.Item]:
    """The session's selected tests that use `fixture` (directly or through another fixture), in
    collection order: of the requesting module only, unless the fixture is session-scoped (then its
    name must be the session's only fixture of that name)."""
    module = None if request.scope == "session" else request.module
    return [item for item in request.session.items if fixture in getattr(item, "fixturenames", ())
            and (module is None or getattr(item, "module", None) is module)]


def params_of(items: Iterable[pytest.Item], name: str) -> list[Any]:
    """The values of parameter `name` among `items` (those parametrized by it), without repeats."""
    values: list[Any] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and name in callspec.params and callspec.params[name] not in values:
            values.append(callspec.params[name])
    return values
