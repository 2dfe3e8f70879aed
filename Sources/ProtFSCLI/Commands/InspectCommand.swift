import Foundation
import ProtFS
import ProtFSAppBundle

/// `protfs inspect APP`: what a real app declares (its Info.plist and the entitlements of its code
/// signature) and what that implies for its container.
package enum InspectCommand {
  package static let command = Command(
    name: "inspect",
    abstract: "Show what an app (.ipa or .app) declares: bundle id, entitlements, background modes.",
    discussion: """
      Reads APP, an .ipa file or an .app directory, in memory (nothing is extracted or written):
      its Info.plist (bundle id, UIBackgroundModes, BGTaskSchedulerPermittedIdentifiers) and the
      entitlements of its executable's code signature (thin or universal Mach-O), among them
      com.apple.developer.default-data-protection, the default class of the app's files. Then
      prints what they imply for its container: a background mode needs nsurlsessiond's Downloads
      directory of class none (init-cache), a default class of complete makes locked background
      downloads fail, a BGTask request needs both the mode and a permitted identifier.

      A damaged or hostile app (a zip bomb, a member named with .. or that is a symbolic link, a
      truncated or oversized code signature) is refused with one error naming the file. The
      device is not touched.

      With --json: one object with path, bundleID, executable, name, version, minimumOSVersion,
      architectures, signature (identifier, teamIdentifier, entitlements, derEntitlements, slots),
      entitlements (the plist as JSON, or null), defaultClassName, defaultClassRawValue,
      defaultClassDeclared, backgroundModes, permittedTaskIdentifiers and implications (each kind,
      level, message and fix).
      """,
    arguments: [app],
    options: [CommonOptions.json],
    run: run)

  /// `<app>`.
  package static let app = Argument(name: "app", help: "The app: an .ipa file or an .app directory.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let package = try AppPackage.read(invocation.required(Self.app))
    var spelling = invocation.spelling
    spelling.bundleID = package.bundleID.rawValue
    if invocation.flag(CommonOptions.json) {
      try Console.json(Report(package, spelling))
      return 0
    }
    let rows = summary(package)
    let width = rows.map(\.0.count).max() ?? 0
    for (label, value) in rows {
      Console.out((label + ":").padding(toLength: width + 2, withPad: " ", startingAt: 0) + value)
    }
    Console.out()
    printEntitlements(package)
    printImplications(package, spelling)
    return 0
  }

  /// The labelled lines that open the text: the app's identity, signature, default class, background
  /// modes and task identifiers.
  static func summary(_ package: AppPackage) -> [(String, String)] {
    let defaultClass = package.containerDefaultClass
    var rows: [(String, String)] = [
      ("Bundle id", package.bundleID.rawValue),
      ("Executable", package.executableName + " (" + package.slices.map(\.architecture).joined(separator: ", ") + ")"),
    ]
    if let name = package.displayName { rows.append(("Name", name)) }
    if let version = package.version { rows.append(("Version", version)) }
    if let minimum = package.minimumOSVersion { rows.append(("Minimum iOS", minimum)) }
    if let signature = package.signature {
      var signed = signature.identifier ?? "no identifier"
      if let team = signature.teamIdentifier { signed += ", team \(team)" }
      if signature.hasDEREntitlements { signed += "; DER entitlements too" }
      rows.append(("Signed", signed))
    } else {
      rows.append(("Signed", "no (no LC_CODE_SIGNATURE)"))
    }
    rows.append(
      ("Default class", defaultClass.name + (package.defaultDataProtection == nil ? " (iOS's default)" : "")))
    rows.append(
      ("Background modes", package.backgroundModes.isEmpty ? "none" : package.backgroundModes.joined(separator: ", ")))
    rows.append(
      (
        "BGTask identifiers",
        package.permittedTaskIdentifiers.isEmpty ? "none" : package.permittedTaskIdentifiers.joined(separator: ", ")
      ))
    return rows
  }

  /// The entitlements of the app's code signature, one a line.
  static func printEntitlements(_ package: AppPackage) {
    if let entitlements = package.entitlements {
      Console.out("Entitlements:")
      for key in entitlements.keys.sorted() {
        Console.out("  \(key) = \(text(entitlements[key]!))")
      }
      if entitlements.isEmpty { Console.out("  none") }
    } else {
      Console.out("Entitlements: none (the code signature has no entitlements blob)")
    }
  }

  /// What the app's declarations imply, each with its fix in the command line's words.
  static func printImplications(_ package: AppPackage, _ spelling: CommandSpelling) {
    if !package.implications.isEmpty {
      Console.out()
      Console.out("What they imply:")
      for implication in package.implications {
        var line = "  \(implication.level.rawValue): \(implication.message)"
        if let fix = fix(implication.kind, spelling) { line += " Fix: \(fix)." }
        Console.out(line)
      }
    }
  }

  /// The fix of an implication of `kind`, in the command line's words, or nil.
  static func fix(_ kind: AppImplication.Kind, _ spelling: CommandSpelling) -> String? {
    switch kind {
    case .downloadsNeedClassNone, .lockedDownloadsFail:
      return "run \(spelling.command("init-cache \(spelling.bundleArgument)"))"
    case .taskIdentifiersMissing: return "add the identifiers to BGTaskSchedulerPermittedIdentifiers"
    case .taskModeMissing: return "add fetch or processing to UIBackgroundModes"
    case .defaultClassUndeclared, .unsigned: return nil
    }
  }

  /// A property list value on one line: strings as they are, arrays in brackets.
  static func text(_ value: PropertyListValue) -> String {
    switch value {
    case .string(let text): return text
    case .integer(let number): return String(number)
    case .real(let number): return String(number)
    case .bool(let flag): return flag ? "true" : "false"
    case .date(let date): return ISO8601DateFormatter().string(from: date)
    case .data(let data): return "<\(data.count) bytes>"
    case .array(let items): return "[" + items.map(text).joined(separator: ", ") + "]"
    case .dictionary(let items):
      return "{" + items.keys.sorted().map { "\($0) = \(text(items[$0]!))" }.joined(separator: ", ") + "}"
    }
  }

  /// What `inspect --json` prints.
  struct Report: Encodable {
    /// One architecture of the executable.
    struct Architecture: Encodable {
      /// Its name (`arm64`).
      var name: String
      /// Whether it has a code signature.
      var signed: Bool
    }
    /// The code signature the entitlements come from.
    struct Signature: Encodable {
      /// The identifier it signs.
      var identifier: String?
      /// Its team.
      var teamIdentifier: String?
      /// Whether it holds an entitlements blob (XML).
      var entitlements: Bool
      /// Whether it holds the DER entitlements too.
      var derEntitlements: Bool
      /// Its blobs' slot types.
      var slots: [UInt32]
    }
    /// One implication, with its fix in the command line's words.
    struct Implication: Encodable {
      /// Its stable name.
      var kind: String
      /// `note` or `warning`.
      var level: String
      /// What follows and why.
      var message: String
      /// What to do, if anything.
      var fix: String?
    }
    var path: String
    var bundleID: String
    var executable: String
    var name: String?
    var version: String?
    var minimumOSVersion: String?
    var architectures: [Architecture]
    var signature: Signature?
    var entitlements: [String: PropertyListValue]?
    var defaultClassName: String
    var defaultClassRawValue: String
    var defaultClassDeclared: Bool
    var backgroundModes: [String]
    var permittedTaskIdentifiers: [String]
    var implications: [Implication]

    init(_ package: AppPackage, _ spelling: CommandSpelling) {
      path = package.path
      bundleID = package.bundleID.rawValue
      executable = package.executableName
      name = package.displayName
      version = package.version
      minimumOSVersion = package.minimumOSVersion
      architectures = package.slices.map { Architecture(name: $0.architecture, signed: $0.signature != nil) }
      signature = package.signature.map {
        Signature(
          identifier: $0.identifier, teamIdentifier: $0.teamIdentifier, entitlements: $0.entitlements != nil,
          derEntitlements: $0.hasDEREntitlements, slots: $0.slots)
      }
      entitlements = package.entitlements
      defaultClassName = package.containerDefaultClass.name
      defaultClassRawValue = package.containerDefaultClass.rawValue
      defaultClassDeclared = package.defaultDataProtection != nil
      backgroundModes = package.backgroundModes
      permittedTaskIdentifiers = package.permittedTaskIdentifiers
      implications = package.implications.map {
        Implication(
          kind: $0.kind.rawValue, level: $0.level.rawValue, message: $0.message,
          fix: InspectCommand.fix($0.kind, spelling))
      }
    }

    /// Encodes every key, `null` for what is absent, so a script finds each one.
    func encode(to encoder: any Encoder) throws {
      var container = encoder.container(keyedBy: CodingKeys.self)
      try container.encode(path, forKey: .path)
      try container.encode(bundleID, forKey: .bundleID)
      try container.encode(executable, forKey: .executable)
      try container.encode(name, forKey: .name)
      try container.encode(version, forKey: .version)
      try container.encode(minimumOSVersion, forKey: .minimumOSVersion)
      try container.encode(architectures, forKey: .architectures)
      try container.encode(signature, forKey: .signature)
      try container.encode(entitlements, forKey: .entitlements)
      try container.encode(defaultClassName, forKey: .defaultClassName)
      try container.encode(defaultClassRawValue, forKey: .defaultClassRawValue)
      try container.encode(defaultClassDeclared, forKey: .defaultClassDeclared)
      try container.encode(backgroundModes, forKey: .backgroundModes)
      try container.encode(permittedTaskIdentifiers, forKey: .permittedTaskIdentifiers)
      try container.encode(implications, forKey: .implications)
    }

    enum CodingKeys: String, CodingKey {
      case path, bundleID, executable, name, version, minimumOSVersion, architectures, signature, entitlements
      case defaultClassName, defaultClassRawValue, defaultClassDeclared, backgroundModes, permittedTaskIdentifiers
      case implications
    }
  }
}
