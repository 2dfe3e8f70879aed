import Foundation
import ProtFS
import ProtFSSystem

/// What the supervisor does on its queue: the lifecycle's effects carried out, the app's end, its
/// record and crash report written, its events sent.
extension AppSupervisor {
  /// Carries out what a change of the app's life requires, in order.
  func carryOut(_ effects: [AppLifecycle.Effect]) {
    for effect in effects {
      switch effect {
      case .send(let line): send(line)
      case .suspend: processes.suspend()
      case .resume: processes.resume()
      case .kill: processes.kill()
      case .writeCrashReport(let report):
        // The record names the report (saved next): its path is `app status`'s and the launch's.
        var path: String?
        do {
          path = try store.write(report)
        } catch {
          onProblem("the crash report of \(bundleID) could not be written: \(error.message)")
        }
        lifecycle.crashReportWritten(at: path?.isEmpty == false ? path : nil)
      case .save: save()
      case .schedule(let timer, let deadline):
        queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: UInt64(max(0, deadline) * 1e9))) { [self] in
          carryOut(lifecycle.fire(timer, at: .now))
        }
      }
    }
  }

  func finish(_ end: Kernel.ChildEnd) {
    if prewarm {
      do {
        try store.setPrewarmSocket(bundleID, nil)
      } catch {
        onProblem("the launch socket of the prewarmed \(bundleID) could not be forgotten: \(error.message)")
      }
    }
    // Whatever the app left goes with it, in its cgroup or its group.
    processes.end()
    status = end.status
    // Read once nothing of the app is left to write: what it says of its crash, believed only as
    // far as AppCrashReport.crashedThread goes.
    let crashedThread = end.signal.flatMap { AppCrashReport.crashedThread(in: crashRecords(), signal: $0) }
    carryOut(lifecycle.exited(end.status, signal: end.signal, crashedThread: crashedThread, at: .now))
    events?.close()
    events = nil
    ControlSocket.shutDown(listener)
    exited.signal()
  }

  /// Writes the record; one not written is reported, as the system's commands and the session
  /// service then see the app as it was before.
  func save() {
    do {
      try store.write(lifecycle.record)
    } catch {
      onProblem("the record of \(bundleID) could not be written: \(error.message)")
    }
  }

  /// The most of the app's writes on its events socket read for its crash record: more than the
  /// socket holds (a writer's buffer, some 200 KiB), so the newest record is among them.
  static let crashRecordBound = 256 * 1024

  /// The crash records (`CrashRecord`) among what the app wrote on its events socket, read
  /// without blocking and within `crashRecordBound`; anything else it wrote there is skipped.
  func crashRecords() -> [CrashRecord] {
    guard let events else { return [] }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16 * 1024)
    while bytes.count < Self.crashRecordBound {
      let wanted = min(chunk.count, Self.crashRecordBound - bytes.count)
      guard case .success(let count) = Kernel.read(events.rawValue, &chunk, wanted), count > 0
      else { break }
      bytes += chunk[..<count]
    }
    return CrashRecord.records(in: bytes)
  }

  /// Writes `line` on the app's events pipe.
  func send(_ line: AppLifecycle.EventLine) {
    guard let events else { return }
    var text = #"{"event":""# + line.event.rawValue + "\""
    if let number = line.number { text += #","number":\#(number)"# }
    if let task = line.task {
      text += #","task":\#(task.id),"name":\#(Self.jsonString(task.name))"#
    }
    if let session = line.session { text += #","session":\#(Self.jsonString(session))"# }
    if let identifier = line.identifier { text += #","identifier":\#(Self.jsonString(identifier))"# }
    if let type = line.taskType { text += #","type":"\#(type.rawValue)""# }
    if let coordinate = line.coordinate {
      text += #","latitude":\#(coordinate.latitude),"longitude":\#(coordinate.longitude)"#
    }
    // Checked JSON text (RemoteNotification), written as it is.
    if let userInfo = line.userInfo { text += #","userInfo":"# + userInfo }
    text += "}\n"
    // Non-blocking: an app that never reads loses events rather than stalling its supervisor.
    _ = try? AtomicFile.writeAll(events.rawValue, Array(text.utf8), path: "events")
  }

  /// `text` as a JSON string.
  static func jsonString(_ text: String) -> String {
    (try? JSONEncoder().encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
  }

  /// Runs a hook: its error becomes the reply's.
  static func hook(_ body: () throws(ProtFSError) -> Void) -> AppReply {
    do {
      try body()
      return .ok()
    } catch {
      return .refused(error)
    }
  }
}
