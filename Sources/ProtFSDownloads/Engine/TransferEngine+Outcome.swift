import CCurl
import Foundation
import ProtFSSystem

/// Ending an attempt: what libcurl's result and the server's answer mean for the task (by
/// `TransferClassification`), and acting on it: complete, retry, start over or fail.
extension TransferEngine {
  /// Forgets the validator, so that the retry asks for the whole entity again, and retries.
  private func restartFromZero(_ t: Transfer, because error: ProtFSError) {
    t.closeKeepingFile()
    t.task.runtime.withLock { r in
      r.record.entityTag = nil
      r.record.lastModified = nil
    }
    retry(t.task, because: error)
  }

  /// Decides what the attempt `t`, ended by libcurl with `result`, means for its task.
  package func finishAttempt(_ t: Transfer, result: CURLcode) {
    if t.upload != nil {
      finishUploadAttempt(t, result: result)
      return
    }
    let url = t.task.url.absoluteString
    if result == CURLE_OK && !t.bodyStarted {
      // An empty body never reached the write callback: decide on the headers alone.
      t.bodyStarted = true
      _ = t.beginBody()
    }
    let code = t.isHTTP ? t.responseCode : 0
    let detail = t.curlErrorDetail ?? String(cString: protfs_curl_easy_strerror(result))
    // An attempt libcurl ended well needs its staged bytes only if it completes: the finisher
    // writes them then, off this thread (every other ending of such an attempt discards them:
    // a refused body stages nothing, a range mismatch starts over). One that
    // ended on an error keeps them for the retry.
    detach(t, writingStagedBytes: result != CURLE_OK)
    if let error = t.writeError {
      fail(t, error)
      return
    }
    if t.rangeMismatch {
      // The server sent another range than asked: forget the validator and start from byte 0.
      restartFromZero(t, because: ProtFSError(.network, "The server sent the wrong byte range for '\(url)'."))
      return
    }
    // A handed-over download keeps its response (status and fields) for the app, whatever it says.
    let answered = t.answersEveryStatus && result == CURLE_OK && t.refusedStatus == nil
    if answered {
      let headers = t.responseHeaders
      t.task.runtime.withLock { $0.record.response = DownloadResponse(status: code, headers: headers) }
    }
    let status = answered ? 200 : t.refusedStatus ?? (t.isHTTP && result == CURLE_OK ? code : 200)
    if status == 416, t.offset > 0 {
      finishRangeNotSatisfiable(t)
    } else if !(200..<300).contains(status) {
      finishRefused(t, status: status)
    } else if result == CURLE_OK {
      core.finisher.post(.complete(t), last: hosts.isIdle)
    } else {
      finishFailed(t, result: result, detail: detail)
    }
  }

  /// Ends an attempt whose range from the temp file's end the server refused (416): the file is
  /// complete when the server's total says so, else the download starts over; an earlier
  /// announced length that the file does not reach fails it.
  private func finishRangeNotSatisfiable(_ t: Transfer) {
    let url = t.task.url.absoluteString
    // A 416 for a range starting at the end of a complete file: there is nothing left to get.
    let total = t.contentRange.flatMap(ContentRange.init)?.total
    let announced = t.task.runtime.withLock { $0.record.bytesExpected }
    if announced >= 0 && announced != t.offset {
      // An earlier response announced more bytes than the entity has: its Content-Length lied.
      fail(
        t,
        ProtFSError(
          .network,
          "The server announced \(announced) bytes for '\(url)' but sent only \(t.offset) and says the file is complete.",
          remedy: .advice("the server's Content-Length is wrong; nothing was kept")))
      return
    }
    if total == nil || total == t.offset {
      t.task.runtime.withLock { $0.record.bytesExpected = t.offset }
      core.finisher.post(.complete(t), last: hosts.isIdle)
      return
    }
    restartFromZero(t, because: ProtFSError(.network, "The server refused the byte range for '\(url)'."))
  }

  /// Ends an attempt the server answered with `status`, not a success: retried when the status
  /// says to try again later, else failed.
  private func finishRefused(_ t: Transfer, status: Int) {
    let url = t.task.url.absoluteString
    let reason = TransferClassification.reasonPhrase(status)
    if TransferClassification.isRetryable(status: status) {
      t.closeKeepingFile()
      retry(
        t.task,
        because: ProtFSError(
          .network, "The server answered \(status) (\(reason)) for '\(url)'.", remedy: .advice("try again later")))
    } else {
      fail(
        t,
        ProtFSError(
          .network, "The server answered \(status) (\(reason)) for '\(url)'.",
          remedy: .advice(status == 404 ? "check the URL" : "check the URL and the server's access rules")))
    }
  }

  /// Ends an attempt libcurl ended with the error `result` (`detail` its words): retried when the
  /// error may pass, else failed.
  private func finishFailed(_ t: Transfer, result: CURLcode, detail: String) {
    if let error = TransferClassification.deterministicFailure(t, result: result) {
      fail(t, error)
      return
    }
    let error = ProtFSError(
      .network, "Cannot download '\(t.task.url.absoluteString)': \(detail).",
      remedy: TransferClassification.hint(for: result).map(Remedy.advice))
    if TransferClassification.isRetryable(result) {
      t.closeKeepingFile()
      retry(t.task, because: error)
    } else {
      fail(t, error)
    }
  }
}
