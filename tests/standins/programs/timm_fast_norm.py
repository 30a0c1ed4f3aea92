"""timm's fast_norm (its apex-guarded import and both paths), loaded from timm's own file."""
import importlib.util
import json
import sys
from pathlib import Path

import torch

spec = importlib.util.find_spec("timm")  # finds timm without importing it (its package needs torchvision)
path = Path(spec.submodule_search_locations[0]) / "layers" / "fast_norm.py"
fast_norm = importlib.util.module_from_spec(importlib.util.spec_from_file_location("timm_fast_norm", path))
fast_norm.__spec__.loader.exec_module(fast_norm)
fast_norm.set_fast_norm(True)

device = sys.argv[2] if len(sys.argv) > 2 else "cuda"
torch.manual_seed(0)
x = torch.randn(4, 6, 32, device=device)
w, b = torch.rand(32, device=device) + 0.5, torch.randn(32, device=device)
results = {"layer": fast_norm.fast_layer_norm(x, [32], w, b, 1e-5),
           "rms": fast_norm.fast_rms_norm(x, [32], w, 1e-6),
           "rms_plain": fast_norm.fast_rms_norm(x, [32], None, 1e-6)}
with torch.autocast(device, dtype=torch.bfloat16):
    results["layer_autocast"] = fast_norm.fast_layer_norm(x, [32], w, b, 1e-5)
torch.save({"x": x.cpu(), "w": w.cpu(), "b": b.cpu(), **{k: v.cpu() for k, v in results.items()}}, sys.argv[1])
print(json.dumps({"has_apex": fast_norm.has_apex, "has_apex_rmsnorm": fast_norm.has_apex_rmsnorm}))
