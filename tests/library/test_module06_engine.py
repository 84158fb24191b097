"""The module-6 engine and tokenizer as course library: the server's model matches the tokenizer, the
tokenizer is deterministic and handles the lab's Chinese prompts, the engine's errors for a
misbehaving manager are clear, and the KV-connector seam (for the LMCache-style part 3) loads and
stores KV so that logits still equal the dense forward."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kvlab.model import TINY, generate, init_params
from kvlab.serving.engine import SERVE, Engine, EngineError, run_requests
from kvlab.serving.manager_contract import ManagerError
from kvlab.testing.compare import LOGIT_ATOL

REPO = Path(__file__).resolve().parents[2]


def reference_manager_class() -> Any:
    spec = importlib.util.spec_from_file_location("m06_block_manager", REPO / "solutions" / "module06" / "block_manager.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None, "the reference block_manager.py should load"
    spec.loader.exec_module(module)
    return module.BlockManager


BlockManager = reference_manager_class()


def test_tokenizer_is_deterministic_and_matches_the_model() -> None:
    tokenizers = pytest.importorskip("tokenizers", reason="the serving stack is not installed")
    from kvlab.serving.tokenizer import VOCAB_SIZE, load_tokenizer, train

    assert tokenizers is not None, "tokenizers imported"
    assert train().to_str() == train().to_str(), "training twice on the shipped corpus should give the same tokenizer"
    tokenizer = load_tokenizer()
    assert tokenizer.vocab_size == VOCAB_SIZE == SERVE.vocab, (
        f"the server model's vocab ({SERVE.vocab}) must equal the tokenizer's ({tokenizer.vocab_size})")
    for text in ("什么是Prefix Caching？请详细回答。", "The KV cache grows with the batch. 🙂"):
        assert tokenizer.decode(tokenizer.encode(text)) == text, f"{text!r} should survive encode + decode"


class BrokenManager:
    """Hands out the same block to every request: the engine must say so, not compute garbage."""

    num_blocks, block_size = 8, 4

    def allocate(self, request_id: str, tokens: list[int]) -> tuple[int, list[int]]:
        return 0, [0] * -(-len(tokens) // 4)


def test_engine_names_a_malformed_allocation() -> None:
    with pytest.raises(ManagerError, match="holds a block id twice"):
        run_requests(BrokenManager(), TINY, [{"prompt": list(range(9)), "max_tokens": 2}])


def test_engine_refuses_requests_that_can_never_fit() -> None:
    engine = Engine(BlockManager(4, 4), TINY)
    with pytest.raises(EngineError, match="KV pool"):
        engine.add_request(list(range(10)), max_tokens=10)


class DictConnector:
    """A store outside the engine, keyed by whole prompts' chunk prefixes (chunks of 8 tokens)."""

    chunk = 8

    def __init__(self) -> None:
        self.kv: dict[tuple[int, ...], np.ndarray] = {}
        self.calls: list[str] = []

    def lookup(self, tokens: list[int]) -> int:
        self.calls.append("lookup")
        best = 0
        for n in range(self.chunk, len(tokens) + 1, self.chunk):
            if any(key[:n] == tuple(tokens[:n]) for key in self.kv):
                best = n
        return best

    def load(self, tokens: list[int], n: int) -> np.ndarray:
        self.calls.append("load")
        key = next(key for key in self.kv if key[:n] == tuple(tokens[:n]))
        return self.kv[key][:, :, :n]

    def store(self, tokens: list[int], kv: np.ndarray) -> None:
        self.calls.append("store")
        self.kv[tuple(tokens)] = kv.copy()


def test_kv_connector_loads_a_prefix_another_engine_computed() -> None:
    params = init_params(TINY, 0)
    rng = np.random.default_rng(3)
    system = [int(t) for t in rng.integers(0, TINY.vocab, size=20)]
    first, second = system + [1, 2, 3], system + [4, 5]
    connector = DictConnector()
    engine_a = Engine(BlockManager(32, 4), TINY, params, kv_connector=connector)
    engine_a.add_request(first, 1)
    engine_a.step()
    assert connector.calls == ["lookup", "store"], f"a miss looks up, computes, stores; calls {connector.calls}"
    # Another engine with an empty block pool: the store's 16 tokens (2 whole chunks) are loaded.
    engine_b = Engine(BlockManager(32, 4, enable_caching=False), TINY, params, kv_connector=connector, keep_logits=True)
    request = engine_b.add_request(second, 3)
    while engine_b.has_unfinished():
        engine_b.step()
    assert request.num_loaded == 16 and request.prefill_positions == len(second) - 16, (
        f"16 tokens should be loaded and {len(second) - 16} computed; got {request.num_loaded} and {request.prefill_positions}")
    _, step_logits = generate(params, TINY, np.asarray([second]), 3)
    diff = max(float(np.abs(a - b[0]).max()) for a, b in zip(request.logits, step_logits))
    assert diff <= LOGIT_ATOL, f"logits with a loaded prefix differ from the dense forward by {diff:.3g}"
    assert (engine_b.prefill_positions, engine_b.loaded_positions) == (len(second) - 16, 16), (
        f"the engine's counters (/metrics kvlab:prefill_positions_total and kv_store_loaded_tokens_total) should be "
        f"{len(second) - 16} computed and 16 loaded; got {engine_b.prefill_positions} and {engine_b.loaded_positions}")


def test_engine_counts_prefill_work_when_it_is_done() -> None:
    """A request aborted right after its prefill (a client that closed the stream after the first
    token) still counts in the engine's prefill counter, which /metrics reports."""
    params = init_params(TINY, 0)
    engine = Engine(BlockManager(32, 4), TINY, params)
    prompt = list(range(3, 17))
    request = engine.add_request(prompt, 8, request_id="closed")
    engine.step()
    engine.abort("closed")
    assert request.output and engine.prefill_positions == len(prompt), (
        f"the {len(prompt)}-token prompt was prefilled before the abort: the engine's prefill_positions should be "
        f"{len(prompt)}; got {engine.prefill_positions}")
    again = engine.add_request(prompt, 1)
    engine.step()
    assert again.num_cached == 12 and engine.prefill_positions == len(prompt) + 2, (
        f"the same prompt again: 12 tokens cached, 2 computed, so prefill_positions {len(prompt) + 2}; got "
        f"num_cached {again.num_cached}, prefill_positions {engine.prefill_positions}")


def test_grading_imports_no_serving_stack() -> None:
    """Grading imports the engine only: it must not pull in the HTTP or tokenizer stack."""
    code = ("import sys, kvlab.serving.engine, kvlab.testing.drills; "
            "print(sorted(m for m in ('fastapi', 'uvicorn', 'tokenizers', 'openai') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", f"the engine imported {done.stdout} {done.stderr[-500:]}"
