def mul(a, b):
    raise NotImplementedError("implement mul(a, b): see README.md")
