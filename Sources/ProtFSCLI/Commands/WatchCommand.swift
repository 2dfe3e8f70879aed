import Foundation
import ProtFS
import ProtFSSystem

/// `protfs watch`: one JSON line per protected-data notification, until interrupted.
package enum WatchCommand {
  package static let command = Command(
    name: "watch",
    abstract: "Print protected-data notifications as JSON lines until interrupted.",
    discussion: """
      Prints {"event": "protectedDataWillBecomeUnavailable" | "protectedDataDidBecomeAvailable",
      "state": ..., "time": ...} for every change made by any protfs process, as iOS posts
      UIApplication's notifications. Stops on SIGINT or SIGTERM with status 0.
      """,
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    let events = try device.protectedDataEvents()
    let state = try device.protectionState()
    let stop = DispatchSemaphore(value: 0)
    // Caught before anything is said: from the moment the user is told to press Ctrl-C, it stops
    // the watch with status 0 (an ignored signal whose dispatch source was not yet in place would
    // be lost, and the watch would go on).
    try SignalForwarding.forward([SIGINT, SIGTERM]) { _ in stop.signal() }
    DebugHold.wait("PROTFS_DEBUG_HOLD_WATCH")
    Console.err("Watching \(device.root) (\(state.lockState)); press Ctrl-C to stop.")
    let printer = Task {
      for await event in events { try? Console.jsonLine(event) }
      stop.signal()
    }
    stop.wait()
    printer.cancel()
    return 0
  }
}
