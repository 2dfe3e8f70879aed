import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem

/// A transfer task as `download --json`, `upload --json` and `unlock --json` print it once it
/// settled: the keys `tasks --json` gives the same things, and its error in the command line's words.
struct TaskOutcome: Encodable {
  /// The task's number, as `protfs tasks` shows it.
  var id: Int64
  /// download or upload.
  var kind: TaskKind
  /// The URL.
  var url: String
  /// completed, failed or waitingForUnlock.
  var state: DownloadState
  /// A download's destination file (for a task waiting for unlock: where it goes).
  var destinationPath: String?
  /// The name another download of the same run already had, when this file got another one.
  var renamedFrom: String?
  /// An upload's HTTP status.
  var responseStatus: Int?
  /// Why the task failed, with its remedy.
  var error: String?

  /// The outcome of `task`, which settled in `state`; its error is worded by `spelling`.
  init(_ task: DownloadTask, state: DownloadState, spelling: CommandSpelling) {
    let record = task.record
    id = task.id
    kind = record.kind
    url = task.url.absoluteString
    self.state = state
    destinationPath = record.kind == .download ? record.destinationPath : nil
    renamedFrom = task.renamedFrom
    responseStatus = task.responseStatus
    if state == .failed {
      error = task.error?.commandLineDescription(spelling) ?? "The task did not finish."
    }
  }

  /// The outcome a task's stored `record` tells.
  init(_ record: DownloadTaskRecord, spelling: CommandSpelling) {
    id = record.id
    kind = record.kind
    url = record.url
    state = record.state
    destinationPath = record.kind == .download ? record.destinationPath : nil
    responseStatus = record.upload?.responseStatus
    if record.state == .failed {
      error = record.commandLineErrorText(spelling) ?? "The task failed."
    }
  }
}

/// A task handed to the session service, as `download --detach --json` and `upload --detach
/// --json` print it: one JSON line per task, as the service takes it.
struct HandedOverTask: Encodable {
  /// The task's number, for `protfs tasks wait`.
  var id: Int64
  /// download or upload.
  var kind: TaskKind
  /// The session it belongs to.
  var sessionIdentifier: String
}
