def add(a, b):
    while True:  # never returns: the engine must kill the whole process group
        pass
