import Foundation
import ProtFS
import ProtFSSystem

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
  /// A regular, non-empty file of a sealed device's container has no key record: plaintext at rest.
  case plaintextInSealedContainer = "PFS018"
  /// A sealed file's key record is damaged, of another class than the file's, or made for another
  /// file.
  case sealedKeyMismatch = "PFS019"

  /// The level of its findings.
  public var level: AuditLevel {
    switch self {
    case .corruptClass, .lockedOut, .symlinkLeavesContainer, .unreadable, .predictedDownloadFailure,
      .plaintextInSealedContainer, .sealedKeyMismatch:
      .error
    case .protectedFileReadableByOthers, .orphanTemporaryDownload, .defaultClassMismatch, .nonUTF8Name, .symlinkLoop,
      .hardLinked, .setID, .notAContainer, .predictedTemporaryDirectoryClass, .appDownloadsNotClassNone,
      .appTaskDeclaration:
      .warning
    case .noOwnClass: .note
    }
  }

  /// How reports describe the check.
  public var description: AuditRuleDescription {
    AuditRuleDescription(
      id: rawValue, name: ruleName, level: level, summary: summary, help: help, origin: "built-in",
      security: security)
  }

  /// The rule's name in reports (SARIF's `name`).
  private var ruleName: String {
    switch self {
    case .corruptClass:
      "corrupt-class"
    case .lockedOut:
      "locked-out-while-unlocked"
    case .protectedFileReadableByOthers:
      "protected-file-readable-by-others"
    case .symlinkLeavesContainer:
      "symlink-leaves-container"
    case .orphanTemporaryDownload:
      "orphan-temporary-download"
    case .noOwnClass:
      "no-own-class"
    case .defaultClassMismatch:
      "default-class-mismatch"
    case .unreadable:
      "unreadable"
    case .nonUTF8Name:
      "non-utf8-name"
    case .symlinkLoop:
      "symlink-loop"
    case .hardLinked:
      "hard-linked-file"
    case .setID:
      "setid-file"
    case .notAContainer:
      "not-a-container"
    case .predictedDownloadFailure:
      "predicted-download-failure"
    case .predictedTemporaryDirectoryClass:
      "predicted-directory-class"
    case .appDownloadsNotClassNone:
      "app-downloads-not-class-none"
    case .appTaskDeclaration:
      "app-task-declaration"
    case .plaintextInSealedContainer:
      "plaintext-in-sealed-container"
    case .sealedKeyMismatch:
      "sealed-key-mismatch"
    }
  }
  /// What a finding says, in one sentence.
  private var summary: String {
    switch self {
    case .corruptClass:
      "The protection class attribute holds a value that is not a protection class."
    case .lockedOut:
      "The item is still locked out although the device is unlocked."
    case .protectedFileReadableByOthers:
      "A complete or unless-open file is readable by its group or others."
    case .symlinkLeavesContainer:
      "A symbolic link points outside its container."
    case .orphanTemporaryDownload:
      "A background-download temp file that no download task owns."
    case .noOwnClass:
      "The item has no protection class of its own."
    case .defaultClassMismatch:
      "The container's default class differs from the entitlements."
    case .unreadable:
      "Part of the tree could not be read, so the audit is incomplete."
    case .nonUTF8Name:
      "A file name is not valid UTF-8."
    case .symlinkLoop:
      "A symbolic link loops."
    case .hardLinked:
      "A file has more than one hard link."
    case .setID:
      "A file inside a container is setuid or setgid."
    case .notAContainer:
      "An entry of Containers/ is not a container."
    case .predictedDownloadFailure:
      "The app's background-download directory will be made with a class that fails downloads while locked."
    case .predictedTemporaryDirectoryClass:
      "A directory the system makes again when missing will get a class that fails writes while locked."
    case .appDownloadsNotClassNone:
      "The app downloads in the background, but its Downloads directory is not class none."
    case .appTaskDeclaration:
      "The app's background-task declarations disagree."
    case .plaintextInSealedContainer:
      "A file in a sealed device's container is not sealed: its contents are plaintext at rest."
    case .sealedKeyMismatch:
      "A sealed file's key record does not match its class or its file."
    }
  }
  /// Why it matters and how to fix it.
  private var help: String {
    switch self {
    case .corruptClass:
      "user.protfs.class must hold one of Apple's raw values (for example NSFileProtectionComplete). Give the item a valid class, or remove the attribute so that it inherits one."
    case .lockedOut:
      "A lock removed the item's permission bits (saving them in user.protfs.saved-mode) and the unlock did not put them back, so the app cannot read it. Unlocking the device restores the saved modes."
    case .protectedFileReadableByOthers:
      "Classes complete and complete-unless-open protect data the app considers sensitive; permission bits that let other users read it defeat that on a shared system. Remove the group and other read bits (chmod go-r)."
    case .symlinkLeavesContainer:
      "An app's container is its sandbox: a link out of it reaches data whose class the app does not control. Replace the link with a copy or point it inside the container."
    case .orphanTemporaryDownload:
      "nsurlsessiond removes CFNetworkDownload_*.tmp files when their task ends; one no task owns is left over from a crash and only wastes space. Delete it."
    case .noOwnClass:
      "On iOS every file gets a class when it is created. An item without user.protfs.class was created outside protfs and inherits its directory's class; give it a class of its own if that is not what the app would do."
    case .defaultClassMismatch:
      "The com.apple.developer.default-data-protection entitlement sets the class new files get; the container was created with another default. Create the container again with the entitlements, or give it their default class."
    case .unreadable:
      "The audit must read every directory and every item's attributes. Run it as a user who can read the whole tree (and with the device unlocked)."
    case .nonUTF8Name:
      "iOS file names are UTF-8 (APFS requires it); a name that is not cannot come from an app. Rename the item."
    case .symlinkLoop:
      "Resolving the link never ends (ELOOP), so any app that opens it fails. Remove or fix the link."
    case .hardLinked:
      "A link may be outside the device, so a lock leaves such a file unchanged (its class is not enforced) rather than change an inode outside the device. iOS apps cannot make hard links across containers; replace the link with a copy (cp, then mv over it)."
    case .setID:
      "An app's container holds data, not programs that run with another identity; a setuid or setgid file there is planted or a mistake, and whoever can run it gains its owner's or group's rights. Remove the bits (chmod ug-s)."
    case .notAContainer:
      "A container is a directory directly inside Containers/ named by a valid bundle identifier. Any other entry has no default class, caches or download tasks, and no app owns it (a lock still protects what is in it). Rename it to its app's bundle identifier, or move it out of the device."
    case .predictedDownloadFailure:
      "nsurlsessiond makes Library/Caches/com.apple.nsurlsessiond/Downloads/BUNDLE-ID at the app's first background download, with the class its parent hands down, and writes every download's temp file there. A class stronger than until-first-auth makes a download that starts or runs while the device is locked fail with EPERM (Operation not permitted). Make the directory now with class none: protfs init-cache BUNDLE-ID."
    case .predictedTemporaryDirectoryClass:
      "tmp and Library/Caches are made again when missing, with the class their parent hands down. A class stronger than until-first-auth makes what the app or the system writes there while the device is locked fail with EPERM: caches of a background fetch, the partial file a cancelled download keeps for its resume data. Create the directory with until-first-auth or none (protfs set-class), or create the container with a weaker default class."
    case .appDownloadsNotClassNone:
      "An app whose UIBackgroundModes has fetch, processing or remote-notification downloads while the device may be locked, even before the first unlock after a restart, when only class none is readable and writable. nsurlsessiond writes its downloads in Library/Caches/com.apple.nsurlsessiond/Downloads/BUNDLE-ID; any other class there fails them with EPERM. Create the directory with class none: protfs init-cache BUNDLE-ID."
    case .plaintextInSealedContainer:
      "On a sealed device every file's contents are encrypted with a key of its own, kept wrapped by its class's key in user.protfs.key. A file without that attribute was written behind the device's mount (by a tool, or a copy into the backing directory); its bytes can be read from the backing file by anyone who reads the disk, root included, even while the device is locked, and the mount refuses to open it (EIO). Move it out of the device, copy it back in through the mount (which seals it), and delete the plaintext copy."
    case .sealedKeyMismatch:
      "A sealed file's key is wrapped with its class's key together with the file's inode number. A record of another class than the file's leaves the contents as available as that class (a record of class D under a class-A file opens while the device is locked); a record that is damaged, copied from another file or changed does not unwrap, and the mount refuses the file (EIO). A class changed behind the mount: set it again with protfs set-class, which rewraps the key. A record that does not unwrap cannot be mended: restore the file from a backup."
    case .appTaskDeclaration:
      "BGTaskScheduler runs a BGProcessingTaskRequest only for an identifier in BGTaskSchedulerPermittedIdentifiers of an app whose UIBackgroundModes has processing (fetch for a BGAppRefreshTaskRequest); otherwise submit fails with notPermitted. Add the missing identifiers or modes to the app's Info.plist."
    }
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
    // The data a class should guard is readable from the disk whatever the lock state.
    case .plaintextInSealedContainer:
      AuditRuleSecurity(severityTenths: 75, cwe: [311], masvs: storage, precision: .veryHigh)
    // A weaker class's key opens the file, or nothing does (tampering, or a class changed behind the mount).
    case .sealedKeyMismatch:
      AuditRuleSecurity(severityTenths: 65, cwe: [311], masvs: storage, precision: .veryHigh)
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
