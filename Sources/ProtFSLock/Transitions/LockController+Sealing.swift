import ProtFS
import ProtFSSeal
import ProtFSSystem

/// Sealing a device that holds no file yet (`protfs init --sealed`): a device key and a keybag of
/// fresh class keys, and the keys in root's keyring, as an unlock leaves them.
extension LockController {
  /// Whether the device is sealed (it has a keybag).
  public var isSealed: Bool {
    get throws(ProtFSError) { try SealStore(device: device).isSealed() }
  }

  /// Seals the device, which must be initialised, unlocked, without a passcode and without a file in
  /// `Containers/` (directories only: a container just made): its files are then written sealed from
  /// the first. A device sealed already is left as it is (false); true when this call sealed it.
  ///
  /// A kill in the middle leaves either no keybag (the device unsealed and still empty: sealing
  /// again works) or the keybag (sealed), never a file written unsealed into a sealed device.
  @discardableResult
  public func sealEmptyDevice() throws(ProtFSError) -> Bool {
    try device.requireInitialized()
    return try LockStore(device).exclusively { () throws(ProtFSError) -> Bool in
      let seal = SealStore(device: device)
      guard try !seal.isSealed() else { return false }
      let record = try LockStore(device).record(now: clock())
      guard record.passcodeHash == nil, record.state == .unlocked else {
        throw ProtFSError(
          .invalidArgument,
          "The device '\(device.root)' has a passcode or is not unlocked: seal it before setting "
            + "a passcode, or remove the passcode and unlock it first.", path: device.root, remedy: .unlock)
      }
      if let file = try Self.firstFile(in: try device.openDirectory(Device.containersPath)) {
        throw ProtFSError(
          .invalidArgument,
          "The device '\(device.root)' already holds files (such as '\(file)'), which would stay "
            + "unencrypted: seal it with `protfs seal`, which encrypts them.", path: file)
      }
      let keys = try seal.create(passcode: nil, iterations: sealIterations)
      let bag = try seal.keybag(deviceKey: try seal.deviceKey())
      try ClassKeyring(keybagUUID: bag.uuid).store(keys)
      return true
    }
  }

  /// PBKDF2 rounds for the keybag: the passcode hash's when a test made it cheap, else measured to take
  /// about 80 ms here.
  var sealIterations: UInt32 {
    get throws(ProtFSError) {
      if passcodeIterations != PasscodeHash.defaultIterations { return UInt32(clamping: passcodeIterations) }
      do { return try Keybag.calibratedIterations() } catch {
        throw error.protfsError(path: device.stateDirectory + "/seal")
      }
    }
  }

  /// The path of the first entry below `directory` that is not a directory, or nil.
  private static func firstFile(in directory: DirectoryHandle) throws(ProtFSError) -> String? {
    for entry in try directory.entries() {
      guard entry.kind == .directory else { return directory.pathOf(entry.name) }
      if let found = try firstFile(in: try directory.openDirectory(entry.name)) { return found }
    }
    return nil
  }
}
