#!/usr/bin/env python3
"""Writes an iOS backup folder, as Finder, iTunes and idevicebackup2 do, for the tests of
`protfs import-backup`: Manifest.db (SQLite, a Files table), each file's metadata as an
NSKeyedArchiver binary plist (an MBFile with ProtectionClass, Mode, Size, times, Target,
Digest), the file store xx/<fileID> (fileID = SHA-1 of "domain-relativePath"), Manifest.plist and Info.plist.

    python3 scripts/make-backup.py OUT-DIR [--encrypted]
    python3 scripts/make-backup.py OUT-DIR --bulk N     (benchmarks/import-backup.sh)

The backup holds an app with every class number (1-4, and 7, which names none), a symlink, a file
whose contents are missing, one whose stored contents do not have the digest its MBFile records
(and one whose MBFile records none), paths that try to leave the container, an app group, a
domain that is no app's and a row whose flags name nothing. --encrypted marks Manifest.plist as encrypted (the
importer refuses it; nothing in it is encrypted).

--bulk N writes instead one app (com.example.bench) of N files of 4,096 bytes in directories of
500, a third of each class 1, 3 and 4, with no contents in the store (for --metadata-only), and
beside the backup the tree as lists for its peer: OUT-DIR.dirs (the directories, parents first)
and OUT-DIR.files (the files), one path a line relative to the container.
"""

import hashlib
import os
import plistlib
import sqlite3
import sys

MTIME = 1_700_000_000

# (domain, relativePath, flags (1 file, 2 directory, 4 symlink), class number, mode, contents or
# None (absent from the store), symlink target)
ENTRIES = [
    ("AppDomain-com.example.notes", "", 2, 0, 0o40755, None, None),
    ("AppDomain-com.example.notes", "Documents", 2, 0, 0o40755, None, None),
    ("AppDomain-com.example.notes", "Documents/notes.sqlite", 1, 3, 0o100644, b"SQLite format 3\0" + b"n" * 4000, None),
    ("AppDomain-com.example.notes", "Documents/secret.txt", 1, 1, 0o100600, b"the passcode is 1234\n", None),
    ("AppDomain-com.example.notes", "Documents/missing.bin", 1, 3, 0o100644, None, None),
    ("AppDomain-com.example.notes", "Documents/latest", 4, 0, 0o120755, None, "notes.sqlite"),
    ("AppDomain-com.example.notes", "Library", 2, 0, 0o40755, None, None),
    ("AppDomain-com.example.notes", "Library/Caches", 2, 4, 0o40755, None, None),
    ("AppDomain-com.example.notes", "Library/Caches/cache.bin", 1, 4, 0o100644, b"cache" * 100, None),
    ("AppDomain-com.example.notes", "Library/Preferences/com.example.notes.plist", 1, 2, 0o100644, b"<plist/>", None),
    ("AppDomain-com.example.notes", "Documents/tampered.db", 1, 1, 0o100644, b"the original bytes", None),
    ("AppDomain-com.example.notes", "tmp/odd.bin", 1, 7, 0o100644, b"odd", None),
    ("AppDomain-com.example.notes", "../../../escaped", 1, 4, 0o100644, b"out", None),
    ("AppDomain-com.example.notes", "Documents/../../escaped2", 1, 4, 0o100644, b"out", None),
    ("AppDomainGroup-group.com.example.shared", "Shared.db", 1, 3, 0o100644, b"shared", None),
    ("HomeDomain", "Library/Preferences/com.apple.springboard.plist", 1, 3, 0o100644, b"home", None),
]

# Stored with other bytes than those its digest was taken of (a damaged or altered backup).
TAMPERED = "Documents/tampered.db"
# Recorded without a Digest, as some backups record files.
UNDIGESTED = "Library/Caches/cache.bin"


def archive(relative, mode, size, protection, target, digest=None):
    """The MBFile of one entry, as an NSKeyedArchiver binary plist."""
    objects = ["$null"]
    mbfile = {
        "$class": None, "Mode": mode, "Size": size, "ProtectionClass": protection, "UserID": 501,
        "GroupID": 501, "LastModified": MTIME, "LastStatusChange": MTIME, "Birth": MTIME - 86_400,
        "InodeNumber": 1234, "Flags": 0,
    }
    objects.append(mbfile)
    objects.append(relative)
    mbfile["RelativePath"] = plistlib.UID(2)
    if target is not None:
        objects.append(target)
        mbfile["Target"] = plistlib.UID(len(objects) - 1)
    if digest is not None:
        objects.append(digest)
        mbfile["Digest"] = plistlib.UID(len(objects) - 1)
    objects.append({"$classname": "MBFile", "$classes": ["MBFile", "NSObject"]})
    mbfile["$class"] = plistlib.UID(len(objects) - 1)
    return plistlib.dumps(
        {"$version": 100000, "$archiver": "NSKeyedArchiver", "$top": {"root": plistlib.UID(1)}, "$objects": objects},
        fmt=plistlib.FMT_BINARY)


def file_id(domain, relative):
    """The row's fileID, also the contents' name in the store: the SHA-1 of "domain-relativePath"."""
    return hashlib.sha1(f"{domain}-{relative}".encode()).hexdigest()


def new_manifest(out):
    """OUT-DIR made, and its Manifest.db opened with an empty Files table."""
    os.makedirs(out, exist_ok=True)
    database = sqlite3.connect(os.path.join(out, "Manifest.db"))
    database.execute(
        "CREATE TABLE Files (fileID TEXT PRIMARY KEY, domain TEXT, relativePath TEXT, flags INTEGER, file BLOB)")
    return database


def write_plists(out, manifest, info):
    """Manifest.plist (binary) and Info.plist (XML), as a backup has them."""
    with open(os.path.join(out, "Manifest.plist"), "wb") as handle:
        plistlib.dump(manifest, handle, fmt=plistlib.FMT_BINARY)
    with open(os.path.join(out, "Info.plist"), "wb") as handle:
        plistlib.dump(info, handle)


def bulk(out, count):
    """The --bulk backup: `count` files in directories of 500, and the peer's lists."""
    database = new_manifest(out)
    domain = "AppDomain-com.example.bench"

    def row(relative, flags, mode, size, protection):
        return (file_id(domain, relative), domain, relative, flags, archive(relative, mode, size, protection, None))

    rows, directories, files = [row("", 2, 0o40755, 0, 0), row("Documents", 2, 0o40755, 0, 0)], ["Documents"], []
    for index in range(count):
        if index % 500 == 0:
            directory = f"Documents/d{index // 500:04d}"
            directories.append(directory)
            rows.append(row(directory, 2, 0o40755, 0, 3))
        relative = f"{directory}/f{index:06d}.dat"
        files.append(relative)
        rows.append(row(relative, 1, 0o100644, 4096, (1, 3, 4)[index % 3]))
    database.executemany("INSERT INTO Files VALUES (?, ?, ?, ?, ?)", rows)
    database.commit()
    database.close()
    write_plists(out, {"IsEncrypted": False, "Version": "10.0"}, {"Device Name": "protfs benchmark iPhone"})
    with open(out + ".dirs", "w") as handle:
        handle.write("".join(d + "\n" for d in directories))
    with open(out + ".files", "w") as handle:
        handle.write("".join(f + "\n" for f in files))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    if "--bulk" in sys.argv[2:]:
        bulk(out, int(sys.argv[sys.argv.index("--bulk") + 1]))
        return
    encrypted = "--encrypted" in sys.argv[2:]
    database = new_manifest(out)
    database.execute("CREATE TABLE Properties (key TEXT PRIMARY KEY, value BLOB)")
    for domain, relative, flags, protection, mode, contents, target in ENTRIES:
        name = file_id(domain, relative)
        size = len(contents) if contents is not None else (5000 if flags == 1 else 0)
        digest = hashlib.sha1(contents).digest() if contents is not None and relative != UNDIGESTED else None
        database.execute(
            "INSERT INTO Files VALUES (?, ?, ?, ?, ?)",
            (name, domain, relative, flags, archive(relative, mode, size, protection, target, digest)))
        if contents is not None:
            os.makedirs(os.path.join(out, name[:2]), exist_ok=True)
            with open(os.path.join(out, name[:2], name), "wb") as handle:
                handle.write(contents if relative != TAMPERED else contents.upper())
    database.execute(
        "INSERT INTO Files VALUES (?, ?, ?, ?, ?)",
        ("f" * 40, "AppDomain-com.example.notes", "Documents/strange", 8,
         archive("Documents/strange", 0o100644, 0, 3, None)))
    database.commit()
    database.close()
    write_plists(out, {"IsEncrypted": encrypted, "Version": "10.0", "Applications": {}},
                 {"Device Name": "protfs test iPhone", "Product Version": "18.0"})


if __name__ == "__main__":
    main()
