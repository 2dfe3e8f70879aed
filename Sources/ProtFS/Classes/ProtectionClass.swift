import Foundation
import ProtFSSystem

/// One of iOS's file-protection classes, with its on-disk encoding.
///
/// The raw value is what `user.protfs.class` stores: Apple's constant name, as ASCII without a
/// trailing NUL (for example `NSFileProtectionNone`). This is the one place that encoding lives.
public enum ProtectionClass: String, CaseIterable, Sendable, Codable {
  /// Class D: always available (`FileProtectionType.none`).
  case none = "NSFileProtectionNone"
  /// Class A: available only while the device is unlocked (`.complete`).
  case complete = "NSFileProtectionComplete"
  /// Class B: open handles survive a lock and new files can be created while locked (`.completeUnlessOpen`).
  case completeUnlessOpen = "NSFileProtectionCompleteUnlessOpen"
  /// Class C, the default: available from the first unlock after boot (`.completeUntilFirstUserAuthentication`).
  case completeUntilFirstUserAuthentication = "NSFileProtectionCompleteUntilFirstUserAuthentication"
  /// Class CX (iOS 17): like class C until the user has been inactive, then like class A (`.completeWhenUserInactive`).
  case completeWhenUserInactive = "NSFileProtectionCompleteWhenUserInactive"

  /// The class a container gets when nothing else says otherwise (class C).
  public static let containerDefault: ProtectionClass = .completeUntilFirstUserAuthentication

  /// All classes, weakest first.
  public static let byStrength: [ProtectionClass] = [
    .none, .completeUntilFirstUserAuthentication, .completeWhenUserInactive, .completeUnlessOpen, .complete,
  ]

  /// The name protfs's command line prints, for example `complete-unless-open`.
  public var name: String {
    switch self {
    case .none: "none"
    case .complete: "complete"
    case .completeUnlessOpen: "complete-unless-open"
    case .completeUntilFirstUserAuthentication: "complete-until-first-user-authentication"
    case .completeWhenUserInactive: "complete-when-user-inactive"
    }
  }

  /// The short alias the command line also accepts, for example `unless-open`.
  public var alias: String? {
    switch self {
    case .none, .complete: nil
    case .completeUnlessOpen: "unless-open"
    case .completeUntilFirstUserAuthentication: "until-first-auth"
    case .completeWhenUserInactive: "when-inactive"
    }
  }

  /// The Swift case name of Foundation's `FileProtectionType`, for example `completeUnlessOpen`.
  public var swiftCaseName: String {
    switch self {
    case .none: "none"
    case .complete: "complete"
    case .completeUnlessOpen: "completeUnlessOpen"
    case .completeUntilFirstUserAuthentication: "completeUntilFirstUserAuthentication"
    case .completeWhenUserInactive: "completeWhenUserInactive"
    }
  }

  /// Apple's letter for the class in the Platform Security Guide: A, B, C, CX or D.
  public var appleClass: String {
    switch self {
    case .none: "D"
    case .complete: "A"
    case .completeUnlessOpen: "B"
    case .completeUntilFirstUserAuthentication: "C"
    case .completeWhenUserInactive: "CX"
    }
  }

  /// Position in the strength order: none (0) < until-first-auth < when-inactive < unless-open < complete (4).
  public var strength: Int {
    switch self {
    case .none: 0
    case .completeUntilFirstUserAuthentication: 1
    case .completeWhenUserInactive: 2
    case .completeUnlessOpen: 3
    case .complete: 4
    }
  }

  /// Every spelling the command line accepts for this class, lowercased.
  public var spellings: [String] {
    var all = [name, rawValue.lowercased(), swiftCaseName.lowercased(), "class-\(appleClass.lowercased())"]
    if let alias { all.append(alias) }
    if self == .completeWhenUserInactive { all.append("inactive") }  // Linux Foundation's case name
    return all
  }

  /// Parses any spelling: the protfs name, its alias, the raw value or the Swift case name, in any case.
  public init?(parsing text: String) {
    let key = text.trimmingCharacters(in: .whitespaces).lowercased()
    guard let match = Self.allCases.first(where: { $0.spellings.contains(key) }) else { return nil }
    self = match
  }

  /// Parses any spelling, or throws an error that lists the valid names and suggests the nearest one.
  public static func parse(_ text: String) throws(ProtFSError) -> ProtectionClass {
    if let value = ProtectionClass(parsing: text) { return value }
    let names = allCases.map(\.name)
    var message = "'\(text)' is not a protection class."
    if let near = Suggestion.nearest(to: text.lowercased(), in: allCases.flatMap(\.spellings)),
      let cls = ProtectionClass(parsing: near)
    {
      message += " Did you mean '\(cls.name)'?"
    }
    throw ProtFSError(
      .invalidArgument, message,
      remedy: .advice("use one of \(names.joined(separator: ", ")) (or an alias, raw value or Swift case name)"))
  }

  /// Parses the bytes of a `user.protfs.class` attribute; `nil` when they are not a known raw value.
  public init?(attributeValue bytes: some Collection<UInt8>) {
    let decoded = bytes.withContiguousStorageIfAvailable { Self(attributeBytes: UnsafeRawBufferPointer($0)) }
    if let decoded {
      guard let decoded else { return nil }
      self = decoded
      return
    }
    guard let value = Array(bytes).withUnsafeBytes({ Self(attributeBytes: $0) }) else { return nil }
    self = value
  }

  /// The encoded values, by case, for the allocation-free decoder.
  private static let encodedValues: [(ProtectionClass, [UInt8])] = allCases.map { ($0, Array($0.rawValue.utf8)) }

  /// Parses attribute bytes read into a buffer without building a `String` (the walks' hot path):
  /// the five values have five different lengths, so the length picks the one to compare with.
  public init?(attributeBytes bytes: UnsafeRawBufferPointer) {
    for (value, encoded) in Self.encodedValues where encoded.count == bytes.count {
      let same = encoded.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
      if same {
        self = value
        return
      }
      return nil
    }
    return nil
  }

  /// The bytes stored in `user.protfs.class`.
  public var attributeValue: [UInt8] { Array(rawValue.utf8) }
}

extension ProtectionClass: Comparable {
  /// Orders by strength, weakest first.
  public static func < (lhs: ProtectionClass, rhs: ProtectionClass) -> Bool { lhs.strength < rhs.strength }
}

extension ProtectionClass: CustomStringConvertible {
  /// The protfs name.
  public var description: String { name }
}

/// Where an item's effective class came from.
public enum ClassSource: String, Sendable, Codable {
  /// The item's own `user.protfs.class` attribute.
  case own
  /// The nearest ancestor directory's attribute inside the device.
  case inherited
  /// The container's default class, or class C when there is none.
  case `default`
}

/// An item's effective class and where it came from.
public struct EffectiveClass: Sendable, Equatable, Codable {
  /// The class that applies.
  public var protectionClass: ProtectionClass
  /// Where it came from.
  public var source: ClassSource
  /// Creates the pair.
  public init(_ protectionClass: ProtectionClass, _ source: ClassSource) {
    self.protectionClass = protectionClass
    self.source = source
  }
}
