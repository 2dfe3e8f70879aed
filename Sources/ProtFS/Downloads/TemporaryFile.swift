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
      switch valueOrErrno({ Foundation.open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) }) {
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
      switch valueOrErrno({ Foundation.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644) }) {
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
    // The temp file is open write-only; read it through a second descriptor.
    let reader = Foundation.open("/proc/self/fd/\(fd)", O_RDONLY | O_CLOEXEC)
    guard reader >= 0 else { return ProtFSError.system("read the temp file", path: path, errno: errno) }
    defer { close(reader) }
    let chunk = 1 << 20
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
    defer { buffer.deallocate() }
    var done: Int64 = 0
    while done < count {
      let n = pread(reader, buffer, min(chunk, Int(count - done)), off_t(done))
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return ProtFSError.system("read the temp file", path: path, errno: n < 0 ? errno : EIO) }
      digest.update(buffer, count: n)
      done += Int64(n)
    }
    return nil
  }
}
