import Foundation

/// Which task the engine starts next: a queue per host in the order tasks were resumed, each
/// host held to its connection limit, and retries that wait out their backoff.
///
/// Used by the engine thread alone. A class, so that launching a task (which may fail it and so
/// forget it here) can run while the scheduler hands out the next ones.
package final class HostScheduler {
  /// Connections one host may have at once.
  private let limit: Int
  /// Tasks waiting for a connection, per host, in the order they were resumed.
  private var queues: [String: HostQueue] = [:]
  private var hostOrder: [String] = []
  /// Ids of the tasks queued, retrying, paused or active, so a second `resume()` is a no-op.
  private var known: Set<Int64> = []
  private var retrying: [(deadline: UInt64, task: DownloadTask)] = []
  private var activePerHost: [String: Int] = [:]
  /// How many tasks wait in the queues for a connection (not those retrying later).
  package private(set) var queued = 0

  /// The monotonic clock retries are due by, in nanoseconds.
  private let clock: () -> UInt64

  /// A scheduler allowing `limit` connections per host (at least one), whose retries fall due by
  /// `clock` (the monotonic clock; tests give their own).
  package init(connectionsPerHost limit: Int, clock: @escaping () -> UInt64 = { Monotonic.now }) {
    self.limit = max(1, limit)
    self.clock = clock
  }

  /// The key connections are counted under: scheme, host and port (`file:` for local files).
  package static func hostKey(_ url: URL) -> String {
    let scheme = url.scheme?.lowercased() ?? ""
    if scheme == "file" { return "file:" }
    return "\(scheme)://\(url.host?.lowercased() ?? ""):\(url.port ?? (scheme == "https" ? 443 : 80))"
  }

  /// Whether the engine has `id` queued, retrying, paused or running.
  package func isKnown(_ id: Int64) -> Bool { known.contains(id) }

  /// Whether the engine has nothing queued, retrying, paused or running.
  package var isIdle: Bool { known.isEmpty }

  /// Counts `id` as the engine's (a paused or retried task, a running transfer).
  package func remember(_ id: Int64) { known.insert(id) }

  /// Forgets `id`: a later `accept` queues it again.
  package func forget(_ id: Int64) { known.remove(id) }

  /// Queues `task` behind its host's others, unless the engine has it already.
  package func accept(_ task: DownloadTask) {
    guard known.insert(task.id).inserted else { return }
    let key = Self.hostKey(task.url)
    if queues[key] == nil {
      hostOrder.append(key)
      queues[key] = HostQueue()
    }
    queues[key]!.append(task)
    queued += 1
  }

  /// Queues `task` again at `deadline` (monotonic nanoseconds).
  package func retry(_ task: DownloadTask, at deadline: UInt64) {
    known.insert(task.id)
    retrying.append((deadline, task))
  }

  /// Takes `task` out of the queues and retries.
  package func withdraw(_ task: DownloadTask) {
    retrying.removeAll { $0.task === task }
    for key in queues.keys {
      if queues[key]!.remove(task) { queued -= 1 }
    }
  }

  /// Forgets every queued and retrying task.
  package func removeAll() {
    retrying.removeAll()
    queues.removeAll()
    hostOrder.removeAll()
    known.removeAll()
    queued = 0
  }

  /// A transfer to the host `key` opened a connection.
  package func opened(_ key: String) { activePerHost[key, default: 0] += 1 }

  /// A transfer to the host `key` gave its connection up.
  package func closed(_ key: String) { activePerHost[key, default: 1] -= 1 }

  /// Queues the retries that are due, then hands `launch` each queued task whose host has a free
  /// connection (a launch that takes one calls `opened`); returns whether it handed out any.
  package func startReady(_ launch: (DownloadTask, String) -> Void) -> Bool {
    if !retrying.isEmpty {
      let now = clock()
      let due = retrying.filter { $0.deadline <= now }
      if !due.isEmpty {
        retrying.removeAll { $0.deadline <= now }
        for item in due {
          known.remove(item.task.id)
          accept(item.task)
        }
      }
    }
    guard !hostOrder.isEmpty else { return false }
    var emptied = false
    var launched = false
    for key in hostOrder {
      while activePerHost[key, default: 0] < limit, let task = queues[key]!.popFirst() {
        queued -= 1
        launch(task, key)
        launched = true
      }
      if queues[key]!.isEmpty { emptied = true }
    }
    if emptied {
      hostOrder.removeAll { queues[$0]!.isEmpty }
      queues = queues.filter { !$0.value.isEmpty }
    }
    return launched
  }

  /// Milliseconds until the next retry is due, capped at `timeout`.
  package func timeout(_ timeout: Int, now: UInt64) -> Int {
    var result = timeout
    for item in retrying {
      let wait = item.deadline > now ? Int((item.deadline - now) / 1_000_000) : 0
      result = min(result, wait)
    }
    return result
  }
}

/// A FIFO of tasks that pops from the front without shifting the array each time.
private struct HostQueue {
  private var tasks: [DownloadTask] = []
  private var head = 0

  /// Whether no task waits.
  var isEmpty: Bool { head == tasks.count }

  /// Queues `task` at the back.
  mutating func append(_ task: DownloadTask) { tasks.append(task) }

  /// The task at the front, taken out.
  mutating func popFirst() -> DownloadTask? {
    guard head < tasks.count else { return nil }
    let task = tasks[head]
    head += 1
    if head == tasks.count {
      tasks.removeAll(keepingCapacity: true)
      head = 0
    }
    return task
  }

  /// Takes `task` out wherever it waits; returns whether it waited here.
  @discardableResult
  mutating func remove(_ task: DownloadTask) -> Bool {
    guard let index = tasks[head...].firstIndex(where: { $0 === task }) else { return false }
    tasks.remove(at: index)
    return true
  }
}
