import CCurl
import Foundation
import ProtFS
import ProtFSSeal
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
  let stagingBuffers: StagingBuffers
  /// Whether `staging` went back; nothing is written from it after that.
  var stagingReturned = false
  /// Bytes in `staging` not yet written.
  var staged = 0
  /// Whether to start writeback of each full buffer as soon as it is written, so that the fsync at
  /// the end waits for the last few MiB instead of the whole file.
  package let writesBehind: Bool
  package let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
  package var headerList: UnsafeMutablePointer<curl_slist>?

  /// Bytes in the temp file: where the staged bytes go.
  var flushed: Int64
  /// Where the blocks reserved for the body end (`reserveSpace(through:)`): up to
  /// `reservationWindow` ahead of the bytes written, never past the announced length.
  var reservedEnd: Int64
  /// Whether to go on reserving: false once `fallocate` failed (unsupported, or a full disk, which
  /// the writes then report themselves).
  var reserves = true
  /// Whether the kept file this attempt continues may hold blocks past its end that an earlier
  /// attempt reserved and, killed, never gave back: `releaseReservation` frees them too.
  var mayHoldEarlierReservation: Bool
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
  /// The temp file's cipher on a sealed device: its bytes are written through it (`SealedFileIO`).
  package var cipher: FileCipher?
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
  var keptHeaderBytes = 0

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
      switch Kernel.linkTmpfile(file.rawValue, directory.fd, temporaryFileName) {
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

  var contentLength: Int64 {
    var length: curl_off_t = -1
    protfs_curl_easy_getinfo_off_t(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
    return Int64(length)
  }
}
