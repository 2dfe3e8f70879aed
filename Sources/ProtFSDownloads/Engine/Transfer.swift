import CCurl
import Foundation
import ProtFS
import ProtFSSystem

/// One attempt at moving a task's bytes: a libcurl easy handle writing into the temp file.
///
/// `@unchecked Sendable`: the engine thread owns it while the attempt runs (libcurl calls back on
/// that thread); afterwards it is handed, whole, to the finisher thread.
package final class Transfer: @unchecked Sendable {
  package let task: DownloadTask
  package let easy: UnsafeMutableRawPointer
  /// The temp file, open for writing; closed by whichever thread ends the attempt.
  package let file: FileDescriptor
  package let temporaryDirectory: String
  /// The temp directory, held open from the temp file's creation to the placement, so that every
  /// operation on the file is relative to the directory it was made in.
  package let directory: DirectoryHandle
  /// The temp file's name in `directory`: reserved, not yet taken, while `isNamed` is false.
  package private(set) var temporaryFileName: String
  /// Whether the temp file has its name in `directory`. A new one has none (`O_TMPFILE`) until
  /// something must find it there (`giveName()`); a download that finishes first is linked straight
  /// into its destination.
  package private(set) var isNamed: Bool
  /// The byte the request asked to start at (`Range: bytes=offset-`).
  package let offset: Int64
  package let isHTTP: Bool
  package let hostKey: String
  package let digest: SHA256Digest?
  /// Where received bytes gather until a write: libcurl hands the body over in 16 KiB pieces
  /// whatever its receive buffer, and one `pwrite` per piece would cost four times the syscalls.
  package let staging: UnsafeMutableRawBufferPointer
  /// Where `staging` goes back when the transfer is done with it (`returnStaging()`).
  private let stagingBuffers: StagingBuffers
  /// Whether `staging` went back; nothing is written from it after that.
  private var stagingReturned = false
  /// Bytes in `staging` not yet written.
  private var staged = 0
  /// Whether to start writeback of each full buffer as soon as it is written, so that the fsync at
  /// the end waits for the last few MiB instead of the whole file.
  package let writesBehind: Bool
  package let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
  package var headerList: UnsafeMutablePointer<curl_slist>?

  /// Bytes in the temp file: where the staged bytes go.
  private var flushed: Int64
  /// Where the blocks reserved for the body end (`reserveSpace(through:)`): up to
  /// `reservationWindow` ahead of the bytes written, never past the announced length.
  private var reservedEnd: Int64
  /// Whether to go on reserving: false once `fallocate` failed (unsupported, or a full disk, which
  /// the writes then report themselves).
  private var reserves = true
  /// Whether the kept file this attempt continues may hold blocks past its end that an earlier
  /// attempt reserved and, killed, never gave back: `releaseReservation` frees them too.
  private var mayHoldEarlierReservation: Bool
  /// How far ahead of its bytes a large body's blocks are reserved. On ext4 a 1 GiB body written
  /// in 128 KiB pieces into reserved blocks took 0.11 s against 0.18 s (medians of 16 alternating
  /// rounds), and whole-file and 64 MiB reservations measured the same; the window bounds what a
  /// process killed mid-body leaves reserved.
  package static let reservationWindow: Int64 = 64 << 20
  /// Bytes received so far, written or staged: where the next byte goes in the temp file; for an
  /// upload, the bytes of the snapshot sent so far.
  package var position: Int64 { upload == nil ? flushed + Int64(staged) : upload!.sent }
  /// The upload side of an upload task's attempt (`file` is then its snapshot, read-only).
  package var upload: UploadAttempt?
  package var bytesExpected: Int64 = -1
  package var bodyStarted = false
  /// An HTTP status the body was refused for.
  package var refusedStatus: Int?
  /// The errno of a failed write (ENOSPC on a full disk).
  package var writeErrno: Int32?
  /// The server answered 206 for another range than asked: start over from byte 0.
  package var rangeMismatch = false
  package var lastActivity: UInt64
  /// The request timeout of this task, in nanoseconds.
  package var requestLimit: UInt64 = 0
  /// When the task's resource timeout ends (seconds since 1970).
  package var deadline: Double = .infinity
  /// Where the current minimum-speed window began, and the position then.
  package var speedWindowStart: UInt64
  package var speedWindowPosition: Int64
  package var lastProgressEvent: UInt64 = 0
  /// The position the last progress event announced. Kept apart from the task's count, which the
  /// store snapshots also move: bytes a snapshot recorded still get their event.
  package var reportedPosition: Int64

  // The current response's headers; a redirect's response starts them over.
  package var entityTag: String?
  package var lastModified: String?
  package var contentDisposition: String?
  package var contentRange: String?
  /// The last redirect's target, to explain a redirect that was refused.
  package var location: String?
  /// A handed-over task's (an app's background download, as nsurlsessiond's): every status is an
  /// answer whose body is the file, and the response's header fields are kept for the app.
  package let answersEveryStatus: Bool
  /// Those header fields, of the current response, and their bytes.
  package var responseHeaders: [UploadHeader] = []
  private var keptHeaderBytes = 0

  package init(
    task: DownloadTask, easy: UnsafeMutableRawPointer, file: FileDescriptor, temporaryDirectory: String,
    directory: DirectoryHandle, temporaryFileName: String, isNamed: Bool = true, offset: Int64, isHTTP: Bool,
    hostKey: String,
    digest: SHA256Digest?, staging buffers: StagingBuffers, writesBehind: Bool
  ) {
    staging = buffers.take()
    stagingBuffers = buffers
    self.writesBehind = writesBehind
    self.task = task
    self.easy = easy
    self.file = file
    self.temporaryDirectory = temporaryDirectory
    self.directory = directory
    self.temporaryFileName = temporaryFileName
    self.isNamed = isNamed
    self.offset = offset
    flushed = offset
    reservedEnd = offset
    mayHoldEarlierReservation = offset > 0
    reportedPosition = offset
    self.isHTTP = isHTTP
    answersEveryStatus = isHTTP && task.runtime.withLock { $0.record.handsOver && $0.record.upload == nil }
    self.hostKey = hostKey
    self.digest = digest
    lastActivity = Monotonic.now
    speedWindowStart = lastActivity
    speedWindowPosition = offset
    errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
  }

  deinit {
    returnStaging()
    errorBuffer.deallocate()
    if let headerList { protfs_curl_slist_free_all(headerList) }
  }

  package var temporaryPath: String { temporaryDirectory + "/" + temporaryFileName }

  /// Gives an unnamed temp file its name in the temp directory, so that whatever looks for the task's
  /// file there (a later attempt, another process after a kill, the app, `protfs tasks`) finds it.
  /// A name taken meanwhile is replaced by a fresh one, in the task's record too. Returns the errno
  /// of a failure (the bytes then go with the descriptor). Called by the thread owning the transfer.
  @discardableResult
  package func giveName() -> Int32? {
    // Held before it has a name, so that `cache purge` never finds it named and not held.
    if !isNamed { TemporaryFileLock.hold(file.rawValue) }
    while !isNamed {
      switch valueOrErrno(.link, { Kernel.linkUnnamed(file.rawValue, in: directory.fd, as: temporaryFileName) }) {
      case .success:
        isNamed = true
      case .failure(let e) where e == .exists:
        let name = TemporaryFile.randomName()
        temporaryFileName = name
        task.runtime.withLock { $0.record.temporaryFileName = name }
      case .failure(let e):
        return e.rawValue
      }
    }
    return nil
  }

  /// Ends the attempt keeping its temp file for the next one: named, its reservation given back,
  /// then closed.
  package func closeKeepingFile() {
    giveName()
    releaseReservation()
    file.close()
  }

  /// The link count the temp file has while nothing else names it: one, or none while unnamed.
  package var ownLinkCount: UInt64 { isNamed ? 1 : 0 }

  /// libcurl's own detail about the failure, if it wrote one.
  package var curlErrorDetail: String? {
    let text = String(cString: errorBuffer)
    return text.isEmpty ? nil : text
  }

  package var responseCode: Int {
    var code: Int = 0
    protfs_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
    return code
  }

  private var contentLength: Int64 {
    var length: curl_off_t = -1
    protfs_curl_easy_getinfo_off_t(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
    return Int64(length)
  }

  // MARK: Called by libcurl on the engine thread

  /// A header line arrived. Called for every header of every response, so it looks at bytes and
  /// makes strings only for the few headers the engine uses.
  package func header(_ line: UnsafeRawBufferPointer) {
    lastActivity = Monotonic.coarse
    if Self.hasPrefix(line, "http/") {
      // A new response (after a redirect or a 100): its headers replace the previous ones.
      entityTag = nil
      lastModified = nil
      contentDisposition = nil
      contentRange = nil
      if answersEveryStatus {
        responseHeaders = []
        keptHeaderBytes = 0
      }
      return
    }
    if answersEveryStatus { keepHeader(line) }
    if Self.hasPrefix(line, "location:") {
      location = Self.value(line, after: 9)
      return
    }
    if Self.hasPrefix(line, "etag:") {
      entityTag = Self.value(line, after: 5)
    } else if Self.hasPrefix(line, "last-modified:") {
      lastModified = Self.value(line, after: 14)
    } else if Self.hasPrefix(line, "content-range:") {
      contentRange = Self.value(line, after: 14)
    } else if Self.hasPrefix(line, "content-disposition:") {
      contentDisposition = Self.value(line, after: 20)
    }
  }

  /// Keeps a header line of a handed-over task's response (at most 100 fields and 16 KiB in all,
  /// so that a hostile server cannot swell the store: what it sends beyond is not kept).
  private func keepHeader(_ line: UnsafeRawBufferPointer) {
    guard responseHeaders.count < 100, keptHeaderBytes + line.count <= 16384, let colon = line.firstIndex(of: 0x3A)
    else { return }
    keptHeaderBytes += line.count
    let name = String(decoding: UnsafeRawBufferPointer(rebasing: line[..<colon]), as: UTF8.self)
      .trimmingCharacters(in: .whitespaces)
    guard !name.isEmpty else { return }
    responseHeaders.append(UploadHeader(name: name, value: Self.value(line, after: colon + 1)))
  }

  /// Whether `line` starts with `prefix` (lowercase ASCII), ignoring case.
  private static func hasPrefix(_ line: UnsafeRawBufferPointer, _ prefix: StaticString) -> Bool {
    let count = prefix.utf8CodeUnitCount
    guard line.count >= count else { return false }
    let bytes = prefix.utf8Start
    for index in 0..<count where line[index] | 0x20 != bytes[index] | 0x20 {
      return false
    }
    return true
  }

  /// The header value after `offset` bytes, without surrounding blanks and line end.
  private static func value(_ line: UnsafeRawBufferPointer, after offset: Int) -> String {
    var start = offset
    var end = line.count
    while start < end, line[start] == 0x20 || line[start] == 0x09 { start += 1 }
    while end > start, line[end - 1] == 0x0D || line[end - 1] == 0x0A || line[end - 1] == 0x20 { end -= 1 }
    return String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<end]), as: UTF8.self)
  }

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
    var written = 0
    while written < staged {
      let result = valueOrErrno(.write) {
        pwrite(fd, staging.baseAddress! + written, staged - written, off_t(flushed + Int64(written)))
      }
      switch result {
      case .success(let count): written += count
      case .failure(let error):
        writeErrno = error.rawValue
        return false
      }
    }
    if writesBehind && staged == staging.count {
      _ = valueOrErrno(.syncFileRange) { Kernel.startWriteback(fd, offset: flushed, length: Int64(staged)) }
    }
    flushed += Int64(staged)
    staged = 0
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
    guard case .success = valueOrErrno(.statfs, { fstatvfs(file.rawValue, &space) }) else {
      reserves = false
      return
    }
    let (bytes, overflow) = UInt64(space.f_bavail).multipliedReportingOverflow(by: UInt64(space.f_frsize))
    let free = overflow ? Int64.max : Int64(clamping: bytes)
    guard free >= Self.sum(target - start, Self.reservationMargin) else {
      reserves = false
      return
    }
    let result = valueOrErrno(.fallocate) { Kernel.reserveSpace(file.rawValue, offset: start, length: target - start) }
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
    _ = valueOrErrno(.truncate) { ftruncate(file.rawValue, off_t(flushed)) }
    reservedEnd = flushed
    mayHoldEarlierReservation = false
  }

  /// Decides, on the first body bytes, whether they continue the temp file or replace it.
  package func beginBody() -> Bool {
    let code = isHTTP ? responseCode : 0
    if isHTTP {
      switch code {
      case 206:
        let range = contentRange.flatMap(ContentRange.init)
        if let range, range.first != offset {
          rangeMismatch = true
          return false
        }
        bytesExpected = range?.total ?? (contentLength >= 0 ? Self.sum(offset, contentLength) : -1)
      default:
        // Another status is refused, except by an app's background download, which takes any
        // answer as nsurlsessiond does: the error page is the file, and the app reads the status
        // from the task's response. (A 416 to a range from the end of a complete file still means
        // "nothing left to get".)
        guard (200..<300).contains(code) || (answersEveryStatus && !(code == 416 && offset > 0)) else {
          refusedStatus = code
          return false
        }
        // A whole answer to a Range request (the server ignored it, the entity changed, If-Range,
        // or an error page): start over.
        if offset > 0 { restartFile() }
        bytesExpected = contentLength
      }
    } else {
      bytesExpected = contentLength >= 0 ? Self.sum(offset, contentLength) : -1
    }
    if let value = contentDisposition, !task.runtime.withLock({ $0.fileNameIsExplicit }),
      let name = DownloadFileName.fromContentDisposition(value)
    {
      task.runtime.withLock { $0.record.fileName = name }
    }
    let (etag, modified) = (entityTag, lastModified)
    let expected = bytesExpected
    // A handed-over download's response is the app's from its first bytes on (iOS sets a task's
    // `response` before its first `didWriteData`); its end records it again, as it ended.
    let response = answersEveryStatus && isHTTP ? DownloadResponse(status: code, headers: responseHeaders) : nil
    // A body that fits the staging buffer reaches the temp file only at its end; a larger one
    // (or one of unknown size) reaches it before, and so gets its name in the temp directory now,
    // its validator in the store with it: a process killed at any point after this leaves the
    // bytes for the next to continue with If-Range. (The small one needs neither: thousands of
    // small files skip a link and a transaction each.)
    let reachesFileEarly = expected < 0 || expected - offset > Int64(staging.count)
    if reachesFileEarly { giveName() }
    let record = task.runtime.withLock { r in
      if let response { r.record.response = response }
      r.record.entityTag = etag
      r.record.lastModified = modified
      r.record.bytesExpected = expected
      return r.record
    }
    if reachesFileEarly { task.core.persistNow(record) }
    return true
  }

  /// `a + b`, or Int64.max where that overflows: the server chooses the Content-Length, and one
  /// near Int64.max on a resumed transfer must not trap.
  private static func sum(_ a: Int64, _ b: Int64) -> Int64 {
    let (value, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : value
  }

  /// Empties the temp file, for a server that sent the whole entity again.
  package func restartFile() {
    _ = valueOrErrno(.truncate) { ftruncate(file.rawValue, 0) }
    flushed = 0
    reservedEnd = 0
    mayHoldEarlierReservation = false
    staged = 0
    digest?.reset()
  }
}

/// A parsed `Content-Range: bytes first-last/total` (total may be `*`), or `bytes */total` for a 416.
package struct ContentRange {
  package var first: Int64?
  package var total: Int64?

  package init?(_ value: String) {
    let trimmed = value.trimmingCharacters(in: .whitespaces)
    guard trimmed.lowercased().hasPrefix("bytes") else { return nil }
    let spec = trimmed.dropFirst(5).trimmingCharacters(in: .whitespaces)
    let parts = spec.split(separator: "/", maxSplits: 1)
    guard parts.count == 2 else { return nil }
    total = Int64(parts[1])
    first = parts[0] == "*" ? nil : parts[0].split(separator: "-").first.flatMap { Int64($0) }
  }
}

/// A monotonic clock in nanoseconds, for timeouts and throttling.
package enum Monotonic {
  package static var now: UInt64 { read(CLOCK_MONOTONIC) }

  /// The same clock at the kernel tick's resolution (a few milliseconds), never ahead of `now`
  /// and cheaper to read: for stamping activity, which callbacks do for every header line and
  /// every block of body while the timeouts it serves are seconds long.
  package static var coarse: UInt64 { read(CLOCK_MONOTONIC_COARSE) }

  private static func read(_ clock: clockid_t) -> UInt64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
  }

  /// `seconds` in nanoseconds, clamped: a value read back from the store may be anything.
  package static func nanoseconds(seconds: Double) -> UInt64 {
    guard seconds.isFinite, seconds > 0 else { return 0 }
    return seconds >= 1.8e10 ? UInt64.max / 2 : UInt64(seconds * 1e9)
  }

  package static func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
  }

  package static func nanoseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    // Saturating: a library caller may configure any duration.
    let (whole, overflow) = UInt64(max(0, seconds)).multipliedReportingOverflow(by: 1_000_000_000)
    return overflow || whole > UInt64.max / 2 ? UInt64.max / 2 : whole + UInt64(max(0, attoseconds) / 1_000_000_000)
  }
}
