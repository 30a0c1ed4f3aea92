"""Written for NVIDIA GPUs with apex: fused norm and Adam, amp O1 with loss scaling and clipping."""
import sys

import torch
from apex import amp
from apex.normalization import FusedLayerNorm, FusedRMSNorm
from apex.optimizers import FusedAdam

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), FusedLayerNorm(16), torch.nn.GELU(), FusedRMSNorm(16),
                            torch.nn.Linear(16, 1)).cuda()
optimizer = FusedAdam(model.parameters(), lr=1e-2, weight_decay=0.01)
model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
x, y = torch.randn(32, 8).cuda(), torch.randn(32, 1).cuda()
losses = []
for _ in range(5):
    loss = torch.nn.functional.mse_loss(model(x).float(), y)
    optimizer.zero_grad()
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), 1.0)
    optimizer.step()
    losses.append(loss.item())
torch.save({"losses": losses, "state": {k: v.cpu() for k, v in model.state_dict().items()}}, sys.argv[1])
