"""Instructor tools run by the Makefile: `make_starter` (starter files from the solutions) and
`release` (the student bundle of an assignment)."""
