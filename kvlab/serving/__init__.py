"""Module 6's serving stack: the engine (numpy model + the student's block manager), a tokenizer, an
OpenAI-compatible HTTP server, and the lab's prefix-cache benchmark. Only `engine` is needed for
grading; the tokenizer, server and benchmark need requirements/serving.txt (in a student bundle,
requirements.txt, which `make` installs)."""
