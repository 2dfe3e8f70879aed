#!/usr/bin/env python3
"""Writes an iOS backup folder, as Finder, iTunes and idevicebackup2 do, for the tests of
`protfs import-backup`: Manifest.db (SQLite, a Files table), each file's metadata as an
NSKeyedArchiver binary plist (an MBFile with ProtectionClass, Mode, Size, times, Target,
Digest), the file store xx/<fileID> (fileID = SHA-1 of "domain-relativePath"), Manifest.plist and Info.plist.

    python3 scripts/make-backup.py OUT-DIR [--encrypted [--password PASSWORD]]
    python3 scripts/make-backup.py OUT-DIR --bulk N     (benchmarks/import-backup.sh)

The backup holds an app with every class number (1-4, and 7, which names none), a symlink, a file
whose contents are missing, one whose stored contents do not have the digest its MBFile records
(and one whose MBFile records none), paths that try to leave the container, an app group, a
domain that is no app's and a row whose flags name nothing.

--encrypted encrypts it as iOS does ("Encrypt local backup"), with PASSWORD (default
"protfs test password"): a keybag in Manifest.plist (BackupKeyBag: SALT/ITER, DPSL/DPIC, and a
random AES key per class 1-11, each wrapped, RFC 3394, with the passcode key, which is
PBKDF2-HMAC-SHA1 of PBKDF2-HMAC-SHA256 of the password), Manifest.db encrypted with its own key
(ManifestKey: the class, 4 bytes little-endian, and the wrapped key), and every file with a key of
its own (its MBFile's EncryptionKey, the same form), AES-256-CBC with a zero IV and PKCS#7
padding. The derivations use 1,000 and 10 rounds rather than iOS's 10,000,000 and 10,000, to keep
the tests fast; the algorithm is the same. One more file, Documents/unopenable.bin, has an
EncryptionKey no class key unwraps.

--bulk N writes instead one app (com.example.bench) of N files of 4,096 bytes in directories of
500, a third of each class 1, 3 and 4, with no contents in the store (for --metadata-only), and
beside the backup the tree as lists for its peer: OUT-DIR.dirs (the directories, parents first)
and OUT-DIR.files (the files), one path a line relative to the container.
"""

import argparse
import hashlib
import os
import plistlib
import sqlite3
import struct

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


def archive(relative, mode, size, protection, target, digest=None, encryption_key=None):
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
    if encryption_key is not None:
        # As iOS archives it: an NSMutableData object, its bytes under NS.data.
        objects.append({"$classname": "NSMutableData", "$classes": ["NSMutableData", "NSData", "NSObject"]})
        objects.append({"NS.data": encryption_key, "$class": plistlib.UID(len(objects) - 1)})
        mbfile["EncryptionKey"] = plistlib.UID(len(objects) - 1)
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


class Encryption:
    """The keys of an encrypted backup, made from `password` as iOS makes them."""

    DPIC = 1_000
    ITER = 10
    MANIFEST_CLASS = 4

    def __init__(self, password):
        # Imported here: only encrypted backups need it (Debian's python3-cryptography).
        global keywrap, padding, Cipher, algorithms, modes
        from cryptography.hazmat.primitives import keywrap, padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        self.salt, self.dpsl = os.urandom(20), os.urandom(20)
        first = hashlib.pbkdf2_hmac("sha256", password.encode(), self.dpsl, self.DPIC, 32)
        self.passcode_key = hashlib.pbkdf2_hmac("sha1", first, self.salt, self.ITER, 32)
        self.class_keys = {number: os.urandom(32) for number in range(1, 12)}

    def keybag(self):
        """BackupKeyBag: tag, big-endian length, value records; then one group per class."""
        def record(tag, value):
            value = struct.pack(">I", value) if isinstance(value, int) else value
            return tag.encode() + struct.pack(">I", len(value)) + value
        bag = b"".join([
            record("VERS", 4), record("TYPE", 1), record("UUID", os.urandom(16)), record("HMCK", os.urandom(40)),
            record("WRAP", 0), record("SALT", self.salt), record("ITER", self.ITER), record("DPWT", 1),
            record("DPIC", self.DPIC), record("DPSL", self.dpsl)])
        for number, key in self.class_keys.items():
            bag += b"".join([
                record("UUID", os.urandom(16)), record("CLAS", number), record("WRAP", 2), record("KTYP", 0),
                record("WPKY", keywrap.aes_key_wrap(self.passcode_key, key))])
        return bag

    def protected_key(self, number, key):
        """A key as iOS stores it: its class, 4 bytes little-endian, and the key wrapped by that class's."""
        return struct.pack("<I", number) + keywrap.aes_key_wrap(self.class_keys[number], key)

    @staticmethod
    def encrypt(key, contents):
        """AES-256-CBC, zero IV, PKCS#7 padding."""
        padder = padding.PKCS7(128).padder()
        padded = padder.update(contents) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(b"\0" * 16)).encryptor()
        return encryptor.update(padded) + encryptor.finalize()


def main():
    summary, _, rest = __doc__.partition("\n\n")
    description = rest.partition("\n\n")[2]
    parser = argparse.ArgumentParser(
        prog="make-backup.py", description=summary, epilog=description,
        usage="python3 scripts/make-backup.py OUT-DIR [--encrypted [--password PASSWORD]]\n"
        "       python3 scripts/make-backup.py OUT-DIR --bulk N",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", metavar="OUT-DIR", help="the backup folder to write (made if missing)")
    parser.add_argument("--encrypted", action="store_true", help="encrypt the backup as iOS does")
    parser.add_argument("--password", default="protfs test password",
                        help='the password of an --encrypted backup (default "protfs test password")')
    parser.add_argument("--bulk", type=int, metavar="N", help="write one app of N files instead (benchmarks)")
    options = parser.parse_args()
    if options.bulk is not None:
        if options.bulk < 0:
            parser.error(f"--bulk needs a count of files, not {options.bulk}")
        bulk(options.out, options.bulk)
        return
    out, encrypted, password = options.out, options.encrypted, options.password
    encryption = Encryption(password) if encrypted else None
    entries = list(ENTRIES)
    if encryption:
        entries.append(("AppDomain-com.example.notes", "Documents/unopenable.bin", 1, 3, 0o100644, b"locked", None))
    database = new_manifest(out)
    database.execute("CREATE TABLE Properties (key TEXT PRIMARY KEY, value BLOB)")
    for domain, relative, flags, protection, mode, contents, target in entries:
        name = file_id(domain, relative)
        size = len(contents) if contents is not None else (5000 if flags == 1 else 0)
        digest = hashlib.sha1(contents).digest() if contents is not None and relative != UNDIGESTED else None
        stored = contents if relative != TAMPERED or contents is None else contents.upper()
        protected = None
        if encryption and flags == 1:
            key = os.urandom(32)
            protected = encryption.protected_key(protection, key) if relative != "Documents/unopenable.bin" \
                else struct.pack("<I", protection) + os.urandom(40)
            stored = Encryption.encrypt(key, stored) if stored is not None else None
        database.execute(
            "INSERT INTO Files VALUES (?, ?, ?, ?, ?)",
            (name, domain, relative, flags, archive(relative, mode, size, protection, target, digest, protected)))
        if stored is not None:
            os.makedirs(os.path.join(out, name[:2]), exist_ok=True)
            with open(os.path.join(out, name[:2], name), "wb") as handle:
                handle.write(stored)
    database.execute(
        "INSERT INTO Files VALUES (?, ?, ?, ?, ?)",
        ("f" * 40, "AppDomain-com.example.notes", "Documents/strange", 8,
         archive("Documents/strange", 0o100644, 0, 3, None)))
    database.commit()
    database.close()
    manifest = {"IsEncrypted": encrypted, "Version": "10.0", "Applications": {}}
    if encryption:
        manifest_key = os.urandom(32)
        path = os.path.join(out, "Manifest.db")
        with open(path, "rb") as handle:
            plain = handle.read()
        with open(path, "wb") as handle:
            handle.write(Encryption.encrypt(manifest_key, plain))
        manifest["BackupKeyBag"] = encryption.keybag()
        manifest["ManifestKey"] = encryption.protected_key(Encryption.MANIFEST_CLASS, manifest_key)
    write_plists(out, manifest, {"Device Name": "protfs test iPhone", "Product Version": "18.0"})


if __name__ == "__main__":
    main()
