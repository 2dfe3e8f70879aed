import Foundation
import ProtFSSystem

/// State changes to make at set times while `protfs exec` runs a program, for example
/// `lock@2s,unlock@5s`; while an app runs, its own changes too (`background@1s,foreground@5s`).
public struct LockSchedule: Sendable, Equatable {
  /// What to do at a step.
  public enum Action: String, Sendable, CaseIterable {
    /// `protfs lock`.
    case lock
    /// `protfs lock --inactive`: the CX inactivity expiry.
    case inactive
    /// `protfs unlock`.
    case unlock
    /// `protfs reboot`.
    case reboot
    /// The app goes to the background.
    case background
    /// The app returns to the foreground.
    case foreground
    /// The app is woken for a background fetch.
    case fetch
    /// The app is terminated.
    case terminate
    /// The app receives a silent remote notification (`{"aps":{"content-available":1}}`), as
    /// `protfs app push` sends one.
    case push
    /// The system runs the app's first due BGAppRefreshTask request, as `protfs app refresh` does.
    case refresh
    /// The system runs the app's first due BGProcessingTask request, as `protfs app process` does.
    case process

    /// The payload of a scheduled `push`.
    public static let silentPushPayload = #"{"aps":{"content-available":1}}"#

    /// Whether the step changes an app's state rather than the device's (it needs an app).
    public var isAppAction: Bool {
      switch self {
      case .lock, .inactive, .unlock, .reboot: false
      case .background, .foreground, .fetch, .terminate, .push, .refresh, .process: true
      }
    }
  }

  /// One change and when it happens, in seconds after the program started.
  public struct Step: Sendable, Equatable {
    /// The change.
    public var action: Action
    /// Seconds after the start.
    public var offset: TimeInterval
    /// Creates a step.
    public init(action: Action, offset: TimeInterval) {
      self.action = action
      self.offset = offset
    }
  }

  /// The steps, earliest first.
  public var steps: [Step]

  /// The latest a step may happen: a week after the start. Anything later is a typo (and a huge
  /// offset would overflow the nanosecond deadline it becomes).
  public static let maximumOffset: TimeInterval = 7 * 86_400
  /// The most steps a schedule may have.
  public static let maximumSteps = 10_000

  /// A schedule of `steps` (sorted by time).
  public init(steps: [Step]) { self.steps = steps.sorted { $0.offset < $1.offset } }

  /// Parses `ACTION@TIME[,ACTION@TIME…]`, TIME being a number with `ms`, `s` or `m` (seconds when bare).
  public init(parsing text: String) throws(ProtFSError) {
    // A long schedule is quoted by its start only, so that the message stays one line.
    let shown = text.count > 80 ? text.prefix(77) + "..." : text
    func invalid(_ part: String, _ why: String) -> ProtFSError {
      ProtFSError(
        .invalidArgument, "The schedule '\(shown)' does not parse: \(why).",
        remedy: .advice(
          "write steps such as lock@2s,unlock@5s (actions: \(Action.allCases.map(\.rawValue).joined(separator: ", ")); times in ms, s or m)"
        ))
    }
    var steps: [Step] = []
    let parts = text.split(separator: ",", omittingEmptySubsequences: false)
    guard parts.count <= Self.maximumSteps else {
      throw invalid(text, "it has \(parts.count) steps, more than the \(Self.maximumSteps) a schedule may have")
    }
    for part in parts.map({ $0.trimmingCharacters(in: .whitespaces) }) {
      let pieces = part.split(separator: "@", omittingEmptySubsequences: false)
      guard pieces.count == 2 else { throw invalid(part, "'\(part)' is not ACTION@TIME") }
      guard let action = Action(rawValue: pieces[0].lowercased()) else {
        throw invalid(part, "'\(pieces[0])' is not an action")
      }
      let time = pieces[1].lowercased()
      let (number, scale): (Substring, Double) =
        time.hasSuffix("ms")
        ? (time.dropLast(2), 0.001)
        : time.hasSuffix("s")
          ? (time.dropLast(), 1) : time.hasSuffix("m") ? (time.dropLast(), 60) : (Substring(time), 1)
      guard let value = Double(number), value.isFinite, value >= 0 else {
        throw invalid(part, "'\(pieces[1])' is not a time")
      }
      guard value * scale <= Self.maximumOffset else {
        throw invalid(part, "'\(pieces[1])' is later than 7 days after the start")
      }
      steps.append(Step(action: action, offset: value * scale))
    }
    self.steps = steps.sorted { $0.offset < $1.offset }
  }
}
