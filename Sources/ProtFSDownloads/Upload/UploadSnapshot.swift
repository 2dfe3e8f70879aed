import Foundation
import ProtFSSystem
import Synchronization

/// The copy of an upload's source file that the task sends (`CFNetworkUpload_XXXXXX.tmp` in the
/// session's Uploads directory), made when the task is created so that the app may change or
/// delete its file meanwhile (docs/semantics.md §5).
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
  /// The source must be inside `configuration.sourceDirectory` (when set), reached without a
  /// symbolic link, a regular file, and readable now by the access policy (a complete file while
  /// the device is locked is not), judged by the class of the file opened; it is read only through
  /// that descriptor, so a file or link swapped in afterwards changes nothing. On failure nothing
  /// is left in the Uploads directory.
  package static func make(from path: String, configuration: DownloadSessionConfiguration) throws(ProtFSError)
    -> Made
  {
    // A trailing slash names a directory, as open(2) takes it, though standardizing drops it.
    guard !path.hasSuffix("/") else { throw ProtFSError.system("open the file to upload", path: path, errno: ENOTDIR) }
    let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
    if let container = configuration.sourceDirectory {
      let root = URL(fileURLWithPath: container).standardizedFileURL.path
      guard absolute.hasPrefix(root + "/") else {
        throw ProtFSError(
          .outsideDevice, "Cannot upload '\(path)': it is outside the app's container '\(root)'.", path: path,
          remedy: .advice("upload a file inside the container, such as Documents/report.json"))
      }
    }
    let fileSystem = configuration.fileSystem
    // The class is the opened file's, and decides about that file: nothing is checked by path and
    // then opened again.
    let (source, protectionClass) = try fileSystem.openSource(absolute)
    try configuration.accessPolicy.checkRead(absolute, protectionClass: protectionClass)
    var status = stat()
    _ = try Kernel.fstat(source.rawValue, &status).orThrow("read the file to upload", path: absolute)
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
      // On a sealed device the copy is the source's ciphertext, under the source's key.
      try fileSystem.adoptKey(copy.rawValue, of: source.rawValue, in: directory)
      if let size = try clone(source.rawValue, into: copy.rawValue, path: absolute) {
        copy.close()
        return Made(directory: directoryPath, name: name, size: size)
      }
      let length = Int64(status.st_size)
      if length > backgroundThreshold {
        // The source stays open (deleting it changes nothing) until every byte is copied.
        let copying = SnapshotCopy(size: length)
        copying.start(source: source, output: copy, path: absolute, status: status)
        return Made(directory: directoryPath, name: name, size: length, copying: copying)
      }
      let size = try Self.copyUntilUnchanged(from: source.rawValue, to: copy.rawValue, status: status, path: absolute)
      copy.close()
      return Made(directory: directoryPath, name: name, size: size)
    } catch {
      directory.removeFile(name, ifStill: copy.rawValue)
      throw error
    }
  }

  /// Makes `output` a clone of `source` where the file system can (XFS with reflink, btrfs): the
  /// two share their extents until either is written, so a snapshot of any size costs no copy and,
  /// taken at one instant (the kernel holds both files while it clones), is consistent by itself,
  /// as APFS's clone is for nsurlsessiond. Returns the snapshot's size, or nil where the file
  /// system cannot clone (ext4, tmpfs, or the two on different file systems): the caller copies.
  /// The class is the snapshot's own attribute, never shared: a clone shares data, not attributes.
  package static func clone(_ source: Int32, into output: Int32, path: String) throws(ProtFSError) -> Int64? {
    switch Kernel.ficlone(source, into: output) {
    case .success:
      var status = stat()
      _ = try Kernel.fstat(output, &status).orThrow("read the upload snapshot of", path: path)
      return Int64(status.st_size)
    case .failure(let e) where [EOPNOTSUPP, ENOTTY, EXDEV, EINVAL, ENOSYS, EPERM].contains(e.rawValue):
      return nil
    case .failure(let e):
      throw ProtFSError.system("clone the file to upload", path: path, errno: e)
    }
  }

  /// How many times a source is copied before one copy is taken for consistent: a source the app
  /// keeps writing fails after these.
  package static let maximumPasses = 3

  /// Copies `source` (whose status was `status` when it was opened) to `output` until a pass finds
  /// the source unchanged (`check`), starting over from an empty snapshot otherwise; `progress`
  /// gets a pass's bytes so far, `restarting` the source's new status before another pass.
  /// Returns the bytes copied.
  package static func copyUntilUnchanged(
    from source: Int32, to output: Int32, status: stat, path: String, progress: (Int64) -> Void = { _ in },
    restarting: (stat) -> Void = { _ in }
  ) throws(ProtFSError) -> Int64 {
    var before = status
    var pass = 1
    while true {
      let total = try copy(from: source, to: output, path: path, limit: Int64(before.st_size), progress: progress)
      guard let now = try check(source, before: before, copied: total, pass: pass, path: path) else { return total }
      restarting(now)
      try rewind(source, output, path: path)
      before = now
      pass += 1
    }
  }

  /// Test hooks by source path, called after each copy pass (numbered from 1) and before its
  /// check: a test changes the source there, as an app writing during the copy would.
  package static let passHooks = Mutex<[String: @Sendable (Int) -> Void]>([:])

  /// After pass `pass` copied `copied` bytes of `source` (whose status was `before` when the pass
  /// began): nil when the source is unchanged (size, mtime and ctime, so no write landed during
  /// the copy), else its status now, for another pass; past `maximumPasses`, an error saying so.
  private static func check(_ source: Int32, before: stat, copied: Int64, pass: Int, path: String)
    throws(ProtFSError) -> stat?
  {
    if let hook = passHooks.withLock({ $0[path] }) { hook(pass) }
    var now = stat()
    _ = try Kernel.fstat(source, &now).orThrow("read the file to upload", path: path)
    let same =
      now.st_size == before.st_size && Int64(now.st_size) == copied
      && now.st_mtim.tv_sec == before.st_mtim.tv_sec && now.st_mtim.tv_nsec == before.st_mtim.tv_nsec
      && now.st_ctim.tv_sec == before.st_ctim.tv_sec && now.st_ctim.tv_nsec == before.st_ctim.tv_nsec
    if same { return nil }
    guard pass < maximumPasses else {
      throw ProtFSError(
        .io,
        "Cannot snapshot '\(path)' for upload: it changed while it was copied, \(pass) times in a row (something keeps writing it).",
        path: path, remedy: .advice("upload the file once the app has finished writing it"))
    }
    return now
  }

  /// Empties the snapshot `output` and puts both files back at byte 0, for another pass.
  private static func rewind(_ source: Int32, _ output: Int32, path: String) throws(ProtFSError) {
    _ = try Kernel.ftruncate(output, 0).orThrow("snapshot the file to upload", path: path)
    _ = try Kernel.lseek(output, 0, SEEK_SET).orThrow("snapshot the file to upload", path: path)
    _ = try Kernel.lseek(source, 0, SEEK_SET).orThrow("snapshot the file to upload", path: path)
  }

  /// A new, empty snapshot file made with `O_EXCL` in `directory`.
  private static func create(in directory: DirectoryHandle) throws(ProtFSError) -> (String, FileDescriptor) {
    while true {
      let name = TemporaryFile.randomName().replacingOccurrences(of: "CFNetworkDownload_", with: "CFNetworkUpload_")
      switch Kernel.openat(directory.fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
      {
      case .success(let fd): return (name, FileDescriptor(owning: fd))
      case .failure(let e) where e == .exists: continue
      case .failure(let e):
        throw ProtFSError.system("create the upload snapshot in", path: directory.path, errno: e)
      }
    }
  }

  /// Copies every byte of `input` to `output` (`ByteCopy`: copy_file_range, which clones where
  /// the file system can, else read and write), at most `limit`, and returns how many.
  package static func copy(
    from input: Int32, to output: Int32, path: String, limit: Int64 = .max, progress: (Int64) -> Void = { _ in }
  ) throws(ProtFSError) -> Int64 {
    switch ByteCopy.copy(from: input, to: output, limit: limit, progress: progress) {
    case .success(let total): return total
    case .failure(.copying(let e)):
      throw ProtFSError.system("snapshot the file to upload", path: path, errno: e)
    case .failure(.reading(let e)): throw ProtFSError.system("read the file to upload", path: path, errno: e)
    case .failure(.writing(let e)):
      throw ProtFSError.system("write the upload snapshot of", path: path, errno: e)
    }
  }
}

/// A large snapshot being copied on its own thread while the upload sends what is copied: the
/// read callback waits (a few milliseconds at most, the copy being faster than any network) only
/// when it catches up with the copy.
///
/// What is sent is exactly one consistent snapshot: its last bytes are handed out only once the
/// copy is complete and the source was found unchanged during it (`UploadSnapshot.check`). When
/// the app wrote to the source meanwhile, the copy starts over as a new generation (at most
/// `UploadSnapshot.maximumPasses` passes), and an attempt sending an older generation is stopped
/// and started again from byte 0 (docs/semantics.md §5).
package final class SnapshotCopy: @unchecked Sendable {
  // @unchecked: every stored property is guarded by `condition`.
  private let condition = NSCondition()
  private var currentSize: Int64
  private var currentGeneration = 0
  private var copied: Int64 = 0
  private var failure: ProtFSError?
  private var done = false

  package init(size: Int64) { currentSize = size }

  /// The bytes the snapshot holds (or will): the source's size when the current pass began.
  package var size: Int64 { current.size }

  /// The current generation (a new one each time the copy starts over) and its size.
  package var current: (generation: Int, size: Int64) {
    condition.lock()
    defer { condition.unlock() }
    return (currentGeneration, currentSize)
  }

  /// Starts copying `source` (whose status was `status` when opened) to `output` on a new thread,
  /// which closes both.
  package func start(source: FileDescriptor, output: FileDescriptor, path: String, status: stat) {
    let thread = Thread { [self] in
      var error: ProtFSError?
      do throws(ProtFSError) {
        _ = try UploadSnapshot.copyUntilUnchanged(
          from: source.rawValue, to: output.rawValue, status: status, path: path,
          progress: { total in self.publish(total) },
          restarting: { now in
            // Written to during the copy: a new generation starts from an empty file.
            self.condition.lock()
            self.currentGeneration += 1
            self.currentSize = Int64(now.st_size)
            self.copied = 0
            self.condition.broadcast()
            self.condition.unlock()
          })
      } catch let caught {
        error = caught
      }
      source.close()
      output.close()
      condition.lock()
      failure = error
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

  /// What the sender of `generation` may read beyond its `sent` bytes.
  package enum Availability {
    /// The snapshot holds this many bytes so far (all of them once the copy is done).
    case copied(Int64)
    /// The copy failed.
    case failed(ProtFSError)
    /// The source changed and the copy started over: the attempt must start over from byte 0.
    case restarted
  }

  /// Waits until more than `sent` bytes of `generation` may be sent, the copy ended, or a new
  /// generation began. The last byte waits for the end of the copy (and its check).
  package func available(beyond sent: Int64, generation: Int) -> Availability {
    condition.lock()
    defer { condition.unlock() }
    while !done && currentGeneration == generation && (copied <= sent || copied >= currentSize) {
      condition.wait()
    }
    if currentGeneration != generation { return .restarted }
    if let failure { return .failed(failure) }
    return .copied(copied)
  }
}
