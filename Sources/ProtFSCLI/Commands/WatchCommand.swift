import Foundation
import ProtFS

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
    Console.err("Watching \(device.root) (\(state.lockState)); press Ctrl-C to stop.")
    let stop = DispatchSemaphore(value: 0)
    var sources: [any DispatchSourceSignal] = []
    for signalNumber in [SIGINT, SIGTERM] {
      signal(signalNumber, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
      source.setEventHandler { stop.signal() }
      source.resume()
      sources.append(source)
    }
    let printer = Task {
      for await event in events { try? Console.jsonLine(event) }
      stop.signal()
    }
    stop.wait()
    printer.cancel()
    _ = sources
    return 0
  }
}
