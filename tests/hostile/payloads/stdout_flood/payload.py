import sys as _sys
_sys.stdout.write("flood " * (50 << 20 // 6))
_sys.stdout.flush()

def greedy_decode(params, cfg, prompt, n_new):
    _sys.stdout.write("x" * (50 << 20))
    _sys.stderr.write("y" * (1 << 20))
    raise NotImplementedError("greedy_decode (task greedy_decode)")
