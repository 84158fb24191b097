"""The worker's side of the sandbox (untrusted): everything in this folder, and nothing else, is
copied into each sandbox's private folder and runs there, beside the student's code.

`main.py` answers the trusted side's requests, `protocol.py` is the wire format both sides speak
and `messages.py` names its tags and messages (the trusted side imports both from here; the
worker, its own copies), `landlock.py` and `seccomp.py` are the confinement the worker applies to
itself. The worker runs them as the package `worker` under `python -I -S -B` (see
`process.launch`): the standard library only, numpy passed as an argument once the worker's
limits are in force. The trusted side imports nothing here but `protocol` and `messages`.
"""
