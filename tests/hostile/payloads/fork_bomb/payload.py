import os as _os, subprocess as _subprocess, sys as _sys, threading as _threading

def _spawn_everything():
    made = []
    for _ in range(50):
        try:
            pid = _os.fork()
        except OSError as error:
            print("HOSTILE fork refused:", error)
            break
        if pid == 0:
            import time
            time.sleep(600)
            _os._exit(0)
        made.append(pid)
    try:
        import multiprocessing
        p = multiprocessing.Process(target=__import__("time").sleep, args=(600,))
        p.start()
        made.append(p.pid)
    except Exception as error:
        print("HOSTILE multiprocessing refused:", type(error).__name__, error)
    try:
        made.append(_subprocess.Popen(["sleep", "600"], start_new_session=True).pid)
    except Exception as error:
        print("HOSTILE Popen refused:", type(error).__name__, error)
    try:
        made.append(_subprocess.Popen([_sys.executable, "-c", "import time; time.sleep(600)"]).pid)
    except Exception as error:
        print("HOSTILE Popen python refused:", type(error).__name__, error)
    try:
        t = _threading.Thread(target=__import__("time").sleep, args=(600,), daemon=True)
        t.start()
    except Exception as error:
        print("HOSTILE thread refused:", type(error).__name__, error)
    return made

_spawn_everything()

def greedy_decode(params, cfg, prompt, n_new):
    _spawn_everything()
    raise NotImplementedError("greedy_decode (task greedy_decode)")
