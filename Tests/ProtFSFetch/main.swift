// protfs-fetch: drives the download engine from the command line, for the benchmark and for the
// tests that kill a downloading process. Stands in for `protfs download` until the CLI has it.
//
// protfs-fetch --store PATH --temp DIR --to DIR [--session ID] [--bundle ID] [--connections N]
//              [--sha256 HEX] [--persist-ms N] [--buffer-kib N] [--sync | --no-sync] [--progress]
//              [-i LIST] URL...
import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("Error: \(message)\n".utf8))
  exit(64)
}

ProcessTuning.keepFreedMemory()
var store: String?
var temporary: String?
var destination: String?
var sessionID = "protfs-fetch"
var bundle = "com.example.fetch"
var connections = 6
var digest: String?
var persistMilliseconds = 1000
var synchronize = false
var bufferKiB: Int?
var progress = false
var urls: [URL] = []

var arguments = CommandLine.arguments.dropFirst()
@MainActor func value(_ flag: String) -> String {
  guard let next = arguments.popFirst() else { fail("\(flag) needs a value") }
  return next
}
while let argument = arguments.popFirst() {
  switch argument {
  case "--store": store = value(argument)
  case "--temp": temporary = value(argument)
  case "--to": destination = value(argument)
  case "--session": sessionID = value(argument)
  case "--bundle": bundle = value(argument)
  case "--connections": connections = Int(value(argument)) ?? connections
  case "--sha256": digest = value(argument)
  case "--persist-ms": persistMilliseconds = Int(value(argument)) ?? persistMilliseconds
  case "--buffer-kib": bufferKiB = Int(value(argument))
  case "--no-sync": synchronize = false
  case "--sync": synchronize = true
  case "--progress": progress = true
  case "-i":
    let list = value(argument)
    guard let text = try? String(contentsOfFile: list, encoding: .utf8) else { fail("cannot read '\(list)'") }
    for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).isEmpty {
      guard let url = URL(string: line.trimmingCharacters(in: .whitespaces)) else { fail("bad URL '\(line)'") }
      urls.append(url)
    }
  default:
    guard let url = URL(string: argument) else { fail("bad URL '\(argument)'") }
    urls.append(url)
  }
}
guard let store, let temporary, let destination else { fail("--store, --temp and --to are required") }

var configuration = DownloadSessionConfiguration(
  identifier: sessionID, bundleID: bundle, storePath: store, temporaryDirectory: temporary,
  destinationDirectory: destination)
configuration.maximumConnectionsPerHost = connections
configuration.progressPersistInterval = .milliseconds(persistMilliseconds)
configuration.synchronizesFiles = synchronize
if let bufferKiB { configuration.receiveBufferSize = bufferKiB << 10 }

do {
  let session = try DownloadSession(configuration: configuration)
  let tasks = try session.downloadTasks(with: urls.map { DownloadRequest(url: $0, expectedSHA256: digest) })
  if progress {
    let events = session.events
    Task.detached {
      for await event in events {
        if case .progress(let id, let written, let expected) = event {
          // Unbuffered, so a reader sees each line as it happens.
          FileHandle.standardOutput.write(
            Data("{\"task\":\(id),\"written\":\(written),\"expected\":\(expected)}\n".utf8))
        }
      }
    }
  }
  for task in tasks { task.resume() }
  var status: Int32 = 0
  let settled = DownloadTask.waitUntilAllSettled(tasks)
  for task in tasks {
    switch settled[task.id] ?? task.state {
    case .completed: break
    case .waitingForUnlock: status = max(status, 2)
    default:
      status = max(status, 1)
      FileHandle.standardError.write(Data("Error: \(task.error?.description ?? "task \(task.id) failed")\n".utf8))
    }
  }
  session.invalidate()
  exit(status)
} catch {
  fail("\(error)")
}
