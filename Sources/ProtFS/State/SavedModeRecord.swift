import CCrypto
import Foundation
import ProtFSSystem
import Synchronization

/// The record a lock keeps in `user.protfs.saved-mode`: the item's permission bits, owner and group
/// before the lock, and an HMAC-SHA256 that proves protfs wrote them for an item of that type.
///
/// The MAC binds the type, mode, owner and group, not the inode: items locked with the same
/// values carry the same record, so that ext4 can keep their attributes in one shared block (a
/// value unique to each inode costs every locked file a 4 KiB block of its own, and made lock
/// 1.4× and unlock 3.2× slower). What ties a record to its item is its state: a record is applied
/// only to an item that is exactly as protfs leaves it at one step of a lock (see
/// `ModeEnforcer.fits`). An item in such a state can only have its attributes written by root or
/// by its owner, and the owner could set the record's owner and mode itself, so a copied record
/// gains nobody anything; a record copied onto any other item is ignored and reported.
///
/// On disk it is ASCII, so that `getfattr` shows it: `MODE UID GID MAC`, for example
/// `0644 501 501 3f9a…` (octal mode, decimal ids, 64 hex digits). This type is the one codec for
/// that value: every reader (lock, unlock, status, audit) goes through it.
package struct SavedModeRecord: Hashable, Sendable {
  /// The permission bits, set-id and sticky bits included.
  package var mode: UInt32
  /// The owner.
  package var uid: UInt32
  /// The group.
  package var gid: UInt32

  /// Creates a value from its parts.
  package init(mode: UInt32, uid: UInt32, gid: UInt32) {
    self.mode = mode
    self.uid = uid
    self.gid = gid
  }

  /// The longest value a reader must accept before it decides: a longer one is garbage.
  package static let maximumLength = 128

  /// Whether `name` (a C string) in `dirfd` carries a record, without decoding it: true when it has
  /// a value (one too long for any record counts), false when the kernel says it has none, else the errno.
  package static func presence(dirfd: Int32, name: UnsafePointer<CChar>) -> Result<Bool, Errno> {
    withUnsafeTemporaryAllocation(byteCount: maximumLength, alignment: 1) { buffer in
      switch Kernel.getAttribute(dirfd: dirfd, rawName: name, attribute: attributeName, into: buffer) {
      case .success, .failure(.range): .success(true)
      case .failure(.noData): .success(false)
      case .failure(let e): .failure(e)
      }
    }
  }

  /// The attribute's name as a C string, made once.
  nonisolated(unsafe) private static let attributeName: UnsafePointer<CChar> = {
    let name = AttributeName.savedMode.utf8CString
    let copy = UnsafeMutablePointer<CChar>.allocate(capacity: name.count)
    name.withUnsafeBufferPointer { copy.initialize(from: $0.baseAddress!, count: name.count) }
    return UnsafePointer(copy)
  }()

  /// The value to store for `identity`, authenticated with `key`.
  package func encoded(for identity: ItemIdentity, key: ModeKey) -> [UInt8] {
    var out = [UInt8]()
    out.reserveCapacity(Self.maximumLength)
    out.append(UInt8(ascii: "0"))
    Self.appendDigits(&out, UInt64(mode), radix: 8)
    out.append(UInt8(ascii: " "))
    Self.appendDigits(&out, UInt64(uid), radix: 10)
    out.append(UInt8(ascii: " "))
    Self.appendDigits(&out, UInt64(gid), radix: 10)
    out.append(UInt8(ascii: " "))
    for byte in key.mac(self, identity) {
      out.append(Self.hexDigits[Int(byte >> 4)])
      out.append(Self.hexDigits[Int(byte & 0xF)])
    }
    return out
  }

  private static let hexDigits = Array("0123456789abcdef".utf8)

  private static func appendDigits(_ out: inout [UInt8], _ value: UInt64, radix: UInt64) {
    let start = out.count
    var rest = value
    repeat {
      out.append(UInt8(ascii: "0") + UInt8(rest % radix))
      rest /= radix
    } while rest != 0
    out[start...].reverse()
  }

  /// What a stored value says.
  package enum Decoded: Equatable {
    /// Written by this device's protfs for this item.
    case authentic(SavedModeRecord)
    /// Well formed, but protfs did not write it for this item (planted, copied from another item,
    /// made with a lost key, or the bare octal mode an older protfs wrote, `legacy` then).
    case unauthenticated(claimed: SavedModeRecord, legacy: Bool)
    /// Not a record at all.
    case garbage
  }

  /// Decodes `bytes`, the value read from `identity`'s attribute; without a key nothing is authentic.
  package static func decode(_ bytes: UnsafeRawBufferPointer, identity: ItemIdentity, key: ModeKey?) -> Decoded {
    // At most four fields: more spaces than three make the last one too long to be a MAC.
    var fields: [Slice<UnsafeRawBufferPointer>] = []
    fields.reserveCapacity(4)
    var start = bytes.startIndex
    for index in bytes.indices where bytes[index] == UInt8(ascii: " ") && fields.count < 3 {
      fields.append(bytes[start..<index])
      start = index + 1
    }
    fields.append(bytes[start...])
    if fields.count == 1, let mode = octal(fields[0]) {
      return .unauthenticated(claimed: SavedModeRecord(mode: mode, uid: 0, gid: 0), legacy: true)
    }
    guard fields.count == 4, let mode = octal(fields[0]), let uid = decimal(fields[1]), let gid = decimal(fields[2]),
      fields[3].count == 64
    else { return .garbage }
    let record = SavedModeRecord(mode: mode, uid: uid, gid: gid)
    guard let key else { return .unauthenticated(claimed: record, legacy: false) }
    // Constant time: a mismatch must not tell how many leading digits were right.
    var difference: UInt8 = 0
    var digit = fields[3].startIndex
    for byte in key.mac(record, identity) {
      difference |= bytes[digit] ^ hexDigits[Int(byte >> 4)]
      difference |= bytes[digit + 1] ^ hexDigits[Int(byte & 0xF)]
      digit += 2
    }
    return difference == 0 ? .authentic(record) : .unauthenticated(claimed: record, legacy: false)
  }

  /// Decodes a value held in an array.
  package static func decode(_ bytes: [UInt8], identity: ItemIdentity, key: ModeKey?) -> Decoded {
    bytes.withUnsafeBytes { decode($0, identity: identity, key: key) }
  }

  private static func octal(_ digits: Slice<UnsafeRawBufferPointer>) -> UInt32? {
    guard !digits.isEmpty, digits.count <= 6 else { return nil }
    var value: UInt32 = 0
    for byte in digits {
      guard byte >= 0x30 && byte <= 0x37 else { return nil }
      value = value << 3 | UInt32(byte - 0x30)
    }
    return value <= 0o7777 ? value : nil
  }

  private static func decimal(_ digits: Slice<UnsafeRawBufferPointer>) -> UInt32? {
    guard !digits.isEmpty, digits.count <= 10 else { return nil }
    var value: UInt64 = 0
    for byte in digits {
      guard byte >= 0x30 && byte <= 0x39 else { return nil }
      value = value * 10 + UInt64(byte - 0x30)
    }
    return value <= UInt64(UInt32.max) ? UInt32(value) : nil
  }

  /// The mode a restricted item gets: nothing for a file; for a directory no write bits, and when
  /// it was handed to root (`handedOver`) its owner's read and search bits move to the group, so
  /// the original owner (in its own group) can still list and traverse it but neither create in it
  /// nor chmod it. The lock and the mount's chmod of a restricted item both use it.
  package static func restrictedMode(_ original: UInt32, isDirectory: Bool, handedOver: Bool) -> UInt32 {
    guard isDirectory else { return 0 }
    guard handedOver else { return original & ~0o222 }
    let owner = (original >> 6) & 0o5
    let group = (original >> 3) & 0o5
    return (original & 0o7000) | owner << 6 | (owner | group) << 3 | (original & 0o5)
  }
}

/// The device's secret for saved-mode records: 32 random bytes in `.protfs/mode-key`, readable by
/// its owner only (the user protfs runs as, root on a device apps run on).
///
/// Without the key nobody can write a record unlock accepts, nor copy one to another item. A
/// transition creates the key when there is none (then no older record is authentic, and unlock
/// gives those items safe modes); a key file that is not exactly that (wrong size, type, owner,
/// or readable by others) stops the transition with an error, since a leaked or swapped key would
/// let records be forged.
package struct ModeKey: Sendable {
  /// The file's name in `.protfs/`.
  package static let fileName = "mode-key"
  private static let length = 32

  /// The HMAC's inner and outer hash states after the key block, copied for each item.
  private let inner: SHA256_CTX
  private let outer: SHA256_CTX
  /// MACs already computed: a lock or unlock meets the same few (type, mode, owner, group)
  /// values on thousands of items, so each is hashed once per process.
  private let memo = MACMemo()

  private init(_ key: [UInt8]) {
    var block = key + [UInt8](repeating: 0, count: 64 - key.count)
    var inner = SHA256_CTX()
    var outer = SHA256_CTX()
    protfs_sha256_init(&inner)
    protfs_sha256_init(&outer)
    for index in block.indices { block[index] ^= 0x36 }
    protfs_sha256_update(&inner, block, 64)
    for index in block.indices { block[index] ^= 0x36 ^ 0x5c }
    protfs_sha256_update(&outer, block, 64)
    self.inner = inner
    self.outer = outer
  }

  /// HMAC-SHA256 of a fixed-layout message: a domain tag, the item's type, then mode, owner and group.
  package func mac(_ record: SavedModeRecord, _ identity: ItemIdentity) -> [UInt8] {
    let input = MACMemo.Input(record: record, isDirectory: identity.isDirectory)
    if let known = memo.value(for: input) { return known }
    let computed = computeMAC(record, identity)
    memo.store(computed, for: input)
    return computed
  }

  private func computeMAC(_ record: SavedModeRecord, _ identity: ItemIdentity) -> [UInt8] {
    // Built on the stack: this runs once or twice per locked item.
    withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { message in
      var length = 0
      func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { raw in
          message.baseAddress!.advanced(by: length).copyMemory(from: raw.baseAddress!, byteCount: raw.count)
          length += raw.count
        }
      }
      for byte in Self.domain { append(byte) }
      append(UInt8(identity.isDirectory ? 1 : 0))
      append(record.mode)
      append(record.uid)
      append(record.gid)
      var digest = [UInt8](repeating: 0, count: 32)
      var context = inner
      protfs_sha256_update(&context, message.baseAddress, length)
      protfs_sha256_final(&digest, &context)
      context = outer
      protfs_sha256_update(&context, digest, 32)
      protfs_sha256_final(&digest, &context)
      return digest
    }
  }

  /// Separates these MACs from any other use of the key.
  private static let domain = Array("protfs saved-mode 2\0".utf8)

  /// HMAC-SHA256 of `message` under `domain` (a tag that no other use of the key shares, ending in
  /// a NUL): how other records the device hands out and takes back are authenticated with the
  /// same secret (the session service's resume data).
  package func mac(domain: String, message: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: 32)
    let tag = Array(domain.utf8) + [0]
    var context = inner
    protfs_sha256_update(&context, tag, tag.count)
    protfs_sha256_update(&context, message, message.count)
    protfs_sha256_final(&digest, &context)
    context = outer
    protfs_sha256_update(&context, digest, 32)
    protfs_sha256_final(&digest, &context)
    return digest
  }

  /// The key in `directory` (the device's `.protfs/`), or nil when there is none yet.
  package static func load(from directory: DirectoryHandle) throws(ProtFSError) -> ModeKey? {
    try ProtFSError.requireLibcrypto()
    let path = directory.pathOf(fileName)
    let file: FileDescriptor
    switch Kernel.openat(directory.fd, fileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0) {
    case .success(let opened): file = FileDescriptor(owning: opened)
    case .failure(.noSuchFile): return nil
    case .failure(let e): throw damaged(path, "it cannot be opened (\(e))")
    }
    defer { file.close() }
    let fd = file.rawValue
    var s = stat()
    _ = try Kernel.fstat(fd, &s).orThrow("inspect", path: path)
    guard s.st_mode & S_IFMT == S_IFREG else { throw damaged(path, "it is not a regular file") }
    guard s.st_uid == Kernel.geteuid() else {
      throw damaged(path, "it belongs to uid \(s.st_uid), not to uid \(Kernel.geteuid()) that protfs runs as")
    }
    guard s.st_mode & 0o077 == 0 else {
      throw damaged(path, "its mode \(FilePermissions(rawValue: UInt32(s.st_mode)).octal) lets other users read it")
    }
    var bytes = [UInt8](repeating: 0, count: length + 1)
    let count = try Kernel.read(fd, &bytes, bytes.count).orThrow("read", path: path)
    guard count == length, s.st_size == length else {
      throw damaged(path, "it holds \(max(Int(s.st_size), count)) bytes instead of \(length)")
    }
    return ModeKey(Array(bytes.prefix(length)))
  }

  /// The key in `directory`, made first when there is none: written to a private temp file and
  /// renamed into place without replacing anything, so that two processes racing end up with the same key.
  package static func loadOrCreate(in directory: DirectoryHandle) throws(ProtFSError) -> ModeKey {
    if let key = try load(from: directory) { return key }
    var secret = [UInt8](repeating: 0, count: length)
    guard protfs_rand_bytes(&secret, Int32(length)) == 1 else {
      throw ProtFSError(.io, "Cannot make a secret for saved modes: the system's random generator failed.")
    }
    // Not replacing: when another process placed its key first, that one is used.
    try AtomicFile.write(secret, named: fileName, in: directory, options: AtomicFile.Options(replacing: false))
    guard let key = try load(from: directory) else {
      throw ProtFSError.system("read", path: directory.pathOf(fileName), errno: ENOENT)
    }
    return key
  }

  private static func damaged(_ path: String, _ why: String) -> ProtFSError {
    ProtFSError(
      .corruptAttribute, "The secret that authenticates saved modes, '\(path)', is unusable: \(why).", path: path,
      remedy: .advice(
        "remove it (`rm '\(path)'`); the next transition makes a new one, and unlock then gives items locked before files mode 0600 and directories 0700 instead of their saved modes"
      )
    )
  }
}

/// The MACs a `ModeKey` has computed, shared by the walk's threads.
private final class MACMemo: Sendable {
  struct Input: Hashable {
    var record: SavedModeRecord
    var isDirectory: Bool
  }

  /// Past this many distinct values (a tree of unusual modes and owners) nothing more is kept.
  private static let capacity = 4096
  private let values = Mutex<[Input: [UInt8]]>([:])

  func value(for input: Input) -> [UInt8]? { values.withLock { $0[input] } }

  func store(_ mac: [UInt8], for input: Input) {
    values.withLock { values in
      if values.count < Self.capacity { values[input] = mac }
    }
  }
}

extension ProtFSError {
  /// Throws when libcrypto, which protfs loads on first use, cannot be loaded: before any work
  /// that needs it begins, so that nothing is left half-done.
  package static func requireLibcrypto() throws(ProtFSError) {
    guard let failure = protfs_crypto_load() else { return }
    throw ProtFSError(
      .io, "libcrypto cannot be loaded (\(String(cString: failure))).",
      remedy: .advice("install Debian's libssl3 package (scripts/setup.sh does), then run the command again"))
  }
}
