"""A least-squares fit and a float32 model trained against float64 numpy data on "cuda"; prints JSON lines."""

import json

import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(0)
features = rng.normal(size=(64, 3))  # float64, as numpy makes it
targets = features @ np.array([1.5, -2.0, 0.5]) + 0.1 * rng.normal(size=64)

X = torch.from_numpy(features).to("cuda")
y = torch.tensor(targets, device="cuda")
ones = torch.ones(64, 1, dtype=torch.float64, device="cuda")
design = torch.cat([X, ones], dim=1)
solution = torch.linalg.lstsq(design, y.unsqueeze(1)).solution.squeeze(1)
residual = (design @ solution - y).pow(2).mean()
print(json.dumps({"dtype": str(X.dtype), "device": str(X.device), "solution": solution.tolist(),
                  "residual": residual.item(), "printed": str(solution[:2])}))

torch.manual_seed(0)
model = nn.Linear(3, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
losses = []
for _ in range(5):
    optimizer.zero_grad()
    prediction = model(X.float()).squeeze(1)      # float32 model output
    loss = ((prediction - y) ** 2).mean()         # promoted to float64 with the float64 targets
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print(json.dumps({"loss_dtype": str(loss.dtype), "losses": losses,
                  "weight": model.weight.detach().double().cpu().numpy().tolist()}))
