import Foundation
import ProtFSSystem
import Synchronization

/// The original modes of items whose permission bits a transition widens for a moment.
///
/// An unprivileged owner cannot read or write `user.*` attributes of a file whose mode denies it
/// (the kernel checks them like contents), and a locked file has mode 0. protfs then adds owner
/// read and write for the duration of one attribute call. Before it does, the original mode is
/// appended here (`.protfs/owner-access.log`, synced), so that a crash inside that window loses
/// nothing: the recovery walk puts logged modes back on items that have no saved mode. The log is
/// removed when the transition commits. Root never needs it.
package final class OwnerAccessLog: Sendable {
  /// An inode: device and inode number.
  package struct FileID: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
  }

  package static let fileName = "owner-access.log"

  private let directory: DirectoryHandle
  private let crash: CrashHook
  /// The log, open for appending once the first line is written, and the loaded entries.
  private let state: Mutex<(file: FileDescriptor?, entries: [FileID: UInt32])>

  /// Opens the log of the device's state directory, loading what an interrupted transition left.
  package init(directory: DirectoryHandle, crash: CrashHook) {
    self.directory = directory
    self.crash = crash
    var entries: [FileID: UInt32] = [:]
    if let bytes = try? AtomicFile.read(named: Self.fileName, in: directory, limit: 16 << 20, stateFile: true) {
      // Replayed in order: "DEV INO MODE" opens a widening, "DEV INO -" closes it once the mode is
      // back. Only widenings left open by the crash matter.
      for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count == 3, let device = UInt64(fields[0]), let inode = UInt64(fields[1]) else { continue }
        let id = FileID(device: device, inode: inode)
        if fields[2] == "-" {
          entries[id] = nil
        } else if let mode = UInt32(fields[2], radix: 8), mode <= 0o7777 {
          entries[id] = mode
        }  // else a torn last line: its chmod never happened
      }
    }
    state = Mutex((nil, entries))
  }

  /// Whether an interrupted transition left records to repair with.
  package var isEmpty: Bool { state.withLock { $0.entries.isEmpty } }

  /// The mode recorded for `id` before it was widened, if any.
  package func original(_ id: FileID) -> UInt32? { state.withLock { $0.entries[id] } }

  /// Appends `mode` as the original of `id`, durably, before the caller widens it.
  package func record(_ id: FileID, mode: UInt32) throws(ProtFSError) {
    try append("\(id.device) \(id.inode) \(String(mode, radix: 8))\n")
  }

  /// Appends that `id` has its original mode back, so a later crash does not "repair" it.
  package func finished(_ id: FileID) throws(ProtFSError) {
    try append("\(id.device) \(id.inode) -\n")
  }

  private func append(_ line: String) throws(ProtFSError) {
    let path = directory.pathOf(Self.fileName)
    let result: Result<Void, ProtFSError> = state.withLock { state in
      do throws(ProtFSError) {
        if state.file == nil {
          state.file = try directory.openDescriptor(
            Self.fileName, flags: O_WRONLY | O_CREAT | O_APPEND, permissions: FilePermissions(rawValue: 0o600))
        }
        let fd = state.file!.rawValue
        try AtomicFile.writeAll(fd, Array(line.utf8), path: path)
        _ = try Kernel.fdatasync(fd).orThrow("sync", path: path)
        return .success(())
      } catch {
        return .failure(error)
      }
    }
    try result.get()
  }

  /// Counts the widening as a step of the transition, for the crash tests.
  package func widened() { crash.step() }

  /// Removes the log once the transition's state is committed.
  package func clear() {
    state.withLock { state in
      state.file?.close()
      state.file = nil
      state.entries = [:]
    }
    _ = Kernel.unlinkat(directory.fd, Self.fileName, 0)
  }
}
