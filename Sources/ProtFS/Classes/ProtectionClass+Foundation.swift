import Foundation
import ProtFSSystem

extension FileProtectionType {
  /// iOS 17's class CX. Linux Foundation lacks the constant; protfs supplies it with Apple's raw value.
  public static let completeWhenUserInactive = FileProtectionType(
    rawValue: ProtectionClass.completeWhenUserInactive.rawValue)
}

extension Data.WritingOptions {
  /// iOS 17's class CX as a writing option (`0x50000000`). Linux Foundation lacks it.
  public static let completeFileProtectionWhenUserInactive = Data.WritingOptions(rawValue: 0x5000_0000)
}

extension ProtectionClass {
  /// The matching Foundation `FileProtectionType`.
  public var fileProtectionType: FileProtectionType { FileProtectionType(rawValue: rawValue) }

  /// The class for a Foundation `FileProtectionType`; `nil` for a value Apple does not define.
  public init?(_ type: FileProtectionType) { self.init(rawValue: type.rawValue) }

  /// The protection bits of `Data.WritingOptions` that select this class.
  public var writingOption: Data.WritingOptions {
    switch self {
    case .none: .noFileProtection
    case .complete: .completeFileProtection
    case .completeUnlessOpen: .completeFileProtectionUnlessOpen
    case .completeUntilFirstUserAuthentication: .completeFileProtectionUntilFirstUserAuthentication
    case .completeWhenUserInactive: .completeFileProtectionWhenUserInactive
    }
  }

  /// The class that the protection bits of `options` select; `nil` when they select none.
  ///
  /// Throws when the bits under `Data.WritingOptions.fileProtectionMask` hold a value Apple does not define.
  public init?(writingOptions options: Data.WritingOptions) throws(ProtFSError) {
    let bits = options.rawValue & Data.WritingOptions.fileProtectionMask.rawValue
    if bits == 0 { return nil }
    guard let match = Self.allCases.first(where: { $0.writingOption.rawValue == bits }) else {
      throw ProtFSError(
        .invalidArgument,
        "The protection bits 0x\(String(bits, radix: 16)) of the writing options are not a protection class.")
    }
    self = match
  }
}
