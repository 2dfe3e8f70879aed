import Foundation
import ProtFS
import ProtFSDownloads

/// Shows download progress: a bar per active task and a total on a terminal, JSON lines for
/// machines, or nothing.
///
/// `@unchecked Sendable`: every mutable property is read and written only while `lock` is held.
package final class ProgressPrinter: @unchecked Sendable {
  private let lock = NSLock()
  private let mode: String
  private var names: [Int64: String] = [:]
  private var order: [Int64] = []
  private var written: [Int64: Int64] = [:]
  private var expected: [Int64: Int64] = [:]
  private var states: [Int64: String] = [:]
  private var linesDrawn = 0
  private var lastDraw = Date.distantPast
  private let started = Date()
  /// How a failure's remedy spells the commands it suggests.
  private let spelling: CommandSpelling
  /// The encoder of `--progress json`'s lines.
  private let encoder = JSONOutput.lineEncoder()

  /// A printer in `mode` (auto, bar, json or none) whose failures suggest commands spelled by `spelling`.
  package init(mode: String, spelling: CommandSpelling) {
    self.spelling = spelling
    switch mode {
    case "auto": self.mode = Console.stderrIsTerminal ? "bar" : "none"
    default: self.mode = mode
    }
  }

  /// Whether nothing is shown (`none`, or `auto` off a terminal).
  package var isSilent: Bool { mode == "none" }

  package func begin(_ tasks: [DownloadTask]) {
    guard !isSilent else { return }
    lock.withLock {
      for task in tasks {
        order.append(task.id)
        // The server's name for the file: escaped, as the bars go to the terminal as they are.
        names[task.id] = TerminalText.escaped(
          task.url.lastPathComponent.isEmpty ? task.url.absoluteString : task.url.lastPathComponent)
        written[task.id] = task.countOfBytesReceived
        expected[task.id] = task.countOfBytesExpectedToReceive
      }
    }
  }

  package func handle(_ event: DownloadEvent) {
    lock.withLock {
      switch event {
      case .progress(let id, let bytes, let total):
        written[id] = bytes
        expected[id] = total
        if mode == "json" {
          emit(ProgressLine(event: "progress", task: id, written: bytes, expected: total))
        }
      case .completed(let id, let location):
        states[id] = "done"
        if mode == "json" { emit(ProgressLine(event: "completed", task: id, location: location.path)) }
      case .waitingForUnlock(let id, let temporary):
        states[id] = "waiting for unlock"
        if mode == "json" { emit(ProgressLine(event: "waitingForUnlock", task: id, temporaryLocation: temporary.path)) }
      case .failed(let id, let error):
        states[id] = "failed"
        if mode == "json" {
          emit(ProgressLine(event: "failed", task: id, error: error.commandLineDescription(spelling)))
        }
      case .suspended(let id):
        states[id] = "suspended"
        if mode == "json" { emit(ProgressLine(event: "suspended", task: id)) }
      case .pausedForLock(let id):
        states[id] = "paused (device locked)"
        if mode == "json" { emit(ProgressLine(event: "pausedForLock", task: id)) }
      case .receivedResponse(let id, let status, let body):
        if mode == "json" { emit(ProgressLine(event: "response", task: id, status: status, bytes: body.count)) }
      case .finishedDownloading(let id, let temporary):
        if mode == "json" {
          emit(ProgressLine(event: "finishedDownloading", task: id, temporaryLocation: temporary.path))
        }
      }
      if mode == "bar", Date().timeIntervalSince(lastDraw) > 0.1 { draw() }
    }
  }

  package func finish() {
    lock.withLock { if mode == "bar" { draw() } }
  }

  /// Writes one JSON line straight to the descriptor: the events come from the session's thread,
  /// while the command's own output waits for the transfers to settle.
  private func emit(_ line: ProgressLine) {
    guard let data = try? encoder.encode(line) else { return }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
  }

  /// Redraws the bars in place on stderr.
  private func draw() {
    lastDraw = Date()
    var lines: [String] = []
    var totalWritten: Int64 = 0
    var totalExpected: Int64 = 0
    let elapsed = max(Date().timeIntervalSince(started), 0.001)
    for id in order {
      let done = written[id] ?? 0
      let total = expected[id] ?? -1
      // Saturating: a server may announce any length up to Int64.max, and two such would overflow.
      totalWritten = Self.sum(totalWritten, done)
      totalExpected = Self.sum(totalExpected, max(total, 0))
      if let state = states[id], state == "done" || state == "failed" { continue }
      lines.append(bar(names[id] ?? "?", done, total, elapsed, states[id]))
    }
    lines.append(bar("total", totalWritten, totalExpected > 0 ? totalExpected : -1, elapsed, nil))
    var text = linesDrawn > 0 ? "\u{1B}[\(linesDrawn)A" : ""
    for line in lines { text += "\u{1B}[2K" + line + "\n" }
    if linesDrawn > lines.count { text += String(repeating: "\u{1B}[2K\n", count: linesDrawn - lines.count) }
    linesDrawn = max(lines.count, linesDrawn)
    FileHandle.standardError.write(Data(text.utf8))
  }

  private static func sum(_ a: Int64, _ b: Int64) -> Int64 {
    let (value, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : value
  }

  /// `value` as a whole number, 0 when it is not finite, clamped to what an Int64 holds (a rate or
  /// an ETA from a server announcing an absurd length must not trap the conversion).
  private static func whole(_ value: Double) -> Int64 {
    guard value.isFinite else { return 0 }
    return value >= 9.2e18 ? .max : value <= -9.2e18 ? .min : Int64(value)
  }

  private func bar(_ name: String, _ done: Int64, _ total: Int64, _ elapsed: TimeInterval, _ state: String?) -> String {
    let rate = Double(done) / elapsed
    let label = String(name.prefix(24)).padding(toLength: 24, withPad: " ", startingAt: 0)
    let size = ByteSize.format(done)
    if total <= 0 { return "\(label) \(size)  \(ByteSize.format(Self.whole(rate)))/s \(state ?? "")" }
    let fraction = max(0, min(1, Double(done) / Double(total)))
    let width = 24
    let filled = Int(fraction * Double(width))
    let eta = rate > 0 ? Self.whole((Double(total) - Double(done)) / rate) : 0
    let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
    return
      "\(label) [\(bar)] \(String(format: "%3.0f%%", fraction * 100)) \(size)/\(ByteSize.format(total)) \(ByteSize.format(Self.whole(rate)))/s ETA \(eta)s \(state ?? "")"
  }
}

/// One line of `--progress json`: the event, the task, and the fields of that event.
private struct ProgressLine: Encodable {
  var event: String
  var task: Int64
  var written: Int64?
  var expected: Int64?
  var location: String?
  var temporaryLocation: String?
  var error: String?
  var status: Int?
  var bytes: Int?
}
