"""kvlab: the course library for the LLM-inference assignments (complete; students call it, never edit it).

Modules: `model` (the Llama-style numpy model and its no-cache reference), `counter` (operations
counted as the model runs), `costs` (the same, analytically, for real models), `specs` (real models
and accelerators), `tables` (console tables), `paged` (paged attention), `trace` (request traces),
`demo` (the runner of the lecture demos), `testing` (the pytest plugin behind `make test`) and
`probe` (batched reads of student objects, for tests).
"""
