import Glibc
import ProtFS
import ProtFSSystem

/// Where a sealed device keeps its device key and keybag: `.protfs/seal/`, closed to everyone but
/// root.
///
/// The device key (32 random bytes, mode 0400) stands in for a phone's hardware UID: every class
/// key is tangled with it, so a keybag copied off the device is useless without it. The keybag is
/// replaced atomically (rename), so a `kill -9` leaves the old one or the new one; the key is
/// written once, before any keybag that depends on it, and never replaced.
package struct SealStore: Sendable {
  static let directoryName = Device.sealDirectoryName
  static let deviceKeyName = "device.key"
  static let keybagName = Device.keybagName
  /// A keybag wrapped with a passcode being set, until the passcode's record is committed.
  static let pendingKeybagName = Device.keybagName + ".next"
  /// The class change under way (``ClassChangeRecord``), until its keys and class are all written.
  static let classChangeName = "class-change.json"

  /// The device.
  package let device: Device

  /// The store of `device`.
  package init(device: Device) { self.device = device }

  private var path: String { device.stateDirectory + "/" + Self.directoryName }

  /// Whether the device is sealed: its keybag is there.
  package func isSealed() throws(ProtFSError) -> Bool {
    guard let directory = try openDirectory(creating: false) else { return false }
    switch directory.statusResult(Self.keybagName) {
    case .success: return true
    case .failure(.noSuchFile): return false
    case .failure(let e): throw ProtFSError.system("read", path: directory.pathOf(Self.keybagName), errno: e)
    }
  }

  /// Seals the device's keys: a device key (kept if one is there from an interrupted run) and a
  /// keybag with fresh class keys wrapped with `passcode`. Returns the keys, all available. A device
  /// sealed already is refused: its files' keys are wrapped with the class keys it has.
  package func create(passcode: String?, iterations: UInt32) throws(ProtFSError) -> ClassKeys {
    // New class keys would orphan every file key wrapped with the old ones.
    guard try !isSealed() else {
      throw ProtFSError(
        .alreadyExists, "The device '\(device.root)' is sealed already: its keybag is in '\(path)'.", path: path)
    }
    let directory = try openDirectory(creating: true)!
    let deviceKey: SecretBytes
    if case .success = directory.statusResult(Self.deviceKeyName) {
      deviceKey = try readDeviceKey(directory)
    } else {
      deviceKey = try sealed { () throws(SealError) in try SecretBytes.random(count: 32) }
      let bytes = deviceKey.withUnsafeBytes { Array($0) }
      try AtomicFile.write(
        bytes, named: Self.deviceKeyName, in: directory,
        options: AtomicFile.Options(replacing: false, permissions: FilePermissions(rawValue: 0o400)))
    }
    let (bag, keys) = try sealed { () throws(SealError) in
      try Keybag.create(deviceKey: deviceKey, passcode: passcode, iterations: iterations)
    }
    try replaceKeybag(bag, deviceKey: deviceKey, in: directory)
    return keys
  }

  /// The device key, checked: a regular file of 32 bytes that only root can read.
  package func deviceKey() throws(ProtFSError) -> SecretBytes {
    guard let directory = try openDirectory(creating: false) else { throw notSealed() }
    return try readDeviceKey(directory)
  }

  /// The keybag, its signature checked with the device key.
  package func keybag(deviceKey: SecretBytes) throws(ProtFSError) -> Keybag {
    guard let directory = try openDirectory(creating: false) else { throw notSealed() }
    let bytes = try AtomicFile.read(named: Self.keybagName, in: directory, limit: Keybag.maximumSize, stateFile: true)
    let path = directory.pathOf(Self.keybagName)
    return try sealed(path: path) { () throws(SealError) in try Keybag(decoding: bytes, deviceKey: deviceKey) }
  }

  /// The keybag's UUID, its signature not checked (``Keybag/unverifiedUUID(in:)``), or nil when the
  /// device is not sealed.
  package func keybagUUID() throws(ProtFSError) -> [UInt8]? {
    guard try isSealed(), let directory = try openDirectory(creating: false) else { return nil }
    let bytes = try AtomicFile.read(named: Self.keybagName, in: directory, limit: Keybag.maximumSize, stateFile: true)
    return try sealed(path: directory.pathOf(Self.keybagName)) { () throws(SealError) in
      try Keybag.unverifiedUUID(in: bytes)
    }
  }

  /// Replaces the keybag with `bag` (a passcode change): the old one or the new one stays, never
  /// neither.
  package func replaceKeybag(_ bag: Keybag, deviceKey: SecretBytes) throws(ProtFSError) {
    guard let directory = try openDirectory(creating: false) else { throw notSealed() }
    try replaceKeybag(bag, deviceKey: deviceKey, in: directory)
  }

  /// Writes `bag` beside the keybag, as the one a passcode change will commit: until
  /// ``commitPendingKeybag()``, the keybag in use stays, and an unlock tries both (the passcode the
  /// state record accepts opens one of them, whenever a kill struck).
  package func writePendingKeybag(_ bag: Keybag, deviceKey: SecretBytes) throws(ProtFSError) {
    guard let directory = try openDirectory(creating: false) else { throw notSealed() }
    let bytes = try sealed { () throws(SealError) in try bag.encoded(deviceKey: deviceKey) }
    try AtomicFile.write(
      bytes, named: Self.pendingKeybagName, in: directory, permissions: FilePermissions(rawValue: 0o600))
  }

  /// The keybag a passcode change wrote and did not commit, its signature checked; nil when none.
  package func pendingKeybag(deviceKey: SecretBytes) throws(ProtFSError) -> Keybag? {
    guard let directory = try openDirectory(creating: false) else { throw notSealed() }
    guard case .success = directory.statusResult(Self.pendingKeybagName) else { return nil }
    let bytes = try AtomicFile.read(
      named: Self.pendingKeybagName, in: directory, limit: Keybag.maximumSize, stateFile: true)
    let path = directory.pathOf(Self.pendingKeybagName)
    return try sealed(path: path) { () throws(SealError) in try Keybag(decoding: bytes, deviceKey: deviceKey) }
  }

  /// Makes the pending keybag the keybag (one rename); nothing when there is none.
  package func commitPendingKeybag() throws(ProtFSError) {
    guard let directory = try openDirectory(creating: false) else { throw notSealed() }
    switch Kernel.renameat2(directory.fd, Self.pendingKeybagName, directory.fd, Self.keybagName, []) {
    case .success, .failure(.noSuchFile): return
    case .failure(let e):
      throw ProtFSError.system("commit the keybag", path: directory.pathOf(Self.pendingKeybagName), errno: e)
    }
  }

  /// Records `change` before any of its keys is wrapped anew: a kill leaves it for
  /// ``classChange()`` to find.
  package func writeClassChange(_ change: ClassChangeRecord) throws(ProtFSError) {
    guard let directory = try openDirectory(creating: false) else { throw notSealed() }
    try JSONStateFile.write(change, named: Self.classChangeName, in: directory)
  }

  /// The class change a kill interrupted, or nil.
  package func classChange() throws(ProtFSError) -> ClassChangeRecord? {
    guard let directory = try openDirectory(creating: false) else { return nil }
    return try JSONStateFile.read(
      ClassChangeRecord.self, named: Self.classChangeName, in: directory, what: "record of a class change",
      remedy: .advice("remove it and run `protfs audit`, which names the keys of another class than their file's"))
  }

  /// Removes the record of a class change, once it is all written; nothing when there is none.
  package func removeClassChange() throws(ProtFSError) {
    guard let directory = try openDirectory(creating: false) else { return }
    try directory.removeFileIfPresent(Self.classChangeName)
  }

  /// Removes a pending keybag whose passcode change was not committed; nothing when there is none.
  package func discardPendingKeybag() throws(ProtFSError) {
    guard let directory = try openDirectory(creating: false) else { throw notSealed() }
    try directory.removeFileIfPresent(Self.pendingKeybagName, action: "remove the keybag")
  }

  private func replaceKeybag(_ bag: Keybag, deviceKey: SecretBytes, in directory: DirectoryHandle) throws(ProtFSError) {
    let bytes = try sealed { () throws(SealError) in try bag.encoded(deviceKey: deviceKey) }
    try AtomicFile.write(bytes, named: Self.keybagName, in: directory, permissions: FilePermissions(rawValue: 0o600))
  }

  private func readDeviceKey(_ directory: DirectoryHandle) throws(ProtFSError) -> SecretBytes {
    let path = directory.pathOf(Self.deviceKeyName)
    let status = try directory.status(Self.deviceKeyName)
    guard status.kind == .file, status.uid == Kernel.geteuid(), status.permissions.rawValue & 0o077 == 0 else {
      throw ProtFSError(
        .permissionDenied,
        "The device key '\(path)' must be a regular file that only its owner, root, can read; "
          + "it is not, so its secrecy cannot be trusted.", path: path)
    }
    var bytes = try AtomicFile.read(named: Self.deviceKeyName, in: directory, limit: 4096, stateFile: true)
    defer { bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } } }
    guard bytes.count == 32 else { throw SealError.deviceKeySize(bytes.count).protfsError(path: path) }
    return bytes.withUnsafeBytes { SecretBytes(copying: $0) }
  }

  private func openDirectory(creating: Bool) throws(ProtFSError) -> DirectoryHandle? {
    let state = try DirectoryHandle(path: device.stateDirectory)
    if creating { try state.makeDirectory(Self.directoryName, permissions: FilePermissions(rawValue: 0o700)) }
    switch state.statusResult(Self.directoryName) {
    case .failure(.noSuchFile): return nil
    default: return try state.openDirectory(Self.directoryName)
    }
  }

  private func notSealed() -> ProtFSError {
    ProtFSError(.notFound, "The device '\(device.root)' is not sealed: it has no keybag in '\(path)'.", path: path)
  }

  private func sealed<T>(path: String? = nil, _ body: () throws(SealError) -> T) throws(ProtFSError) -> T {
    do { return try body() } catch { throw error.protfsError(path: path ?? self.path) }
  }
}

extension Keybag {
  /// PBKDF2 rounds that take about `target` seconds on this machine (Apple's aim for the passcode
  /// key is 80 ms), measured on the spot: the quickest of three short runs, scaled.
  package static func calibratedIterations(target: Double = 0.08) throws(SealError) -> UInt32 {
    let probe = 20_000
    var fastest = Double.infinity
    for _ in 0..<3 {
      let start = ContinuousClock.now
      _ = try SealCrypto.pbkdf2("calibration", salt: [UInt8](repeating: 0, count: 16), iterations: probe)
      let elapsed = ContinuousClock.now - start
      fastest = min(fastest, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
    let scaled = Double(probe) * target / max(fastest, 1e-6)
    return UInt32(min(max(scaled, 10_000), 10_000_000))
  }
}
