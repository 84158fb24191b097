"""The benches' `--write-docs`: each rewrites its own section of docs/performance.md, nothing else.

No bench runs here (they take minutes and want an idle machine): `tools.bench.publish` is given a
stand-in that prints, and the page is a copy in a temporary folder.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tools import bench

PAGE = """# Performance

Intro text, kept.

<!-- bench:grading -->
old grading figures
<!-- /bench:grading -->

Between the sections, kept.

<!-- bench:replay -->
old replay figures
<!-- /bench:replay -->
tail, kept
"""


def test_the_section_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(PAGE)
    bench.write_docs_section("grading", "new figures\nsecond line", page)
    expected = PAGE.replace("old grading figures", "new figures\nsecond line")
    assert page.read_text() == expected, (
        f"after rewriting section 'grading' the page should differ only inside its markers; got:\n{page.read_text()}")


def test_rewriting_twice_gives_the_same_page(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(PAGE)
    bench.write_docs_section("replay", "\n\nfigures\n\n", page)
    once = page.read_text()
    bench.write_docs_section("replay", "figures", page)
    assert page.read_text() == once, "a section's surrounding blank lines should not grow with every rewrite"
    assert "<!-- bench:replay -->\nfigures\n<!-- /bench:replay -->" in once, (
        f"section 'replay' should hold exactly its new content between its markers; got:\n{once}")


@pytest.mark.parametrize("broken", [
    PAGE.replace("<!-- /bench:grading -->\n", ""),
    PAGE.replace("<!-- bench:grading -->\n", ""),
    PAGE + "<!-- bench:grading -->\n",
    PAGE.replace("<!-- bench:grading -->\nold grading figures\n<!-- /bench:grading -->",
                 "<!-- /bench:grading -->\nold grading figures\n<!-- bench:grading -->"),
], ids=["no closing marker", "no opening marker", "opening marker twice", "markers reversed"])
def test_a_damaged_section_is_refused_and_the_page_left_alone(tmp_path: Path, broken: str) -> None:
    page = tmp_path / "performance.md"
    page.write_text(broken)
    with pytest.raises(ValueError, match="bench:grading"):
        bench.write_docs_section("grading", "new figures", page)
    assert page.read_text() == broken, "a refused rewrite must leave the page byte for byte as it was"


def test_publish_writes_what_the_bench_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "performance.md"
    page.write_text(PAGE)

    def fake_bench() -> int:
        print(f"table of {bench.ROOT}/solutions/lecture07/prefix_cache.py: 0.04 s")
        return 0

    assert bench.publish("replay", fake_bench, page) == 0, "publish should return the bench's own result"
    text = page.read_text()
    section = text[text.index("<!-- bench:replay -->"):text.index("<!-- /bench:replay -->")]
    assert "table of solutions/lecture07/prefix_cache.py: 0.04 s" in section, (
        f"the printed figures (with this checkout's path made relative) belong in section 'replay'; got:\n{section}")
    assert "Figures from the last run of `python -m" in section and "cores" in section, (
        f"the section should name the command and the machine; got:\n{section}")
    assert text.replace(section, "") == PAGE.replace(PAGE[PAGE.index("<!-- bench:replay -->"):
                                                          PAGE.index("<!-- /bench:replay -->")], ""), (
        "publish must change nothing outside section 'replay'")
    assert "0.04 s" in capsys.readouterr().out, "the bench's output should still reach the console"


def test_publish_writes_nothing_when_the_bench_fails(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(PAGE)

    def failing_bench() -> int:
        print("half a table")
        raise RuntimeError("the reference scored 90 of 100")

    with pytest.raises(RuntimeError):
        bench.publish("replay", failing_bench, page)
    assert page.read_text() == PAGE, "a bench that failed must leave its section as it was"


def test_the_page_has_every_benchs_section() -> None:
    text = bench.PERFORMANCE_PAGE.read_text()
    for name in ("grading", "replay", "kvstore"):
        opening, closing = bench.section_markers(name)
        assert text.count(opening) == 1 and text.count(closing) == 1, (
            f"docs/performance.md should hold section {name!r} once ({opening} ... {closing}), "
            "which its bench's --write-docs rewrites")


@pytest.mark.parametrize("module_name, section, argv", [
    ("tools.bench_grading", "grading", ["--rounds", "1", "--write-docs", "lecture02"]),
    ("tools.bench", "replay", ["--repeats", "1", "--write-docs"]),
    ("tools.bench_kvstore", "kvstore", ["--write-docs", "--chunks", "2"]),
])
def test_each_bench_publishes_its_own_section(monkeypatch: pytest.MonkeyPatch, module_name: str, section: str,
                                              argv: list[str]) -> None:
    import importlib  # noqa: PLC0415

    module = importlib.import_module(module_name)
    published: list[str] = []
    monkeypatch.setattr(bench, "publish", lambda name, run, page=None: published.append(name))
    module.main(argv)
    assert published == [section], (
        f"{module_name} --write-docs should rewrite section {section!r} of docs/performance.md "
        f"(and only it, once); it published {published}")
