"""Module 6 demo: KV memory of real models (part 1), then prefix caching measured by TTFT (part 2).

    python demo.py [--submission DIR] [--runs 5] [--part 1|2|all]     (in the repository: make demo A=module06)

DIR is the first of: --submission, $KVLAB_SUBMISSION, the current directory if it holds
block_manager.py, else the repository's reference solution.

Part 1 (your kv_memory.py): the lab's table, Qwen2.5-0.5B/7B/72B and DeepSeek-V3 at 2k-32k tokens,
batch 1 and 8, FP16, with the lab's DeepSeek-V3 figure (computed as if it were GQA with 8 KV heads
of 128) beside the right one (MLA); then the largest batch that fits beside the BF16 weights on an
80 GB and a 24 GB GPU.

Part 2 (your block_manager.py inside the course server): starts `python -m kvlab.serving.server` on
a free loopback port with prefix caching on, runs the benchmark (kvlab.serving.bench) --runs times,
stops it, does the same with caching off, and prints the TTFT medians side by side with the hit
counts read from /metrics, and what the lab's script as written would have measured.
"""
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, only this file's folder is on sys.path: add the folder that holds kvlab/.
_ROOT = next(p for p in Path(__file__).resolve().parents if (p / "kvlab").is_dir())
sys.path.insert(0, str(_ROOT))

from kvlab.demo import Student, run  # noqa: E402 - first: it sets the BLAS threads before numpy loads

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from typing import Any  # noqa: E402

from kvlab.hf_configs import CONFIGS, LAB_BATCHES, LAB_DEEPSEEK_AS_GQA, LAB_SEQ_LENS  # noqa: E402
from kvlab.tables import format_table  # noqa: E402

GPUS = {"80 GB (A100/H100)": 80 * 10**9, "24 GB (RTX 4090)": 24 * 10**9}
FIT_SEQ_LEN = 4096
STARTUP_SECONDS = 90


def table_kv_memory(student: Student) -> None:
    """(1) The lab's table: KV cache in GiB per model, sequence length and batch, FP16."""
    if student.args.part == "2":
        return
    kv_memory = student.kv_memory
    per_token = {name: kv_memory.kv_bytes_per_token(spec.as_dict()) for name, spec in CONFIGS.items()}
    lab_deepseek = kv_memory.kv_bytes_per_token(LAB_DEEPSEEK_AS_GQA)
    rows = []
    for name, spec in CONFIGS.items():
        for batch in LAB_BATCHES:
            cells = [kv_memory.kv_cache_gib(spec.as_dict(), n, batch) for n in LAB_SEQ_LENS]
            rows.append([name, batch, *(f"{c:.2f}" for c in cells)])
            if name == "DeepSeek-V3":
                lab = [kv_memory.kv_cache_gib(LAB_DEEPSEEK_AS_GQA, n, batch) for n in LAB_SEQ_LENS]
                rows.append(["  the lab's figure (GQA 8x128)", batch, *(f"{c:.2f}" for c in lab)])
    print(format_table("(1) KV cache in GiB, FP16 (your kv_cache_gib)", ["model", "batch", *map(str, LAB_SEQ_LENS)], rows,
                       notes=["bytes per token: " + ", ".join(f"{n} {b:,}" for n, b in per_token.items()),
                              f"the lab's DeepSeek-V3 row assumes 61 layers x 8 KV heads x 128 x K,V = {lab_deepseek:,} "
                              f"bytes per token; MLA caches 61 x (512 + 64) values = {per_token['DeepSeek-V3']:,}"]))


def table_max_batch(student: Student) -> None:
    """(2) The largest batch that fits beside the BF16 weights on an 80 GB and a 24 GB GPU."""
    if student.args.part == "2":
        return
    rows = []
    for name, spec in CONFIGS.items():
        weights = spec.n_params * 2
        rows.append([name, f"{weights / 10**9:.1f} GB",
                     *(student.kv_memory.max_batch(spec.as_dict(), FIT_SEQ_LEN, gpu, weights) for gpu in GPUS.values())])
    print(format_table(f"(2) The largest batch of {FIT_SEQ_LEN}-token sequences beside the BF16 weights (your max_batch)",
                       ["model", "weights", *GPUS], rows,
                       notes=["0: the weights alone do not fit (DeepSeek-V3 needs a multi-GPU node even in FP8)"]))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_server(submission: Path, caching: bool) -> Iterator[str]:
    """A server on a free loopback port; yields its /v1 base URL; stops it afterwards."""
    import httpx

    port = free_port()
    flag = "--enable-prefix-caching" if caching else "--no-enable-prefix-caching"
    process = subprocess.Popen([sys.executable, "-m", "kvlab.serving.server", "--host", "127.0.0.1", "--port", str(port),
                                flag, "--submission", str(submission)], cwd=_ROOT, start_new_session=True,
                               env={**os.environ, "PYTHONPATH": str(_ROOT)})
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited with {process.returncode}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start within {STARTUP_SECONDS} s")
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def measure(submission: Path, caching: bool, runs: int) -> dict[str, Any]:
    from kvlab.serving import bench

    with running_server(submission, caching) as base_url:
        client = bench.client_for(base_url)
        tag = f"{'on' if caching else 'off'}-{time.time_ns()}"
        results = [bench.run_once(client, "kvlab-serve", f"{tag}-{i}") for i in range(runs)]
        lab = [bench.lab_flow(client, "kvlab-serve", f"{tag}-{i}") for i in range(runs)] if caching else []
        counters = bench.read_metrics(base_url)
    return {"medians": bench.medians(results), "lab": bench.medians(lab) if lab else {}, "metrics": counters}


def table_ttft(student: Student) -> None:
    """(3) Prefix caching in the course server: TTFT medians with caching on and off."""
    if student.args.part == "1":
        return
    # The server runs your manager in another process: try it here first, so a stub costs one line.
    student.block_manager.BlockManager(4, 16).allocate("probe", list(range(20)))
    submission, runs = student.directory, student.args.runs
    missing = [name for name in ("fastapi", "uvicorn", "openai") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"table (3) skipped: the serving stack is not installed ({', '.join(missing)}); "
              "pip install -r requirements/serving.txt")
        return
    print(f"(3) {runs} runs with prefix caching on, then off (each run: warmup, miss, hit, other; ~2k-token "
          "system prompts; times are wall clock on a CPU, so noisy: the medians and the /metrics counts are the point)")
    try:
        on, off = measure(submission, True, runs), measure(submission, False, runs)
    except Exception as error:  # a student's unfinished manager fails the server; say so and stop
        print(f"table (3) stopped: {type(error).__name__}: {error}")
        return
    rows = [[label, f"{on['medians'][key] * 1000:.0f}", f"{off['medians'][key] * 1000:.0f}"]
            for key, label in (("miss", "miss: system prompt A, question 1 (first sight of A)"),
                               ("hit", "hit: system prompt A, question 2"),
                               ("other", "other: system prompt B, question 1 (same length)"))]
    same = 1 - on["medians"]["hit"] / off["medians"]["hit"]
    versus_miss = 1 - on["medians"]["hit"] / on["medians"]["miss"]
    notes = [f"the same request (A + question 2): {off['medians']['hit'] * 1000:.0f} ms with caching off, "
             f"{on['medians']['hit'] * 1000:.0f} ms with caching on: TTFT {same:.0%} lower (the lab expects 50-80%)",
             f"with caching on, the hit against a miss of the same length: {versus_miss:.0%} lower"]
    for name, result in (("on", on), ("off", off)):
        metrics = result["metrics"]
        notes.append(f"/metrics with caching {name}: vllm:prefix_cache_hits_total {metrics['vllm:prefix_cache_hits_total']:.0f}"
                     f" of vllm:prefix_cache_queries_total {metrics['vllm:prefix_cache_queries_total']:.0f} tokens")
    print(format_table("Median TTFT in ms", ["request", "caching on", "caching off"], rows, notes=notes))
    lab = on["lab"]
    print(f"\nthe lab's script as written (caching on): 'NO CACHE' {lab['no cache (as labelled)'] * 1000:.0f} ms, "
          f"'CACHE' {lab['cache'] * 1000:.0f} ms: its warmup already cached the 'NO CACHE' request, so it compares a "
          "hit with a hit and shows no speed-up.")


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="benchmark runs per setting (default 5)")
    parser.add_argument("--part", choices=["1", "2", "all"], default="all", help="which part of the lab (default all)")


if __name__ == "__main__":
    sys.exit(run(__file__, __doc__, modules=["kv_memory", "block_manager", "kv_connector"],
                 tables=[table_kv_memory, table_max_batch, table_ttft], options=options))
