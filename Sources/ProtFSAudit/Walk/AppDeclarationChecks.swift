import Foundation
import ProtFS
import ProtFSSystem

/// What an app declares (`audit --app`), to check its container against: read from its package by
/// the caller, which also words what is wrong with its background-task declarations.
public struct AuditedApp: Sendable, Equatable {
  /// The app's package, as given, for messages.
  public var path: String
  /// Its bundle id: the container the checks apply to.
  public var bundleID: String
  /// Its `UIBackgroundModes` whose work downloads while the device may be locked (`fetch`,
  /// `processing`, `remote-notification`).
  public var downloadingModes: [String]
  /// What is wrong with its background-task declarations, one sentence each (a `processing` mode
  /// without `BGTaskSchedulerPermittedIdentifiers`, identifiers without the mode).
  public var taskDeclarationProblems: [String]

  /// An app at `path` with these declarations.
  public init(path: String, bundleID: String, downloadingModes: [String], taskDeclarationProblems: [String]) {
    self.path = path
    self.bundleID = bundleID
    self.downloadingModes = downloadingModes
    self.taskDeclarationProblems = taskDeclarationProblems
  }
}

extension ContainerWalk {
  /// Checks the container of `configuration.app` against what the app declares: its Downloads
  /// directory must be class none when it downloads in the background (unless `predicted` already
  /// reported that directory), and its background-task declarations must agree.
  func checkAppDeclarations(
    _ setup: inout Worker, root: DirectoryHandle, inheritance: ClassInheritance, predicted: Set<[String]>
  ) {
    guard let app = configuration.app, unit.isContainer, unit.name == app.bundleID,
      let bundleID = try? BundleID(unit.name)
    else { return }
    let downloads = SystemDirectoryPrediction.downloadsPath(bundleID: bundleID.rawValue)
    if !app.downloadingModes.isEmpty, !predicted.contains(downloads),
      let found = setup.directoryClass(downloads, root: root, inheritance: inheritance),
      found.protectionClass != .none
    {
      let has =
        found.exists
        ? "is class \(found.protectionClass.shortName) (from \(found.source))"
        : "does not exist yet and will be made with class \(found.protectionClass.shortName) (from \(found.source))"
      setup.path = Array(downloads.joined(separator: "/").utf8)
      setup.emit(
        .appDownloadsNotClassNone,
        "The app '\(app.path)' downloads in the background (UIBackgroundModes: "
          + "\(app.downloadingModes.joined(separator: ", "))), but its Downloads directory \(has): a download the "
          + "system runs for it before the first unlock after a restart fails with EPERM. "
          + "Create it with class none: protfs init-cache \(bundleID).",
        expected: "none",
        actual: found.exists ? found.protectionClass.shortName : "\(found.protectionClass.shortName) (predicted)")
    }
    setup.path = []
    for problem in app.taskDeclarationProblems {
      setup.emit(.appTaskDeclaration, "The app '\(app.path)': \(problem)")
    }
  }
}
