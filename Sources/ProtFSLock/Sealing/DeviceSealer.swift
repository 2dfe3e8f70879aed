import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// Sealing a device that already holds files (`protfs seal`, docs/sealed.md): its keys, as
/// ``LockController/sealEmptyDevice()`` makes them, then every regular file of `Containers/`
/// encrypted in place of its plaintext.
///
/// Crash safety across the walk: the marker `.protfs/seal/sealing` is written before anything else
/// and removed last. While it is there the device is being sealed; the next `protfs seal` (or the
/// command line's preamble, when the keys are at hand) walks again. A file is sealed iff it has a key
/// record, so the walk skips what an earlier run did; each file is replaced by a rename, so a kill
/// leaves its old plaintext or its sealed copy, never neither.
extension LockController {
  /// The marker of a sealing in progress, in `.protfs/seal/`.
  static let sealingMarkerName = "sealing"
  /// The prefix of a file's sealed copy before the rename over it.
  static let sealingCopyPrefix = ".protfs-sealing."

  /// Whether a `protfs seal` began on the device and has not finished (one `stat`).
  public var isBeingSealed: Bool {
    var status = stat()
    return Kernel.stat(sealingMarkerPath, &status).isSuccess
  }

  private var sealingMarkerPath: String { device.stateDirectory + "/seal/" + Self.sealingMarkerName }

  /// Seals the device: keys wrapped with `passcode` (which must be the device's, checked against its
  /// hash before anything; wrong ones count as an unlock's do), then every file in `Containers/`
  /// encrypted with a key of its effective class. The device must be unlocked. A sealing that a kill
  /// interrupted is finished; a device sealed already is left as it is.
  ///
  /// Refused, before anything changes, while a file to seal has more than one link (its other names
  /// would keep the plaintext, and may be outside the device) or is held open by a process (whose
  /// writes would go to the plaintext file the rename unlinks).
  @discardableResult
  public func sealDevice(passcode: String?) throws(ProtFSError) -> SealReport {
    try device.requireInitialized()
    let store = try LockStore(device)
    return try store.exclusively { () throws(ProtFSError) -> SealReport in
      _ = try recover(store)
      let record = try store.record(now: clock())
      if let hash = record.passcodeHash {
        do { try check(passcode, against: hash, record) } catch let failure as PasscodeFailure {
          try store.write(failure.record)
          throw failure.error
        } catch let error as ProtFSError { throw error } catch {
          throw ProtFSError(.io, "Cannot check the passcode of '\(device.root)': \(error).", path: device.root)
        }
      }
      return try sealFiles(record, passcode: passcode)
    }
  }

  /// Finishes a `protfs seal` that a kill interrupted, with the keys the kernel keyring holds (an
  /// unlocked device's); nil when no sealing was interrupted. Throws when it cannot go on without the
  /// passcode or while the device is locked: `protfs seal` then finishes it.
  @discardableResult
  public func finishInterruptedSealing() throws(ProtFSError) -> SealReport? {
    guard isBeingSealed else { return nil }
    let store = try LockStore(device)
    return try store.exclusively { () throws(ProtFSError) -> SealReport? in
      guard isBeingSealed else { return nil }
      return try sealFiles(try store.record(now: clock()), passcode: nil)
    }
  }

  /// The walk, under the state lock, with the passcode checked (or nil: the keyring's keys only).
  private func sealFiles(_ record: LockRecord, passcode: String?) throws(ProtFSError) -> SealReport {
    let seal = SealStore(device: device)
    let resuming = isBeingSealed
    let sealedAlready = try seal.isSealed()
    guard resuming || !sealedAlready else { return SealReport(sealedAlready: true) }
    guard record.state == .unlocked else {
      throw ProtFSError(
        .protectedDataUnavailable,
        "Cannot seal the device '\(device.root)' while it is \(record.state): its files' classes need "
          + "their keys.", path: device.root, errno: EPERM, remedy: .unlock)
    }
    let files = try filesToSeal()
    try refuseUnsealable(files)
    try writeSealingMarker()
    crashHook.step()
    let (keys, uuid) = try sealingKeys(seal, record: record, passcode: passcode)
    crashHook.step()
    let sealed = SealedFiles(device: device, keys: keys, keybagUUID: uuid)
    var report = SealReport(resumed: resuming)
    var directories: [Int32: DirectoryHandle] = [:]
    for file in files {
      if try Self.seal(file, with: sealed) { report.encrypted += 1 } else { report.skipped += 1 }
      directories[file.parent.fd] = file.parent
      crashHook.step()
    }
    // The renames reach the disk before the marker says the walk is done.
    for directory in directories.values { _ = Kernel.fsync(directory.fd) }
    try removeSealingMarker()
    return report
  }

  /// The key material of the sealing: the class keys a first run makes, or (resuming) those of the
  /// keybag it made, from the keyring or unwrapped with `passcode`.
  private func sealingKeys(_ seal: SealStore, record: LockRecord, passcode: String?) throws(ProtFSError) -> (
    ClassKeys, [UInt8]
  ) {
    let keybagPath = device.stateDirectory + "/seal/keybag"
    let needsPasscode = ProtFSError(
      .invalidArgument,
      "The sealing of '\(device.root)' needs the device's passcode to go on.", path: device.root,
      remedy: .advice("seal the device again, giving its passcode"))
    if try !seal.isSealed() {
      guard record.passcodeHash == nil || passcode != nil else { throw needsPasscode }
      let keys = try seal.create(passcode: record.passcodeHash == nil ? nil : passcode, iterations: sealIterations)
      let bag = try seal.keybag(deviceKey: try seal.deviceKey())
      try ClassKeyring(keybagUUID: bag.uuid).store(keys)
      return (keys, bag.uuid)
    }
    let deviceKey = try seal.deviceKey()
    let bag = try seal.keybag(deviceKey: deviceKey)
    let keyring = ClassKeyring(keybagUUID: bag.uuid)
    do {
      let held = try keyring.load(onto: try bag.deviceOnlyKeys(deviceKey: deviceKey))
      if held.available.count == ProtectionClassCode.allCases.count { return (held, bag.uuid) }
      guard !bag.hasPasscode || passcode != nil else { throw needsPasscode }
      let keys = try bag.unlock(deviceKey: deviceKey, passcode: bag.hasPasscode ? passcode : nil)
      try keyring.store(keys)
      return (keys, bag.uuid)
    } catch let error as SealError {
      throw error.protfsError(path: keybagPath)
    } catch let error as ProtFSError { throw error } catch {
      throw ProtFSError(.io, "Cannot unwrap the class keys of '\(keybagPath)': \(error).", path: keybagPath)
    }
  }

  private func writeSealingMarker() throws(ProtFSError) {
    let state = try DirectoryHandle(path: device.stateDirectory)
    try state.makeDirectory("seal", permissions: FilePermissions(rawValue: 0o700))
    let directory = try state.openDirectory("seal")
    guard !isBeingSealed else { return }
    try AtomicFile.write(
      Array("protfs seal began; the next protfs seal finishes it\n".utf8), named: Self.sealingMarkerName,
      in: directory, permissions: FilePermissions(rawValue: 0o600))
  }

  private func removeSealingMarker() throws(ProtFSError) {
    let directory = try DirectoryHandle(path: device.stateDirectory + "/seal")
    try directory.removeFileIfPresent(Self.sealingMarkerName)
    _ = Kernel.fsync(directory.fd)
  }
}

/// What `protfs seal` did.
public struct SealReport: Sendable, Equatable {
  /// The device was sealed already, and nothing was done.
  public var sealedAlready = false
  /// This finished a sealing that a kill had interrupted.
  public var resumed = false
  /// Files encrypted now.
  public var encrypted = 0
  /// Files found sealed already (by the interrupted run).
  public var skipped = 0
}

extension Result {
  fileprivate var isSuccess: Bool {
    if case .success = self { return true }
    return false
  }
}
