"""An OpenAI-compatible HTTP server over the module-6 engine, on the stack vLLM's server uses
(FastAPI on uvicorn), with vLLM's flags where vLLM has them:

    python -m kvlab.serving.server [--host 127.0.0.1] [--port 8000] [--served-model-name NAME ...]
        [--enable-prefix-caching | --no-enable-prefix-caching] [--max-model-len 4096]
        [--block-size 16] [--num-gpu-blocks-override 1024] [--dtype float32] [--submission DIR]
        [--kv-store URL] [--kv-chunk-size 256] [--port-file PATH]

`--submission DIR` names the folder whose `block_manager.py` manages the KV blocks (default:
$KVLAB_SUBMISSION, else the repository's reference solution when present, else the current
folder). The model is `kvlab.serving.engine.SERVE` with fixed weights; decoding is greedy, so
`temperature`, `top_p` and the like are accepted and ignored.

`--kv-store URL` (off by default; module 6, part 3, LMCache's role in vLLM) shares KV with other
engines through an external store: `redis://HOST:PORT`, `unix:///PATH` (a Redis server) or `memory://`
(a store inside this process, for tests). The engine then runs the `KVConnector` of the submission
folder's `kv_connector.py`, built as `KVConnector(open_store(URL), model_fingerprint(SERVE, dtype,
WEIGHT_SEED), --kv-chunk-size)`: at each admission it loads the stored chunks of the prompt beyond
what the local prefix cache holds, and after each prefill it stores the prompt's new full chunks.

Endpoints: `POST /v1/chat/completions` and `POST /v1/completions` (with `"stream": true`:
server-sent events, one `data: {json}` chunk per token, ending with `data: [DONE]`), `GET /v1/models`,
`GET /health`, `GET /metrics` (Prometheus text: vLLM's `vllm:prefix_cache_queries_total` and
`vllm:prefix_cache_hits_total` counters, in tokens, the prompt positions computed
`kvlab:prefill_positions_total`, and a few more; with `--kv-store`, the connector's counters too:
`kvlab:kv_store_hits_total` and `kvlab:kv_store_misses_total` in chunks,
`kvlab:kv_store_bytes_loaded_total`, `kvlab:kv_store_bytes_stored_total`,
`kvlab:kv_store_chunks_stored_total`, and `kvlab:kv_store_loaded_tokens_total`, the prompt positions
filled from the store). Work is counted when it is done: a streamed request closed after its first
token (as the lab's benchmark does) has its prefill counted all the same. Such a request never
finishes: it counts in `kvlab:request_aborted_total`, not in `vllm:request_success_total` (which
counts the requests that ran to a stop token or max_tokens, as vLLM's does). `usage` reports
`prompt_tokens_details.cached_tokens` as vLLM does: the prompt tokens not computed, whether the
engine's prefix cache held them or the KV connector loaded them from the store.

Once it listens, the server prints one line: its URL, the served model name(s), prefix caching
on/off, the KV blocks, the KV store if any, and the BLAS threads the model runs on (one, as the
demos run, unless OPENBLAS_NUM_THREADS or the like is set: kvlab.blas). Errors are OpenAI-style bodies
`{"error": {"message", "type", "param", "code"}}`: 400 for a bad request (malformed JSON, a negative
`max_tokens`, a prompt longer than `--max-model-len`, or one the KV pool could never hold), 404 for
an unknown model.

Concurrency: one engine thread runs `Engine.step()` while any request is unfinished (first come,
first served; a request whose blocks are not free waits in the queue, and running requests are
preempted and recomputed when decoding runs out of blocks); the HTTP handlers only queue commands
for it and read its events, so the engine is never touched by two threads.

One module on purpose (over 400 lines): one concept, the HTTP front of one engine; the endpoints, the
engine thread they queue commands for and the command line share the Server's state, and this docstring
is the server's manual.
"""
from __future__ import annotations

# First, before numpy loads: one BLAS thread unless the environment sets one (kvlab.blas says why).
import kvlab.blas

import argparse
import asyncio
import contextlib
import importlib.util
import itertools
import json
import os
import queue
import threading
import time
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from kvlab.kvstore import model_fingerprint, open_store
from kvlab.serving.engine import SERVE, WEIGHT_SEED, Engine, EngineError, Event
from kvlab.serving.launch import write_port
from kvlab.serving.tokenizer import ChatTokenizer, load_tokenizer, stream_text

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = "kvlab-serve"
# OpenAI's default for /v1/completions; used for chat too, so that a request without max_tokens
# stays short on a CPU.
DEFAULT_MAX_TOKENS = 16


class ApiError(Exception):
    """An error answered as an OpenAI-style body with `status`."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param

    def response(self) -> JSONResponse:
        return JSONResponse({"error": {"message": self.message, "type": self.kind, "param": self.param,
                                       "code": self.status}}, status_code=self.status)


def default_submission() -> Path:
    if os.environ.get("KVLAB_SUBMISSION"):
        return Path(os.environ["KVLAB_SUBMISSION"])
    reference = REPO / "solutions" / "module06"
    return reference if (reference / "block_manager.py").is_file() else Path(".")


def load_submission_module(folder: Path, name: str) -> Any:
    """The module `name` of `folder`: `block_manager` (its BlockManager manages the KV blocks) or
    `kv_connector` (its KVConnector talks to the --kv-store)."""
    path = Path(folder) / f"{name}.py"
    if not path.is_file():
        raise SystemExit(f"no {name}.py in {folder}: pass --submission DIR")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Stream:
    """Where one request's events go: an asyncio queue on the server's event loop."""

    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue


class EngineThread:
    """Runs the engine on its own thread; handlers talk to it through `submit` and `abort` only."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.commands: queue.SimpleQueue = queue.SimpleQueue()
        self.streams: dict[str, Stream] = {}
        self.wake = threading.Event()
        self.stopping = False
        self.prompt_tokens = self.generation_tokens = self.finished = self.aborted = 0
        self.thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self.thread.start()

    def submit(self, request_id: str, prompt: list[int], max_tokens: int, stop_ids: tuple[int, ...]) -> asyncio.Queue:
        events: asyncio.Queue = asyncio.Queue()
        self.commands.put(("add", request_id, prompt, max_tokens, stop_ids, Stream(asyncio.get_running_loop(), events)))
        self.wake.set()
        return events

    def abort(self, request_id: str) -> None:
        self.commands.put(("abort", request_id))
        self.wake.set()

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()
        self.thread.join(timeout=10)

    def _send(self, request_id: str, item: Any) -> None:
        stream = self.streams.get(request_id)
        if stream is not None:
            stream.loop.call_soon_threadsafe(stream.events.put_nowait, item)

    def _commands(self) -> None:
        while True:
            try:
                command = self.commands.get_nowait()
            except queue.Empty:
                return
            if command[0] == "add":
                _, request_id, prompt, max_tokens, stop_ids, stream = command
                self.streams[request_id] = stream
                try:
                    self.engine.add_request(prompt, max_tokens, request_id, stop_ids)
                    self.prompt_tokens += len(prompt)
                except EngineError as error:
                    self._send(request_id, ApiError(400, str(error)))
                    del self.streams[request_id]
            else:
                # A request still in the engine when its client went away is aborted, not finished.
                self.aborted += command[1] in self.engine.requests
                self.engine.abort(command[1])
                self.streams.pop(command[1], None)

    def _run(self) -> None:
        while not self.stopping:
            self._commands()
            if not self.engine.has_unfinished():
                self.wake.wait(0.5)
                self.wake.clear()
                continue
            try:
                events = self.engine.step()
            except Exception as error:  # a broken block manager must fail its requests, not the server
                traceback.print_exc()
                self._fail_all(f"the engine stopped: {type(error).__name__}: {error}")
                continue
            for event in events:
                self._deliver(event)

    def _deliver(self, event: Event) -> None:
        self.generation_tokens += 1
        request = self.engine.requests.get(event.request_id)
        if event.finish_reason is not None and request is not None:
            self.finished += 1
            del self.engine.requests[event.request_id]
        # vLLM's cached tokens: prefix-cache hits plus tokens loaded through the KV connector.
        cached = request.num_cached + request.num_loaded if request is not None else 0
        self._send(event.request_id, (event, cached))
        if event.finish_reason is not None:
            self.streams.pop(event.request_id, None)

    def _fail_all(self, message: str) -> None:
        for request_id in list(self.engine.requests):
            self._send(request_id, ApiError(500, message, "InternalServerError"))
            try:
                self.engine.abort(request_id)
            except Exception:  # the manager that broke may break again; the request is gone either way
                self.engine.requests.pop(request_id, None)
            self.streams.pop(request_id, None)


class Server:
    """The application state: tokenizer, engine thread, settings."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.names = list(args.served_model_name)
        self.tokenizer: ChatTokenizer = load_tokenizer()
        module = load_submission_module(Path(args.submission), "block_manager")
        self.manager = module.BlockManager(args.num_gpu_blocks_override, args.block_size, args.enable_prefix_caching)
        dtype = np.dtype(args.dtype)
        self.connector = None
        if args.kv_store:
            connectors = load_submission_module(Path(args.submission), "kv_connector")
            store = open_store(args.kv_store)
            try:
                store.ping()  # fail at startup, not at the first request, when the store is not there
            except Exception as error:
                raise SystemExit(f"--kv-store {args.kv_store} does not answer: {type(error).__name__}: {error}") from error
            self.connector = connectors.KVConnector(store, model_fingerprint(SERVE, dtype, WEIGHT_SEED), args.kv_chunk_size)
        self.engine = Engine(self.manager, SERVE, dtype=dtype, kv_connector=self.connector)
        self.runner = EngineThread(self.engine)
        self.created = int(time.time())
        self.ids = itertools.count()

    def check_model(self, body: dict[str, Any]) -> str:
        model = body.get("model", self.names[0])
        if model not in self.names:
            raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        return model

    def max_tokens(self, body: dict[str, Any], n_prompt: int, *names: str) -> int:
        value = next((body[name] for name in names if body.get(name) is not None), None)
        limit = self.args.max_model_len
        if n_prompt >= limit:
            raise ApiError(400, f"This model's maximum context length is {limit} tokens. However, your prompt has "
                                f"{n_prompt} tokens: shorten it, or restart the server with a larger --max-model-len.",
                           param="messages")
        if value is None:
            value = min(DEFAULT_MAX_TOKENS, limit - n_prompt)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ApiError(400, f"max_tokens must be an integer >= 1; got {value!r}", param=names[0])
        if n_prompt + value > limit:
            raise ApiError(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                                f"{n_prompt + value} tokens ({n_prompt} in the prompt, {value} in the completion).",
                           param=names[0])
        most = self.engine.max_tokens_for(n_prompt)
        if value > most:
            raise ApiError(400, f"a {n_prompt}-token prompt with max_tokens {value} needs more KV blocks than the "
                                f"server has ({self.engine.num_blocks} blocks of {self.engine.block_size}); at most "
                                f"{most} tokens fit", param=names[0])
        return value

    def metrics(self) -> str:
        model = self.names[0]
        label = f'{{model_name="{model}"}}'
        engine, runner = self.engine, self.runner
        rows = [
            ("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in tokens.", self.manager.prefix_cache_queries),
            ("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in tokens.", self.manager.prefix_cache_hits),
            ("vllm:prompt_tokens_total", "counter", "Prompt tokens received.", runner.prompt_tokens),
            ("vllm:generation_tokens_total", "counter", "Tokens generated.", runner.generation_tokens),
            ("vllm:num_preemptions_total", "counter", "Requests preempted (recomputed later).",
             engine.scheduler.preemptions),
            ("vllm:request_success_total", "counter",
             "Requests finished (a stop token or max_tokens); not those whose client closed the stream first.",
             runner.finished),
            ("kvlab:request_aborted_total", "counter",
             "Requests dropped unfinished because their client went away (a stream closed after its first token).",
             runner.aborted),
            ("vllm:num_requests_running", "gauge", "Requests holding KV blocks.", len(engine.scheduler.running)),
            ("vllm:num_requests_waiting", "gauge", "Requests waiting for KV blocks.", len(engine.scheduler.waiting)),
            ("vllm:kv_cache_usage_perc", "gauge", "Fraction of KV blocks in use.",
             1 - self.manager.num_free_blocks / engine.num_blocks),
            ("kvlab:num_free_blocks", "gauge", "KV blocks in the free queue (cached or not).", self.manager.num_free_blocks),
            ("kvlab:prefill_positions_total", "counter", "Prompt positions run through the model while prefilling.",
             engine.prefill_positions),
        ]
        if self.connector is not None:
            rows += [(f"kvlab:kv_store_{attribute}_total", "counter", text, _counter(self.connector, attribute))
                     for attribute, text in CONNECTOR_COUNTERS]
            rows.append(("kvlab:kv_store_loaded_tokens_total", "counter",
                         "Prompt positions filled from the KV store instead of computed.",
                         engine.loaded_positions))
        lines = []
        for name, kind, text, value in rows:
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name}{label} {value}"]
        return "\n".join(lines) + "\n"


# The KV connector's counters on /metrics, by attribute (kv_connector.py's KVConnector states them).
CONNECTOR_COUNTERS = (
    ("hits", "KV store chunks loaded."),
    ("misses", "Full prompt chunks the KV store could not supply (computed instead)."),
    ("bytes_loaded", "Bytes read from the KV store."),
    ("bytes_stored", "Bytes written to the KV store."),
    ("chunks_stored", "Chunks written to the KV store."),
)


def _counter(connector: Any, attribute: str) -> float | int:
    """A connector counter as a number; NaN when the student's connector lacks it or it is not a number,
    so that /metrics still answers."""
    value = getattr(connector, attribute, None)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return float("nan")
    return value


def _text_of(content: Any) -> str:
    """A message's content: a string, or a list of {"type": "text", "text": ...} parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                                         for p in content):
        return "".join(p["text"] for p in content)
    raise ApiError(400, "a message's content must be a string or a list of text parts", param="messages")


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ApiError(400, f"the request body is not valid JSON: {error}") from error
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if body.get("n", 1) != 1:
        raise ApiError(400, "only n=1 is supported", param="n")
    if not isinstance(body.get("stream", False), bool):
        raise ApiError(400, "stream must be a boolean", param="stream")
    return body


def create_app(args: argparse.Namespace) -> FastAPI:
    state: dict[str, Server] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state["server"] = Server(args)
        yield
        state["server"].runner.stop()

    app = FastAPI(title="kvlab serving lab", lifespan=lifespan)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return error.response()

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        server = state["server"]
        return {"object": "list", "data": [{"id": name, "object": "model", "created": server.created,
                                            "owned_by": "kvlab", "root": name, "max_model_len": args.max_model_len}
                                           for name in server.names]}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(state["server"].metrics(), media_type="text/plain; version=0.0.4")

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        server = state["server"]
        body = await _json_body(request)
        model = server.check_model(body)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ApiError(400, "messages must be a non-empty list of {role, content} objects", param="messages")
        try:
            text = server.tokenizer.apply_chat_template([{"role": m.get("role"), "content": _text_of(m.get("content"))}
                                                         for m in messages])
        except ValueError as error:
            raise ApiError(400, str(error), param="messages") from error
        prompt = server.tokenizer.encode(text)
        max_tokens = server.max_tokens(body, len(prompt), "max_completion_tokens", "max_tokens")
        stop = (server.tokenizer.im_end_id, server.tokenizer.eos_token_id)
        return await _respond(server, body, "chat", model, prompt, max_tokens, stop)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        server = state["server"]
        body = await _json_body(request)
        model = server.check_model(body)
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
            raw = raw[0]
        if isinstance(raw, str) and raw:
            prompt = server.tokenizer.encode(raw)
        elif isinstance(raw, list) and raw and all(isinstance(t, int) and not isinstance(t, bool) for t in raw):
            if min(raw) < 0 or max(raw) >= SERVE.vocab:
                raise ApiError(400, f"token ids must lie in [0, {SERVE.vocab})", param="prompt")
            prompt = list(raw)
        else:
            raise ApiError(400, "prompt must be a non-empty string or a list of token ids (one prompt)", param="prompt")
        max_tokens = server.max_tokens(body, len(prompt), "max_tokens")
        return await _respond(server, body, "completion", model, prompt, max_tokens,
                              (server.tokenizer.eos_token_id,))

    return app


async def _events(events: asyncio.Queue) -> AsyncIterator[tuple[Event, int]]:
    """The request's (event, cached tokens) pairs until it finishes; ApiError when the engine refused it."""
    while True:
        item = await events.get()
        if isinstance(item, ApiError):
            raise item
        yield item
        if item[0].finish_reason is not None:
            return


async def _respond(server: Server, body: dict[str, Any], kind: str, model: str, prompt: list[int],
                   max_tokens: int, stop: tuple[int, ...]) -> Response:
    prefix = "chatcmpl" if kind == "chat" else "cmpl"
    request_id = f"{prefix}-{next(server.ids)}-{os.urandom(4).hex()}"
    events = server.runner.submit(request_id, prompt, max_tokens, stop)
    created = int(time.time())
    tokenizer = server.tokenizer
    if not body.get("stream", False):
        output, cached, finish = [], 0, None
        try:
            async for event, cached in _events(events):
                output.append(event.token)
                finish = event.finish_reason
        except asyncio.CancelledError:
            server.runner.abort(request_id)
            raise
        text = tokenizer.decode(output)
        usage = _usage(len(prompt), len(output), cached)
        if kind == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                      "finish_reason": finish}
            return JSONResponse({"id": request_id, "object": "chat.completion", "created": created, "model": model,
                                 "choices": [choice], "usage": usage})
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return JSONResponse({"id": request_id, "object": "text_completion", "created": created, "model": model,
                             "choices": [choice], "usage": usage})

    # Streaming: wait for the first event before answering, so that a refused request still gets
    # its error status rather than a 200 with an error inside the stream.
    stream = _events(events)
    try:
        first = await stream.__anext__()
    except asyncio.CancelledError:
        server.runner.abort(request_id)
        raise
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    object_name = "chat.completion.chunk" if kind == "chat" else "text_completion"

    def chunk(delta_text: str | None, finish: str | None, role: bool = False) -> str:
        if kind == "chat":
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
            if delta_text is not None:
                delta["content"] = delta_text
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": delta_text or "", "logprobs": None, "finish_reason": finish}
        payload = {"id": request_id, "object": object_name, "created": created, "model": model, "choices": [choice]}
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    async def sse() -> AsyncIterator[str]:
        output: list[int] = []
        sent = ""
        finished = False
        try:
            if kind == "chat":
                yield chunk(None, None, role=True)
            cached = 0
            pending = [first]
            while True:
                for event, cached in pending:
                    output.append(event.token)
                    finish = event.finish_reason
                    if finish is not None:
                        text = tokenizer.decode(output)
                        yield chunk(text[len(sent):] if text.startswith(sent) else "", finish)
                        finished = True
                    else:
                        new = stream_text(tokenizer, output, sent)
                        sent += new
                        yield chunk(new, None)
                if finished:
                    break
                pending = [await stream.__anext__()]
            if include_usage:
                usage = {"id": request_id, "object": object_name, "created": created, "model": model, "choices": [],
                         "usage": _usage(len(prompt), len(output), cached)}
                yield f"data: {json.dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"
        except ApiError as error:
            yield f"data: {json.dumps({'error': {'message': error.message, 'type': error.kind, 'code': error.status}})}\n\n"
        finally:
            if not finished:
                server.runner.abort(request_id)

    return StreamingResponse(sse(), media_type="text/event-stream")


def _usage(n_prompt: int, n_output: int, cached: int) -> dict[str, Any]:
    return {"prompt_tokens": n_prompt, "completion_tokens": n_output, "total_tokens": n_prompt + n_output,
            "prompt_tokens_details": {"cached_tokens": cached}}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kvlab.serving.server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0: a free port the kernel chooses (see --port-file)")
    parser.add_argument("--port-file", metavar="PATH", default=None,
                        help="write the port the server listens on to PATH once it is bound (kvlab's own flag: "
                             "with --port 0, how the demo and the tests learn a port nothing else can take first)")
    parser.add_argument("--served-model-name", nargs="+", default=[DEFAULT_MODEL],
                        help="the model name(s) requests must use (default: %(default)s)")
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True,
                        help="prefix caching, on by default as in vLLM v1")
    parser.add_argument("--max-model-len", type=int, default=SERVE.max_seq)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--num-gpu-blocks-override", type=int, default=1024, help="KV blocks in the pool")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--submission", default=str(default_submission()),
                        help="folder holding block_manager.py (and kv_connector.py for --kv-store; default: %(default)s)")
    parser.add_argument("--kv-store", metavar="URL", default=None,
                        help="share KV through an external store: redis://HOST:PORT, unix:///PATH or memory:// "
                             "(default: off)")
    parser.add_argument("--kv-chunk-size", type=int, default=256, metavar="N",
                        help="tokens per stored chunk with --kv-store (default: %(default)s, as LMCache)")
    args = parser.parse_args(argv)
    if not 1 <= args.max_model_len <= SERVE.max_seq:
        parser.error(f"--max-model-len must lie in 1 .. {SERVE.max_seq} (the model's context)")
    if args.block_size < 1 or args.num_gpu_blocks_override < 1 or args.kv_chunk_size < 1:
        parser.error("--block-size, --num-gpu-blocks-override and --kv-chunk-size must be >= 1")
    if args.kv_store is not None and not args.kv_store.startswith(("redis://", "unix://", "memory://")):
        parser.error(f"--kv-store takes redis://HOST:PORT, unix:///PATH or memory://; got {args.kv_store!r}")
    return args


def ready_line(args: argparse.Namespace, host: str, port: int) -> str:
    """The one line the server prints once it listens, e.g. "kvlab server ready on http://127.0.0.1:8000
    | model Qwen/Qwen2.5-0.5B-Instruct (also kvlab-serve) | prefix caching on | 1024 KV blocks of 16 tokens
    | KV store off | submission . | BLAS threads 1" (the served model names, the first one as /metrics labels
    it; the BLAS thread count and, when the environment chose it, which variable did)."""
    host = f"[{host}]" if ":" in host else host
    store = f"KV store {args.kv_store} (chunks of {args.kv_chunk_size} tokens)" if args.kv_store else "KV store off"
    first, *others = args.served_model_name
    model = first + (f" (also {', '.join(others)})" if others else "")
    return (f"kvlab server ready on http://{host}:{port} | model {model} | prefix caching "
            f"{'on' if args.enable_prefix_caching else 'off'} | {args.num_gpu_blocks_override} KV blocks of "
            f"{args.block_size} tokens | {store} | submission {args.submission} | {kvlab.blas.describe()}")


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, printing `line` once the app has started and the socket accepts requests
    (uvicorn itself logs nothing at log level "warning")."""

    def __init__(self, config: uvicorn.Config, line: str) -> None:
        super().__init__(config)
        self.line = line

    async def startup(self, sockets: list[Any] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            print(self.line, flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    config = uvicorn.Config(create_app(args), host=args.host, port=args.port, log_level="warning")
    listening = config.bind_socket()
    host, port = listening.getsockname()[:2]
    if args.port_file is not None:
        write_port(Path(args.port_file), port)
    _Uvicorn(config, ready_line(args, host, port)).run(sockets=[listening])


if __name__ == "__main__":
    main()
