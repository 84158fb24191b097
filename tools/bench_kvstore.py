"""The KV-store benchmark (kvlab.kvstore_bench) on the reference connector, solutions/module06/kv_connector.py.

    python -m tools.bench_kvstore [--backend system|embedded] [kvlab.kvstore_bench's other options]

Students run the same benchmark on their own connector from their folder: `make bench-kvstore`, or
`python -m kvlab.kvstore_bench [--submission DIR]`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from kvlab.kvstore_bench import main

REFERENCE = Path(__file__).resolve().parent.parent / "solutions" / "module06"

if __name__ == "__main__":
    main(["--submission", str(REFERENCE), *sys.argv[1:]])
