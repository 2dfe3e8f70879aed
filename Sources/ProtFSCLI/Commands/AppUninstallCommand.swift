import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem

/// `protfs app uninstall BUNDLE-ID`: removes an app and its data, as `simctl uninstall` does.
package enum AppUninstallCommand {
  package static let command = Command(
    name: "uninstall",
    abstract: "Remove an app and its data: its container, bundle, record and background tasks.",
    discussion: """
      Removes the app's container (its data), its bundle (from install --from-app), its record
      (the installed command, its background state) and its log, and the records of its
      background sessions' tasks, as simctl uninstall does. An app that runs is refused: run
      `protfs app terminate BUNDLE-ID` first (simctl terminates it itself; protfs leaves that to
      you, so that no app is ended by an uninstall typed for another). So is one with unfinished
      tasks (`protfs tasks cancel ID`). Crash reports stay. The container is renamed into
      .protfs/trash first, then removed: a kill leaves nothing half there, and the next protfs
      command finishes the removal. A symlink inside is removed, never followed.
      """,
    arguments: [AppCommand.bundleArgument],
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try invocation.bundleID(invocation.required(AppCommand.bundleArgument))
    let device = invocation.device
    try device.requireInitialized()
    let apps = AppStore(device: device)
    let record = try apps.record(bundleID)
    if let record, record.isSupervised {
      throw ExitStatus(
        code: 1,
        message:
          "The app \(bundleID) is running; terminate it first (\(invocation.spelling.command("app terminate \(bundleID)")))."
      )
    }
    let taskCount = try forgetTasks(of: bundleID, on: device, invocation)
    let container = try device.removeItem(Device.containersPath.appending(bundleID.rawValue))
    let bundle = try device.removeItem(
      DevicePath.root.appending(AppBundle.directoryName).appending(bundleID.rawValue + AppBundle.directoryExtension))
    let hadRecord = try apps.removeRecord(bundleID)
    let log = AppInstallCommand.logPath(device, bundleID)
    _ = Kernel.unlink(log)
    guard container || bundle || hadRecord || taskCount > 0 else {
      throw ExitStatus(code: 1, message: "The app \(bundleID) is not installed on the device '\(device.root)'.")
    }
    let removed =
      [
        container ? "its container" : nil, bundle ? "its bundle" : nil, hadRecord ? "its record" : nil,
        taskCount > 0 ? "\(taskCount) task \(taskCount == 1 ? "record" : "records")" : nil,
      ].compactMap { $0 }
    Console.out("Uninstalled \(bundleID): removed \(removed.joined(separator: ", ")).")
    return 0
  }

  /// Forgets the background sessions of `bundleID` on `device` with their tasks, and returns how
  /// many tasks they had; refuses while any is unfinished.
  static func forgetTasks(of bundleID: BundleID, on device: Device, _ invocation: Invocation) throws -> Int {
    guard let store = try TasksCommand.store(device) else { return 0 }
    var taskCount = 0
    let sessions = try store.sessions().filter { $0.bundleID == bundleID.rawValue }.map(\.identifier)
    let unfinished = try store.unfinishedTaskCount(sessions: sessions)
    if unfinished > 0 {
      throw ExitStatus(
        code: 1,
        message:
          "The app \(bundleID) has \(unfinished) unfinished background \(unfinished == 1 ? "task" : "tasks"); "
          + "cancel \(unfinished == 1 ? "it" : "them") first (\(invocation.spelling.command("tasks cancel ID"))), "
          + "or wait until \(unfinished == 1 ? "it finishes" : "they finish").")
    }
    for session in sessions {
      taskCount += try store.tasks(session: session).count
      try store.forgetSession(session)
    }
    return taskCount
  }
}
