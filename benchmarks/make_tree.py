#!/usr/bin/env python3
"""Builds a benchmark tree: DIRS directories of FILES files under ROOT, with classes mixed.

usage: make_tree.py ROOT DIRS FILES [--unclassed-fraction F]
Files get a class in rotation (complete, unless-open, until-first-auth, none, when-inactive);
every third file has no class of its own, so it inherits its directory's.
"""
import os
import sys

CLASSES = [b"NSFileProtectionComplete", b"NSFileProtectionCompleteUnlessOpen",
           b"NSFileProtectionCompleteUntilFirstUserAuthentication", b"NSFileProtectionNone",
           b"NSFileProtectionCompleteWhenUserInactive"]

root, dirs, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
payload = b"x" * 100
n = 0
for d in range(dirs):
    path = os.path.join(root, f"d{d:04}")
    os.makedirs(path, exist_ok=True)
    os.setxattr(path, "user.protfs.class", CLASSES[d % len(CLASSES)])
    for f in range(files):
        name = os.path.join(path, f"f{f:05}.dat")
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, payload)
        os.close(fd)
        if n % 3 != 0:
            os.setxattr(name, "user.protfs.class", CLASSES[n % len(CLASSES)])
        n += 1
print(f"made {n} files in {dirs} directories under {root}")
