import ProtFS

/// A protection class as keybags and key records number it: Apple's 1 to 4 for classes A to D, and 5
/// for iOS 17's class CX (the digit of its `Data.WritingOptions` bit; Apple publishes no keybag
/// number for it).
package enum ProtectionClassCode: UInt8, CaseIterable, Sendable, CustomStringConvertible {
  /// Class A, `complete`.
  case a = 1
  /// Class B, `completeUnlessOpen`: an X25519 key pair, whose public half stays while locked.
  case b = 2
  /// Class C, `completeUntilFirstUserAuthentication`.
  case c = 3
  /// Class D, `none`: wrapped by the device key alone, so always available.
  case d = 4
  /// Class CX, `completeWhenUserInactive`.
  case cx = 5

  /// The code of `protectionClass`.
  package init(_ protectionClass: ProtectionClass) {
    self =
      switch protectionClass {
      case .complete: .a
      case .completeUnlessOpen: .b
      case .completeUntilFirstUserAuthentication: .c
      case .none: .d
      case .completeWhenUserInactive: .cx
      }
  }

  /// The class this code numbers.
  package var protectionClass: ProtectionClass {
    switch self {
    case .a: .complete
    case .b: .completeUnlessOpen
    case .c: .completeUntilFirstUserAuthentication
    case .d: .none
    case .cx: .completeWhenUserInactive
    }
  }

  /// Apple's letter for the class: A, B, C, D or CX.
  package var description: String {
    switch self {
    case .a: "A"
    case .b: "B"
    case .c: "C"
    case .d: "D"
    case .cx: "CX"
    }
  }

  /// Whether the class key is wrapped with the passcode (every class but D).
  package var needsPasscode: Bool { self != .d }
}
