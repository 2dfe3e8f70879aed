import Foundation
import ProtFS
import ProtFSSystem

/// One thing the audit found wrong (or worth noting) about one item.
public struct AuditFinding: Sendable, Equatable {
  /// The stable id of the rule or built-in check, for example `DP004` or `PFS003`.
  public var ruleID: String
  /// How serious it is.
  public var level: AuditLevel
  /// The container's directory name (its bundle id), or the audited directory's name.
  public var container: String
  /// The item's path relative to the audited root as raw bytes (percent-encoded in SARIF URIs).
  public var pathBytes: [UInt8]
  /// Where, in `pathBytes`, the path relative to the container root starts.
  public var containerPathOffset: Int
  /// A whole sentence: what is wrong and why it matters.
  public var message: String
  /// What the rule wanted, for example `>= until-first-auth`; nil when no class is involved.
  public var expected: String?
  /// What the item has, for example `none (own)`; nil when no class is involved.
  public var actual: String?

  /// Creates a finding for the item at `pathBytes` (relative to the audited root), whose path inside
  /// its container starts at `containerPathOffset`.
  public init(
    ruleID: String, level: AuditLevel, container: String, pathBytes: [UInt8], containerPathOffset: Int = 0,
    message: String, expected: String? = nil, actual: String? = nil
  ) {
    self.ruleID = ruleID
    self.level = level
    self.container = container
    self.pathBytes = pathBytes
    self.containerPathOffset = min(containerPathOffset, pathBytes.count)
    self.message = message
    self.expected = expected
    self.actual = actual
  }

  /// The item's path relative to the audited root, with bytes that are not printable UTF-8 escaped as
  /// `\xNN`; `.` for the root itself. Computed on demand: most findings are never shown as text.
  public var path: String { DisplayPath.relative(pathBytes[...]) }

  /// The item's path relative to its container root, escaped the same way.
  public var containerPath: String { DisplayPath.relative(pathBytes[containerPathOffset...]) }

  /// A fingerprint that stays the same across runs and machines while the rule and item do (SARIF `partialFingerprints`).
  public var fingerprint: String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in Array(ruleID.utf8) + [0] + Array(container.utf8) + [0] + pathBytes[containerPathOffset...] {
      hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }
    let hex = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
  }
}

/// A rule as reports describe it: a policy rule or one of protfs's built-in checks.
public struct AuditRuleDescription: Sendable, Equatable {
  /// The stable id.
  public var id: String
  /// A readable name (SARIF `name`): kebab case for a built-in check (`symlink-leaves-container`),
  /// `policy/POLICY/ID` for a policy rule (`policy/default/DP004`).
  public var name: String
  /// The level of its findings.
  public var level: AuditLevel
  /// One sentence saying what it checks.
  public var summary: String
  /// Why it matters and how to fix a finding.
  public var help: String
  /// Where it is defined: `policy-file:line`, or `built-in`.
  public var origin: String
  /// How its findings rank as security findings (CWE, MASVS, MASTG, security severity).
  public var security: AuditRuleSecurity

  /// Creates a description.
  public init(
    id: String, name: String, level: AuditLevel, summary: String, help: String, origin: String,
    security: AuditRuleSecurity
  ) {
    self.id = id
    self.name = name
    self.level = level
    self.summary = summary
    self.help = help
    self.origin = origin
    self.security = security
  }

  /// The rule's documentation in Markdown: SARIF's `help.markdown`, and its section of
  /// docs/audit-rules.md. Prose is wrapped at 100 columns; every link is to CWE's or OWASP's site.
  public var markdown: String {
    var lines = [
      "- Level: \(level.rawValue)",
      "- Security severity: \(security.severity) (\(security.rating))",
      "- Precision: \(security.precision.rawValue)",
    ]
    let cwe = security.cwe.map { "[CWE-\($0)](https://cwe.mitre.org/data/definitions/\($0).html)" }
    let masvs = security.masvs.map { "[\($0)](https://mas.owasp.org/MASVS/controls/\($0)/)" }
    lines.append("- CWE: " + (cwe.isEmpty ? "none" : cwe.joined(separator: ", ")))
    lines.append("- MASVS: " + (masvs.isEmpty ? "none" : masvs.joined(separator: ", ")))
    lines.append("- MASTG: " + (security.mastg.isEmpty ? "none" : security.mastg.joined(separator: ", ")))
    lines.append("- Tags: " + security.tags.map { "`\($0)`" }.joined(separator: ", "))
    lines.append("")
    lines.append(Self.wrap("**What it checks.** \(summary)", width: 100))
    lines.append("")
    lines.append(Self.wrap("**Why it matters, and the fix.** \(help)", width: 100))
    return lines.joined(separator: "\n") + "\n"
  }

  /// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole).
  package static func wrap(_ text: String, width: Int) -> String {
    var lines: [String] = []
    var line = ""
    for word in text.split(separator: " ", omittingEmptySubsequences: true) {
      if !line.isEmpty && line.count + 1 + word.count > width {
        lines.append(line)
        line = ""
      }
      line += (line.isEmpty ? "" : " ") + word
    }
    if !line.isEmpty { lines.append(line) }
    return lines.joined(separator: "\n")
  }
}

/// The checks protfs runs besides policy rules. Their ids are stable: CI baselines refer to them.
public enum BuiltInCheck: String, Sendable, CaseIterable {
  /// `user.protfs.class` (or the container's default) holds a value that is not a protection class.
  case corruptClass = "PFS001"
  /// The device is unlocked but the item still carries a lock's saved mode, or its bits are stripped.
  case lockedOut = "PFS002"
  /// A complete or unless-open file is readable by its group or by others.
  case protectedFileReadableByOthers = "PFS003"
  /// A symbolic link resolves outside its container.
  case symlinkLeavesContainer = "PFS004"
  /// A background-download temp file that no download task owns.
  case orphanTemporaryDownload = "PFS005"
  /// The item has no class of its own and inherits one.
  case noOwnClass = "PFS006"
  /// The container's stored default class differs from the entitlements' default.
  case defaultClassMismatch = "PFS007"
  /// Part of the tree could not be read, so the audit is incomplete.
  case unreadable = "PFS008"
  /// A file name that is not valid UTF-8.
  case nonUTF8Name = "PFS009"
  /// A symbolic link that loops.
  case symlinkLoop = "PFS010"
  /// A file with more than one link: a lock leaves it unchanged, since a link may be outside the device.
  case hardLinked = "PFS011"
  /// A setuid or setgid file inside a container.
  case setID = "PFS012"
  /// An entry of a device's `Containers/` that is not a container.
  case notAContainer = "PFS013"
  /// nsurlsessiond's Downloads directory of the app is missing, and will be made with a class that
  /// fails the background downloads started or running while the device is locked.
  case predictedDownloadFailure = "PFS014"
  /// A directory the system makes again when missing (`tmp`, `Library/Caches`) will be made with a
  /// class that fails what is written there while the device is locked.
  case predictedTemporaryDirectoryClass = "PFS015"
  /// The app (`audit --app`) downloads in the background but its Downloads directory is not class none.
  case appDownloadsNotClassNone = "PFS016"
  /// The app's background-task declarations disagree (`audit --app`): a mode without identifiers,
  /// or identifiers without a mode.
  case appTaskDeclaration = "PFS017"

  /// The level of its findings.
  public var level: AuditLevel {
    switch self {
    case .corruptClass, .lockedOut, .symlinkLeavesContainer, .unreadable, .predictedDownloadFailure: .error
    case .protectedFileReadableByOthers, .orphanTemporaryDownload, .defaultClassMismatch, .nonUTF8Name, .symlinkLoop,
      .hardLinked, .setID, .notAContainer, .predictedTemporaryDirectoryClass, .appDownloadsNotClassNone,
      .appTaskDeclaration:
      .warning
    case .noOwnClass: .note
    }
  }

  /// How reports describe the check.
  public var description: AuditRuleDescription {
    let (name, summary, help): (String, String, String) =
      switch self {
      case .corruptClass:
        (
          "corrupt-class", "The protection class attribute holds a value that is not a protection class.",
          "user.protfs.class must hold one of Apple's raw values (for example NSFileProtectionComplete). Give the item a valid class, or remove the attribute so that it inherits one."
        )
      case .lockedOut:
        (
          "locked-out-while-unlocked", "The item is still locked out although the device is unlocked.",
          "A lock removed the item's permission bits (saving them in user.protfs.saved-mode) and the unlock did not put them back, so the app cannot read it. Unlocking the device restores the saved modes."
        )
      case .protectedFileReadableByOthers:
        (
          "protected-file-readable-by-others",
          "A complete or unless-open file is readable by its group or others.",
          "Classes complete and complete-unless-open protect data the app considers sensitive; permission bits that let other users read it defeat that on a shared system. Remove the group and other read bits (chmod go-r)."
        )
      case .symlinkLeavesContainer:
        (
          "symlink-leaves-container", "A symbolic link points outside its container.",
          "An app's container is its sandbox: a link out of it reaches data whose class the app does not control. Replace the link with a copy or point it inside the container."
        )
      case .orphanTemporaryDownload:
        (
          "orphan-temporary-download", "A background-download temp file that no download task owns.",
          "nsurlsessiond removes CFNetworkDownload_*.tmp files when their task ends; one no task owns is left over from a crash and only wastes space. Delete it."
        )
      case .noOwnClass:
        (
          "no-own-class", "The item has no protection class of its own.",
          "On iOS every file gets a class when it is created. An item without user.protfs.class was created outside protfs and inherits its directory's class; give it a class of its own if that is not what the app would do."
        )
      case .defaultClassMismatch:
        (
          "default-class-mismatch", "The container's default class differs from the entitlements.",
          "The com.apple.developer.default-data-protection entitlement sets the class new files get; the container was created with another default. Create the container again with the entitlements, or give it their default class."
        )
      case .unreadable:
        (
          "unreadable", "Part of the tree could not be read, so the audit is incomplete.",
          "The audit must read every directory and every item's attributes. Run it as a user who can read the whole tree (and with the device unlocked)."
        )
      case .nonUTF8Name:
        (
          "non-utf8-name", "A file name is not valid UTF-8.",
          "iOS file names are UTF-8 (APFS requires it); a name that is not cannot come from an app. Rename the item."
        )
      case .symlinkLoop:
        (
          "symlink-loop", "A symbolic link loops.",
          "Resolving the link never ends (ELOOP), so any app that opens it fails. Remove or fix the link."
        )
      case .hardLinked:
        (
          "hard-linked-file", "A file has more than one hard link.",
          "A link may be outside the device, so a lock leaves such a file unchanged (its class is not enforced) rather than change an inode outside the device. iOS apps cannot make hard links across containers; replace the link with a copy (cp, then mv over it)."
        )
      case .setID:
        (
          "setid-file", "A file inside a container is setuid or setgid.",
          "An app's container holds data, not programs that run with another identity; a setuid or setgid file there is planted or a mistake, and whoever can run it gains its owner's or group's rights. Remove the bits (chmod ug-s)."
        )
      case .notAContainer:
        (
          "not-a-container", "An entry of Containers/ is not a container.",
          "A container is a directory directly inside Containers/ named by a valid bundle identifier. Any other entry has no default class, caches or download tasks, and no app owns it (a lock still protects what is in it). Rename it to its app's bundle identifier, or move it out of the device."
        )
      case .predictedDownloadFailure:
        (
          "predicted-download-failure",
          "The app's background-download directory will be made with a class that fails downloads while locked.",
          "nsurlsessiond makes Library/Caches/com.apple.nsurlsessiond/Downloads/BUNDLE-ID at the app's first background download, with the class its parent hands down, and writes every download's temp file there. A class stronger than until-first-auth makes a download that starts or runs while the device is locked fail with EPERM (Operation not permitted). Make the directory now with class none: protfs init-cache BUNDLE-ID."
        )
      case .predictedTemporaryDirectoryClass:
        (
          "predicted-directory-class",
          "A directory the system makes again when missing will get a class that fails writes while locked.",
          "tmp and Library/Caches are made again when missing, with the class their parent hands down. A class stronger than until-first-auth makes what the app or the system writes there while the device is locked fail with EPERM: caches of a background fetch, the partial file a cancelled download keeps for its resume data. Create the directory with until-first-auth or none (protfs set-class), or create the container with a weaker default class."
        )
      case .appDownloadsNotClassNone:
        (
          "app-downloads-not-class-none",
          "The app downloads in the background, but its Downloads directory is not class none.",
          "An app whose UIBackgroundModes has fetch, processing or remote-notification downloads while the device may be locked, even before the first unlock after a restart, when only class none is readable and writable. nsurlsessiond writes its downloads in Library/Caches/com.apple.nsurlsessiond/Downloads/BUNDLE-ID; any other class there fails them with EPERM. Create the directory with class none: protfs init-cache BUNDLE-ID."
        )
      case .appTaskDeclaration:
        (
          "app-task-declaration",
          "The app's background-task declarations disagree.",
          "BGTaskScheduler runs a BGProcessingTaskRequest only for an identifier in BGTaskSchedulerPermittedIdentifiers of an app whose UIBackgroundModes has processing (fetch for a BGAppRefreshTaskRequest); otherwise submit fails with notPermitted. Add the missing identifiers or modes to the app's Info.plist."
        )
      }
    return AuditRuleDescription(
      id: rawValue, name: name, level: level, summary: summary, help: help, origin: "built-in", security: security)
  }

  /// How its findings rank as security findings, and what they stand for (docs/audit-rules.md
  /// gives the reasons). A new check does not compile until it says.
  public var security: AuditRuleSecurity {
    let storage = ["MASVS-STORAGE-1"]
    return switch self {
    // Transitions treat a class they cannot read as complete: the data is locked away, not exposed.
    case .corruptClass: AuditRuleSecurity(severityTenths: 50, cwe: [665], masvs: storage, precision: .veryHigh)
    // A saved mode an interrupted unlock left behind: the app cannot read its own data.
    case .lockedOut: AuditRuleSecurity(severityTenths: 50, cwe: [459], masvs: storage, precision: .veryHigh)
    // The app's most sensitive files readable by another local account.
    case .protectedFileReadableByOthers:
      AuditRuleSecurity(severityTenths: 65, cwe: [732], masvs: storage, precision: .veryHigh)
    // Reads and writes through the link reach data whose class the app does not control.
    case .symlinkLeavesContainer:
      AuditRuleSecurity(severityTenths: 70, cwe: [59], masvs: storage, precision: .veryHigh)
    // A partial download outlives its task: data kept longer than anyone meant.
    case .orphanTemporaryDownload: AuditRuleSecurity(severityTenths: 30, cwe: [459], masvs: storage)
    // Often deliberate (a file copied in by a tool): a hint.
    case .noOwnClass: AuditRuleSecurity(severityTenths: 20, cwe: [665], masvs: storage, precision: .medium)
    // New files get another class than the app declared.
    case .defaultClassMismatch: AuditRuleSecurity(severityTenths: 55, cwe: [276], masvs: storage)
    // A limit of the audit, not a weakness of the app: no CWE; what it could not read is unchecked.
    case .unreadable: AuditRuleSecurity(severityTenths: 40, precision: .veryHigh)
    // No app makes such a name: planted, and tools that take names as UTF-8 mishandle it.
    case .nonUTF8Name: AuditRuleSecurity(severityTenths: 20, cwe: [176], precision: .veryHigh)
    // Every open fails: availability only.
    case .symlinkLoop: AuditRuleSecurity(severityTenths: 30, cwe: [59], precision: .veryHigh)
    // A lock leaves the file unchanged, so its class is not enforced.
    case .hardLinked: AuditRuleSecurity(severityTenths: 55, cwe: [62], masvs: storage, precision: .veryHigh)
    // Whoever runs it gains its owner's or group's rights.
    case .setID: AuditRuleSecurity(severityTenths: 60, cwe: [732], precision: .veryHigh)
    // Data no app owns, with no container default class.
    case .notAContainer: AuditRuleSecurity(severityTenths: 30, masvs: storage)
    // Availability, as DP005's: the first background download while locked will fail; predicted from
    // the classes, so as precise as they are.
    case .predictedDownloadFailure: AuditRuleSecurity(severityTenths: 55, cwe: [665], precision: .high)
    // Availability too, of what runs there while locked, and only once the directory is made again.
    case .predictedTemporaryDirectoryClass: AuditRuleSecurity(severityTenths: 35, cwe: [665], precision: .medium)
    // Availability again, before the first unlock only: the class the app needs there is none.
    case .appDownloadsNotClassNone: AuditRuleSecurity(severityTenths: 40, cwe: [665], precision: .high)
    // A declaration mistake: work the app schedules never runs. Not a weakness of its data.
    case .appTaskDeclaration: AuditRuleSecurity(severityTenths: 20, precision: .veryHigh)
    }
  }

  /// Whether the audit runs this check on `unit`: a tree given on its own is no entry of a
  /// device's `Containers/`, and an entry that is not a directory is checked for that alone.
  public func applies(to unit: AuditTarget.Unit) -> Bool {
    switch self {
    case .notAContainer: unit.entry != nil
    default: unit.isDirectory
    }
  }
}

extension PolicyRule {
  /// How reports describe the rule: `policy/POLICY/ID` as its name and, as its summary, a sentence
  /// saying what it requires of which items (the policy language's own words are its origin's).
  public var description: AuditRuleDescription {
    AuditRuleDescription(
      id: id, name: "policy/\(policyName)/\(id)", level: level, summary: requirementSentence,
      help: "\(message) \(fixSentence)", origin: "\(source):\(line)", security: security)
  }

  /// How to fix a finding, as a sentence: what class to give the item, and with which command.
  public var fixSentence: String {
    let command = "(protfs set-class CLASS PATH, or the app's FileProtectionType when it creates the item)"
    return switch requirement {
    case .equal(let c): "Fix: give the item class \(c.shortName) \(command)."
    case .atLeast(let c): "Fix: give the item class \(c.shortName) or a stronger one \(command)."
    case .atMost(let c): "Fix: give the item class \(c.shortName) or a weaker one \(command)."
    case .notEqual(let c): "Fix: give the item any class but \(c.shortName) \(command)."
    case .oneOf(let set):
      "Fix: give the item one of the classes \(set.sorted().map(\.shortName).joined(separator: ", ")) \(command)."
    case .any: "Nothing to fix: the rule allows any class (it makes an exception to an earlier rule)."
    case .sameAsSiblingWithout(let suffix):
      "Fix: give the item the class of its sibling named without \"\(suffix)\" \(command)."
    }
  }

  /// The name of the policy it comes from: its file name without `.policy` (`default` for the built-in one).
  public var policyName: String {
    let file = source == Policy.builtInSource ? "default.policy" : (source as NSString).lastPathComponent
    let name = file.hasSuffix(".policy") && file.count > 7 ? String(file.dropLast(7)) : file
    return name.isEmpty ? "policy" : name
  }

  /// What the rule requires, as a sentence: `Items matching "Documents/" or "Documents/**" must have
  /// class until-first-auth or stronger.`
  public var requirementSentence: String {
    let quoted = patterns.map { "\"\($0.text)\"" }
    let which = quoted.count <= 1 ? quoted.joined() : quoted.dropLast().joined(separator: ", ") + " or " + quoted.last!
    let what =
      switch requirement {
      case .equal(let c): "must have class \(c.shortName)"
      case .atLeast(let c): "must have class \(c.shortName) or stronger"
      case .atMost(let c): "must have class \(c.shortName) or weaker"
      case .notEqual(let c): "must not have class \(c.shortName)"
      case .oneOf(let set): "must have one of the classes \(set.sorted().map(\.shortName).joined(separator: ", "))"
      case .any: "may have any class"
      case .sameAsSiblingWithout(let suffix): "must have the class of the sibling named without \"\(suffix)\""
      }
    return "Items matching \(which) \(what)."
  }
}

/// Turns raw path bytes into text a report can show.
package enum DisplayPath {
  /// A relative path for reports: escaped, without a trailing `/`, `.` when empty.
  package static func relative(_ bytes: ArraySlice<UInt8>) -> String {
    var bytes = bytes
    if bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
    return bytes.isEmpty ? "." : text(bytes)
  }

  /// UTF-8 as is, except control characters and bytes that are not UTF-8, which become `\xNN`
  /// (`DisplayText.escaping`, as every command shows such names).
  package static func text(_ bytes: some Collection<UInt8>) -> String { DisplayText.escaping(bytes) }

  /// Whether `bytes` are valid UTF-8.
  package static func isValidUTF8(_ bytes: some Collection<UInt8>) -> Bool {
    if bytes.allSatisfy({ $0 < 0x80 }) { return true }
    return String(validating: Array(bytes), as: UTF8.self) != nil
  }
}
