"""The lab's prefix-cache benchmark (`prefix_cache_bench.py`), written for this repository with the
`openai` client and streaming, comparing like with like.

    python -m kvlab.serving.bench [--base-url http://127.0.0.1:8000/v1] [--model kvlab-serve] [--runs 5]

TTFT (time to first token) is the time from sending a streaming chat request to receiving its first
chunk. One run (`run_once`) sends, with fresh system prompts that no earlier run used:
1. a warmup: a short request that shares nothing with what follows;
2. "miss": a long system prompt A and question 1, the first time the server sees A;
3. "hit": the same system prompt A with question 2: with prefix caching on, A's blocks are cached;
4. "other": another system prompt B of the same length with question 1: a miss again.
Run against a server with caching on and one with caching off, "hit" is the same request both
times: that pair, and "hit" against "miss"/"other" of the same length, is the comparison to make.

The lab's script as written (`lab_flow`) warms up with exactly the request it then labels
"NO CACHE", so with caching on that request is a hit too: it compares a hit with a hit and shows
no speed-up whatever the cache does.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import httpx
from openai import OpenAI

from kvlab.serving.tokenizer import CORPUS

QUESTIONS = ("What does the KV cache store, and why does it grow?",
             "请用一句话解释什么是前缀缓存。")
WARMUP = [{"role": "user", "content": "Hello!"}]
# About 2,000 tokens of the course tokenizer: long enough that prefill dominates the TTFT.
SYSTEM_PROMPT_REPEATS = 2


def system_prompt(variant: str, repeats: int = SYSTEM_PROMPT_REPEATS) -> str:
    """A long system prompt; different `variant`s differ from their very first token on, so that no
    two share a cached block."""
    lines = [line for line in CORPUS.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    return f"[{variant}] You are a helpful assistant. Background:\n" + "\n".join(lines * repeats)


def messages(system: str, question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def ttft(client: OpenAI, model: str, chat: list[dict[str, str]], max_tokens: int = 4) -> float:
    """Seconds from sending a streaming chat request to its first chunk; the stream is read to its end."""
    start = time.perf_counter()
    first = None
    stream = client.chat.completions.create(model=model, messages=chat, max_tokens=max_tokens, stream=True,
                                            temperature=0)
    for chunk in stream:
        if first is None and chunk.choices:
            first = time.perf_counter() - start
    if first is None:
        raise RuntimeError("the stream ended without a chunk")
    return first


def run_once(client: OpenAI, model: str, tag: str) -> dict[str, float]:
    """One run of the comparison (see the module docstring); `tag` makes its system prompts fresh."""
    ttft(client, model, WARMUP)
    a, b = system_prompt(f"{tag}-A"), system_prompt(f"{tag}-B")
    return {
        "miss": ttft(client, model, messages(a, QUESTIONS[0])),
        "hit": ttft(client, model, messages(a, QUESTIONS[1])),
        "other": ttft(client, model, messages(b, QUESTIONS[0])),
    }


def lab_flow(client: OpenAI, model: str, tag: str) -> dict[str, float]:
    """The lab's script as written: warmup = the very request it then calls "NO CACHE"."""
    system = system_prompt(f"{tag}-lab")
    ttft(client, model, messages(system, QUESTIONS[0]))
    return {"no cache (as labelled)": ttft(client, model, messages(system, QUESTIONS[0])),
            "cache": ttft(client, model, messages(system, QUESTIONS[1]))}


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def read_metrics(base_url: str) -> dict[str, float]:
    """The server's /metrics counters by name (labels dropped), e.g. 'vllm:prefix_cache_hits_total'."""
    text = httpx.get(base_url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=10).text
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name.split("{")[0]] = float(value)
    return values


def client_for(base_url: str) -> OpenAI:
    # The lab's client settings: any API key works; no retries, so that a time is one request's.
    return OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=120)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="TTFT with and without a cached system prompt")
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default="kvlab-serve")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    client = client_for(args.base_url)
    tag = f"{time.time_ns()}"
    runs = [run_once(client, args.model, f"{tag}-{i}") for i in range(args.runs)]
    result = medians(runs)
    for key, value in result.items():
        print(f"median TTFT {key:>5}: {value * 1000:8.1f} ms")
    print(f"hit / miss: {result['hit'] / result['miss']:.2f}")
    counters = read_metrics(args.base_url)
    print(f"prefix cache: {counters.get('vllm:prefix_cache_hits_total', 0):.0f} hit tokens of "
          f"{counters.get('vllm:prefix_cache_queries_total', 0):.0f} queried")
    return result


if __name__ == "__main__":
    main()
