import Foundation

/// Copies bytes from one descriptor to another: the one byte-copy loop of protfs (item copies and
/// cross-filesystem moves, upload snapshots, copied programs).
///
/// `copy_file_range(2)` first, which lets the kernel copy without a trip through user space (and
/// clone, where the file system can); `read(2)` and `write(2)` where the kernel refuses it for these
/// two files (`EXDEV`, `EINVAL`, `ENOSYS`, `EOPNOTSUPP`, `EPERM`). Both go through `valueOrErrno`, so
/// `EINTR` is retried and debug builds' `SyscallFaults` reach every call.
package enum ByteCopy {
  /// Bytes asked of one `copy_file_range` call: one 1 GiB call measured up to four times slower
  /// than 16 MiB ones on ext4 (the upload benchmark), and a progress callback hears more often.
  package static let rangeChunk = 16 << 20
  /// The buffer of the read/write fallback.
  package static let bufferSize = 1 << 20

  /// The call a copy failed in, with its errno.
  package enum Failure: Error, Equatable {
    /// `copy_file_range(2)` failed with an errno that the fallback does not cover.
    case copying(Errno)
    /// `read(2)` of the input failed.
    case reading(Errno)
    /// `write(2)` of the output failed.
    case writing(Errno)

    /// The errno of the failed call.
    package var errno: Errno {
      switch self {
      case .copying(let e), .reading(let e), .writing(let e): return e
      }
    }
  }

  /// Copies from the current offset of `input` to that of `output` until the input ends or `limit`
  /// bytes are copied; returns how many were. `progress` hears the total after each call.
  package static func copy(
    from input: Int32, to output: Int32, limit: Int64 = .max, progress: (Int64) -> Void = { _ in }
  ) -> Result<Int64, Failure> {
    var total: Int64 = 0
    while total < limit {
      switch valueOrErrno(
        .copyFileRange, { Kernel.copyFileRange(input, output, Int(min(Int64(rangeChunk), limit - total))) })
      {
      case .success(0): return .success(total)
      case .success(let count):
        total += Int64(count)
        progress(total)
      case .failure(let e) where [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EPERM].contains(e.rawValue):
        return readAndWrite(from: input, to: output, limit: limit, total: total, progress: progress)
      case .failure(let e): return .failure(.copying(e))
      }
    }
    return .success(total)
  }

  /// Copies the first `length` bytes of `input` to the same offsets of `output`, one data extent
  /// at a time (`lseek(2)`'s `SEEK_DATA` and `SEEK_HOLE`), so that a hole stays a hole, then gives
  /// `output` the size `length`: a sparse file's copy takes the blocks its data takes, and never
  /// more than `length` bytes are read whatever `input` grows to meanwhile. Both offsets are left
  /// wherever the last extent ended. Returns the bytes of data copied.
  ///
  /// A file system that does not know holes answers as if the file were all data.
  package static func copyKeepingHoles(from input: Int32, to output: Int32, length: Int64) -> Result<Int64, Failure> {
    var offset: Int64 = 0
    var total: Int64 = 0
    while offset < length {
      let data: Int64
      switch valueOrErrno(.seek, { lseek(input, off_t(offset), Kernel.seekData) }) {
      case .success(let found): data = Int64(found)
      case .failure(let e) where e.rawValue == ENXIO: data = length  // only a hole is left
      case .failure(let e): return .failure(.reading(e))
      }
      if data >= length { break }
      let hole: Int64
      switch valueOrErrno(.seek, { lseek(input, off_t(data), Kernel.seekHole) }) {
      case .success(let found): hole = Int64(found)
      case .failure(let e) where e.rawValue == ENXIO: hole = data  // truncated meanwhile
      case .failure(let e): return .failure(.reading(e))
      }
      let end = min(hole, length)
      if end <= data { break }
      for (fd, failure) in [(input, Failure.reading), (output, Failure.writing)] {
        if case .failure(let e) = valueOrErrno(.seek, { lseek(fd, off_t(data), SEEK_SET) }) {
          return .failure(failure(e))
        }
      }
      switch copy(from: input, to: output, limit: end - data) {
      case .success(let count):
        total += count
        // Shorter than the extent: the file was cut meanwhile, and nothing more is there.
        if count < end - data { offset = length } else { offset = end }
      case .failure(let failure):
        return .failure(failure)
      }
    }
    if case .failure(let e) = valueOrErrno(.truncate, { ftruncate(output, off_t(length)) }) {
      return .failure(.writing(e))
    }
    return .success(total)
  }

  /// The fallback: `read(2)` and `write(2)` through a buffer, from `total` bytes already copied.
  private static func readAndWrite(
    from input: Int32, to output: Int32, limit: Int64, total start: Int64, progress: (Int64) -> Void
  ) -> Result<Int64, Failure> {
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: 4096)
    defer { buffer.deallocate() }
    var total = start
    while total < limit {
      let asked = Int(min(Int64(bufferSize), limit - total))
      let count: Int
      switch valueOrErrno(.read, { read(input, buffer, asked) }) {
      case .success(0): return .success(total)
      case .success(let n): count = n
      case .failure(let e): return .failure(.reading(e))
      }
      var written = 0
      while written < count {
        switch valueOrErrno(.write, { write(output, buffer + written, count - written) }) {
        case .success(let n): written += n
        case .failure(let e): return .failure(.writing(e))
        }
      }
      total += Int64(count)
      progress(total)
    }
    return .success(total)
  }
}
