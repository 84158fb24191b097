# Instructors: `make` builds everything and grades the reference solutions; `make test` runs the
# repository's own tests. Both create .venv by themselves. See README.md for every target.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
ASSIGNMENTS := $(notdir $(patsubst %/assignment.json,%,$(wildcard assignments/*/assignment.json)))
A ?= $(firstword $(ASSIGNMENTS))
SUB ?= solutions/$(A)
OUT ?= dist/$(A)-results.json
SUBS ?=
JOBS ?= 2

.PHONY: all venv starter release autograder grade grade-all grade-reference demo bench test check-py310 clean

all: venv starter release autograder grade-reference

$(VENV)/.installed: requirements/student.txt requirements/grader.txt requirements/instructor.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements/instructor.txt
	touch $@

venv: $(VENV)/.installed

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

grade-reference: venv
	$(PY) -m autograder.grade_reference $(ASSIGNMENTS)

demo: venv
	$(PY) assignments/$(A)/demo.py --submission $(SUB)

bench: venv
	$(PY) -m tools.bench

check-py310: venv
	$(VENV)/bin/vermin --target=3.10- --violations --no-tips --eval-annotations --backport dataclasses kvlab solutions starter assignments autograder tools tests

test: venv check-py310
	$(PY) -m pytest

clean:
	rm -rf dist build

# Mutation sweep of one assignment (not part of `make test`: it takes tens of minutes). Options for
# tools/mutate.py go in MUTATE, e.g. `make mutate A=lecture07 JOBS=1 MUTATE="--file paged_kv.py --limit 20"`.
MUTATE ?=
.PHONY: mutate
mutate: venv
	$(PY) -m tools.mutate $(A) --jobs $(JOBS) $(MUTATE)
