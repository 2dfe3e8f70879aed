/// The task store tells the cache manager which temp files belong to which tasks.
extension DownloadStore: DownloadTaskDirectory {
  /// The tasks of every session of `bundleID`.
  public func tasks(for bundleID: BundleID) throws(ProtFSError) -> [AttachedTask] {
    let sessions = try sessions().filter { $0.bundleID == bundleID.rawValue }.map(\.identifier)
    var result: [AttachedTask] = []
    for session in sessions {
      for record in try tasks(session: session) {
        let hasValidator = record.entityTag != nil || record.lastModified != nil
        result.append(
          AttachedTask(
            id: String(record.id), session: session, state: record.state.rawValue, url: record.url,
            bytesReceived: record.bytesReceived, temporaryFileName: record.temporaryFileName,
            isRunning: record.state == .running || record.state == .canceling,
            isResumable: record.temporaryFileName != nil
              && (record.state == .waitingForUnlock || hasValidator)))
      }
    }
    return result
  }
}
