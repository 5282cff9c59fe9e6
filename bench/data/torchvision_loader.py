#!/usr/bin/python3
"""The baseline of `gyre bench data`: torchvision's ImageFolder read through PyTorch's DataLoader
with N worker processes, decoding and transforming as gyre_data_load does (grayscale or RGB,
ToTensor, Normalize). Prints one JSON line: {"loader":"torchvision","threads":N,"images":...,
"seconds":...,"images_per_s":...}; the time counts from the first batch asked for to the last
one received (imports and the folder's listing are left out, as gyre_data_load's program start
is)."""
import argparse
import json
import sys
import time

try:
    import torch
    from PIL import Image
    from torchvision import datasets, transforms
except ImportError as e:
    sys.exit(f"gyre_torchvision_loader: {e}: install Debian's python3-torchvision")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("root")
    p.add_argument("--workers", type=int, default=1, help="DataLoader worker processes")
    p.add_argument("--channels", type=int, default=1, choices=(1, 3))
    p.add_argument("--mean", type=float, default=0.5)
    p.add_argument("--std", type=float, default=0.5)
    p.add_argument("--batch", type=int, default=256)
    a = p.parse_args()
    torch.set_num_threads(1)
    mode = "L" if a.channels == 1 else "RGB"

    def load(path):
        with open(path, "rb") as f:
            return Image.open(f).convert(mode)

    t = transforms.Compose([transforms.ToTensor(), transforms.Normalize([a.mean] * a.channels, [a.std] * a.channels)])
    data = datasets.ImageFolder(a.root, transform=t, loader=load)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=a.workers)
    images = 0
    begin = time.perf_counter()
    for x, _ in loader:
        images += x.shape[0]
    seconds = time.perf_counter() - begin
    print(json.dumps({"loader": "torchvision", "threads": a.workers, "images": images, "seconds": seconds,
                      "images_per_s": images / seconds}))


if __name__ == "__main__":
    main()
