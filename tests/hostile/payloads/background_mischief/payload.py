# Attacks on the grader's time: a background thread that keeps the process busy between calls and
# that keeps writing (output between replies), and a generator result that never ends.
import threading as _threading, time as _time, sys as _sys

def _busy():
    while True:
        _sys.stdout.write("tick\n")
        _time.sleep(0.01)

try:
    _threading.Thread(target=_busy, daemon=True).start()
except Exception as error:
    print("HOSTILE no thread:", type(error).__name__)

class _Endless:
    def __len__(self):
        return 1
    def __iter__(self):
        while True:
            yield 0

def greedy_decode(params, cfg, prompt, n_new):
    return _Endless(), _Endless()
