def double(x):
    # BEGIN SOLUTION
    return 2 * x
    # STARTER
    # raise NotImplementedError("see README.md")
    # END SOLUTION
