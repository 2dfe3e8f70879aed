import ProtFS
import ProtFSSeal
import ProtFSSystem

/// A sealed device's class keys follow its lock state (docs/sealed.md): `unlock` unwraps them with
/// the passcode and leaves them in root's kernel keyring, where the mount takes them; every other
/// transition invalidates there the keys its state withdraws (class A's and class B's private key at
/// a lock, once the grace ends; all but class D's at a reboot), for every process at once. Passcode
/// changes rewrap the class keys in the keybag; files are never touched.
extension LockController {
  /// The sealed device's store and keyring, or nil for a device that is not sealed.
  private func sealedKeys() throws(ProtFSError) -> (SealStore, Keybag, SecretBytes, ClassKeyring)? {
    let store = SealStore(device: device)
    guard try store.isSealed() else { return nil }
    let deviceKey = try store.deviceKey()
    let bag = try store.keybag(deviceKey: deviceKey)
    return (store, bag, deviceKey, ClassKeyring(keybagUUID: bag.uuid))
  }

  /// Evicts from the keyring every class key `state` withdraws. Only the keys' name is read from
  /// the keybag, its signature unchecked: evicting needs no key (nor libcrypto, which a lock would
  /// load for nothing else), and a keybag damaged past its UUID keeps no key in the keyring.
  func withdrawSealedKeys(for state: ProtectionState) throws(ProtFSError) {
    guard let uuid = try SealStore(device: device).keybagUUID() else { return }
    try ClassKeyring(keybagUUID: uuid).evict(
      Set(ProtectionClassCode.allCases.filter { !state.allows($0.protectionClass, .read) }))
  }

  /// Unwraps the class keys with `passcode` into the keyring, after an unlock. A passcode change a
  /// kill interrupted left two keybags: the one that agrees with the record (wrapped with a passcode
  /// when `recorded`, and opened by `passcode`) stays; the other goes.
  func releaseSealedKeys(passcode: String?, recorded: Bool) throws(ProtFSError) {
    guard let (store, bag, deviceKey, keyring) = try sealedKeys() else { return }
    try keybagOperation(store, "unwrap the class keys of") {
      let pending = try store.pendingKeybag(deviceKey: deviceKey)
      if let pending, pending.hasPasscode == recorded,
        bag.hasPasscode != recorded || (try? bag.unlock(deviceKey: deviceKey, passcode: passcode)) == nil
      {
        try keyring.store(try pending.unlock(deviceKey: deviceKey, passcode: recorded ? passcode : nil))
        return try store.commitPendingKeybag()
      }
      try keyring.store(try bag.unlock(deviceKey: deviceKey, passcode: bag.hasPasscode ? passcode : nil))
      try store.discardPendingKeybag()
    }
  }

  /// Writes the keybag a passcode change to `passcode` (nil: the device key alone) will commit, on an
  /// unlocked device, whose keys are all in the keyring: called before the change's record is
  /// written, so that a kill at any point leaves a keybag that the recorded passcode opens.
  func prepareSealedKeys(passcode: String?) throws(ProtFSError) {
    guard let (store, bag, deviceKey, keyring) = try sealedKeys() else { return }
    try keybagOperation(store, "wrap anew the class keys of") {
      let keys = try keyring.load(onto: try bag.deviceOnlyKeys(deviceKey: deviceKey))
      guard keys.available.count == ProtectionClassCode.allCases.count else {
        throw ProtFSError(
          .permissionDenied,
          "The class keys of '\(Self.keybagPath(store))' are not all unlocked, so they cannot "
            + "be wrapped anew.", path: Self.keybagPath(store), remedy: .unlock)
      }
      try store.writePendingKeybag(
        try bag.rewrapped(keys, deviceKey: deviceKey, newPasscode: passcode, iterations: sealIterations),
        deviceKey: deviceKey)
    }
  }

  /// Commits the keybag `prepareSealedKeys` wrote, once the passcode's record is written.
  func commitSealedKeys() throws(ProtFSError) {
    guard device.isSealed else { return }
    try SealStore(device: device).commitPendingKeybag()
  }

  private static func keybagPath(_ store: SealStore) -> String { store.device.stateDirectory + "/seal/keybag" }

  /// Runs `body`, whose errors are the keys' (`SealError`, worded for the keybag) or protfs's.
  private func keybagOperation(_ store: SealStore, _ what: String, _ body: () throws -> Void) throws(ProtFSError) {
    let path = Self.keybagPath(store)
    do {
      try body()
    } catch let error as SealError {
      throw error.protfsError(path: path)
    } catch let error as ProtFSError {
      throw error
    } catch {
      throw ProtFSError(.io, "Cannot \(what) '\(path)': \(error).", path: path)
    }
  }
}
