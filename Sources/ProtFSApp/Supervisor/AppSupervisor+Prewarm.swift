import Foundation
import ProtFS
import ProtFSSystem

/// A prewarmed app: held before `UIApplicationMain`, frozen, then launched or discarded.
extension AppSupervisor {
  /// Records that the prewarmed app is held before `UIApplicationMain` and that its launch is taken
  /// on the socket `name` (`AppStore.prewarmSocket`).
  public func held(launchSocket name: String) {
    queue.sync {
      do throws(ProtFSError) {
        try store.setPrewarmSocket(bundleID, name)
      } catch {
        onProblem("the launch socket of the prewarmed \(bundleID) could not be recorded: \(error.message)")
      }
    }
  }

  /// Freezes the prewarmed app once it says it is held before `UIApplicationMain`, as iOS suspends
  /// a prewarmed process: none of its processes runs again until `activate` (or it is discarded),
  /// whatever threads or children it started meanwhile.
  public func freezeHeld() {
    queue.sync {
      guard lifecycle.record.state == .prewarmed else { return }
      processes.suspend()
    }
  }

  /// Launches the prewarmed app: hands it `descriptors` (its standard input, output and error) with
  /// an `activate` line on its events socket, and from then on it runs as an app launched by the
  /// user. Throws when the app cannot be handed them (it is gone, or closed its socket): it is
  /// then ended.
  public func activate(standardStreams descriptors: [Int32]) throws(ProtFSError) {
    try queue.sync {
      Result { () throws(ProtFSError) in try handOver(descriptors) }
    }.get()
  }

  /// `activate`'s work, on the queue.
  func handOver(_ descriptors: [Int32]) throws(ProtFSError) {
    guard let events, lifecycle.record.state == .prewarmed else {
      throw ProtFSError(.notFound, "The prewarmed app \(bundleID) is gone.")
    }
    let available = device.isProtectedDataAvailable ? "available" : "unavailable"
    let line = #"{"event":"activate","protectedData":"\#(available)"}"# + "\n"
    processes.resume()
    do {
      try DescriptorPassing.send(Array(line.utf8), descriptors: descriptors, on: events)
    } catch {
      // Not taken: a held app that cannot hear its launch is discarded, never left running.
      processes.kill()
      throw error
    }
    do {
      try store.setPrewarmSocket(bundleID, nil)
    } catch {
      onProblem("the launch socket of the prewarmed \(bundleID) could not be forgotten: \(error.message)")
    }
    lifecycle.record.state = .active
    lifecycle.record.forceQuit = false
    save()
  }

  /// Lets go of the app's claim once the app has ended, so that the next launch finds it free at
  /// once: at a process's exit the kernel may release its files a few milliseconds after its
  /// sockets report the end (a launch that took a prewarmed app learns of the end on one).
  public func releaseClaim() {
    guard waitForExit(until: .now()) != nil else { return }
    claim.close()
  }

  /// Ends every process of the app at once through its cgroup, no signal it could ignore: how a
  /// prewarmed app is discarded (as iOS discards one: no event, no crash report), and how a taken
  /// one ends when its launch went away.
  public func discard() {
    queue.async { self.processes.kill() }
  }
}
