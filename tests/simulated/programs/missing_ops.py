"""Ops Apple silicon has no kernel for, forward and backward, written for an NVIDIA GPU; prints a JSON line."""

import json

import torch
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"
volume = torch.randn(2, 3, 4, 6, 6, device=device, requires_grad=True)
pooled = F.adaptive_max_pool3d(volume, (2, 3, 3))
pooled.sum().backward()
x = torch.randn(5, device=device)
stepped = torch.heaviside(x, torch.tensor([0.5], device=device))
probabilities = torch.rand(5, device=device).clamp(0.05, 0.95)
logits = probabilities.clone().logit_(eps=1e-6)
board = torch.zeros(3, 3, device=device)
board.put_(torch.tensor([0, 4, 8], device=device), torch.tensor([1.0, 2.0, 3.0], device=device))
scores = torch.randn(4, 5, device=device, requires_grad=True)
labels = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 4, -1, 0], [0, -1, 0, 0, 0], [4, 3, 2, 1, 0]], device=device)
margin = F.multilabel_margin_loss(scores, labels)
margin.backward()
print(json.dumps({
    "pooled": pooled.detach().cpu().flatten().tolist(), "pool_grad": volume.grad.cpu().flatten().tolist(),
    "heaviside": stepped.cpu().tolist(), "logit": logits.cpu().tolist(), "put": board.cpu().flatten().tolist(),
    "margin": margin.item(), "margin_grad": scores.grad.cpu().flatten().tolist(), "device": str(pooled.device),
}))
