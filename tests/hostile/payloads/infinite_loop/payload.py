def greedy_decode(params, cfg, prompt, n_new):
    while True:
        pass
