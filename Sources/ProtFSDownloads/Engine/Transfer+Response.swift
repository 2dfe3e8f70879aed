import CCurl
import Foundation
import ProtFS
import ProtFSSystem

/// The response as libcurl hands it over: its header lines, and what its first body bytes decide.
extension Transfer {
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
}
