import Foundation

/// The `CFNetworkDownload_XXXXXX.tmp` files a download writes into, named as nsurlsessiond names them.
enum TemporaryFile {
  struct Opened {
    var fd: Int32
    var name: String
    /// Bytes already in the file, which the transfer continues after.
    var size: Int64
  }

  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

  /// A fresh name with six random alphanumerics (one `getrandom` for all six).
  static func randomName() -> String {
    var generator = SystemRandomNumberGenerator()
    var bits = generator.next()
    var suffix = ""
    for _ in 0..<6 {
      suffix.append(alphabet[Int(bits % UInt64(alphabet.count))])
      bits /= UInt64(alphabet.count)
    }
    return "CFNetworkDownload_\(suffix).tmp"
  }

  /// Opens the task's temp file in `directory` (created when missing): the existing one when
  /// `existingName` is still there, emptied unless `canContinue`, else a new one made with `O_EXCL`.
  static func open(directory: String, existingName: String?, canContinue: Bool) throws(ProtFSError) -> Opened {
    if let existingName {
      let path = directory + "/" + existingName
      // Read-write: a resumed download with a digest to check reads back the bytes it has.
      switch valueOrErrno({ Foundation.open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC) }) {
      case .success(let fd):
        TemporaryFileLock.hold(fd)  // tells `cache purge` in another process that this file is live
        var status = stat()
        fstat(fd, &status)
        var size = Int64(status.st_size)
        if !canContinue && size > 0 {
          // Without a validator the server cannot tell us whether these bytes are still good.
          _ = ftruncate(fd, 0)
          size = 0
        }
        return Opened(fd: fd, name: existingName, size: size)
      case .failure(let e) where e == .noSuchFile:
        break
      case .failure(let e):
        throw ProtFSError.system("open the temp file", path: path, errno: e.rawValue)
      }
    }
    var createdDirectory = false
    while true {
      let name = randomName()
      let path = directory + "/" + name
      switch valueOrErrno({ Foundation.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644) }) {
      case .success(let fd):
        TemporaryFileLock.hold(fd)
        return Opened(fd: fd, name: name, size: 0)
      case .failure(let e) where e == .exists: continue
      case .failure(let e) where e == .noSuchFile && !createdDirectory:
        // nsurlsessiond creates the Downloads directory on first use; so do we.
        createdDirectory = true
        do {
          try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
          throw ProtFSError(
            .io, "Cannot create the downloads directory '\(directory)': \(error.localizedDescription).",
            path: directory)
        }
      case .failure(let e): throw ProtFSError.system("create the temp file", path: path, errno: e.rawValue)
      }
    }
  }

  /// Feeds the first `count` bytes of `fd` to `digest` (a resumed download's bytes so far);
  /// returns the error, if reading failed.
  static func hashPrefix(fd: Int32, count: Int64, into digest: SHA256Digest, path: String) -> ProtFSError? {
    let chunk = 1 << 20
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
    defer { buffer.deallocate() }
    var done: Int64 = 0
    while done < count {
      let n = pread(fd, buffer, min(chunk, Int(count - done)), off_t(done))
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return ProtFSError.system("read the temp file", path: path, errno: n < 0 ? errno : EIO) }
      digest.update(buffer, count: n)
      done += Int64(n)
    }
    return nil
  }

  /// Moves `source` to `destination` on another filesystem (where rename(2) fails with EXDEV):
  /// copies into a new temp file next to the destination, flushes it and renames it into place, so
  /// the destination still never holds a partial file. Returns the errno of a failure.
  static func moveAcrossFilesystems(from source: String, to destination: String) -> Int32? {
    let input = Foundation.open(source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    guard input >= 0 else { return errno }
    defer { close(input) }
    var status = stat()
    guard fstat(input, &status) == 0 else { return errno }
    let directory = (destination as NSString).deletingLastPathComponent
    var output: Int32 = -1
    var staging = ""
    while output < 0 {
      staging = directory + "/" + randomName()
      output = Foundation.open(staging, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
      if output < 0 && errno != EEXIST { return errno }
    }
    var failure: Int32?
    var remaining = Int(status.st_size)
    while remaining > 0 && failure == nil {
      let sent = sendfile(output, input, nil, min(remaining, 1 << 30))
      if sent < 0 && errno == EINTR { continue }
      if sent <= 0 { failure = sent < 0 ? errno : EIO } else { remaining -= sent }
    }
    if failure == nil && fsync(output) != 0 { failure = errno }
    if close(output) != 0 && failure == nil { failure = errno }
    if failure == nil && rename(staging, destination) != 0 { failure = errno }
    if let failure {
      unlink(staging)
      return failure
    }
    unlink(source)
    return nil
  }
}
