"""A tiny DistributedDataParallel job: a few SGD steps on random data, then an all-reduce of the ranks.

Runs on GPUs (NCCL) or CPUs (gloo). Start it with `launchkit run --torchrun` (see README.md).
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    gpu = torch.cuda.is_available()
    dist.init_process_group("nccl" if gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    torch.manual_seed(rank)
    model = DistributedDataParallel(
        torch.nn.Linear(16, 1).to(device), device_ids=[local_rank] if gpu else None
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(int(os.environ.get("STEPS", "5"))):
        x = torch.randn(64, 16, device=device)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ranks = torch.tensor([rank], device=device)
    dist.all_reduce(ranks)
    print(f"rank {rank} of {world}: summed rank {ranks.item()}, loss {loss.item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if not gpu:  # gloo can abort in interpreter teardown ("terminate called ...") once a peer is gone
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
