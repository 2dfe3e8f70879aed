import Foundation
import ProtFS
import ProtFSSystem

/// A file of the device that some process holds open.
public struct OpenFile: Sendable, Equatable, Codable {
  /// The process.
  public var pid: Int32
  /// Its command name (`/proc/PID/comm`).
  public var command: String
  /// The file's absolute path.
  public var path: String
}

extension Device {
  /// Files inside `Containers/` that processes hold open, found through `/proc/*/fd`
  /// (as `fscrypt lock` warns about files still in use). Processes protfs may not inspect are skipped.
  public func openFiles() -> [OpenFile] {
    let prefixes = Set([root, canonicalRoot]).map { ($0 == "/" ? "" : $0) + "/" + Device.containersDirectoryName + "/" }
    var found: [OpenFile] = []
    let me = Kernel.getpid()
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
      guard let pid = Int32(entry), pid != me else { continue }
      let fdDirectory = "/proc/\(entry)/fd"
      guard let fds = try? FileManager.default.contentsOfDirectory(atPath: fdDirectory) else { continue }
      var command: String?
      for fd in fds {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let link = fdDirectory + "/" + fd
        let length = (try? Kernel.readlink(link, &buffer, buffer.count - 1).get()) ?? 0
        guard length > 0 else { continue }
        let target = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard prefixes.contains(where: target.hasPrefix), !target.hasSuffix(" (deleted)") else { continue }
        if command == nil {
          command =
            (try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
        }
        found.append(OpenFile(pid: pid, command: command!, path: target))
      }
    }
    return found.sorted { ($0.path, $0.pid) < ($1.path, $1.pid) }
  }
}

extension LockController {
  /// Open files whose data stays reachable through their descriptors although the current state
  /// makes their class unavailable to open handles (complete; when-inactive after the expiry).
  public func openFilesStillReachable() throws(ProtFSError) -> [OpenFile] {
    let state = try record().protection
    guard !state.isProtectedDataAvailable else { return [] }
    // A sealed device's backing files are ciphertext to every descriptor, and each read through the
    // mount is decided by the daemon, which holds the keys: nothing stays reachable (and `/proc` is
    // not searched, which cost a sealed lock more than its keys).
    guard try !isSealed else { return [] }
    // A mount's daemon holds items for its clients, whose every read it decides itself; another
    // protfs (a lock, unlock or status walking the device meanwhile) holds each item only for as
    // long as it inspects it, under the lock's rules.
    let daemons = Set(MountRegistry(device: device).records().map(\.pid))
    let own = Self.executableIdentity("/proc/self/exe")
    return device.openFiles().filter { file in
      guard !daemons.contains(file.pid), own == nil || Self.executableIdentity("/proc/\(file.pid)/exe") != own,
        let path = try? device.resolve(file.path),
        let cls = try? device.effectiveClass(of: path)
      else {
        return false
      }
      return !state.allows(cls.protectionClass, .openHandle)
    }
  }

  /// The device and inode of the executable `link` (`/proc/PID/exe`) names, or nil when it cannot
  /// be read (the process ended, or is closed to this one).
  private static func executableIdentity(_ link: String) -> [UInt64]? {
    var status = stat()
    guard case .success = Kernel.stat(link, &status) else { return nil }
    return [UInt64(status.st_dev), UInt64(status.st_ino)]
  }
}
