import Foundation
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem

/// The userInfo key of a failed or cancelled download's resume data, as Apple's.
public let NSURLSessionDownloadTaskResumeData = "NSURLSessionDownloadTaskResumeData"

/// The `NSURLErrorDomain` errors the tasks complete with (docs/semantics.md §9). Foundation on
/// Linux declares the domain and the codes; this is the one place protfs failures become them.
enum URLErrorMapping {
  /// The code `error` maps to: a cancel is `NSURLErrorCancelled` (-999), a timeout
  /// `NSURLErrorTimedOut`, a server that cannot be reached `NSURLErrorCannotConnectToHost`, a
  /// transfer broken off `NSURLErrorNetworkConnectionLost`, a bad reply or checksum
  /// `NSURLErrorBadServerResponse`, a protected or unwritable file `NSURLErrorCannotCreateFile` /
  /// `NSURLErrorCannotWriteToFile`, a missing file to upload `NSURLErrorFileDoesNotExist`, resume
  /// data that continues no download of the session `NSURLErrorCannotOpenFile`.
  static func code(of error: ProtFSError) -> Int {
    switch error.code {
    case .cancelled: return NSURLErrorCancelled
    case .network:
      switch error.errno {
      case ETIMEDOUT?: return NSURLErrorTimedOut
      case ECONNREFUSED?, EHOSTUNREACH?, ENETUNREACH?: return NSURLErrorCannotConnectToHost
      case ECONNRESET?, EPIPE?: return NSURLErrorNetworkConnectionLost
      default:
        let text = error.message.lowercased()
        if text.contains("timed out") || text.contains("timeout") { return NSURLErrorTimedOut }
        if text.contains("connect") || text.contains("resolve") { return NSURLErrorCannotConnectToHost }
        return NSURLErrorNetworkConnectionLost
      }
    case .resumeDataRefused: return NSURLErrorCannotOpenFile
    case .checksumMismatch, .malformed: return NSURLErrorBadServerResponse
    case .notFound: return NSURLErrorFileDoesNotExist
    case .protectedDataUnavailable, .permissionDenied: return NSURLErrorCannotCreateFile
    case .invalidArgument, .outsideDevice, .symlink: return NSURLErrorUnsupportedURL
    default: return NSURLErrorCannotWriteToFile
    }
  }

  /// The `NSError` a task completes with for `error`: domain `NSURLErrorDomain`, the description,
  /// the POSIX error underneath (EPERM for a protection failure), the resume data of a resumable
  /// download, and for a task the system cancelled (a force-quit) its reason under
  /// `NSURLErrorBackgroundTaskCancelledReasonKey`.
  ///
  /// With `reading` (an upload's own file), a file the app may not read is
  /// `NSURLErrorNoPermissionsToReadFile` rather than a file it cannot create.
  static func nsError(
    _ error: ProtFSError, url: URL?, resumeData: Data? = nil, cancelledReason: BackgroundTaskCancelledReason? = nil,
    reading: Bool = false
  ) -> NSError {
    var info: [String: Any] = [NSLocalizedDescriptionKey: error.message]
    if let url {
      info[NSURLErrorFailingURLErrorKey] = url
      // NSURLErrorFailingURLStringErrorKey's value; the constant is deprecated in Foundation, not the key.
      info["NSErrorFailingURLStringKey"] = url.absoluteString
    }
    let posix = error.errno ?? (error.code == .protectedDataUnavailable ? EPERM : nil)
    if let posix { info[NSUnderlyingErrorKey] = NSError(domain: NSPOSIXErrorDomain, code: Int(posix)) }
    if let resumeData { info[NSURLSessionDownloadTaskResumeData] = resumeData }
    if let cancelledReason, error.code == .cancelled {
      info[NSURLErrorBackgroundTaskCancelledReasonKey] = value(of: cancelledReason)
    }
    let unreadable = reading && [.permissionDenied, .protectedDataUnavailable].contains(error.code)
    return NSError(
      domain: NSURLErrorDomain, code: unreadable ? NSURLErrorNoPermissionsToReadFile : code(of: error), userInfo: info)
  }

  /// Foundation's `NSURLErrorCancelledReason…` constant for `reason`.
  static func value(of reason: BackgroundTaskCancelledReason) -> Int {
    switch reason {
    case .userForceQuitApplication: NSURLErrorCancelledReasonUserForceQuitApplication
    case .backgroundUpdatesDisabled: NSURLErrorCancelledReasonBackgroundUpdatesDisabled
    case .insufficientSystemResources: NSURLErrorCancelledReasonInsufficientSystemResources
    }
  }

  /// Whether a download that failed so may continue from resume data.
  static func isResumable(_ error: ProtFSError) -> Bool {
    error.code == .cancelled || error.code == .network || error.code == .protectedDataUnavailable
  }
}
