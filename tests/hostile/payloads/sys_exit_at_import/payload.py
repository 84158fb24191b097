import sys as _sys
print("HOSTILE leaving with status 0 before the grader can report")
_sys.exit(0)
