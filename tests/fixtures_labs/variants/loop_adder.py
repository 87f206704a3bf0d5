import os
import subprocess
import sys


def add(a, b):
    # A grandchild the engine must kill too: it is in the grader's process group.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    # Its pid as this process sees it (inside the OS wall's pid namespace that is not the host's number)
    # and its start time, which the test finds it by on the host.
    with open(f"/proc/{child.pid}/stat") as fh:
        started = fh.read().rsplit(")", 1)[1].split()[19]
    with open(os.path.join(os.environ["ROADMAP_WORKSPACE"], "grandchild.pid"), "w") as fh:
        fh.write(f"{child.pid} {started}")
    while True:  # never returns: the engine must kill the whole process group
        pass
