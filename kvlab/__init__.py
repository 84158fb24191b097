"""kvlab: the course library for the LLM-inference assignments (complete; students call it, never edit it).

Modules: `model` (the Llama-style numpy model and its no-cache reference), `counter` (operations
counted as the model runs), `costs` (the same, analytically, for real models), `specs` (real models
and accelerators), `hf_configs` (published `config.json` fields of module 6's models), `tables`
(console tables), `paged` (paged attention), `trace` (request traces), `demo` (the runner of the
lecture demos), `testing` (the pytest plugin behind `make test`), `freshwire` (the tagged JSON of
`student.fresh_call`), `probe` (batched reads of student objects, for tests), `kvstore` (module 6's
external KV stores: an in-memory store and a Redis server), `kvstore_bench` (a KV connector's
throughput against Redis) and the package `serving` (module 6's serving stack).
"""
