#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (Ubuntu 22.04, after
# apt-get update), from the unzipped package in /autograder/source. It keeps the system python3
# (Gradescope's own harness uses it) and puts the grader's pinned dependencies in a venv beside it.
set -euo pipefail

SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$SOURCE")"
export DEBIAN_FRONTEND=noninteractive

apt-get install -y --no-install-recommends python3-venv
# bubblewrap gives the student's process a private filesystem view; where the image cannot run
# it, the sandbox falls back to file permissions alone and says so in every result. The student's
# code runs as a uid of its own that owns nothing (the grader claims one per sandbox; it has no account).
apt-get install -y --no-install-recommends bubblewrap \
  || echo "warning: bubblewrap could not be installed; grading reports reduced isolation"

python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --no-cache-dir --disable-pip-version-check \
  -r "$SOURCE/requirements/grader.txt"
# Bytecode for every grading in this image: the grader's imports and each sandboxed worker's start
# load it instead of compiling the course library and the harness again (gradings write none).
"$ROOT/venv/bin/python" -m compileall -q "$SOURCE"
# The hidden tests and the harness live here: root only.
chmod 700 "$SOURCE"
