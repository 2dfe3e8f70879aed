import Foundation
import ProtFS
import ProtFSSystem

/// The crash report written when the system kills an app, or when it crashes (docs/semantics.md
/// §8).
public struct AppCrashReport: Codable, Sendable, Equatable {
  /// The app.
  public var bundleID: String
  /// When it was killed.
  public var time: Date
  /// `0x8badf00d` ("ate bad food"): the watchdog's reason, as on iOS; for a crash, its exception
  /// type (`EXC_BAD_ACCESS (SIGSEGV)`).
  public var terminationReason: String
  /// Why, in words.
  public var reason: String
  /// The names of the background tasks still open (an empty string for an unnamed one).
  public var openTasks: [String]
  /// The app's process.
  public var pid: Int32
  /// The thread that crashed, as iOS reports it (`Crashed Thread`): 0 for the main thread. Nil
  /// when the app did not say (a program that is not a ProtFSKit app) or said what is not believed.
  public var crashedThread: Int?
  /// That thread's name (the main thread's `com.apple.main-thread`), as the app gave it, escaped.
  public var crashedThreadName: String?

  /// The watchdog's termination reason.
  public static let watchdog = "0x8badf00d"
  /// The termination reason of an app that raised an exception nothing caught, as iOS reports it.
  public static let uncaughtException = "EXC_CRASH (SIGABRT)"

  /// Creates a report (the watchdog's unless `terminationReason` says otherwise).
  public init(
    bundleID: String, time: Date, reason: String, openTasks: [String], pid: Int32,
    terminationReason: String = Self.watchdog, crashedThread: Int? = nil, crashedThreadName: String? = nil
  ) {
    self.bundleID = bundleID
    self.time = time
    self.terminationReason = terminationReason
    self.reason = reason
    self.openTasks = openTasks
    self.pid = pid
    self.crashedThread = crashedThread
    self.crashedThreadName = crashedThreadName
  }

  /// The exception type iOS reports for a crash by `signal` (`EXC_BAD_ACCESS (SIGSEGV)`), nil for
  /// a signal that is no crash (a kill: the user's, the watchdog's, a terminate's).
  public static func exceptionType(signal: Int32) -> String? {
    switch signal {
    case SIGSEGV: "EXC_BAD_ACCESS (SIGSEGV)"
    case SIGBUS: "EXC_BAD_ACCESS (SIGBUS)"
    case SIGILL: "EXC_BAD_INSTRUCTION (SIGILL)"
    case SIGTRAP: "EXC_BREAKPOINT (SIGTRAP)"
    case SIGABRT: "EXC_CRASH (SIGABRT)"
    case SIGFPE: "EXC_ARITHMETIC (SIGFPE)"
    default: nil
    }
  }

  /// iOS's termination reason of a crash by `signal`, in words: `Namespace SIGNAL, Code 11,
  /// Segmentation fault: 11`.
  public static func signalReason(_ signal: Int32) -> String {
    let words =
      switch signal {
      case SIGSEGV: "Segmentation fault"
      case SIGBUS: "Bus error"
      case SIGILL: "Illegal instruction"
      case SIGTRAP: "Trace/BPT trap"
      case SIGABRT: "Abort trap"
      case SIGFPE: "Floating point exception"
      default: "Signal"
      }
    return "Namespace SIGNAL, Code \(signal), \(words): \(signal)"
  }

  /// The crashed thread a crash by `signal` is reported with, from the `records` the app sent (its
  /// claims, believed no further than this): the newest for that signal whose thread is a number a
  /// process can have, with its name escaped; nil when there is none.
  package static func crashedThread(in records: [CrashRecord], signal: Int32) -> (number: Int, name: String?)? {
    guard let record = records.last(where: { $0.signal == signal }), (0..<threadLimit).contains(record.thread)
    else { return nil }
    let name = TerminalText.escaped(String(decoding: record.name, as: UTF8.self))
    return (Int(record.thread), name.isEmpty ? nil : name)
  }

  /// More threads than any process here has (Linux's own limit is per system, and far higher).
  static let threadLimit: Int32 = 65_536
}
