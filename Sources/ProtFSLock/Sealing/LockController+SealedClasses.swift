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
    if let sealed = try SealedFiles(device: device) {
      let (parent, name) = try device.openParentEntry(path)
      let rewraps = try SealedFiles.rewraps(
        of: name, in: parent, to: protectionClass, recursive: recursive,
        skipping: name == nil ? FileName(Device.stateDirectoryName) : nil)
      try sealed.requireKeys(for: rewraps)
      try sealed.perform(rewraps)
    }
    return try device.setClass(protectionClass, of: path, recursive: recursive)
  }
}
