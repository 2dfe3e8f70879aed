import Foundation

/// The error every ProtFS operation throws: what failed, on which path, the system call and errno
/// behind it, and what the user can do about it.
///
/// The type is generic. Its codes and remedies are open sets: this target declares those any layer
/// can meet (a missing file, a refused permission, a malformed file), and each feature target
/// declares its own in an extension beside the code that throws them (the downloads' `.network`,
/// the mount's `.enableFuse`), so that a newcomer finds a code's owner by its file, and a new
/// feature's error rebuilds only that feature and what sits on it.
public struct ProtFSError: Error, Sendable, Equatable, Codable, CustomStringConvertible {
  /// What kind of failure this is; the command line maps it to an exit status.
  ///
  /// An open set, like `Notification.Name`: a feature declares its codes as static members in an
  /// extension. Encoded as its raw value, so stored errors keep their meaning across versions.
  public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The code's name, as stored and sent.
    public let rawValue: String
    /// A code named `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A code named `rawValue`.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// The code's name.
    public var description: String { rawValue }

    /// A value given by the caller is not valid (class name, bundle id, size, …).
    public static let invalidArgument = Code("invalidArgument")
    /// The item does not exist.
    public static let notFound = Code("notFound")
    /// The item already exists where protfs must create it.
    public static let alreadyExists = Code("alreadyExists")
    /// The filesystem does not support user extended attributes.
    public static let xattrUnsupported = Code("xattrUnsupported")
    /// Permission bits or ownership refused the operation.
    public static let permissionDenied = Code("permissionDenied")
    /// The path is a symlink, which protfs does not follow.
    public static let symlink = Code("symlink")
    /// A file protfs reads (entitlements, state, policy) is malformed.
    public static let malformed = Code("malformed")
    /// Any other system call failure.
    public static let io = Code("io")
  }

  /// What kind of failure this is.
  public var code: Code
  /// A whole sentence saying what went wrong, quoting the path.
  public var message: String
  /// The path involved, if any.
  public var path: String?
  /// The system call that failed, if one did and the error came through the syscall layer.
  public var syscall: Syscall?
  /// The errno behind the failure, if a system call failed.
  public var errno: Int32?
  /// What the user can do about it, if anything.
  public var remedy: Remedy?

  /// The remedy in the library's words, which name no command (a front end words it its own way).
  public var hint: String? { remedy.flatMap { $0.advice.isEmpty ? nil : $0.advice } }

  /// Creates an error.
  public init(
    _ code: Code, _ message: String, path: String? = nil, syscall: Syscall? = nil, errno: Int32? = nil,
    remedy: Remedy? = nil
  ) {
    self.code = code
    self.message = message
    self.path = path
    self.syscall = syscall
    self.errno = errno
    self.remedy = remedy
  }

  /// The message followed by the remedy, worded by `advice` (the library's words unless a front end
  /// gives its own).
  public func description(advice: (Remedy) -> String) -> String {
    guard let hint = remedy.map(advice), !hint.isEmpty else { return message }
    if message.hasSuffix("?") { return "\(message) \(hint.prefix(1).uppercased())\(hint.dropFirst())." }
    let base = message.hasSuffix(".") ? String(message.dropLast()) : message
    return "\(base); \(hint)."
  }

  /// The message followed by the remedy in the library's words.
  public var description: String { description(advice: \.advice) }

  /// Maps an errno from `operation` on `path` to an error, once, at the call site; `syscall` names
  /// the call that failed when the caller knows it.
  public static func system(_ operation: String, path: String, errno: Int32, syscall: Syscall? = nil) -> ProtFSError {
    let reason = String(cString: strerror(errno))
    let message = "Cannot \(operation) '\(path)': \(reason)."
    func error(_ code: Code, _ message: String = message, remedy: Remedy? = nil) -> ProtFSError {
      ProtFSError(code, message, path: path, syscall: syscall, errno: errno, remedy: remedy)
    }
    switch errno {
    case ENOENT: return error(.notFound)
    case EEXIST: return error(.alreadyExists)
    case EACCES, EPERM: return error(.permissionDenied)
    case ELOOP:
      return error(.symlink, "Cannot \(operation) '\(path)': it is a symbolic link, which protfs does not follow.")
    case ENOTSUP:
      return error(
        .xattrUnsupported, "Cannot \(operation) '\(path)': its filesystem does not support user extended attributes.",
        remedy: .advice("put the device on a filesystem with user xattrs (ext4, xfs, btrfs, tmpfs)"))
    default: return error(.io)
    }
  }

  /// Maps `errno`, from the system call it names, of `operation` on `path` to an error.
  public static func system(_ operation: String, path: String, errno: Errno) -> ProtFSError {
    system(operation, path: path, errno: errno.rawValue, syscall: errno.call)
  }
}

extension ProtFSError: LocalizedError {
  /// The message followed by the hint.
  public var errorDescription: String? { description }
}

/// What the user can do about a failure. The library names the action and words it without naming
/// a command; a front end words it its own way (the CLI turns `.unlock` into "run `protfs unlock`").
///
/// An open set: generic remedies are declared here, and each feature declares its own beside the
/// code that offers them, as a static member that fills in `action`, `arguments` and `advice`.
public struct Remedy: Sendable, Hashable, Codable {
  /// The action a remedy names, which a front end matches to word it (`case .unlock:`).
  public struct Action: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The action's name, as stored and sent.
    public let rawValue: String
    /// An action named `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// An action named `rawValue`.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// The action's name.
    public var description: String { rawValue }

    /// Words of a sentence, with no action a front end could word differently.
    public static let advice = Action("advice")
    /// Fix the item, then run `operation` (lock, unlock, …) again.
    public static let retry = Action("retry")
    /// Run as root, or (argument `orChown`) give the item to the device's owner.
    public static let runAsRoot = Action("runAsRoot")
    /// Run as the device's owner.
    public static let runAsDeviceOwner = Action("runAsDeviceOwner")
  }

  /// A value a remedy's action is about (a path, a task's id, a choice).
  public enum Argument: Sendable, Hashable, Codable {
    /// A text, such as a path or a bundle id.
    case text(String)
    /// A whole number, such as a task's id.
    case number(Int64)
    /// A choice.
    case flag(Bool)

    /// Decodes the JSON value itself: a string, a number or a boolean.
    public init(from decoder: any Decoder) throws {
      let container = try decoder.singleValueContainer()
      if let flag = try? container.decode(Bool.self) {
        self = .flag(flag)
      } else if let number = try? container.decode(Int64.self) {
        self = .number(number)
      } else {
        self = .text(try container.decode(String.self))
      }
    }

    /// Encodes the JSON value itself.
    public func encode(to encoder: any Encoder) throws {
      var container = encoder.singleValueContainer()
      switch self {
      case .text(let text): try container.encode(text)
      case .number(let number): try container.encode(number)
      case .flag(let flag): try container.encode(flag)
      }
    }
  }

  /// What the user should do.
  public var action: Action
  /// What the action is about, by name (`path`, `bundleID`, `id`, …).
  public var arguments: [String: Argument]
  /// The remedy in words that name no command; empty for a remedy stored by a version of protfs
  /// that kept only the action (a front end still words it from `action`).
  public var advice: String

  /// A remedy: `action` on `arguments`, worded `advice` in words that name no command.
  public init(_ action: Action, _ arguments: [String: Argument] = [:], advice: String) {
    self.action = action
    self.arguments = arguments
    self.advice = advice
  }

  /// The text argument `name`, or an empty string.
  public func text(_ name: String) -> String {
    if case .text(let value)? = arguments[name] { return value }
    return ""
  }

  /// The number argument `name`, if the remedy has it.
  public func number(_ name: String) -> Int64? {
    if case .number(let value)? = arguments[name] { return value }
    return nil
  }

  /// The choice argument `name`, false if the remedy does not have it.
  public func flag(_ name: String) -> Bool {
    if case .flag(let value)? = arguments[name] { return value }
    return false
  }

  /// Anything else, as the words of a sentence that name no command.
  public static func advice(_ text: String) -> Remedy { Remedy(.advice, advice: text) }

  /// Fix the item, then run `operation` (lock, unlock, …) again.
  public static func retry(operation: String) -> Remedy {
    Remedy(.retry, ["operation": .text(operation)], advice: "fix the item, then \(operation) again")
  }

  /// Run as root, or (`orChown`) give the item to the device's owner.
  public static func runAsRoot(orChown: Bool) -> Remedy {
    Remedy(
      .runAsRoot, ["orChown": .flag(orChown)],
      advice: orChown ? "run as root, or give the item to the device's owner with chown" : "run as root")
  }

  /// Run as the device's owner.
  public static let runAsDeviceOwner = Remedy(.runAsDeviceOwner, advice: "run as the device's owner")

  private enum CodingKeys: String, CodingKey {
    case action, arguments, advice
  }

  /// Any key: the form before remedies were an open set stored `{"<action>": {<arguments>}}`.
  private struct LegacyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  /// Decodes `{"action", "arguments", "advice"}`, or the earlier form `{"<action>": {<arguments>}}`
  /// that download stores written by earlier versions still hold (its `advice` then is empty, but
  /// for the `advice` action, whose words were its one argument).
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    if container.contains(.action) {
      action = try container.decode(Action.self, forKey: .action)
      arguments = try container.decodeIfPresent([String: Argument].self, forKey: .arguments) ?? [:]
      advice = try container.decodeIfPresent(String.self, forKey: .advice) ?? ""
      return
    }
    let legacy = try decoder.container(keyedBy: LegacyKey.self)
    guard let key = legacy.allKeys.first, legacy.allKeys.count == 1 else {
      throw DecodingError.dataCorrupted(
        .init(codingPath: decoder.codingPath, debugDescription: "A remedy names one action."))
    }
    action = Action(key.stringValue)
    arguments = (try? legacy.decode([String: Argument].self, forKey: key)) ?? [:]
    if action == .advice, case .text(let text)? = arguments["_0"] {
      arguments = [:]
      advice = text
    } else {
      advice = ""
    }
  }

  /// Encodes `{"action", "arguments", "advice"}`.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(action, forKey: .action)
    if !arguments.isEmpty { try container.encode(arguments, forKey: .arguments) }
    try container.encode(advice, forKey: .advice)
  }
}

/// Why a Foundation call failed, in protfs's words: strerror(3)'s text for a POSIX error, and
/// a short phrase for a Cocoa one, never Foundation's own sentences ("The operation could not be
/// completed.") nor their closing period, so that a message can end it with its own.
package enum FailureReason {
  /// The reason `error` gives, as a phrase to follow a colon.
  package static func of(_ error: any Error) -> String {
    let error = error as NSError
    if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
      return String(cString: strerror(Int32(underlying.code)))
    }
    if error.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(error.code))) }
    if error.domain == NSCocoaErrorDomain, let errno = posixCode(ofCocoa: error.code) {
      return String(cString: strerror(errno))
    }
    if error.domain == NSCocoaErrorDomain, (3840...3851).contains(error.code) || error.code == 4864 {
      return "malformed data"
    }
    var text = error.localizedDescription
    while text.hasSuffix(".") { text.removeLast() }
    for lead in ["The operation could not be completed. ", "The operation couldn’t be completed. "]
    where text.hasPrefix(lead) {
      text.removeFirst(lead.count)
    }
    return text
  }

  /// The errno a Cocoa file error stands for (CocoaError's file codes), or nil.
  private static func posixCode(ofCocoa code: Int) -> Int32? {
    switch code {
    case CocoaError.fileNoSuchFile.rawValue, CocoaError.fileReadNoSuchFile.rawValue: ENOENT
    case CocoaError.fileWriteFileExists.rawValue: EEXIST
    case CocoaError.fileReadNoPermission.rawValue, CocoaError.fileWriteNoPermission.rawValue: EACCES
    case CocoaError.fileWriteOutOfSpace.rawValue: ENOSPC
    case CocoaError.fileWriteVolumeReadOnly.rawValue: EROFS
    case CocoaError.fileReadTooLarge.rawValue: EFBIG
    default: nil
    }
  }
}
