import ProtFS

/// What an app's declarations mean for its container and its background work: a conclusion the
/// audit can check a container against, and `inspect` prints.
///
/// The library says what follows and why, in words that name no command; a front end words the
/// fix of each `Kind` its own way (the command line names `init-cache`).
package struct AppImplication: Sendable, Equatable, Encodable {
  /// Which conclusion this is: stable names, for scripts and for the audit.
  package enum Kind: String, Sendable, Encodable, CaseIterable {
    /// The app downloads in the background (`downloadingModes`), so nsurlsessiond's Downloads
    /// directory, where its background sessions' downloads land while the device is locked, must be
    /// class none.
    case downloadsNeedClassNone
    /// The default class is complete: what the app, or nsurlsessiond for it, creates while the
    /// device is locked (a finished background download) cannot be written.
    case lockedDownloadsFail
    /// A `processing` (or `fetch`) background mode without `BGTaskSchedulerPermittedIdentifiers`.
    case taskIdentifiersMissing
    /// `BGTaskSchedulerPermittedIdentifiers` without the `fetch` or `processing` background mode.
    case taskModeMissing
    /// The entitlements do not set `com.apple.developer.default-data-protection`.
    case defaultClassUndeclared
    /// The executable has no code signature: its entitlements are unknown.
    case unsigned
  }

  /// How much it matters.
  package enum Level: String, Sendable, Encodable {
    /// Worth knowing; nothing fails because of it.
    case note
    /// Something the app does will fail unless its container or its Info.plist changes.
    case warning
  }

  /// Which conclusion this is.
  package var kind: Kind
  /// How much it matters.
  package var level: Level
  /// The conclusion and its reason, one or two sentences.
  package var message: String

  /// The `UIBackgroundModes` whose work downloads while the device may be locked: a background
  /// fetch, a processing task, a silent remote notification. Other modes (audio, location, VoIP…)
  /// keep the app running but say nothing about downloads.
  package static let downloadingModes: Set<String> = ["fetch", "processing", "remote-notification"]

  /// The modes of `modes` that download in the background, in their order.
  package static func downloading(_ modes: [String]) -> [String] { modes.filter(downloadingModes.contains) }

  /// What `modes`, `identifiers`, the default class `declared` (nil when the entitlement is
  /// absent) and whether the executable is `signed` imply, in the order of `Kind`.
  package static func of(
    backgroundModes modes: [String], permittedTaskIdentifiers identifiers: [String],
    defaultDataProtection declared: ProtectionClass?, signed: Bool
  ) -> [AppImplication] {
    var found: [AppImplication] = []
    let downloading = downloading(modes)
    if !downloading.isEmpty {
      found.append(
        AppImplication(
          kind: .downloadsNeedClassNone, level: .note,
          message:
            "The app downloads in the background (UIBackgroundModes: \(downloading.joined(separator: ", "))): the downloads its background sessions finish while the device is locked are written to nsurlsessiond's Downloads directory, which must be class none (NSFileProtectionNone)."
        ))
    }
    if declared == .complete {
      found.append(
        AppImplication(
          kind: .lockedDownloadsFail, level: .warning,
          message:
            "The default class is NSFileProtectionComplete: files created while the device is locked cannot be written, and a background download that finishes while it is locked fails (Operation not permitted) unless nsurlsessiond's Downloads directory is class none."
        ))
    }
    found += taskImplications(backgroundModes: modes, permittedTaskIdentifiers: identifiers)
    if !signed {
      found.append(
        AppImplication(
          kind: .unsigned, level: .warning,
          message:
            "The executable has no code signature (LC_CODE_SIGNATURE): its entitlements, and so its default class, are unknown; iOS would not run it."
        ))
    } else if declared == nil {
      found.append(
        AppImplication(
          kind: .defaultClassUndeclared, level: .note,
          message:
            "The entitlements do not set \(Entitlements.defaultDataProtectionKey): new files get \(ProtectionClass.containerDefault.rawValue)."
        ))
    }
    return found
  }

  /// What the background modes `modes` and the task identifiers `identifiers` imply for
  /// BGTaskScheduler.
  private static func taskImplications(backgroundModes modes: [String], permittedTaskIdentifiers identifiers: [String])
    -> [AppImplication]
  {
    var found: [AppImplication] = []
    let schedules = modes.filter { $0 == "fetch" || $0 == "processing" }
    if identifiers.isEmpty, modes.contains("processing") {
      found.append(
        AppImplication(
          kind: .taskIdentifiersMissing, level: .warning,
          message:
            "UIBackgroundModes has processing but BGTaskSchedulerPermittedIdentifiers is empty: BGTaskScheduler refuses every BGProcessingTaskRequest (notPermitted)."
        ))
    } else if identifiers.isEmpty, modes.contains("fetch") {
      found.append(
        AppImplication(
          kind: .taskIdentifiersMissing, level: .note,
          message:
            "UIBackgroundModes has fetch but BGTaskSchedulerPermittedIdentifiers is empty: only the legacy background fetch (application(_:performFetchWithCompletionHandler:)) runs; a BGAppRefreshTaskRequest is refused (notPermitted)."
        ))
    }
    if !identifiers.isEmpty, schedules.isEmpty {
      found.append(
        AppImplication(
          kind: .taskModeMissing, level: .warning,
          message:
            "BGTaskSchedulerPermittedIdentifiers names \(identifiers.joined(separator: ", ")) but UIBackgroundModes has neither fetch nor processing: BGTaskScheduler refuses their requests (notPermitted)."
        ))
    }
    return found
  }
}
