def mul(a, b):
    # BEGIN SOLUTION
    return a * b
    # STARTER
    # raise NotImplementedError("implement mul(a, b): see README.md")
    # END SOLUTION
