import Foundation

// What Foundation on Linux lacks or refuses of what iOS code calls at once: each is added here
// with Apple's name and signature, over what Foundation on Linux has.

extension Progress {
  /// A progress of no units, in no tree, as `Progress()` makes one on Apple's platforms
  /// (`init(parent: nil, userInfo: nil)`). Foundation on Linux has no `init()`, and an extension
  /// cannot add one that NSObject declares: this one takes an argument that is never given.
  public convenience init(_: Void = ()) {
    self.init(parent: nil, userInfo: nil)
  }
}

extension NSDictionary {
  /// A dictionary with the keys and values of `otherDictionary`, as Apple's, which takes an
  /// `NSDictionary` (Foundation on Linux takes a Swift dictionary alone); also for
  /// `NSMutableDictionary(dictionary:)`.
  public convenience init(dictionary otherDictionary: NSDictionary) {
    var entries: [AnyHashable: Any] = [:]
    // Every key of an NSDictionary is an NSObject, so hashable.
    for case let (key as AnyHashable, value) in otherDictionary { entries[key] = value }
    self.init(dictionary: entries)
  }
}

extension NSCoder {
  /// Decodes the object under `key` of one of `classes`; throws the decoding's error instead of
  /// stopping the app, as Apple's (Foundation on Linux declares it unavailable).
  ///
  /// A keyed unarchiver is switched to `decodingFailurePolicy = .setErrorAndReturn` first and left
  /// so: Foundation on Linux allows that only before its first decode, so call it first, as
  /// `unarchivedObject(ofClass:from:)` and its kind do. A key the archive does not hold gives nil
  /// and no error, as Apple's: Foundation on Linux would set one, and with it fail every later
  /// decode of the unarchiver (download managers try a key, then `NSKeyedArchiveRootObjectKey`).
  public func decodeTopLevelObject(of classes: [AnyClass]?, forKey key: String) throws -> Any? {
    try decodingTopLevel(key: key) { decodeObject(of: classes, forKey: key) }
  }

  /// Decodes the object of class `cls` under `key`; throws the decoding's error.
  public func decodeTopLevelObject<DecodedObjectType>(
    of cls: DecodedObjectType.Type, forKey key: String
  ) throws -> DecodedObjectType? where DecodedObjectType: NSObject, DecodedObjectType: NSCoding {
    try decodingTopLevel(key: key) { decodeObject(of: cls, forKey: key) }
  }

  /// Decodes the object under `key`; throws the decoding's error.
  public func decodeTopLevelObject(forKey key: String) throws -> Any? {
    try decodingTopLevel(key: key) { decodeObject(forKey: key) }
  }

  /// Decodes the next object; throws the decoding's error.
  public func decodeTopLevelObject() throws -> Any? {
    try decodingTopLevel { decodeObject() }
  }

  /// Runs `decode` with failures set as errors, and throws the error it left.
  /// `key`: the key decoded, nil for the next object; an absent key gives nil, no error.
  private func decodingTopLevel<Value>(key: String? = nil, _ decode: () -> Value?) throws -> Value? {
    if let unarchiver = self as? NSKeyedUnarchiver, unarchiver.decodingFailurePolicy != .setErrorAndReturn {
      unarchiver.decodingFailurePolicy = .setErrorAndReturn
    }
    // Asked after the policy is set: Foundation on Linux counts it as the start of decoding.
    if let key, !containsValue(forKey: key) { return nil }
    let value = decode()
    if let error { throw error }
    return value
  }
}

extension URLResourceKey {
  /// The space left on the volume for what the user asked for. Linux has no purgeable space, so
  /// it is the volume's available capacity (`statvfs(3)`: the blocks available to the app), and
  /// this key is Foundation's `volumeAvailableCapacityKey`, which Foundation on Linux computes.
  public static let volumeAvailableCapacityForImportantUsageKey = URLResourceKey.volumeAvailableCapacityKey
  /// The space left on the volume for what the app may do later; as
  /// `volumeAvailableCapacityForImportantUsageKey`.
  public static let volumeAvailableCapacityForOpportunisticUsageKey = URLResourceKey.volumeAvailableCapacityKey
}

extension URLResourceValues {
  /// The space left on the volume for what the user asked for, in bytes, when it was asked for
  /// (`volumeAvailableCapacityForImportantUsageKey`).
  public var volumeAvailableCapacityForImportantUsage: Int64? { volumeAvailableCapacity.map(Int64.init) }
  /// The space left on the volume for what the app may do later, in bytes, when it was asked for.
  public var volumeAvailableCapacityForOpportunisticUsage: Int64? { volumeAvailableCapacity.map(Int64.init) }
}
