import os


def add(a, b):
    os.abort()  # kills the interpreter: the engine must record a crash
