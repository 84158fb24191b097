"""Module 6's serving stack.

Modules: `engine` (the numpy model over the student's block manager), `scheduler` (which requests
hold KV blocks: admission and preemption), `manager_contract` (what the engine relies on in the
block manager's answers, and the checks of them), `tokenizer` (a byte-level BPE trained from
`data/corpus.txt`), `server` (an OpenAI-compatible HTTP server), `launch` (servers started as
processes, for the demo and tests) and `bench` (the lab's prefix-cache benchmark). Only `engine`,
`scheduler` and `manager_contract` are needed for grading (the free queues the cost guards churn are
`kvlab.testing.drills`); the tokenizer, server and benchmark need requirements/serving.txt (in a
student bundle, requirements.txt, which `make` installs)."""
