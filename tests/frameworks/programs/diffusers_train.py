"""A small diffusion model trained and sampled with Hugging Face diffusers, as its training examples write it.

``python diffusers_train.py OUT_DIR [--cpu]``: a ``UNet2DModel`` (attention blocks, group norms) trained for a
few DDPM steps with AdamW on the GPU, with an exponential moving average of its weights (``EMAModel``), then
sampled by a ``DDPMPipeline`` three ways: on the GPU, with ``enable_model_cpu_offload()`` and with
``enable_sequential_cpu_offload()`` (accelerate's hooks move the weights to the GPU module by module, rebuilding
each parameter with its own class). ``--cpu`` runs the same program on the CPU, without offloading (which needs an
accelerator). Writes ``OUT_DIR/rank0.json``: the losses, a digest of the trained and EMA weights, the samples.
"""

import argparse
import json
import os

import torch
from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel
from diffusers.training_utils import EMAModel


def digest(module: torch.nn.Module) -> list[float]:
    """Per parameter, the sum of its values (enough to tell trained weights apart)."""
    return [p.detach().float().sum().item() for p in module.parameters()]


def sample(pipeline: DDPMPipeline) -> list:
    generator = torch.Generator("cpu").manual_seed(3)
    images = pipeline(batch_size=2, generator=generator, num_inference_steps=3, output_type="np").images
    return images.round(decimals=5).tolist()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    device = "cpu" if args.cpu else "cuda"

    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=4)
    scheduler = DDPMScheduler(num_train_timesteps=50)
    unet.to(device)
    ema = EMAModel(unet.parameters(), decay=0.9)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-3)
    data = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    losses = []
    for step in range(4):
        clean = data.to(device)
        noise = torch.randn(clean.shape, generator=torch.Generator().manual_seed(10 + step)).to(device)
        timesteps = torch.tensor([5, 15, 25, 35], device=device)
        noisy = scheduler.add_noise(clean, noise, timesteps)
        loss = torch.nn.functional.mse_loss(unet(noisy, timesteps).sample, noise)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ema.step(unet.parameters())
        losses.append(loss.item())

    trained = digest(unet)
    ema.copy_to(unet.parameters())
    record = {"device": str(next(unet.parameters()).device), "losses": losses, "trained": trained,
              "ema": digest(unet), "samples": sample(DDPMPipeline(unet=unet, scheduler=scheduler))}
    if not args.cpu:
        unet.to("cpu")
        for offload in ("enable_model_cpu_offload", "enable_sequential_cpu_offload"):
            pipeline = DDPMPipeline(unet=unet, scheduler=scheduler)
            getattr(pipeline, offload)()
            record[offload] = sample(pipeline)
            pipeline.remove_all_hooks()
    with open(os.path.join(args.out, "rank0.json"), "w") as f:
        json.dump(record, f)
