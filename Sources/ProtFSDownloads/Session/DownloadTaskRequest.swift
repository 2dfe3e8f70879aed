/// What another process can ask of a download task through the task store
/// (`protfs tasks cancel|suspend|resume TASK-ID`).
public enum DownloadTaskRequest: String, Sendable, Codable, CaseIterable {
  /// Stop the transfer and delete its temp file.
  case cancel
  /// Stop the transfer, keeping its temp file.
  case suspend
  /// Continue the transfer from its temp file.
  case resume
}
