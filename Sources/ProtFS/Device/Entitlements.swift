import Foundation
import ProtFSSystem

/// An app's entitlements plist (XML or binary), as far as data protection is concerned.
public struct Entitlements: Sendable, Equatable {
  /// The key that sets the default protection class of an app's files.
  public static let defaultDataProtectionKey = "com.apple.developer.default-data-protection"

  /// The class the entitlement asks for, or nil when the plist does not set it.
  public var defaultDataProtection: ProtectionClass?

  /// The largest entitlements file read (Xcode's are a few KiB).
  public static let sizeLimit = 1 << 20

  /// Parses the entitlements at `path`.
  public init(contentsOf path: String) throws(ProtFSError) {
    switch Kernel.readNamedFile(path, limit: Self.sizeLimit) {
    case .success(let bytes):
      try self.init(data: Data(bytes), path: path)
    case .failure(let failure):
      throw ProtFSError(
        .notFound, "Cannot read the entitlements file '\(path)': \(failure.reason).", path: path,
        remedy: .advice("give the path of an .entitlements or .plist file"))
    }
  }

  /// Parses entitlements from `data`; `path` is used in messages. The plist is read within bounds
  /// (`BoundedPropertyList`): one that expands without end, or nests too deep, is refused.
  public init(data: Data, path: String) throws(ProtFSError) {
    let plist: Any
    switch BoundedPropertyList.parse(Array(data), limits: BoundedPropertyList.Limits(bytes: Self.sizeLimit)) {
    case .success(let parsed):
      plist = parsed
    case .failure(let refusal):
      throw ProtFSError(
        .malformed, "The entitlements file '\(path)' is not a property list protfs reads: \(refusal.reason).",
        path: path, remedy: .advice("check it with `plutil -lint` or export it again from Xcode"))
    }
    guard let dictionary = plist as? [String: Any] else {
      throw ProtFSError(
        .malformed, "The entitlements file '\(path)' does not hold a dictionary at its top level.", path: path)
    }
    guard let value = dictionary[Self.defaultDataProtectionKey] else {
      defaultDataProtection = nil
      return
    }
    guard let text = value as? String, let cls = ProtectionClass(rawValue: text) else {
      throw ProtFSError(
        .malformed,
        "The entitlements file '\(path)' sets \(Self.defaultDataProtectionKey) to \(String(describing: value)), which is not a protection class.",
        path: path, remedy: .advice("use a raw value such as NSFileProtectionComplete"))
    }
    defaultDataProtection = cls
  }
}
