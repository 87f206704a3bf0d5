def add(a, b):
    raise NotImplementedError("implement add(a, b): see README.md, section Add")
