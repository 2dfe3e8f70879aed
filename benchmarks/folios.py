#!/usr/bin/env python3
"""Says how much of a file's page cache sits in large folios: on this kernel, the read row of
mount.sh depends on it.

A warm read through the mount is served from FUSE's page cache, the backing directory's from
ext4's. ext4 caches a file in large folios (up to 2 MiB each); FUSE, up to at least Linux 6.18,
in 4 KiB ones, so the kernel walks and copies 512 times as many folios for the same bytes through
the mount, whatever the daemon does. This maps the first 64 MiB of each FILE (private, never
written, so the mapping holds the page cache's own pages), touches every page, and looks each up
in /proc/self/pagemap and /proc/kpageflags (root only): a page that is the head or a tail of a
compound page belongs to a large folio.

    python3 benchmarks/folios.py FILE...

Prints one line per file: "FILE: N pages cached, M in large folios".
"""
import ctypes
import mmap
import os
import struct
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")
PRESENT = 1 << 63
PFN_MASK = (1 << 55) - 1
COMPOUND = (1 << 15) | (1 << 16)  # KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL
LIMIT = 64 << 20


def count(path):
    """(pages present, pages in large folios) of the first LIMIT bytes of `path`."""
    with open(path, "rb") as file:
        size = min(os.fstat(file.fileno()).st_size, LIMIT)
        if size == 0:
            return 0, 0
        mapping = mmap.mmap(file.fileno(), size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        view = memoryview(mapping)
        for offset in range(0, size, PAGE):
            view[offset]  # a read fault maps the page cache's page; nothing is written
        base = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
        present = large = 0
        with open("/proc/self/pagemap", "rb") as pagemap, open("/proc/kpageflags", "rb") as flags:
            for offset in range(0, size, PAGE):
                pagemap.seek((base + offset) // PAGE * 8)
                (entry,) = struct.unpack("<Q", pagemap.read(8))
                if not entry & PRESENT:
                    continue
                flags.seek((entry & PFN_MASK) * 8)
                (bits,) = struct.unpack("<Q", flags.read(8))
                present += 1
                if bits & COMPOUND:
                    large += 1
        del view
        return present, large
    finally:
        try:
            mapping.close()
        except BufferError:
            pass  # the ctypes view still points into it; the process ends soon


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: folios.py FILE...")
    if os.geteuid() != 0:
        sys.exit("folios.py: run as root (/proc/kpageflags and page frame numbers need it)")
    for path in sys.argv[1:]:
        present, large = count(path)
        print(f"{path}: {present} pages cached, {large} in large folios")


if __name__ == "__main__":
    main()
