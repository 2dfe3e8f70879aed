import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem
import Synchronization

/// The keys of a sealed device (docs/sealed.md) as the mount holds them: ``SealedFiles``, whose
/// errors become the kernel's. The mount is the only way to a sealed file's plaintext: a file whose
/// class key is gone cannot be opened (EPERM, root included); a file whose key record is missing,
/// damaged, or made for another file or class fails with EIO.
final class MountSeal: Sendable {
  private let files: SealedFiles
  /// The sealed files whose pages a state change drops.
  let pages = SealedPages()
  /// The keys open handles hold, which a state change drops with the class keys.
  let openKeys = OpenFileKeys()
  /// Where the crash tests kill the daemon in a class change (`PROTFS_CRASH_AFTER`).
  private let crashHook = CrashHook.fromEnvironment()
  /// Held through a class change, whose record is the device's only one.
  private let changing = Mutex(())

  /// The seal of `device`, or nil when the device is not sealed.
  init?(device: Device) throws(ProtFSError) {
    guard let files = try SealedFiles(device: device) else { return nil }
    self.files = files
  }

  /// Keeps the keys `state` allows, and drops those of open files of the classes it withdraws
  /// (but class B's, whose open files stay usable while locked).
  func apply(_ state: ProtectionState) {
    openKeys.evict(files.apply(state).subtracting([.b, .d]))
  }

  /// The cipher of the sealed file `fd` holds, from its key record.
  func cipher(of fd: Int32) throws(Errno) -> FileCipher {
    do { return try files.cipher(of: fd) } catch { throw Self.errno(error) }
  }

  /// The key of the sealed file `fd` holds, for a handle opened on it (registered in ``openKeys``).
  func handleKey(of fd: Int32) throws(Errno) -> HandleKey {
    do {
      let (cipher, code) = try files.cipherAndClass(of: fd)
      return openKeys.register(cipher, code: code, seal: self)
    } catch {
      throw Self.errno(error)
    }
  }

  /// A fresh key for the new file `fd` of class `cls`, written beside its class, for the handle
  /// that creates it.
  func seal(_ fd: Int32, class cls: ProtectionClass) throws(Errno) -> HandleKey {
    do {
      return openKeys.register(try files.seal(fd, class: cls), code: ProtectionClassCode(cls), seal: self)
    } catch {
      throw Self.errno(error)
    }
  }

  /// A class change to `cls` of what `fd` (open for reading) holds: a sealed file's key is wrapped
  /// anew with `cls`'s key; for a directory, the keys of the sealed files below it that inherit the
  /// class. EPERM, and nothing changed, when a key it needs is evicted. `write` then writes the
  /// class (or removes the item's own, when `removesOwnClass`: `cls` is the one it inherits then).
  ///
  /// Recorded first, as `protfs set-class` records its changes: a daemon killed midway leaves some
  /// keys wrapped by the new class, and the next protfs command run as root makes the same change
  /// again (`LockController.finishInterruptedClassChange`).
  /// One change at a time: the device keeps one record.
  func changeClass(
    _ fd: Int32, to cls: ProtectionClass, removesOwnClass: Bool = false, write apply: () throws(Errno) -> Void
  ) throws(Errno) {
    try changing.withLock { (_) throws(Errno) in
      let recorded = try record(fd, cls, removesOwnClass: removesOwnClass)
      try rewrap(fd, to: cls)
      try apply()
      if recorded { try forgetClassChange() }
    }
  }

  /// Removes the record of a class change once its class is written.
  private func forgetClassChange() throws(Errno) {
    do { try SealStore(device: files.device).removeClassChange() } catch { throw Errno(error.errno ?? EIO) }
  }

  /// Writes the record of a class change of what `fd` holds; false when it has no path in the
  /// device to record (removed meanwhile), which leaves the change unrecorded, as before.
  private func record(_ fd: Int32, _ cls: ProtectionClass, removesOwnClass: Bool) throws(Errno) -> Bool {
    var link = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard let count = try? Kernel.readlinkat(AT_FDCWD, procPath(fd), &link, link.count - 1).get(),
      let path = try? files.device.resolve(bytes: link.prefix(count).map { UInt8(bitPattern: $0) })
    else { return false }
    let change = ClassChangeRecord(
      path: path.names.map(\.bytes), protectionClass: cls.rawValue, recursive: false,
      removesOwnClass: removesOwnClass ? true : nil)
    do { try SealStore(device: files.device).writeClassChange(change) } catch { throw Errno(error.errno ?? EIO) }
    crashHook.step()
    return true
  }

  private func rewrap(_ fd: Int32, to cls: ProtectionClass) throws(Errno) {
    var s = stat()
    try Kernel.fstat(fd, &s).get()
    guard s.st_mode & S_IFMT == S_IFDIR else {
      guard SealedFiles.hasRecord(fd) else { return }
      do { try files.rewrap(fd, to: cls) } catch { throw Self.errno(error) }
      crashHook.step()
      return
    }
    do {
      let directory = DirectoryHandle(
        fd: try Kernel.openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC).orThrow("open", path: "(a directory)"),
        path: "(a directory)")
      let rewraps = try SealedFiles.rewraps(of: nil, in: directory, to: cls, recursive: false)
      try files.requireKeys(for: rewraps)
      try files.perform(rewraps) { crashHook.step() }
    } catch {
      throw Errno(error.errno ?? EIO)
    }
  }

  /// What the kernel says for `error`: EPERM for an evicted key, the call's own error, else EIO.
  private static func errno(_ error: SealError) -> Errno {
    switch error {
    case .classKeyUnavailable: .notPermitted
    case .system(_, let e): e
    default: Errno(EIO)
    }
  }
}

/// A sealed file's key as an open handle holds it. A state that withdraws the file's class takes
/// it from the handle (``OpenFileKeys/evict(_:)``), as iOS discards a complete file's key at a
/// lock even while the file is open; the handle's next I/O the state allows again unwraps it anew
/// from the file's record. Class B's keys stay with their handles: an open file of that class
/// stays readable and writable while locked (`NSFileProtectionCompleteUnlessOpen`).
final class HandleKey: Sendable {
  /// The class the file's key is wrapped with.
  let code: ProtectionClassCode
  private let seal: MountSeal
  private let held: Mutex<FileCipher?>

  fileprivate init(_ cipher: FileCipher, code: ProtectionClassCode, seal: MountSeal) {
    self.code = code
    self.seal = seal
    held = Mutex(cipher)
  }

  /// The cipher of the file `fd` holds: the one held, else unwrapped again now (EPERM while its
  /// class key is evicted). Unwrapped under the lock an eviction takes: a key unwrapped with keys
  /// that are withdrawn meanwhile is not kept.
  func cipher(_ fd: Int32) throws(Errno) -> FileCipher {
    try held.withLock { (held) throws(Errno) -> FileCipher in
      if let held { return held }
      let cipher = try seal.cipher(of: fd)
      held = cipher
      return cipher
    }
  }

  /// Whether the key is held now.
  var isHeld: Bool { held.withLock { $0 != nil } }

  fileprivate func drop() { held.withLock { $0 = nil } }
}

/// The keys the open handles of a sealed mount hold, by class: a state change drops those of the
/// classes it withdraws. A handle's key leaves the registry with the handle.
final class OpenFileKeys: Sendable {
  private let keys = Mutex<[ObjectIdentifier: WeakKey]>([:])

  /// A key for a handle being opened, registered until the handle goes.
  func register(_ cipher: FileCipher, code: ProtectionClassCode, seal: MountSeal) -> HandleKey {
    let key = HandleKey(cipher, code: code, seal: seal)
    keys.withLock { $0[ObjectIdentifier(key)] = WeakKey(key: key) }
    return key
  }

  /// A handle closed: its key is no longer held.
  func remove(_ key: HandleKey) { _ = keys.withLock { $0.removeValue(forKey: ObjectIdentifier(key)) } }

  /// Drops the keys of open files of the classes in `codes` (after the mount's class keys were).
  func evict(_ codes: Set<ProtectionClassCode>) {
    let open = keys.withLock { keys in
      keys = keys.filter { $0.value.key != nil }  // those of handles whose open failed after the key was made
      return keys.values.compactMap(\.key)
    }
    for key in open where codes.contains(key.code) { key.drop() }
  }

  /// How many open handles hold their file's key now, by class name: the value of
  /// `user.protfs.mount-file-keys` on the mount's root.
  func heldCounts() -> [String: Int] {
    let open = keys.withLock { $0.values.compactMap(\.key) }
    var counts: [String: Int] = [:]
    for key in open where key.isHeld { counts[key.code.protectionClass.name, default: 0] += 1 }
    return counts
  }
}

/// A registry entry: the registry does not keep a handle's key alive.
private struct WeakKey {
  weak var key: HandleKey?
}
