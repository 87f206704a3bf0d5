import os
import subprocess
import sys


def add(a, b):
    # A grandchild the engine must kill too: it is in the grader's process group.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(os.path.join(os.environ["ROADMAP_WORKSPACE"], "grandchild.pid"), "w") as fh:
        fh.write(str(child.pid))
    while True:  # never returns: the engine must kill the whole process group
        pass
