import ProtFS
import ProtFSSeal
import ProtFSSystem

/// `protfs set-class` on any device: on a sealed one, a class change is also a change of the keys
/// that wrap its files' keys (docs/sealed.md).
extension LockController {
  /// Sets the own class of the item at `path` (with `recursive`, of everything below it too), as
  /// `Device.setClass(_:of:recursive:)` does. On a sealed device the key of every file whose
  /// effective class changes, the item's and those below it that inherit the new class, is first
  /// wrapped anew with the new class's key; a change that needs a key the lock evicted is refused
  /// with EPERM, and changes nothing.
  @discardableResult
  public func setClass(_ protectionClass: ProtectionClass, of path: DevicePath, recursive: Bool = false)
    throws(ProtFSError) -> SetClassResult
  {
    guard let sealed = try SealedFiles(device: device) else {
      return try device.setClass(protectionClass, of: path, recursive: recursive)
    }
    let rewraps = try checkedRewraps(sealed, of: path, to: protectionClass, recursive: recursive)
    // Recorded first: a kill while keys are wrapped anew is finished by the next command.
    let store = SealStore(device: device)
    try store.writeClassChange(
      ClassChangeRecord(
        path: path.names.map(\.bytes), protectionClass: protectionClass.rawValue, recursive: recursive))
    crashHook.step()
    try sealed.perform(rewraps) { crashHook.step() }
    let result = try device.setClass(protectionClass, of: path, recursive: recursive)
    try store.removeClassChange()
    return result
  }

  /// Makes again the class change a kill interrupted (recorded in `.protfs/seal`), so that every
  /// key is wrapped by its file's class; the item's path, or nil when there was none. An item gone
  /// since leaves nothing to change. A key the lock evicted refuses it (EPERM) and keeps the record for
  /// the next command.
  public func finishInterruptedClassChange() throws(ProtFSError) -> DevicePath? {
    guard device.isSealed else { return nil }  // an unsealed device, or none yet
    let store = SealStore(device: device)
    guard let change = try store.classChange() else { return nil }
    // Parsed as any path given to protfs: no `..`, nothing outside the device, whatever the file says.
    let path = try DevicePath(bytes: Array(change.path.joined(separator: [UInt8(ascii: "/")])))
    guard let cls = ProtectionClass(rawValue: change.protectionClass) else {
      try store.removeClassChange()
      return nil
    }
    do {
      if change.removesOwnClass == true {
        try removeClass(of: path, inheriting: cls)
      } else {
        try setClass(cls, of: path, recursive: change.recursive)
      }
    } catch  where error.code == .notFound {
      try store.removeClassChange()
    }
    return path
  }

  /// Removes the own class of the item at `path` on a sealed device, whose keys are wrapped with
  /// `inherited`, the class it inherits then, before the class goes: a `removexattr` through the
  /// mount that a kill interrupted, made again.
  private func removeClass(of path: DevicePath, inheriting inherited: ProtectionClass) throws(ProtFSError) {
    guard let sealed = try SealedFiles(device: device) else { return try device.removeClass(of: path) }
    try sealed.perform(try checkedRewraps(sealed, of: path, to: inherited, recursive: false))
    try device.removeClass(of: path)  // nothing when the kill came after it
    try SealStore(device: device).removeClassChange()
  }

  /// The keys a new class `cls` of the item at `path` (with `recursive`, of everything below it
  /// too) must wrap anew, each key it needs checked first: EPERM, before anything changes, when
  /// the lock evicted one.
  private func checkedRewraps(_ sealed: SealedFiles, of path: DevicePath, to cls: ProtectionClass, recursive: Bool)
    throws(ProtFSError) -> [KeyRewrap]
  {
    let (parent, name) = try device.openParentEntry(path)
    let rewraps = try SealedFiles.rewraps(
      of: name, in: parent, to: cls, recursive: recursive,
      skipping: name == nil ? FileName(Device.stateDirectoryName) : nil)
    try sealed.requireKeys(for: rewraps)
    return rewraps
  }
}
