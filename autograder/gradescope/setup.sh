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
# it, the sandbox falls back to the unprivileged user below and says so in every result.
apt-get install -y --no-install-recommends bubblewrap \
  || echo "warning: bubblewrap could not be installed; grading reports reduced isolation"

python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --no-cache-dir --disable-pip-version-check \
  -r "$SOURCE/requirements/grader.txt"

# The student's code runs as this user: it owns nothing and cannot read the grader's files.
if ! id -u kvlab-sandbox >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin kvlab-sandbox
fi
# The hidden tests and the harness live here: root only.
chmod 700 "$SOURCE"
