import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem

/// `download --detach`: the tasks are recorded here, then handed to the session service.
extension DownloadCommand {
  /// `--detach`.
  package static let detach = Option.flag(
    "detach", help: "Hand the tasks to the session service, print their ids and return at once.")

  /// Records the tasks (suspended, released), hands them to the device's session service, starting
  /// it if needed, and prints their ids. When the service cannot take them they stay suspended in
  /// the store, resumable by `protfs tasks resume`, and one error says so.
  static func detach(
    _ invocation: Invocation, configuration: DownloadSessionConfiguration, first: [DownloadRequest],
    next: () -> [DownloadRequest]
  ) throws -> Int32 {
    let session = try DownloadSession(configuration: configuration)
    var ids: [Int64] = []
    var requests = first
    while !requests.isEmpty {
      ids += try session.downloadTasks(with: requests).map(\.id)
      requests = next()
    }
    session.invalidate()
    try handToService(invocation, configuration: configuration, ids: ids)
    return exitCompleted
  }

  /// Hands the recorded tasks `ids` of `configuration`'s session (suspended, released) to the
  /// device's session service, starting it if needed, and prints their ids; when the service cannot
  /// take them they stay suspended in the store and one error says so. `upload --detach` too.
  static func handToService(_ invocation: Invocation, configuration: DownloadSessionConfiguration, ids: [Int64])
    throws
  {
    var settings = SessionConfiguration(identifier: configuration.identifier, bundleID: configuration.bundleID)
    settings.connectionsPerHost = configuration.maximumConnectionsPerHost
    settings.requestTimeout = Double(configuration.requestTimeout.components.seconds)
    settings.resourceTimeout = Double(configuration.resourceTimeout.components.seconds)
    settings.sendsLaunchEvents = false
    do {
      try SessionServiceStarter.ensureRunning(invocation.device)
      try SessionServiceClient.adopt(
        settings, destinationDirectory: configuration.destinationDirectory, resuming: ids,
        socketName: SessionServiceClient.socketName(device: invocation.device))
    } catch {
      let reason = (error as? ProtFSError)?.message ?? "\(error)"
      let list = ids.map(String.init).joined(separator: " ")
      throw ProtFSError(
        .io, "The tasks (\(list)) were not handed to the session service: \(reason)",
        remedy: .advice("they stay suspended; `protfs tasks resume ID` runs one here"))
    }
    for id in ids { Console.out(String(id)) }
  }
}
