"""Streams, events, memory statistics and mixed precision, written for NVIDIA GPUs (input of the end-to-end test)."""
import torch
import torch.nn as nn


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(16, 4).to(device)
    scaler = torch.cuda.amp.GradScaler()
    side = torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.reset_peak_memory_stats()
    start.record()
    with torch.cuda.stream(side):
        x = torch.randn(8, 16).cuda(non_blocking=True)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        loss = model(x).float().square().mean()
    scaler.scale(loss).backward()
    end.record()
    torch.cuda.synchronize()
    elapsed = start.elapsed_time(end)
    peak = torch.cuda.max_memory_allocated() / 2**20
    torch.cuda.empty_cache()
    print(f"loss {loss.item():.4f} on {x.device.type}, {elapsed:.1f} ms, peak {peak:.1f} MiB")


if __name__ == "__main__":
    main()
