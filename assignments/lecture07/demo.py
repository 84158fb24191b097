"""Lecture 7 demo: prefix caching, run on your paged_kv.py and prefix_cache.py.

    python demo.py [--submission DIR] [--plot FILE]        (in the repository: make demo A=lecture07)

DIR is the first of: --submission, $KVLAB_SUBMISSION, the current directory if it holds
prefix_cache.py, else the repository's reference solution. Four tables:

(1) chained block hashes (your block_hashes) of three requests that share a system prompt;
(2) a shared few-shot prefix (your prefill on the tiny model): tokens computed and saved, logits
    against the no-cache `kvlab.model.forward`, beside the vLLM paper's figure 16;
(3) hit ratios (your hit_ratio) by cache capacity, LRU and LFU, on the synthetic trace
    `kvlab.trace.make_trace()` and on the real Mooncake traces when present, beside the Mooncake
    report's Table 1; a plot of them goes to FILE;
(4) what the hits save: prefill GPU time of the synthetic trace for Llama-2-70B on 8 A800s, and
    the storage a large cache needs against the machine's HBM.

A function you have not implemented yet costs its table (or row) one line, not a traceback.

One file on purpose (over 400 lines): the bundle runs it as a script beside the student's files, where a
helper module of its own would be one more file to ship and a top-level name that could shadow a
student's module; its tables share the student's loaded modules and the traces.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Run as a script, only this file's folder is on sys.path: add the folder that holds kvlab/.
sys.path.insert(0, str(next(p for p in Path(__file__).resolve().parents if (p / "kvlab").is_dir())))

from kvlab.demo import Student, run, timed  # noqa: E402 - first: it sets the BLAS threads before numpy loads

import numpy as np  # noqa: E402

from kvlab import costs  # noqa: E402
from kvlab.model import TINY, forward, init_params  # noqa: E402
from kvlab.specs import HARDWARE, MODELS  # noqa: E402
from kvlab.tables import format_table, human_bytes, human_flops, human_ratio  # noqa: E402
from kvlab.trace import (BLOCK, MOONCAKE_SOURCE, Request, load_mooncake_trace, make_trace, mooncake_dir,  # noqa: E402
                         trace_stats)

DEFAULT_PLOT = Path("dist") / "lecture07-hit-ratio.png"

# Table (1): blocks of 4 tokens, so a whole request fits on a line. A: a two-block system prompt
# and a three-block question; B: A's first three blocks, then its own; C: A with one token of
# block 2 changed (token 9, 10 -> 99).
HASH_BLOCK = 4
REQUEST_A = list(range(1, 21))
REQUEST_B = REQUEST_A[:12] + list(range(41, 49))
REQUEST_C = REQUEST_A[:9] + [99] + REQUEST_A[10:]

# Table (2): vLLM's block size on GPUs; 8 requests, each the shared prefix plus its own question of
# 24, 27, ..., 45 tokens. The two prefix lengths are those of the vLLM paper's figure 16.
PREFILL_BLOCK = 16
QUESTION_LENGTHS = tuple(24 + 3 * i for i in range(8))
FEW_SHOT = ((80, "1-shot", 1.67), (341, "5-shot", 3.58))
VLLM_FIGURE_16 = ("vLLM paper (Kwon et al., SOSP'23), figure 16: LLaMA-13B, WMT16 English-to-German with "
                  "a shared 1-shot (80-token) / 5-shot (341-token) prefix serves 1.67x / 3.58x the "
                  "throughput of Orca (Oracle).")

# Table (3): capacities in blocks (None: unlimited), and the Mooncake report's Table 1 (arXiv
# 2407.00079 v3) on its own 23,608-request trace; it has no 3,000-block column.
CAPACITIES: tuple[int | None, ...] = (None, 100_000, 50_000, 30_000, 10_000, 3_000, 1_000)
POLICIES = ("lru", "lfu")
MOONCAKE_TABLE_1 = {
    "lru": (0.51, 0.51, 0.50, 0.48, 0.40, None, 0.30),
    "lfu": (0.51, 0.51, 0.49, 0.43, 0.35, None, 0.30),
}
MOONCAKE_REPORT = "Mooncake report (arXiv 2407.00079 v3)"
MOONCAKE_ROW = "Mooncake report, Table 1"
# The real traces, with the FAST'25 paper's published figures for each.
REAL_TRACES = (
    ("conversation_trace.jsonl", "FAST'25 paper: 12,031 requests, average input 12,035, output 343, cache ratio about 0.40"),
    ("synthetic_trace.jsonl", "FAST'25 paper: 3,993 requests, average input 15,325, output 149, cache ratio about 0.66"),
)

# Table (4): Llama-2-70B served with tensor parallelism over one 8 x A800 machine, assumed to
# sustain 60% of the dense BF16 peak on prefill's large matmuls.
MODEL = MODELS["Llama-2-70B"]
GPU = HARDWARE["A800 80GB"]
GPUS = 8
UTILIZATION = 0.6
TIME_CAPACITIES: tuple[int | None, ...] = (None, 10_000, 1_000)
STORAGE_CAPACITIES = (1_000, 10_000)


def capacity_label(capacity: int | None) -> str:
    return "unlimited" if capacity is None else f"{capacity:,}"


def table_hashes(student: Student) -> None:
    """(1) Chained digests of A, B and C: equal digests mean equal prefixes, and only that."""
    requests = {"A": REQUEST_A, "B": REQUEST_B, "C": REQUEST_C}
    digests = {name: student.prefix_cache.block_hashes(tokens, HASH_BLOCK) for name, tokens in requests.items()}
    rows = []
    for i in range(len(REQUEST_A) // HASH_BLOCK):
        row: list[Any] = [i, "system prompt" if i < 2 else "question"]
        # A wrong block_hashes may return too few digests: its missing ones print as "-".
        ours = {name: list(d)[i] if i < len(d) else None for name, d in digests.items()}
        for name, tokens in requests.items():
            chunk = tokens[i * HASH_BLOCK:(i + 1) * HASH_BLOCK]
            mark = "" if name == "A" else (" = A" if ours[name] == ours["A"] else " new")
            row += [" ".join(map(str, chunk)), None if ours[name] is None else str(ours[name])[:12] + mark]
        rows.append(row)
    print(format_table(
        f"(1) Chained block hashes, block size {HASH_BLOCK}: your block_hashes, first 12 hex digits",
        ["block", "part", "A tokens", "A digest", "B tokens", "B digest", "C tokens", "C digest"],
        rows,
        align=[">", "<", "<", "<", "<", "<", "<", "<"],
        notes=["B repeats A's first 3 blocks; C changes one token of block 2 (10 -> 99). Digest i covers "
               "blocks 0..i, so C shares A's blocks 0-1 only: from the changed block on, every digest differs, "
               "even where the tokens agree again (blocks 3-4)."],
    ))


def run_shared_prefix(student: Student, params: dict[str, np.ndarray],
                      prefix_len: int, seed: int) -> list[Any]:
    """Prefill 8 requests sharing a `prefix_len`-token prefix through one PrefixCache, in order.

    Returns [input tokens, computed, saved, input/computed, blocks cached, max |logit diff|] where
    the difference is against `forward` on each whole prompt, without any cache.
    """
    rng = np.random.default_rng(seed)
    prefix = rng.integers(0, TINY.vocab, prefix_len)
    # Distinct first question tokens, so no two questions share a block: the prefix is all they share.
    firsts = rng.permutation(TINY.vocab)[:len(QUESTION_LENGTHS)]
    prompts = [np.concatenate([prefix, [first], rng.integers(0, TINY.vocab, n - 1)])
               for first, n in zip(firsts, QUESTION_LENGTHS)]
    # Enough blocks for every request without any sharing: the pool never runs out.
    pool = student.paged_kv.BlockPool(TINY, sum(-(-len(p) // PREFILL_BLOCK) for p in prompts), PREFILL_BLOCK)
    cache = student.prefix_cache.PrefixCache(pool)
    computed, worst = 0, 0.0
    for prompt in prompts:
        seq, logits, n = student.prefix_cache.prefill(params, TINY, cache, prompt)
        computed += int(n)
        reference = forward(params, TINY, prompt[None], last_only=True)[0, -1]
        worst = max(worst, float(np.abs(np.asarray(logits) - reference).max()))
        # The request is done: its blocks go back to the pool, except those the cache holds.
        seq.free()
    total = sum(len(p) for p in prompts)
    # The contract computes at least one token per request; a prefill that claims none gets "-".
    return [total, computed, total - computed, total / computed if computed else None, len(cache), worst]


def table_shared_prefix(student: Student) -> None:
    """(2) A few-shot prefix shared by 8 requests: what prefill skips, and that the logits do not change."""
    params = init_params(TINY)
    rows, notes = [], []
    for seed, (prefix_len, shots, figure) in enumerate(FEW_SHOT):
        with student.skip(f"row '{prefix_len} tokens' skipped") as attempt:
            rows.append([f"{prefix_len} ({shots})", len(QUESTION_LENGTHS),
                         *run_shared_prefix(student, params, prefix_len, seed), f"{figure:.2f}x"])
        if attempt.skipped:
            notes.append(attempt.message)
    full = [(n // PREFILL_BLOCK, n // PREFILL_BLOCK * PREFILL_BLOCK) for n, _, _ in FEW_SHOT]
    print(format_table(
        f"(2) A shared few-shot prefix: {len(QUESTION_LENGTHS)} requests, each the prefix plus its own question of "
        f"{QUESTION_LENGTHS[0]}-{QUESTION_LENGTHS[-1]} tokens; your prefill, {TINY.name} model, float64, "
        f"block size {PREFILL_BLOCK}",
        ["prefix tokens", "requests", "input tokens", "computed", "saved", "input / computed",
         "blocks cached", "max |logit diff|", "vLLM fig. 16*"],
        rows,
        formats=[None, None, None, None, None, human_ratio, None, ".1e", None],
        align=["<", ">", ">", ">", ">", ">", ">", ">", ">"],
        notes=notes + [
            "max |logit diff|: your prefill's last logits against kvlab.model.forward on the whole prompt "
            "(no cache); sharing blocks must not change them: 0, or rounding (~1e-15).",
            f"Only full blocks are shared: the {FEW_SHOT[1][0]}-token prefix fills {full[1][0]} blocks "
            f"({full[1][1]} tokens), so each later request recomputes its last {FEW_SHOT[1][0] - full[1][1]} "
            "tokens with its question.",
            "* " + VLLM_FIGURE_16 + " That is end-to-end serving throughput against another system, not "
            "this table's ratio of prefill tokens: a different quantity, shown for context only.",
        ],
    ))


def hit_ratios(student: Student, traces: Sequence[tuple[str, Sequence[Request]]],
               notes: list[str]) -> dict[tuple[str, str], list[float]]:
    """Your hit_ratio at every capacity, by (trace name, policy).

    A policy whose replay hits a stub is skipped for every trace, with one line in `notes`.
    """
    ratios = {}
    for policy in POLICIES:
        with student.skip(f"the {policy.upper()} rows skipped") as attempt:
            for name, trace in traces:
                ratios[name, policy] = [float(student.prefix_cache.hit_ratio(trace, capacity, policy)) for capacity in CAPACITIES]
        if attempt.skipped:
            notes.append(attempt.message)
    return ratios


def load_real_traces() -> tuple[list[tuple[str, list[Request], str]], list[str]]:
    """[(file name, trace, published figures)] for the real traces present, and a line naming those absent."""
    folder = mooncake_dir()
    present, absent = [], []
    for file, published in REAL_TRACES:
        if (folder / file).is_file():
            present.append((file, load_mooncake_trace(folder / file), published))
        else:
            absent.append(file)
    if not absent:
        return present, []
    return present, [f"Mooncake traces absent from {folder} ({', '.join(absent)}): download them from "
                     f"{MOONCAKE_SOURCE} into that folder (in the repository: `make traces`), or set "
                     "KVLAB_MOONCAKE_DIR to a folder holding them."]


def table_hit_ratios(student: Student, synthetic: list[Request],
                     plot: Path) -> dict[str, list[float]]:
    """(3) Trace statistics and hit ratios by capacity; returns your ratios on `synthetic` by policy."""
    real, absent = load_real_traces()
    traces = [("make_trace(seed=0)", synthetic, f"{MOONCAKE_REPORT}, its trace: 23,608 requests in an hour, "
                                                  "average input about 7,590, output 182")]
    traces += [(f"Mooncake {file}", trace, published) for file, trace, published in real]
    stats_rows = []
    for name, trace, _ in traces:
        s = trace_stats(trace)
        stats_rows.append([name, s["requests"], s["minutes"], s["avg_input"], s["avg_output"],
                           s["distinct_blocks"], s["once_share"], s["hottest_block_accesses"],
                           s["top1pct_share"]])
    print(format_table(
        f"(3a) The traces: {BLOCK}-token blocks (kvlab.trace.trace_stats)",
        ["trace", "requests", "minutes", "avg input", "avg output", "distinct blocks", "seen once",
         "hottest block", "hottest 1% share"],
        stats_rows,
        formats=[None, None, ".1f", ",.0f", ",.0f", None, ".0%", None, ".0%"],
        notes=["hottest block: requests that contain it; hottest 1% share: of all block accesses."]
        + [f"{name}: published: {published}" for name, _, published in traces] + absent,
    ))
    print()

    notes: list[str] = []
    ratios, seconds = timed(hit_ratios, student, [(name, trace) for name, trace, _ in traces], notes)
    rows, curves = [], []
    for name, _, _ in traces:
        for policy in POLICIES:
            if (name, policy) in ratios:
                rows.append([name, f"{policy.upper()} (yours)", *ratios[name, policy]])
                curves.append((name, policy, ratios[name, policy]))
        if name == traces[0][0]:
            rows += [[MOONCAKE_ROW, f"{policy.upper()} (published)", *MOONCAKE_TABLE_1[policy]]
                     for policy in POLICIES]
    print(format_table(
        "(3b) Token-weighted prefix-cache hit ratio by capacity in blocks: your hit_ratio",
        ["trace", "policy", *map(capacity_label, CAPACITIES)],
        rows,
        formats=[None, None] + [".2f"] * len(CAPACITIES),
        align=["<", "<"] + [">"] * len(CAPACITIES),
        notes=notes + ([f"{len(ratios) * len(CAPACITIES)} replays took {seconds:.1f} s."] if ratios else []) + [
            f"{MOONCAKE_ROW}: {MOONCAKE_REPORT}, on Mooncake's own 23,608-request trace, which make_trace imitates "
            "(it is not that trace); the report has no 3,000-block column ('-') and does not say whether its "
            "ratio weighs tokens or requests (ours weighs tokens).",
            "The FAST'25 'cache ratio' of the real traces (table 3a) is the paper's figure, close to but not "
            "defined as our unlimited column.",
        ],
    ))
    write_plot(plot, curves)
    return {policy: ratios[name, policy] for (name, policy) in ratios if name == traces[0][0]}


def write_plot(path: Path, curves: list[tuple[str, str, list[float]]]) -> None:
    """Hit ratio against capacity for each (trace, policy, ratios) curve and the published Table 1.

    Log x axis; 'unlimited' is drawn one decade past the largest capacity. One color per trace,
    solid for LRU and dashed for LFU.
    """
    if not curves:
        print("Plot skipped: no hit ratios to draw.")
        return
    try:
        import matplotlib  # noqa: PLC0415 - optional: the student bundle does not install it

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("Plot skipped: matplotlib is not installed (pip install matplotlib to get it).")
        return
    finite = [c for c in CAPACITIES if c is not None]
    unlimited_x = 10 * max(finite)
    xs = [unlimited_x if c is None else c for c in CAPACITIES]
    fig, ax = plt.subplots(figsize=(8, 5))
    colors: dict[str, Any] = {}
    for trace, policy, values in curves:
        color = colors.setdefault(trace, f"C{len(colors)}")
        ax.plot(xs, values, marker="o", color=color, linestyle="-" if policy == "lru" else "--",
                label=f"{trace}, {policy.upper()}")
    for policy, values in MOONCAKE_TABLE_1.items():
        points = [(x, v) for x, v in zip(xs, values) if v is not None]
        ax.plot(*zip(*points), marker="s", color="gray", linestyle="-" if policy == "lru" else "--",
                label=f"{MOONCAKE_REPORT}, Table 1, {policy.upper()}")
    ax.set_xscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([capacity_label(c) for c in CAPACITIES], rotation=30)
    ax.minorticks_off()
    ax.set_xlabel(f"cache capacity (blocks of {BLOCK} tokens; 'unlimited' drawn at the right)")
    ax.set_ylabel("hit ratio (share of input tokens)")
    ax.set_ylim(0, 1)
    ax.set_title("Prefix-cache hit ratio by capacity (solid: LRU, dashed: LFU)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"Plot: {path.resolve()}")


def prefill_cost(trace: Sequence[Request], hits: Sequence[int]) -> tuple[int, int]:
    """(tokens computed, prefill FLOPs) of the trace when request i's first hits[i] tokens need no compute.

    The computed tokens still attend to the hit ones (`past`), so attention does not shrink in
    proportion. A request whose every token hits still computes its last one, for its logits.
    """
    tokens = flops = 0
    for request, hit in zip(trace, hits):
        past = min(hit, request.input_len - 1)
        tokens += request.input_len - past
        flops += costs.forward_counts(MODEL, 1, request.input_len - past, past=past, last_only=True,
                                       kv_bytes_per_token=MODEL.kv_bytes_per_token).flops
    return tokens, flops


def table_gpu_time(student: Student, trace: list[Request], lru_ratios: list[float] | None) -> None:
    """(4) Prefill GPU time with and without the cache, and the storage the cache needs."""
    rate = GPUS * UTILIZATION * GPU.peak_flops
    minutes = trace_stats(trace)["minutes"]
    total_tokens, baseline = prefill_cost(trace, [0] * len(trace))
    rows: list[list[Any]] = [["no cache", 0.0, total_tokens, baseline, baseline / rate / 3600,
                              GPUS * baseline / rate / 3600, 1.0]]
    notes = []
    with student.skip("the LRU rows skipped") as attempt:
        for capacity in TIME_CAPACITIES:
            ratio = (lru_ratios[CAPACITIES.index(capacity)] if lru_ratios is not None
                     else float(student.prefix_cache.hit_ratio(trace, capacity, "lru")))
            computed, flops = prefill_cost(trace, [int(ratio * request.input_len) for request in trace])
            rows.append([f"LRU, {capacity_label(capacity)} blocks", ratio, computed, flops,
                         flops / rate / 3600, GPUS * flops / rate / 3600, baseline / flops])
    if attempt.skipped:
        notes.append(attempt.message)
    print(format_table(
        f"(4a) Prefill of make_trace(seed=0) ({len(trace):,} requests over {minutes:.0f} minutes) for "
        f"{MODEL.name} on one {GPUS} x {GPU.name} machine, your LRU cache",
        ["cache", "hit ratio", "tokens computed", "prefill FLOPs", "machine hours", "GPU hours", "speedup"],
        rows,
        formats=[None, ".2f", None, human_flops, ".2f", ".1f", human_ratio],
        notes=notes + [
            f"FLOPs: kvlab.costs.forward_counts, 2 x matmul weights x computed tokens plus attention's "
            "quadratic term (computed tokens attend to the hit ones too).",
            "Hit tokens of each request: your hit_ratio times its input length (the demo uses only your "
            "hit_ratio, not a replay of its own), so the attention term is approximate.",
            f"Time: tensor parallel over {GPUS} GPUs at {UTILIZATION:.0%} of {GPU.peak_flops / 1e12:.0f} TFLOP/s "
            f"dense BF16 each ({GPU.source}).",
            "Assumed: a hit token's KV is read from CPU memory layer by layer, overlapped with the computation "
            "of the previous layer, so a hit costs no GPU compute and no visible transfer time. Decode, "
            f"queueing and batching are not counted. The trace spans {minutes / 60:.1f} hours: more machine hours "
            "than that means one machine cannot keep up with its prefill alone.",
        ],
    ))
    print()
    per_token = MODEL.kv_bytes_per_token
    per_block = BLOCK * per_token
    hbm = GPUS * GPU.hbm_bytes
    distinct = trace_stats(trace)["distinct_blocks"]
    rows = [[f"{capacity:,}", capacity * per_block, capacity * per_block / 1e12,
             capacity * per_block / hbm] for capacity in STORAGE_CAPACITIES]
    rows.append([f"unlimited ({distinct:,}: every distinct block)", distinct * per_block,
                 distinct * per_block / 1e12, distinct * per_block / hbm])
    print(format_table(
        f"(4b) KV storage of the cache for {MODEL.name} (BF16): {BLOCK} tokens x {human_bytes(per_token)} per "
        f"token = {human_bytes(per_block)} per block",
        ["capacity (blocks)", "KV bytes", "TB", "x HBM of the machine"],
        rows,
        formats=[None, human_bytes, ".2f", ".2f"],
        notes=[
            f"HBM of one {GPUS} x {GPU.name} machine: {GPUS} x {GPU.hbm_bytes / 1e9:.0f} GB = {hbm / 1e12:.2f} TB "
            f"(A800 datasheet, as in table 4a), of which the weights take {MODEL.weight_bytes / 1e9:.0f} GB "
            f"({MODEL.n_params:,} parameters x 2 bytes).",
            f"KV per token: 2 x {MODEL.n_layers} layers x {MODEL.n_kv_heads} KV heads x {MODEL.d_head} x 2 bytes "
            f"({MODEL.source}); the Mooncake report quotes 320 KB per token for its LLaMA3-70B-like model.",
            "A cache that holds the hits of table (3) does not fit in HBM: Mooncake keeps it in the cluster's "
            "CPU memory and SSDs and moves KV to the GPUs that need it.",
        ],
    ))


def tables_traces(student: Student) -> None:
    """(3) and (4): hit ratios on the traces, then what the synthetic trace's LRU hits save."""
    synthetic = make_trace(seed=0)
    lru = table_hit_ratios(student, synthetic, student.args.plot).get("lru")
    print()
    table_gpu_time(student, synthetic, lru)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plot", metavar="FILE", type=Path, default=DEFAULT_PLOT,
                        help=f"where to write the hit-ratio plot, a PNG (default: {DEFAULT_PLOT})")


if __name__ == "__main__":
    # paged_kv first: prefix_cache.py imports it by name, and must get the student's.
    sys.exit(run(__file__, __doc__, modules=["paged_kv", "prefix_cache"], options=options,
                 tables=[table_hashes, table_shared_prefix, tables_traces]))
