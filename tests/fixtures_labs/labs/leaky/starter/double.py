def double(x):
    raise NotImplementedError("see README.md")
