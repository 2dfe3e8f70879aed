import CCurl
import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// The body's bytes on their way to the temp file: staged, written, their blocks reserved ahead.
extension Transfer {
  /// Body bytes arrived; returns how many were taken (fewer aborts the transfer).
  package func receive(_ bytes: UnsafeRawPointer, count: Int) -> Int {
    lastActivity = Monotonic.coarse
    if let upload {
      upload.collect(bytes, count: count)
      return count
    }
    if !bodyStarted {
      bodyStarted = true
      guard beginBody() else { return 0 }
    }
    var taken = 0
    while taken < count {
      let n = min(count - taken, staging.count - staged)
      (staging.baseAddress! + staged).copyMemory(from: bytes + taken, byteCount: n)
      staged += n
      taken += n
      if staged == staging.count {
        // More bytes than announced: the file is named before the first of them reaches it.
        if !isNamed { giveName() }
        guard flush() else { return 0 }
      }
    }
    digest?.update(bytes, count: count)
    return count
  }

  /// Gives the staging buffer back for another transfer; staged bytes not written by then are
  /// dropped. Called by the thread that owns the transfer (and by `deinit`).
  package func returnStaging() {
    guard !stagingReturned else { return }
    stagingReturned = true
    stagingBuffers.give(staging)
  }

  /// The error of the write that failed, if one did (ENOSPC on a full disk).
  package var writeError: ProtFSError? {
    guard let e = writeErrno else { return nil }
    var error = ProtFSError.system(
      "write the temp file of '\(task.url.absoluteString)' at", path: temporaryPath, errno: e)
    if e == ENOSPC { error.remedy = .advice("free space on the device's filesystem, then download it again") }
    return error
  }

  /// Writes the staged bytes to the temp file; false (with `writeErrno` set) when that failed.
  @discardableResult
  package func flush() -> Bool {
    guard staged > 0, writeErrno == nil, !stagingReturned else { return writeErrno == nil }
    let fd = file.rawValue
    // A full buffer means a body larger than the buffer: its blocks are reserved ahead of it.
    if staged == staging.count { reserveSpace(through: flushed + Int64(staged)) }
    if let cipher {
      guard writeSealed(with: cipher) else { return false }
    }
    var written = cipher == nil ? 0 : staged
    while written < staged {
      let result = Kernel.pwrite(fd, staging.baseAddress! + written, staged - written, off_t(flushed + Int64(written)))
      switch result {
      case .success(let count): written += count
      case .failure(let error):
        writeErrno = error.rawValue
        return false
      }
    }
    if writesBehind && staged == staging.count {
      _ = Kernel.sync_file_range(fd, flushed, Int64(staged))
    }
    flushed += Int64(staged)
    staged = 0
    return true
  }

  /// Writes the staged bytes through the temp file's key (`SealedFileIO`); false (with `writeErrno`
  /// set) when that failed.
  private func writeSealed(with cipher: FileCipher) -> Bool {
    let io = SealedFileIO(fd: file.rawValue, cipher: cipher, path: temporaryPath)
    do {
      try io.write(UnsafeRawBufferPointer(rebasing: staging[..<staged]), at: Int(flushed))
    } catch {
      writeErrno = error.errno ?? EIO
      return false
    }
    return true
  }

  /// The free space a reservation must leave on the temp file's filesystem: below it nothing more
  /// is reserved, so that what is reserved and not yet written never fills a disk.
  package static let reservationMargin: Int64 = 256 << 20

  /// Reserves the temp file's blocks from the end of the last reservation to `reservationWindow`
  /// past its bytes (or to the announced length, if nearer) once a write would reach beyond it.
  ///
  /// Never further ahead than the bytes already in the file, so a server that announces a large
  /// body and sends little makes a transfer hold at most as much disk again as it sent (the
  /// reservations grow with the body: 256 KiB, 512 KiB, … up to the window); and never what would
  /// leave less than `reservationMargin` free.
  private func reserveSpace(through end: Int64) {
    guard reserves, end > reservedEnd else { return }
    var target = Self.sum(flushed, min(Self.reservationWindow, flushed))
    if bytesExpected > flushed { target = min(target, bytesExpected) }
    guard target > end else { return }
    let start = max(reservedEnd, flushed)
    var space = statvfs()
    guard case .success = Kernel.fstatvfs(file.rawValue, &space) else {
      reserves = false
      return
    }
    let (bytes, overflow) = UInt64(space.f_bavail).multipliedReportingOverflow(by: UInt64(space.f_frsize))
    let free = overflow ? Int64.max : Int64(clamping: bytes)
    guard free >= Self.sum(target - start, Self.reservationMargin) else {
      reserves = false
      return
    }
    let result = Kernel.fallocateKeepSize(file.rawValue, start, target - start)
    // Even a failed call may have reserved part of the range: `releaseReservation` covers it.
    reservedEnd = target
    if case .failure = result { reserves = false }
  }

  /// Gives back the blocks reserved past the file's last byte (a body that ended short of its
  /// announced length, or of unknown length, or an earlier attempt's): a truncate to its own size
  /// frees them. Called before
  /// a kept file is closed and before a finished one is placed.
  package func releaseReservation() {
    guard reservedEnd > flushed || mayHoldEarlierReservation else { return }
    _ = Kernel.ftruncate(file.rawValue, off_t(flushed))
    reservedEnd = flushed
    mayHoldEarlierReservation = false
  }

  /// `a + b`, or Int64.max where that overflows: the server chooses the Content-Length, and one
  /// near Int64.max on a resumed transfer must not trap.
  static func sum(_ a: Int64, _ b: Int64) -> Int64 {
    let (value, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : value
  }

  /// Empties the temp file, for a server that sent the whole entity again.
  package func restartFile() {
    _ = Kernel.ftruncate(file.rawValue, 0)
    flushed = 0
    reservedEnd = 0
    mayHoldEarlierReservation = false
    staged = 0
    digest?.reset()
  }
}
