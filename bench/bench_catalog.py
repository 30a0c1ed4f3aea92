"""Catalog load, plan and render times."""

from __future__ import annotations

import time


def run():
    from codegen.load import load
    from codegen.plan import plan
    from codegen.render import render_all

    start = time.perf_counter()
    catalog = load()
    loaded = time.perf_counter()
    planned = plan(catalog)
    files = render_all(planned)
    rendered = time.perf_counter()
    yield {"name": "catalog_load", "seconds": loaded - start, "entries": len(catalog.entries)}
    yield {"name": "plan_and_render", "seconds": rendered - loaded, "files": len(files),
           "bytes": sum(len(t) for t in files.values())}
