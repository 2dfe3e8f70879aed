import CCurl
import Foundation
import ProtFSSeal
import ProtFSSystem

/// The upload side of one attempt: the snapshot read from byte 0 by libcurl's read callback, and
/// the response body collected (up to `UploadDetails.keptResponseLimit` bytes).
///
/// `@unchecked Sendable`: used by the engine thread while the attempt runs, then by the finisher.
package final class UploadAttempt: @unchecked Sendable {
  /// The snapshot's size: what the attempt sends.
  package let size: Int64
  /// Bytes of the snapshot handed to libcurl so far.
  package var sent: Int64 = 0
  /// The response body kept.
  package var response = Data()
  /// The response body's whole size, kept or not.
  package var responseBytes: Int64 = 0
  /// The errno of a failed read of the snapshot.
  package var readErrno: Int32?
  /// Why the snapshot's copy failed, when it did.
  package var copyFailure: ProtFSError?
  /// Whether the source changed during the copy, so that the copy started over and this attempt,
  /// which sent bytes of the previous copy, must start over too.
  package var snapshotRestarted = false

  /// The snapshot's copy still under way in this process, if any.
  package let copying: SnapshotCopy?
  /// The copy's generation this attempt sends.
  package let generation: Int
  /// The snapshot's cipher on a sealed device: what is sent is decrypted through it.
  package var cipher: FileCipher?

  package init(size: Int64, copying: SnapshotCopy?, generation: Int = 0) {
    self.size = size
    self.copying = copying
    self.generation = generation
  }

  /// Keeps response bytes up to the limit and counts the rest.
  package func collect(_ bytes: UnsafeRawPointer, count: Int) {
    responseBytes += Int64(count)
    let room = UploadDetails.keptResponseLimit - response.count
    if room > 0 { response.append(bytes.assumingMemoryBound(to: UInt8.self), count: min(room, count)) }
  }

  /// Reads the next bytes of the snapshot `fd` into libcurl's `buffer`; returns how many (0 at
  /// the end), or `CURL_READFUNC_ABORT` after a failed read.
  package func read(_ fd: Int32, into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
    var end = size
    var waitedFor = sent
    while let copying = copying {
      switch copying.available(beyond: waitedFor, generation: generation) {
      case .copied(let copied):
        end = min(size, copied)
        // A sealed snapshot is decrypted in whole blocks: wait for the copy to finish the next one.
        if cipher != nil, end < size, end / Int64(FileCipher.blockSize) * Int64(FileCipher.blockSize) <= sent {
          waitedFor = copied
          continue
        }
      case .failed(let error):
        copyFailure = error
        return Int(CURL_READFUNC_ABORT)
      case .restarted:
        snapshotRestarted = true
        return Int(CURL_READFUNC_ABORT)
      }
      break
    }
    if let cipher { return readSealed(fd, cipher: cipher, into: buffer, capacity: capacity, end: end) }
    switch Kernel.pread(fd, buffer, min(capacity, Int(max(0, end - sent))), off_t(sent)) {
    case .success(let n):
      sent += Int64(n)
      return n
    case .failure(let error):
      readErrno = error.rawValue
      return Int(CURL_READFUNC_ABORT)
    }
  }
}

extension UploadAttempt {
  /// Reads the next plaintext bytes of the sealed snapshot `fd`, up to `end`, into `buffer`. While
  /// the copy is under way only its whole blocks are read: the copy's last block so far is
  /// encrypted as part of a longer file and does not decrypt on its own.
  fileprivate func readSealed(
    _ fd: Int32, cipher: FileCipher, into buffer: UnsafeMutableRawPointer, capacity: Int, end: Int64
  ) -> Int {
    let block = Int64(FileCipher.blockSize)
    let readable = end < size ? end / block * block : end
    guard readable > sent else { return 0 }
    let bytes: [UInt8]
    do {
      bytes = try SealedFileIO(fd: fd, cipher: cipher, path: "").read(
        at: Int(sent), count: min(capacity, Int(readable - sent)))
    } catch {
      readErrno = error.errno ?? EIO
      return Int(CURL_READFUNC_ABORT)
    }
    bytes.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    sent += Int64(bytes.count)
    return bytes.count
  }
}

/// Upload attempts: launched from the task's snapshot, sent with PUT or POST through the same
/// multi handle, host limits and retries as downloads, ended by the server's status.
extension TransferEngine {
  /// Starts an attempt at the upload `task` (whose record is `record`): the snapshot opened in its
  /// held directory, sent from byte 0.
  package func launchUpload(_ task: DownloadTask, record: DownloadTaskRecord, hostKey: String, deadline: Double) {
    let url = task.url
    let directory = record.temporaryDirectory
    guard let upload = record.upload, let name = record.temporaryFileName else {
      fail(
        task, ProtFSError(.notFound, "The upload of '\(url.absoluteString)' has no snapshot left to send."),
        deleting: nil)
      return
    }
    do {
      try DownloadSession.checkUploadURL(url)
    } catch {
      fail(task, error, deleting: TemporaryRemoval(task, in: configuration.fileSystem))
      return
    }
    if case .deny(let code) = configuration.accessPolicy.canWriteTemp(in: directory) {
      fail(
        task,
        ProtFSError(
          .protectedDataUnavailable,
          "Cannot read the snapshot of '\(record.fileName ?? name)' in '\(directory)': Operation not permitted (the Uploads directory's protection class is not available while the device is locked).",
          path: directory, errno: code, remedy: .resumeAfterUnlock), deleting: nil)
      return
    }
    let held: DirectoryHandle
    let file: FileDescriptor
    let status: stat
    let cipher: FileCipher?
    do {
      (held, file, status, cipher) = try openSnapshot(name, in: directory)
    } catch {
      fail(task, error, deleting: nil)
      return
    }
    let copying = task.runtime.withLock { $0.snapshotCopy }
    let current = copying?.current
    let size = current?.size ?? Int64(status.st_size)
    if copying == nil, record.bytesExpected >= 0, size != record.bytesExpected {
      // The process that made it ended before the copy did: what is left is not the file.
      file.close()
      fail(
        task,
        ProtFSError(
          .io,
          "The snapshot of '\(record.fileName ?? name)' holds \(size) of its \(record.bytesExpected) bytes: the process copying it ended first.",
          path: held.pathOf(name), remedy: .advice("upload the file again")),
        deleting: TemporaryRemoval(directory: held, name: name))
      return
    }
    recordSnapshotSize(size, of: task)
    let easy = idleHandles.popLast() ?? protfs_curl_easy_init()!
    let transfer = Transfer(
      task: task, easy: easy, file: file, temporaryDirectory: directory, directory: held, temporaryFileName: name,
      offset: 0, isHTTP: true, hostKey: hostKey, digest: nil, staging: stagingBuffers, writesBehind: false)
    transfer.upload = UploadAttempt(size: size, copying: copying, generation: current?.generation ?? 0)
    transfer.upload?.cipher = cipher
    start(transfer, record: record, deadline: deadline) {
      configureUpload(transfer, url: url, upload: upload, size: size)
    }
  }

  /// Opens the snapshot `name` in the held temp directory `directory`, and reads its status and,
  /// on a sealed device, its cipher.
  private func openSnapshot(_ name: String, in directory: String) throws(ProtFSError)
    -> (DirectoryHandle, FileDescriptor, stat, FileCipher?)
  {
    var status = stat()
    let held = try temporaryDirectory(directory)
    let file = try held.openDescriptor(name, flags: O_RDONLY)
    _ = try Kernel.fstat(file.rawValue, &status).orThrow(
      "read the snapshot", path: held.pathOf(name))
    return (held, file, status, try configuration.fileSystem.cipher(of: file.rawValue, path: held.pathOf(name)))
  }

  /// Records that the upload `task` sends `size` bytes from byte 0.
  private func recordSnapshotSize(_ size: Int64, of task: DownloadTask) {
    let resized = task.runtime.withLock { r in
      defer {
        r.record.bytesReceived = 0
        r.record.bytesExpected = size
      }
      return r.record.bytesExpected == size ? nil : r.record
    }
    // A copy that started over holds the source's new size: the store must know it before a
    // later process checks a snapshot left behind against it.
    if var record = resized {
      record.bytesReceived = 0
      record.bytesExpected = size
      task.core.persistNow(record)
    }
  }

  /// Sets the easy handle of an upload up: the read callback over the snapshot, its size, the
  /// method and the caller's headers; the response body goes to the write callback.
  private func configureUpload(_ transfer: Transfer, url: URL, upload: UploadDetails, size: Int64) {
    let easy = transfer.easy
    configureConnection(transfer, url: url, write: uploadResponseCallback, header: uploadHeaderCallback)
    let context = Unmanaged.passUnretained(transfer).toOpaque()
    // curl_read_callback and curl_write_callback have the same C type.
    protfs_curl_easy_setopt_write_callback(easy, CURLOPT_READFUNCTION, uploadReadCallback)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_READDATA, context)
    switch upload.method {
    case .put:
      protfs_curl_easy_setopt_long(easy, CURLOPT_UPLOAD, 1)
      protfs_curl_easy_setopt_off_t(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(size))
    case .post:
      protfs_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
      protfs_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(size))
    }
    // libcurl's largest send buffer: fewer, larger writes to the socket (as `curl -T` does).
    protfs_curl_easy_setopt_long(easy, CURLOPT_UPLOAD_BUFFERSIZE, 2 << 20)
    // The body is sent at once rather than after a `100 Continue` round trip, as nsurlsessiond does.
    var list = protfs_curl_slist_append(nil, "Expect:")
    for header in upload.headers { list = protfs_curl_slist_append(list, "\(header.name): \(header.value)") }
    transfer.headerList = list
    protfs_curl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
    // Redirects are followed as a background URLSession follows them (docs/semantics.md §5): 307
    // and 308 send the method and the whole snapshot again (libcurl rewinds through the seek
    // callback), 301 and 302 turn a POST into a GET without a body, 303 turns either into a GET.
    protfs_curl_easy_setopt_seek_callback(easy, uploadSeekCallback)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_SEEKDATA, context)
    protfs_curl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
    protfs_curl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, Self.maximumRedirects)
    protfs_curl_easy_setopt_long(easy, CURLOPT_POSTREDIR, 0)
    protfs_curl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
    protfs_curl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
  }

  /// Decides what the upload attempt `t`, ended by libcurl with `result`, means for its task: a
  /// 2xx completes it, a 5xx (or 408, 429) or a dropped connection retries it from byte 0, any
  /// other status fails it with that status; the answer is kept with the task either way.
  package func finishUploadAttempt(_ t: Transfer, result: CURLcode) {
    let upload = t.upload!
    let task = t.task
    let url = task.url.absoluteString
    let name = task.record.fileName ?? t.temporaryFileName
    let code = t.responseCode
    let detail = t.curlErrorDetail ?? String(cString: protfs_curl_easy_strerror(result))
    detach(t)
    if upload.snapshotRestarted {
      // The source changed while it was copied: send the new copy from byte 0, at once, without
      // counting a failed attempt (the copy makes a bounded number of passes).
      t.file.close()
      task.runtime.withLock { $0.attempts -= 1 }
      hosts.retry(task, at: Monotonic.now)
      return
    }
    if let error = upload.copyFailure {
      fail(t, error)
      return
    }
    if let e = upload.readErrno {
      fail(t, ProtFSError.system("read the upload snapshot of '\(name)' at", path: t.temporaryPath, errno: e))
      return
    }
    if result == CURLE_TOO_MANY_REDIRECTS {
      fail(
        t,
        ProtFSError(
          .network,
          "The server redirected the upload of '\(name)' to '\(url)' more than \(Self.maximumRedirects) times (the last to '\(t.location ?? "?")'): a redirect loop, so the upload stopped.",
          remedy: .advice("the server redirects in a loop; ask its owner for the URL that takes the upload")))
      return
    }
    guard result == CURLE_OK, code > 0 else {
      let error = ProtFSError(
        .network, "Cannot upload '\(name)' to '\(url)': \(detail).",
        remedy: TransferClassification.hint(for: result).map(Remedy.advice))
      if TransferClassification.isRetryable(result) || result == CURLE_ABORTED_BY_CALLBACK {
        t.file.close()
        retry(task, because: error)
      } else {
        fail(t, error)
      }
      return
    }
    finishAnsweredUpload(t, status: code, name: name)
  }

  /// Ends the upload attempt `t` that the server answered with `code`: the answer is kept with the
  /// task; a 2xx completes it, a 5xx (or 408, 429) retries it, any other status fails it.
  private func finishAnsweredUpload(_ t: Transfer, status code: Int, name: String) {
    let upload = t.upload!
    let task = t.task
    let url = task.url.absoluteString
    let body = upload.response
    task.runtime.withLock { r in
      r.record.upload?.responseStatus = code
      r.record.upload?.responseBytes = upload.responseBytes
      r.record.responseBody = body
    }
    let reason = TransferClassification.reasonPhrase(code)
    if (200..<300).contains(code) {
      core.notifyResponse(task, status: code, body: body)
      core.finisher.post(.complete(t))
    } else if TransferClassification.isRetryable(status: code) {
      t.file.close()
      retry(
        task,
        because: ProtFSError(
          .network, "The server answered \(code) (\(reason)) to the upload of '\(name)' to '\(url)'.",
          remedy: .advice("try again later")))
    } else {
      core.notifyResponse(task, status: code, body: body)
      fail(
        t,
        ProtFSError(
          .network, "The server answered \(code) (\(reason)) to the upload of '\(name)' to '\(url)'.",
          remedy: .advice("check the URL, the method and the server's access rules")))
    }
  }
}

private let uploadResponseCallback: curl_write_callback = { data, size, count, context in
  guard let context, let data else { return 0 }
  let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
  return transfer.receive(UnsafeRawPointer(data), count: size * count)
}

private let uploadHeaderCallback: curl_write_callback = { data, size, count, context in
  guard let context, let data else { return 0 }
  // The transfer notes the activity and a redirect's Location, to name it should the redirects loop.
  Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().header(
    UnsafeRawBufferPointer(start: data, count: size * count))
  return size * count
}

private let uploadReadCallback: curl_write_callback = { buffer, size, count, context in
  guard let context, let buffer else { return Int(CURL_READFUNC_ABORT) }
  let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
  transfer.lastActivity = Monotonic.now
  return transfer.upload!.read(transfer.file.rawValue, into: buffer, capacity: size * count)
}

/// libcurl rewinds the body to send it again after a 307 or 308 (always to byte 0).
private let uploadSeekCallback: curl_seek_callback = { context, offset, origin in
  guard let context, origin == SEEK_SET, offset >= 0 else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
  let upload = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().upload!
  guard offset <= upload.size else { return Int32(CURL_SEEKFUNC_FAIL) }
  upload.sent = Int64(offset)
  return Int32(CURL_SEEKFUNC_OK)
}
