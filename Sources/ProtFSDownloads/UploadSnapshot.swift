import Foundation
import ProtFSSystem

/// The copy of an upload's source file that the task sends (`CFNetworkUpload_XXXXXX.tmp` in the
/// session's Uploads directory), made when the task is created so that the app may change or
/// delete its file meanwhile (docs/semantics.md §9).
package enum UploadSnapshot {
  /// A snapshot made: its directory (absolute path), its name and its size.
  package struct Made {
    package var directory: String
    package var name: String
    package var size: Int64
    /// The copy still under way, for a large file (nil once the snapshot was complete when made).
    package var copying: SnapshotCopy?
  }

  /// Files larger than this are copied on a thread of their own while the task starts sending
  /// (`SnapshotCopy`); smaller ones before `uploadTask` returns.
  package static let backgroundThreshold: Int64 = 64 << 20

  /// Checks the source at `path` (absolute) against the session's rules and copies it.
  ///
  /// The source must be inside `configuration.sourceDirectory` (when set), readable now by the
  /// access policy (a complete file while the device is locked is not), reached without a symbolic
  /// link, and a regular file; it is read only through the descriptor opened here, so a link
  /// swapped in afterwards changes nothing. On failure nothing is left in the Uploads directory.
  package static func make(from path: String, configuration: DownloadSessionConfiguration) throws(ProtFSError)
    -> Made
  {
    let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
    if let container = configuration.sourceDirectory {
      let root = URL(fileURLWithPath: container).standardizedFileURL.path
      guard absolute.hasPrefix(root + "/") else {
        throw ProtFSError(
          .outsideDevice, "Cannot upload '\(path)': it is outside the app's container '\(root)'.", path: path,
          remedy: .advice("upload a file inside the container, such as Documents/report.json"))
      }
    }
    try configuration.accessPolicy.checkRead(absolute)
    let fileSystem = configuration.fileSystem
    let source = try fileSystem.openSource(absolute)
    var status = stat()
    _ = try valueOrErrno(.stat) { fstat(source.rawValue, &status) }.orThrow("read the file to upload", path: absolute)
    guard status.st_mode & S_IFMT == S_IFREG else {
      let what = status.st_mode & S_IFMT == S_IFDIR ? "a directory" : "not a regular file"
      throw ProtFSError(
        .invalidArgument, "Cannot upload '\(absolute)': it is \(what).", path: absolute,
        remedy: .advice("give a regular file"))
    }
    let directoryPath = configuration.uploadsDirectory
    let directory = try fileSystem.openUploadsDirectory(directoryPath, like: configuration.temporaryDirectory)
    if case .deny(let e) = configuration.accessPolicy.canWriteTemp(in: directoryPath) {
      throw ProtFSError(
        .protectedDataUnavailable,
        "Cannot snapshot '\(absolute)' in '\(directoryPath)': Operation not permitted (the Uploads directory's protection class is not available while the device is locked).",
        path: directoryPath, errno: e, remedy: .initializeDownloadsDirectory)
    }
    let (name, copy) = try create(in: directory)
    do {
      try fileSystem.label(file: copy.rawValue, for: directory)
      let length = Int64(status.st_size)
      if length > backgroundThreshold {
        // The source stays open (deleting it changes nothing) until every byte is copied.
        let copying = SnapshotCopy(size: length)
        copying.start(source: source, output: copy, path: absolute)
        return Made(directory: directoryPath, name: name, size: length, copying: copying)
      }
      let size = try Self.copy(from: source.rawValue, to: copy.rawValue, path: absolute)
      copy.close()
      return Made(directory: directoryPath, name: name, size: size)
    } catch {
      directory.removeFile(name, ifStill: copy.rawValue)
      throw error
    }
  }

  /// A new, empty snapshot file made with `O_EXCL` in `directory`.
  private static func create(in directory: DirectoryHandle) throws(ProtFSError) -> (String, FileDescriptor) {
    while true {
      let name = TemporaryFile.randomName().replacingOccurrences(of: "CFNetworkDownload_", with: "CFNetworkUpload_")
      switch valueOrErrno(
        .open, { Kernel.openAt(directory.fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) })
      {
      case .success(let fd): return (name, FileDescriptor(owning: fd))
      case .failure(let e) where e == .exists: continue
      case .failure(let e):
        throw ProtFSError.system("create the upload snapshot in", path: directory.path, errno: e.rawValue)
      }
    }
  }

  /// Copies every byte of `input` to `output` (copy_file_range, which clones where the file system
  /// can; read and write where the kernel refuses it) and returns how many. 16 MiB a call: one
  /// 1 GiB call measured up to four times slower than these on ext4.
  package static func copy(
    from input: Int32, to output: Int32, path: String, limit: Int64 = .max, progress: (Int64) -> Void = { _ in }
  ) throws(ProtFSError) -> Int64 {
    var total: Int64 = 0
    var useRange = true
    var buffer: UnsafeMutableRawPointer?
    defer { buffer?.deallocate() }
    while total < limit {
      if useRange {
        let n = Kernel.copyFileRange(input, output, Int(min(16 << 20, limit - total)))
        if n > 0 {
          total += Int64(n)
          progress(total)
          continue
        }
        if n == 0 { return total }
        let e = errno
        if e == EINTR { continue }
        if [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EPERM].contains(e) {
          useRange = false
          continue
        }
        throw ProtFSError.system("snapshot the file to upload", path: path, errno: e)
      }
      let size = 1 << 20
      if buffer == nil { buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096) }
      let n = read(input, buffer, Int(min(Int64(size), limit - total)))
      if n == 0 { return total }
      if n < 0 {
        if errno == EINTR { continue }
        throw ProtFSError.system("read the file to upload", path: path, errno: errno)
      }
      var written = 0
      while written < n {
        let w = write(output, buffer! + written, n - written)
        if w < 0 {
          if errno == EINTR { continue }
          throw ProtFSError.system("write the upload snapshot of", path: path, errno: errno)
        }
        written += w
      }
      total += Int64(n)
      progress(total)
    }
    return total
  }
}

/// A large snapshot being copied on its own thread while the upload sends what is copied: the
/// read callback waits (a few milliseconds at most, the copy being faster than any network) only
/// when it catches up with the copy.
package final class SnapshotCopy: @unchecked Sendable {
  // @unchecked: `copied`, `failure` and `done` are guarded by `condition`.
  /// The bytes the snapshot will hold: the source's size when it was opened.
  package let size: Int64
  private let condition = NSCondition()
  private var copied: Int64 = 0
  private var failure: Int32?
  private var done = false

  package init(size: Int64) { self.size = size }

  /// Starts copying `size` bytes from `source` to `output` on a new thread, which closes both.
  package func start(source: FileDescriptor, output: FileDescriptor, path: String) {
    let thread = Thread { [self] in
      var code: Int32?
      do throws(ProtFSError) {
        let total = try UploadSnapshot.copy(
          from: source.rawValue, to: output.rawValue, path: path, limit: size,
          progress: { total in self.publish(total) })
        if total != size { code = EIO }  // the file shrank while it was copied
      } catch {
        code = error.errno ?? EIO
      }
      source.close()
      output.close()
      condition.lock()
      failure = code
      done = true
      condition.broadcast()
      condition.unlock()
    }
    thread.name = "protfs.upload.snapshot"
    thread.start()
  }

  private func publish(_ total: Int64) {
    condition.lock()
    copied = total
    condition.broadcast()
    condition.unlock()
  }

  /// Waits until more than `sent` bytes are copied or the copy ended; returns the bytes copied and
  /// the errno the copy failed with, if it did.
  package func available(beyond sent: Int64) -> (copied: Int64, failure: Int32?) {
    condition.lock()
    defer { condition.unlock() }
    while copied <= sent && !done { condition.wait() }
    return (copied, failure)
  }
}
