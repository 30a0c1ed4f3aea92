# The CUDA idioms of a pytorch/examples-style ImageNet script (mp.spawn per GPU, cudnn, NCCL, DataParallel).
import argparse
import time

import torch
import torch.backends.cudnn as cudnn
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim
import torch.utils.data
import torch.utils.data.distributed

parser = argparse.ArgumentParser()
parser.add_argument("--gpu", default=None, type=int)
parser.add_argument("--dist-backend", default="nccl", type=str)
parser.add_argument("--multiprocessing-distributed", action="store_true")


def main():
    args = parser.parse_args()
    if torch.cuda.is_available():
        ngpus_per_node = torch.cuda.device_count()
    else:
        ngpus_per_node = 1
    if args.multiprocessing_distributed:
        mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
    else:
        main_worker(args.gpu, ngpus_per_node, args)


def main_worker(gpu, ngpus_per_node, args):
    args.gpu = gpu
    if args.multiprocessing_distributed:
        dist.init_process_group(backend=args.dist_backend, init_method="tcp://127.0.0.1:23456",
                                world_size=ngpus_per_node, rank=gpu)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        print("using CPU, this will be slow")
    elif args.multiprocessing_distributed:
        torch.cuda.set_device(args.gpu)
        model.cuda(args.gpu)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
    elif args.gpu is not None and torch.cuda.is_available():
        torch.cuda.set_device(args.gpu)
        model = model.cuda(args.gpu)
    else:
        model = torch.nn.DataParallel(model).cuda()
    device = torch.device("cuda", args.gpu) if torch.cuda.is_available() else torch.device("cpu")
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    cudnn.benchmark = True
    start = time.time()
    images = torch.randn(4, 3, 16, 16).cuda(args.gpu, non_blocking=True)
    target = torch.randint(10, (4,)).cuda(args.gpu, non_blocking=True)
    loss = criterion(model(images), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.time() - start


if __name__ == "__main__":
    main()
