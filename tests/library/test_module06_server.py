"""The module-6 server (kvlab.serving.server) over HTTP, on the reference block manager.

Servers run on 127.0.0.1 only, on a port each chooses itself (kvlab.serving.launch), started and
stopped by the fixtures, each test bounded in time. Covered: /health, /v1/models, /metrics; chat and
text completions with and without streaming (SSE ending in [DONE]); prefix-cache hits reported in
usage and /metrics; OpenAI-style error bodies and status codes; 8 concurrent streaming clients with
mixed prefixes on a pool too small for all of them (same tokens as alone, none lost, the pool never
over-committed, every block free again); a stream closed after its first token still counts its
prefill in /metrics; the lab's own script, unchanged except for its base_url; and `--kv-store`: two
servers (different PYTHONHASHSEED) sharing one Redis, the second loading what the first stored and
reporting those tokens as cached in `usage`, as vLLM does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kvlab.serving.launch import Launched, ServerFailed, launch, stop, wait_ready
from support.redis_binaries import FIRST_REDIS

httpx = pytest.importorskip("httpx", reason="the serving stack (requirements/serving.txt) is not installed")
openai = pytest.importorskip("openai", reason="the serving stack (requirements/serving.txt) is not installed")

REPO = Path(__file__).resolve().parents[2]
LAB_SCRIPT = REPO / "tests" / "library" / "data" / "lab_prefix_cache_bench.py"
LAB_MODEL = "Qwen/Qwen2.5-7B-Instruct"
STARTUP_SECONDS = 90
# A small pool for the load test: 8 requests of about 60-110 tokens need about 50 blocks of 16 at
# once; 24 make most of them wait or be preempted.
BLOCKS, BLOCK_SIZE, MAX_MODEL_LEN = 24, 16, 384


@dataclass
class Running:
    """A server process (on the port it chose, kvlab.serving.launch) and its base URL."""

    launched: Launched

    @property
    def process(self) -> subprocess.Popen:
        return self.launched.process

    @property
    def url(self) -> str:
        return self.launched.url

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def metrics(self) -> dict[str, float]:
        values = {}
        for line in httpx.get(self.url + "/metrics", timeout=10).text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name.split("{")[0]] = float(value)
        return values


def start_server(*flags: str, hash_seed: str | None = None) -> Running:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = hash_seed
    launched = launch(flags, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                      start_new_session=True)
    try:
        wait_ready(launched, time.monotonic() + STARTUP_SECONDS)
    except ServerFailed as failure:
        stop(launched)
        pytest.fail(f"{failure} within {STARTUP_SECONDS} s:\n{launched.process.stdout.read()[-3000:]}")
    return Running(launched)


def stop_server(server: Running) -> None:
    stop(server.launched)


@pytest.fixture(scope="module")
def server() -> Iterator[Running]:
    running = start_server("--served-model-name", "kvlab-serve", LAB_MODEL, "--num-gpu-blocks-override", str(BLOCKS),
                           "--block-size", str(BLOCK_SIZE), "--max-model-len", str(MAX_MODEL_LEN))
    yield running
    stop_server(running)


def client(server: Running) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.v1, api_key="EMPTY", max_retries=0, timeout=120)


def sse_lines(server: Running, path: str, body: dict) -> list[str]:
    with httpx.stream("POST", server.v1 + path, json=body, timeout=120) as response:
        assert response.status_code == 200, f"{path} answered {response.status_code}: {response.read()[:500]!r}"
        assert response.headers["content-type"].startswith("text/event-stream"), (
            f"a streaming answer should be text/event-stream; got {response.headers['content-type']}")
        return [line for line in response.iter_lines() if line]


@pytest.mark.timeout(120)
def test_health_models_and_metrics(server: Running) -> None:
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200, "/health should answer 200"
    models = httpx.get(server.v1 + "/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["kvlab-serve", LAB_MODEL], f"/v1/models lists {models}"
    metrics = server.metrics()
    for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "kvlab:num_free_blocks"):
        assert name in metrics, f"/metrics lacks {name}: {sorted(metrics)}"


@pytest.mark.timeout(120)
def test_chat_stream_matches_the_whole_answer(server: Running) -> None:
    messages = [{"role": "user", "content": "你好！What is a KV cache?"}]
    whole = client(server).chat.completions.create(model="kvlab-serve", messages=messages, max_tokens=6)
    assert whole.object == "chat.completion" and whole.choices[0].finish_reason in ("length", "stop"), f"got {whole}"
    assert whole.usage.completion_tokens == 6 or whole.choices[0].finish_reason == "stop", f"usage {whole.usage}"
    lines = sse_lines(server, "/chat/completions", {"model": "kvlab-serve", "messages": messages, "max_tokens": 6,
                                                    "stream": True})
    assert lines[-1] == "data: [DONE]", f"a stream ends with 'data: [DONE]'; it ended with {lines[-1]!r}"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all(line.startswith("data: ") for line in lines), "every server-sent event is a 'data: ' line"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant", "the first chunk names the assistant role"
    assert text == whole.choices[0].message.content, (
        f"greedy decoding: the streamed text {text!r} should equal the whole answer {whole.choices[0].message.content!r}")
    assert chunks[-1]["choices"][0]["finish_reason"] == whole.choices[0].finish_reason, "the last chunk carries the finish reason"


@pytest.mark.timeout(120)
def test_text_completion_with_token_ids_and_usage_stream(server: Running) -> None:
    lines = sse_lines(server, "/completions", {"model": "kvlab-serve", "prompt": [5, 6, 7, 8], "max_tokens": 3,
                                               "stream": True, "stream_options": {"include_usage": True}})
    usage = json.loads(lines[-2].removeprefix("data: "))["usage"]
    assert usage["prompt_tokens"] == 4 and usage["completion_tokens"] == 3, f"usage {usage}"
    answer = client(server).completions.create(model="kvlab-serve", prompt="The quick brown fox", max_tokens=3)
    assert answer.object == "text_completion" and answer.usage.completion_tokens <= 3, f"got {answer}"


@pytest.mark.timeout(180)
def test_a_repeated_system_prompt_is_a_cache_hit(server: Running) -> None:
    system = "You are a helpful assistant who explains caches. " * 12
    before = server.metrics()
    answers = [client(server).chat.completions.create(
        model="kvlab-serve", max_tokens=2,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}])
        for question in ("What is a block?", "什么是前缀缓存？")]
    cached = [a.usage.prompt_tokens_details.cached_tokens for a in answers]
    assert cached[0] == 0 and cached[1] >= BLOCK_SIZE, f"the second request should reuse the system prompt's blocks; cached {cached}"
    assert cached[1] % BLOCK_SIZE == 0, f"cached tokens come in whole blocks of {BLOCK_SIZE}; got {cached[1]}"
    after = server.metrics()
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    prompts = sum(a.usage.prompt_tokens for a in answers)
    assert (hits, queries) == (cached[1], prompts), (
        f"/metrics should count {cached[1]} hit tokens of {prompts} queried; it counted {hits} of {queries}")


@pytest.mark.timeout(120)
def test_a_stream_closed_after_its_first_token_counts_its_prefill(server: Running) -> None:
    """The lab's benchmark closes each stream at its first token: /metrics must count the prefill anyway."""
    prompt = list(range(500, 560))
    before = server.metrics()
    # More tokens than a loaded machine decodes before the client's close reaches the server.
    body = {"model": "kvlab-serve", "prompt": prompt, "max_tokens": 200, "stream": True}
    with httpx.stream("POST", server.v1 + "/completions", json=body, timeout=60) as response:
        first = next(line for line in response.iter_lines() if line.startswith("data: "))
    assert json.loads(first.removeprefix("data: "))["choices"], f"the first chunk should carry a token: {first}"
    deadline = time.monotonic() + 30
    while True:  # the abort reaches the engine thread asynchronously
        after = server.metrics()
        ended = (after["kvlab:request_aborted_total"] + after["vllm:request_success_total"]
                 - before["kvlab:request_aborted_total"] - before["vllm:request_success_total"])
        if (ended >= 1 and after["vllm:num_requests_running"] == 0) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    computed = after["kvlab:prefill_positions_total"] - before["kvlab:prefill_positions_total"]
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    assert computed == len(prompt) - hits and computed > 0, (
        f"a {len(prompt)}-token prompt ({hits:.0f} cached) was prefilled, then its stream closed after the first "
        f"token: kvlab:prefill_positions_total should grow by {len(prompt) - hits:.0f}; it grew by {computed:.0f}")
    grew = {name: after[name] - before[name] for name in ("vllm:request_success_total", "kvlab:request_aborted_total")}
    assert grew == {"vllm:request_success_total": 0, "kvlab:request_aborted_total": 1}, (
        f"a stream closed before its last token is an aborted request, not a finished one; /metrics grew by {grew}")


ERRORS = [
    ("malformed JSON", "/completions", b'{"model": "kvlab-serve", "prompt": ', 400, "BadRequestError"),
    ("unknown model", "/chat/completions", {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
     404, "NotFoundError"),
    ("prompt longer than --max-model-len", "/completions",
     {"model": "kvlab-serve", "prompt": [1] * (MAX_MODEL_LEN + 1), "max_tokens": 1}, 400, "BadRequestError"),
    ("negative max_tokens", "/chat/completions",
     {"model": "kvlab-serve", "messages": [{"role": "user", "content": "hi"}], "max_tokens": -3}, 400, "BadRequestError"),
    ("prompt + max_tokens beyond the context", "/completions",
     {"model": "kvlab-serve", "prompt": [1] * 300, "max_tokens": 100}, 400, "BadRequestError"),
    ("no messages", "/chat/completions", {"model": "kvlab-serve", "messages": []}, 400, "BadRequestError"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("case", "path", "body", "status", "kind"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_openai_style(server: Running, case: str, path: str, body: object, status: int, kind: str) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = httpx.post(server.v1 + path, content=content, headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == status, f"{case}: status {response.status_code}, expected {status}: {response.text[:300]}"
    error = response.json().get("error", {})
    assert error.get("type") == kind and error.get("code") == status and error.get("message"), (
        f"{case}: the body should be {{'error': {{'message', 'type': {kind!r}, 'code': {status}}}}}; got {response.text[:300]}")
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200, f"the server should survive {case}"


def load_requests() -> list[dict]:
    """8 prompts of 60-110 token ids with mixed prefixes: three share one, three another, two none."""
    shared = [list(range(10, 74)), list(range(200, 248))]
    own = [[300 + 7 * i + j for j in range(10 + 6 * i)] for i in range(8)]
    prefixes = [shared[0]] * 3 + [shared[1]] * 3 + [[], []]
    return [{"model": "kvlab-serve", "prompt": prefix + tail, "max_tokens": 12, "stream": True}
            for prefix, tail in zip(prefixes, own)]


def streamed_text(server: Running, body: dict) -> tuple[str, str]:
    lines = sse_lines(server, "/completions", body)
    assert lines[-1] == "data: [DONE]", f"the stream ended with {lines[-1]!r}, not [DONE]"
    chunks = [json.loads(line.removeprefix("data: "))["choices"][0] for line in lines[:-1]]
    return "".join(c["text"] for c in chunks), chunks[-1]["finish_reason"]


@pytest.mark.timeout(600)
def test_eight_concurrent_streaming_clients(server: Running) -> None:
    requests = load_requests()
    start = server.metrics()
    alone = [streamed_text(server, body) for body in requests]
    results: dict[int, tuple[str, str] | BaseException] = {}
    peaks = {"running": 0.0, "usage": 0.0}
    done = threading.Event()

    def one(index: int) -> None:
        try:
            results[index] = streamed_text(server, requests[index])
        except BaseException as error:  # reported below, with the others
            results[index] = error

    def watch() -> None:
        while not done.is_set():
            metrics = server.metrics()
            peaks["running"] = max(peaks["running"], metrics["vllm:num_requests_running"])
            peaks["usage"] = max(peaks["usage"], metrics["vllm:kv_cache_usage_perc"])
            assert metrics["kvlab:num_free_blocks"] >= 0, "the free block count went negative"
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    clients = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    began = time.monotonic()
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(timeout=500)
    elapsed = time.monotonic() - began
    done.set()
    watcher.join(timeout=30)
    failed = {i: r for i, r in results.items() if isinstance(r, BaseException)}
    assert len(results) == len(requests) and not failed, f"requests lost or failed: {failed}, {len(results)} answered"
    for index, (got, want) in enumerate(zip((results[i] for i in range(len(requests))), alone)):
        assert got == want, f"request {index} under load gave {got!r}; alone it gave {want!r}"
    assert peaks["usage"] <= 1.0, f"KV usage peaked at {peaks['usage']}: over-committed"
    end = server.metrics()
    assert end["kvlab:num_free_blocks"] == start["kvlab:num_free_blocks"] == BLOCKS, (
        f"every block should be free again: {start['kvlab:num_free_blocks']} before, {end['kvlab:num_free_blocks']} after")
    assert end["vllm:num_requests_running"] == end["vllm:num_requests_waiting"] == 0, "requests left behind"
    print(f"\nload test: 8 streaming clients in {elapsed:.1f} s, peak running {peaks['running']:.0f}, peak KV usage "
          f"{peaks['usage']:.0%}, preemptions {end['vllm:num_preemptions_total'] - start['vllm:num_preemptions_total']:.0f}")


@pytest.fixture(scope="module")
def lab_server() -> Iterator[Running]:
    """The server as `make serve` starts it, answering to the lab's model name."""
    running = start_server("--served-model-name", LAB_MODEL)
    yield running
    stop_server(running)


@pytest.mark.timeout(300)
def test_the_labs_script_runs_with_only_its_base_url_changed(lab_server: Running, tmp_path: Path) -> None:
    server = lab_server
    original = LAB_SCRIPT.read_text(encoding="utf-8")
    assert original.count("http://localhost:8000/v1") == 1, "the lab script's base_url should appear once"
    script = tmp_path / "prefix_cache_bench.py"
    script.write_text(original.replace("http://localhost:8000/v1", server.v1), encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, f"the lab's script failed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    assert "NO CACHE TTFT" in run.stdout and "CACHE TTFT" in run.stdout, f"the script printed:\n{run.stdout}"
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200, "the server should survive the script"


# --kv-store: chunks of 16 tokens, so a 64-token shared prefix is 4 chunks.
KV_CHUNK, SHARED = 16, list(range(400, 464))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("binary", FIRST_REDIS)
def test_two_servers_share_kv_through_the_store(binary: Any) -> None:
    pytest.importorskip("redis", reason="the Redis client (requirements/kvstore.txt) is not installed")
    from kvlab.redis_server import redis_server
    from kvlab.serving.engine import SERVE, Engine
    from kvlab.serving.server import load_submission_module
    from kvlab.serving.tokenizer import load_tokenizer

    first_prompt, second_prompt = SHARED + [7, 8, 9, 10, 11, 12, 13], SHARED + [21, 22, 23, 24, 25]
    with redis_server(16 << 20, binary=binary) as url:
        flags = ("--kv-store", url, "--kv-chunk-size", str(KV_CHUNK), "--num-gpu-blocks-override", "64",
                 "--max-model-len", str(MAX_MODEL_LEN))
        servers = [start_server(*flags, hash_seed=seed) for seed in ("1", "2")]
        try:
            answers = [client(running).completions.create(model="kvlab-serve", prompt=prompt, max_tokens=4)
                       for running, prompt in zip(servers, (first_prompt, second_prompt))]
            first, second = (running.metrics() for running in servers)
        finally:
            for running in servers:
                stop_server(running)
    assert first["kvlab:kv_store_chunks_stored_total"] == len(first_prompt) // KV_CHUNK, (
        f"the first server should store the {len(first_prompt) // KV_CHUNK} full chunks of its prompt; it stored "
        f"{first['kvlab:kv_store_chunks_stored_total']:.0f}")
    assert second["kvlab:prefill_positions_total"] == len(second_prompt) - len(SHARED), (
        f"the second server should compute only the {len(second_prompt) - len(SHARED)} tokens after the stored "
        f"prefix; it computed {second['kvlab:prefill_positions_total']:.0f}")
    assert second["kvlab:kv_store_loaded_tokens_total"] == len(SHARED), (
        f"the second server should fill {len(SHARED)} positions from the store; it filled "
        f"{second['kvlab:kv_store_loaded_tokens_total']:.0f}")
    assert second["kvlab:kv_store_hits_total"] == len(SHARED) // KV_CHUNK, (
        f"/metrics of the second server should count {len(SHARED) // KV_CHUNK} chunk hits; it shows "
        f"{second['kvlab:kv_store_hits_total']:.0f}")
    cached = answers[1].usage.prompt_tokens_details.cached_tokens
    assert cached == len(SHARED), (
        f"usage.prompt_tokens_details.cached_tokens of the second server's answer is {cached}; as in vLLM, the "
        f"{len(SHARED)} tokens loaded through the KV connector count as cached")
    assert second["kvlab:kv_store_bytes_loaded_total"] == first["kvlab:kv_store_bytes_stored_total"] > 0, (
        f"the second server loaded {second['kvlab:kv_store_bytes_loaded_total']:.0f} bytes; the first stored "
        f"{first['kvlab:kv_store_bytes_stored_total']:.0f}, the same chunks")

    # The same prompt recomputed in this process, without a store: the greedy tokens must agree.
    tokenizer = load_tokenizer()
    manager = load_submission_module(REPO / "solutions" / "module06", "block_manager").BlockManager(64, BLOCK_SIZE)
    engine = Engine(manager, SERVE, dtype="float32", eos_token_id=tokenizer.eos_token_id)
    request = engine.add_request(second_prompt, 4)
    while engine.has_unfinished():
        engine.step()
    assert answers[1].choices[0].text == tokenizer.decode(request.output), (
        f"with its prefix loaded from the store the second server answered {answers[1].choices[0].text!r}; "
        f"recomputing the same prompt gives {tokenizer.decode(request.output)!r}")
