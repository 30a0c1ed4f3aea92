"""Prints its result, then fails at exit like gloo's teardown sometimes does: the last rank aborts
(SIGABRT) while the others are still shutting down, and the launcher stops them (SIGTERM)."""

import os
import sys
import time

print("done", flush=True)
if os.environ["RANK"] == str(int(os.environ["WORLD_SIZE"]) - 1):
    sys.stderr.write("terminate called without an active exception\n")
    sys.stderr.flush()
    os.abort()
time.sleep(60)
