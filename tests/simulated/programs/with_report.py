"""``with_report.py SCRIPT ARGS...``: run SCRIPT as ``__main__``, then print ``torchdevice.report()`` as a JSON line."""

import json
import runpy
import sys

import torchdevice

sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
print(json.dumps({"report": torchdevice.report()}))
