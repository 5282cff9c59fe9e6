#!/usr/bin/python3
"""Writes Fashion-MNIST as an image folder, the layout `gyre train --data` and torchvision's
ImageFolder read: DEST/train/CLASS/NNNNN.png and DEST/test/CLASS/NNNNN.png, 28x28 8-bit grayscale
PNGs, the class folders named so that their sorted order is the labels' (0-t-shirt-top, 1-trouser,
...). Standard library only (gzip, zlib, struct).

  scripts/export-fashion-mnist.py DEST                 # all 60,000 + 10,000 images
  scripts/export-fashion-mnist.py DEST --limit 2000    # the first 2,000 of each split
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

CLASSES = ["t-shirt-top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
           "ankle-boot"]
SPLITS = {"train": "train", "test": "t10k"}


def read_idx(path, rank):
    """The dimensions and bytes of an IDX file of unsigned bytes, gzip-compressed or not."""
    for name in (path + ".gz", path):
        if os.path.exists(name):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(name, "rb") as f:
                data = f.read()
            break
    else:
        sys.exit(f"export-fashion-mnist: {path}(.gz) not found: install Debian's dataset-fashion-mnist "
                 "or pass --data-dir")
    magic, = struct.unpack(">I", data[:4])
    if magic != 0x0800 | rank:
        sys.exit(f"export-fashion-mnist: {name} is not an IDX file of rank {rank} (magic {magic:#x})")
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return dims, data[4 + 4 * rank:]


def png(width, height, pixels):
    """An 8-bit grayscale PNG of `pixels` (height rows of width bytes)."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = b"".join(b"\0" + pixels[r * width:(r + 1) * width] for r in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dest", help="the folder to write (created; must not hold a train or test folder)")
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST's IDX files")
    parser.add_argument("--limit", type=int, default=0, help="the first N images of each split (0: all)")
    args = parser.parse_args()
    if args.limit < 0:
        parser.error("--limit must not be negative")
    for split in SPLITS:
        if os.path.exists(os.path.join(args.dest, split)):
            sys.exit(f"export-fashion-mnist: {os.path.join(args.dest, split)} exists; choose another DEST")
    for split, prefix in SPLITS.items():
        (n, h, w), images = read_idx(os.path.join(args.data_dir, prefix + "-images-idx3-ubyte"), 3)
        (m,), labels = read_idx(os.path.join(args.data_dir, prefix + "-labels-idx1-ubyte"), 1)
        if n != m:
            sys.exit(f"export-fashion-mnist: {n} images but {m} labels in {prefix}")
        count = min(n, args.limit) if args.limit else n
        folders = [os.path.join(args.dest, split, f"{k}-{name}") for k, name in enumerate(CLASSES)]
        for folder in folders:
            os.makedirs(folder)
        for i in range(count):
            with open(os.path.join(folders[labels[i]], f"{i:05d}.png"), "wb") as f:
                f.write(png(w, h, images[i * h * w:(i + 1) * h * w]))
        print(f"export-fashion-mnist: {count} {split} images in {os.path.join(args.dest, split)}")


if __name__ == "__main__":
    main()
