def add(a, b):
    # BEGIN SOLUTION
    return a + b
    # STARTER
    # raise NotImplementedError("implement add(a, b): see README.md, section Add")
    # END SOLUTION
