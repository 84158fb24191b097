# Instructors: `make` builds everything and grades the reference solutions; `make test` runs the
# repository's own tests. Both create .venv by themselves. See README.md for every target.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# autograder.assignment.discover: every folder of assignments/ holding an assignment.json.
ASSIGNMENTS := $(shell $(PYTHON) -m autograder.assignment)
A ?= $(firstword $(ASSIGNMENTS))
SUB ?= solutions/$(A)
OUT ?= dist/$(A)-results.json
SUBS ?=
JOBS ?= 2

.PHONY: all venv bytecode traces new starter release autograder grade grade-all class-report grade-reference demo bench test check-py310 clean

# Ends with one line naming `make traces` when the real traces could not be installed.
all: venv traces starter release autograder grade-reference
	@$(PY) -m tools.traces --check

# The stamp is written only after a complete install; without it (an install that failed or was
# interrupted) the venv is deleted and built again. The Python version is checked first. As root,
# tools/venv_python.py may pick the system's python3 over one the sandbox's uid cannot run (its
# docstring says why); PYTHON given on the command line is used as given.
$(VENV)/.installed: $(wildcard requirements/*.txt)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || { \
	  echo "kvlab needs Python 3.10 or newer; $(PYTHON) is $$($(PYTHON) --version 2>&1 || echo missing)." \
	       "Run make PYTHON=python3.1x with a newer one."; exit 1; }
	rm -rf $(VENV)
	$(if $(filter command line,$(origin PYTHON)),$(PYTHON),$$($(PYTHON) tools/venv_python.py $(PYTHON))) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements/instructor.txt
	touch $@

venv: $(VENV)/.installed

# Bytecode of the course library and the harness, as setup.sh compiles it on Gradescope: sandboxed
# workers graded from this checkout (the tests, tools.bench_grading) load it instead of compiling
# the library and their own modules at every start. A grading writes none (its Watch would read a
# new .pyc as a change of the grader's files), hence this step before the tests.
bytecode: venv
	$(PY) -m compileall -q kvlab autograder

# The real Mooncake traces into data/mooncake/ (ignored by git), from a local copy or their
# published commit, SHA-256 checked (tools/traces.py). Without either, one line says so; exit 0.
traces: venv
	$(PY) -m tools.traces

# A new assignment from tools/assignment_template (its solution, starter, tests, catalog, handout, demo),
# and the record of which test first catches each of its mutants (tools/first_catch.py).
new: venv
	$(PY) -m tools.new_assignment $(if $(filter command line,$(origin A)),$(A),$(error make new needs A=<id>))
	$(PY) -m tools.first_catch $(A)

starter: venv
	$(PY) -m tools.make_starter

release: venv
	$(PY) -m tools.release $(if $(filter command line,$(origin A)),$(A),$(ASSIGNMENTS))

autograder: venv
	$(PY) -m autograder.build $(if $(filter command line,$(origin A)),$(A),$(ASSIGNMENTS))

grade: venv
	$(PY) -m autograder.grade --assignment $(A) --submission $(SUB) --out $(OUT)

grade-all: venv
	$(PY) -m autograder.grade_all --assignment $(A) --submissions $(SUBS) --jobs $(JOBS) \
		--out $(if $(filter command line,$(origin OUT)),$(OUT),dist/$(A)-batch)

# After grade-all (the same A, SUBS and OUT): report.html and report.csv in OUT, the batch folder
# (autograder/class_report.py: score histograms, most failed tests, slowest gradings, grader faults,
# similar pairs of submissions).
class-report: venv
	$(PY) -m autograder.class_report --assignment $(A) \
		--submissions $(or $(SUBS),$(error make class-report needs SUBS=<the folder grade-all graded>)) \
		--batch $(if $(filter command line,$(origin OUT)),$(OUT),dist/$(A)-batch)

grade-reference: venv
	$(PY) -m autograder.grade_reference $(ASSIGNMENTS)

demo: venv
	$(PY) assignments/$(A)/demo.py --submission $(SUB)

bench: venv
	$(PY) -m tools.bench

# Module 6's OpenAI-compatible server on loopback, as the bundle's `make serve` starts it: the lab's
# model name and --max-model-len 4096. PORT=8000; SUB=dir runs that block_manager.py (default: the
# reference solution); CACHING=off turns prefix caching off; KV_STORE=redis://HOST:PORT shares KV.
.PHONY: serve
serve: venv
	$(if $(filter-out on off,$(or $(CACHING),on)),$(error CACHING must be on or off; got '$(CACHING)'))
	$(PY) -m kvlab.serving.server --host 127.0.0.1 --port $(or $(PORT),8000) $(if $(filter command line,$(origin SUB)),--submission $(SUB)) \
	  --served-model-name $(or $(MODEL),Qwen/Qwen2.5-0.5B-Instruct) kvlab-serve --max-model-len 4096 \
	  --$(if $(filter off,$(CACHING)),no-)enable-prefix-caching$(if $(KV_STORE), --kv-store $(KV_STORE))

# Python 3.10 (Gradescope's image) is enough for every file; both test tiers run this as a test.
check-py310: venv
	$(VENV)/bin/vermin --target=3.10- --violations --no-tips --eval-annotations --backport dataclasses kvlab solutions starter assignments autograder tools tests

# The repository's tests on TEST_JOBS cores (pytest-xdist), a test file per worker at a time (the
# files that grade many submissions share one fixture per file); their batches of gradings share
# TEST_JOBS grading slots (tests/support/slots.py). `make test` is the everyday tier (`-m "not full"`:
# every kind of check, on a fixed sample of the catalogs, corpora and hostile cases); `make test-all`
# runs every test (what CI runs). No bytecode is written: a grading fingerprints kvlab/ and the
# harness, and a .pyc that a test beside it writes there would read as a change of the grader's files.
TEST_JOBS ?= 2
PYTEST_RUN = TEST_JOBS=$(TEST_JOBS) PYTHONDONTWRITEBYTECODE=1 $(PY) -m pytest -n $(TEST_JOBS) --dist loadfile --durations=15
.PHONY: test-all
test: venv bytecode traces
	$(PYTEST_RUN) -m "not full"

test-all: venv bytecode traces
	$(PYTEST_RUN)

clean:
	rm -rf dist build

# Mutation sweep of one assignment (not part of `make test`: it takes tens of minutes). Options for
# tools/mutate.py go in MUTATE, e.g. `make mutate A=lecture07 JOBS=1 MUTATE="--file paged_kv.py --limit 20"`.
MUTATE ?=
.PHONY: mutate
mutate: venv
	$(PY) -m tools.mutate $(A) --jobs $(JOBS) $(MUTATE)

# The course on JupyterHub with nbgrader (README.md, "Teaching with nbgrader"). `make nbgrader`: the
# course folder OUT (default dist/nbgrader): nbgrader_config.py and source/<id>/ for every assignment
# (A=<id>: that one), EXCHANGE=DIR sets nbgrader's Exchange.root; the gradebook, release/,
# submitted/ and feedback/ already there are kept. `make nbgrader-grade A=<id>`: grades what
# `nbgrader collect` put in OUT/submitted/ with the hidden tests in the sandbox, as `make grade`
# does, into the gradebook, feedback/ and the batch OUT/batch/<id>/ (scores.csv, results.json).
NBGRADER_COURSE = $(if $(filter command line,$(origin OUT)),$(OUT),dist/nbgrader)
.PHONY: nbgrader nbgrader-grade
nbgrader: venv
	$(PY) -m tools.nbgrader_course $(if $(filter command line,$(origin A)),$(A)) --out $(NBGRADER_COURSE) \
		$(if $(EXCHANGE),--exchange $(EXCHANGE))

nbgrader-grade: venv
	$(PY) -m autograder.nbgrader_grade --course $(NBGRADER_COURSE) --jobs $(JOBS) \
		--assignment $(if $(filter command line,$(origin A)),$(A),$(error make nbgrader-grade needs A=<id>))
