# An endless loop at import: the import itself must be stopped by the CPU-time limit, once.
while True:
    pass
