import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem
import Synchronization

/// The `CFNetworkDownload_XXXXXX.tmp` files a download writes into, named as nsurlsessiond names them.
package enum TemporaryFile {
  package struct Opened {
    /// The temp file, open for reading and writing.
    package var file: FileDescriptor
    package var name: String
    /// Bytes already in the file, which the transfer continues after.
    var size: Int64
    /// Whether the file has `name` in the directory; an unnamed one (`O_TMPFILE`) gets it from
    /// `Transfer.giveName()` when something must find it there.
    package var isNamed: Bool
    /// The file's cipher on a sealed device (its bytes are written and read through its key); nil
    /// where it is not sealed.
    package var cipher: FileCipher?

    /// A new, empty unnamed `file`, with the name it will take once it needs one.
    package static func unnamed(_ file: FileDescriptor) -> Opened {
      Opened(file: file, name: TemporaryFile.randomName(), size: 0, isNamed: false)
    }
  }

  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

  /// Random words from the system's generator, fetched 64 at a time: a name per small download
  /// would otherwise cost a `getrandom` call of its own.
  private static let randomWords = Mutex((words: [UInt64](repeating: 0, count: 64), next: 64))

  private static func randomWord() -> UInt64 {
    randomWords.withLock { pool in
      if pool.next == pool.words.count {
        var generator = SystemRandomNumberGenerator()
        for index in pool.words.indices { pool.words[index] = generator.next() }
        pool.next = 0
      }
      defer { pool.next += 1 }
      return pool.words[pool.next]
    }
  }

  /// A fresh name with six random alphanumerics (from one random word).
  package static func randomName() -> String {
    var bits = randomWord()
    var suffix = ""
    for _ in 0..<6 {
      suffix.append(alphabet[Int(bits % UInt64(alphabet.count))])
      bits /= UInt64(alphabet.count)
    }
    return TemporaryDownloadName.make(suffix)
  }

  /// Opens the task's temp file in the held `directory`: the existing one when `existingName` is
  /// still there and is one protfs would continue (a regular file with a single link that
  /// `accepts`, which checks its label and owner), continued when `canContinue`; else a new one,
  /// given its label by `label` before any byte is written. An existing file that is not accepted
  /// is left exactly as it is (never relabelled, handed to anyone, truncated or written): it may be
  /// any file the app moved to that name. One that is accepted but cannot be continued (no
  /// validator to ask the server with) is removed by name and a new file made. A new one is made
  /// without a name when `unnamed` and the filesystem can (`O_TMPFILE`; its name is reserved, not
  /// taken), else with `O_EXCL` under a fresh name.
  package static func open(
    in directory: DirectoryHandle, existingName: String?, canContinue: Bool, unnamed: Bool,
    accepts: (_ fd: Int32, _ status: stat) -> Bool, label: (_ fd: Int32) throws(ProtFSError) -> Void
  ) throws(ProtFSError) -> Opened {
    if let existingName,
      let kept = try continueExisting(existingName, in: directory, canContinue: canContinue, accepts: accepts)
    {
      return kept
    }
    if unnamed, let file = try makeUnnamed(in: directory, label: label) {
      return .unnamed(file)
    }
    return try makeNamed(in: directory, label: label)
  }

  /// The kept temp file `existingName` in `directory`, opened to be continued, when it is still
  /// there, private, accepted and `canContinue`; nil when a new one is to be made instead (one
  /// accepted but not continued is removed).
  private static func continueExisting(
    _ existingName: String, in directory: DirectoryHandle, canContinue: Bool,
    accepts: (_ fd: Int32, _ status: stat) -> Bool
  ) throws(ProtFSError) -> Opened? {
    // Read-write: a resumed download with a digest to check reads back the bytes it has.
    switch Kernel.openat(directory.fd, existingName, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0) {
    case .success(let fd):
      // Closed when it goes away: every path below that does not continue it lets go of it.
      let file = FileDescriptor(owning: fd)
      var status = stat()
      _ = try Kernel.fstat(fd, &status).orThrow(
        "read the temp file", path: directory.pathOf(existingName))
      // Another link to the file could be outside the device: only a private regular file continues.
      guard status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1 else {
        file.close()
        throw ProtFSError(
          .invalidArgument,
          "The temp file '\(directory.pathOf(existingName))' is not a regular file with a single link; protfs does not write to it.",
          path: directory.pathOf(existingName), remedy: .purgeCaches)
      }
      if accepts(fd, status) && canContinue {
        TemporaryFileLock.hold(fd)  // tells `cache purge` in another process that this file is live
        return Opened(file: file, name: existingName, size: Int64(status.st_size), isNamed: true)
      }
      if accepts(fd, status) {
        // Without a validator the server cannot tell whether these bytes are still good.
        directory.removeFile(existingName, ifStill: fd)
      }
      file.close()
    case .failure(let e) where e == .noSuchFile:
      break
    case .failure(let e):
      throw ProtFSError.system("open the temp file", path: directory.pathOf(existingName), errno: e)
    }
    return nil
  }

  /// A new temp file under a fresh name in `directory` (`O_EXCL`), labelled by `label` before any
  /// byte is written.
  private static func makeNamed(
    in directory: DirectoryHandle, label: (_ fd: Int32) throws(ProtFSError) -> Void
  ) throws(ProtFSError) -> Opened {
    while true {
      let name = randomName()
      switch Kernel.openat(directory.fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
      {
      case .success(let fd):
        let file = FileDescriptor(owning: fd)
        do {
          try label(fd)
        } catch {
          _ = Kernel.unlinkat(directory.fd, name, 0)
          file.close()
          throw error
        }
        TemporaryFileLock.hold(fd)
        return Opened(file: file, name: name, size: 0, isNamed: true)
      case .failure(let e) where e == .exists: continue
      case .failure(let e):
        throw ProtFSError.system("create the temp file", path: directory.pathOf(name), errno: e)
      }
    }
  }

  /// A new temp file without a name in `directory`, labelled by `label`; nil where the filesystem
  /// (or kernel) makes no unnamed files. The engine makes its own this way, and the finisher those
  /// it makes ahead (`TemporaryFileReserve`). It is held (`flock`) as a live temp file only when it
  /// gets a name (`Transfer.giveName()`): until then `cache purge` cannot see it, and a small file
  /// linked straight into its destination never needs the lock.
  package static func makeUnnamed(in directory: DirectoryHandle, label: (Int32) throws(ProtFSError) -> Void)
    throws(ProtFSError) -> FileDescriptor?
  {
    switch Kernel.openTmpfile(directory.fd, 0o644) {
    case .success(let fd):
      let file = FileDescriptor(owning: fd)
      do {
        try label(fd)
      } catch {
        // Unnamed, it goes away with its descriptor.
        file.close()
        throw error
      }
      return file
    case .failure(let e) where e.rawValue == EOPNOTSUPP || e.rawValue == EISDIR || e.rawValue == EINVAL:
      return nil
    case .failure(let e):
      throw ProtFSError.system("create the temp file", path: directory.path, errno: e)
    }
  }

  /// Feeds the first `count` bytes of `fd` to `digest` (a resumed download's bytes so far),
  /// decrypted with `cipher` when the file is sealed; returns the error, if reading failed.
  package static func hashPrefix(
    fd: Int32, count: Int64, into digest: SHA256Digest, path: String, cipher: FileCipher? = nil
  ) -> ProtFSError? {
    let chunk = 1 << 20
    if let cipher {
      let io = SealedFileIO(fd: fd, cipher: cipher, path: path)
      var done: Int64 = 0
      while done < count {
        let bytes: [UInt8]
        do { bytes = try io.read(at: Int(done), count: min(chunk, Int(count - done))) } catch { return error }
        guard !bytes.isEmpty else { return ProtFSError.system("read the temp file", path: path, errno: EIO) }
        bytes.withUnsafeBytes { digest.update($0.baseAddress!, count: $0.count) }
        done += Int64(bytes.count)
      }
      return nil
    }
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
    defer { buffer.deallocate() }
    var done: Int64 = 0
    while done < count {
      let n: Int
      switch Kernel.pread(fd, buffer, min(chunk, Int(count - done)), off_t(done)) {
      case .success(let read) where read > 0: n = read
      case .success: return ProtFSError.system("read the temp file", path: path, errno: EIO)
      case .failure(let e): return ProtFSError.system("read the temp file", path: path, errno: e)
      }
      digest.update(buffer, count: n)
      done += Int64(n)
    }
    return nil
  }
}
