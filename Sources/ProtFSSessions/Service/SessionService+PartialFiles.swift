import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem

/// Where a cancelled background download's partial file waits: in the app's `tmp/`, as iOS leaves
/// it, under the name its resume data gives (`NSURLSessionResumeInfoTempFileName`). Download
/// managers look for it there, to keep a copy across launches or to check it exists before they
/// resume. While the download runs, and for a failure that keeps it for a later automatic resume
/// (the lock), it stays in the session's `Downloads/<bundle-id>`.
///
/// The app owns both directories, so nothing here gives it more than it has: every move goes
/// through held directories with `renameat2(RENAME_NOREPLACE)` (never over what the app put in
/// the way, never through a link), and what comes back is continued only as any temp file is,
/// when it is a private regular file carrying exactly the label a new temp file gets there.
extension SessionService {
  /// Cancels `task` of app `bundleID` producing resume data (the engine's), its partial file then
  /// waiting in the app's `tmp/`: the app's own cancel and a force-quit's.
  func cancelKeepingPartialFile(_ task: DownloadTask, bundleID: String) -> Data? {
    let data = Self.cancelProducingResumeData(task)
    if data != nil, let name = task.record.temporaryFileName { parkPartialFile(name, bundleID: bundleID) }
    return data
  }

  /// Moves the partial file `name` of a download of `bundleID` from the session's Downloads
  /// directory to the app's `tmp/`. Left where it is when it cannot move (a file of that name in
  /// `tmp/`, a directory gone): resuming finds it in either place.
  func parkPartialFile(_ name: String, bundleID: String) {
    guard let (downloads, temporary) = partialFileDirectories(bundleID) else { return }
    _ = Kernel.renameat2(downloads.fd, name, temporary.fd, name, .noReplace)
  }

  /// Moves the partial file `name` back from the app's `tmp/` to the session's Downloads
  /// directory for a download that continues it, when it is a regular file with one link and
  /// nothing of that name is in the Downloads directory. Otherwise it stays: the download then
  /// continues what the Downloads directory holds under that name, or starts over.
  func unparkPartialFile(_ name: String, bundleID: String) {
    guard let (downloads, temporary) = partialFileDirectories(bundleID),
      let status = try? temporary.status(name), status.kind == .file, status.linkCount == 1
    else { return }
    _ = Kernel.renameat2(temporary.fd, name, downloads.fd, name, .noReplace)
  }

  /// The app's Downloads directory and `tmp/`, opened without following links; nil for a bundle
  /// id that is not valid or a container without them.
  private func partialFileDirectories(_ bundleID: String) -> (DirectoryHandle, DirectoryHandle)? {
    guard let bundle = try? BundleID(bundleID) else { return nil }
    let container = device.container(bundle)
    guard let downloads = try? device.openDirectory(container.downloadsPath),
      let temporary = try? device.openDirectory(container.path.appending("tmp"))
    else { return nil }
    return (downloads, temporary)
  }
}
