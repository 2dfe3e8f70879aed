import Foundation
import ProtFSSystem

/// Placing a finished download: the temp file checked, labelled with its destination's class and
/// renamed there between held directories, under a name no other task of the session claimed.
extension DownloadFinisher {
  /// Moves a finished task's temp file to its destination if the access policy allows it now.
  ///
  /// `transfer` is the attempt that just wrote the file, with its temp directory and file still
  /// open; without one (a task that waited for unlock) both are opened again. Runs on the finisher
  /// thread, or on the caller's for `completeWaitingTasks()`.
  package func place(_ task: DownloadTask, transfer: Transfer? = nil) -> Outcome {
    let record = task.record
    let url = task.url.absoluteString
    guard let name = record.temporaryFileName, let destination = record.destinationPath,
      let fileName = record.fileName
    else {
      return settle(
        task, .failed,
        error: ProtFSError(.notFound, "The finished download of '\(url)' has no temp file or file name to place."))
    }
    let temporary = record.temporaryDirectory + "/" + name
    switch core.configuration.accessPolicy.canPlaceDestination(destination) {
    case .allow:
      var heldDirectory = transfer?.directory
      let placedName = claim(fileName, in: record.destinationDirectory)
      do throws(ProtFSError) {
        try move(record, fileName: placedName, transfer: transfer, heldDirectory: &heldDirectory)
      } catch {
        // The bytes are removed from wherever the held directory is now, even if it was moved
        // out of the device: nothing of the download stays outside it.
        heldDirectory?.removeFile(name, ifStill: transfer?.file.rawValue)
        var failure = error
        failure.message = "The download of '\(url)' was not placed: \(error.message)"
        failure.remedy = error.remedy ?? .advice("nothing was kept; download it again")
        return settle(task, .failed, error: failure) { $0.temporaryFileName = nil }
      }
      if placedName != fileName { task.runtime.withLock { $0.renamedFrom = fileName } }
      // The event's URL is made only for a listener.
      let event =
        core.reportsEvents
        ? DownloadEvent.completed(
          taskID: task.id,
          location: URL(fileURLWithPath: record.destinationDirectory, isDirectory: true).appendingPathComponent(
            placedName, isDirectory: false))
        : nil
      return settle(task, .completed, event: event) {
        $0.temporaryFileName = nil
        $0.fileName = placedName
      }
    case .waitForUnlock:
      return settle(
        task, .waitingForUnlock,
        event: .waitingForUnlock(
          taskID: task.id, temporaryLocation: URL(fileURLWithPath: temporary, isDirectory: false)))
    case .deny(let code):
      TemporaryRemoval(task, in: core.configuration.fileSystem)?.remove()
      return settle(
        task, .failed,
        error: ProtFSError(
          .protectedDataUnavailable,
          "Cannot move the download of '\(url)' to '\(destination)': \(String(cString: strerror(code))).",
          path: destination, errno: code, remedy: .advice("unlock the device and download it again"))
      ) { $0.temporaryFileName = nil }
    }
  }

  /// `fileName`, or the first numbered variant of it (`name (1).ext`) that no other task of this
  /// session has placed in `directory`, now claimed for the caller. A file there from before the
  /// session is replaced, as the same download run again replaces its earlier result.
  private func claim(_ fileName: String, in directory: String) -> String {
    claimed.withLock { paths in
      var name = fileName
      var n = 0
      while paths.contains(directory + "/" + name) {
        n += 1
        name = DownloadFileName.numbered(fileName, n)
      }
      paths.insert(directory + "/" + name)
      return name
    }
  }

  /// Labels the finished temp file with its destination's class and renames it there, between
  /// directories opened without following a symlink. A temp directory that is no longer the one
  /// the bytes were written in (moved, replaced, or swapped for a link) fails the placement.
  /// `heldDirectory` is set to the temp directory as soon as it is open, for the caller's cleanup.
  private func move(
    _ record: DownloadTaskRecord, fileName: String, transfer: Transfer?, heldDirectory: inout DirectoryHandle?
  ) throws(ProtFSError) {
    let fileSystem = core.configuration.fileSystem
    let name = record.temporaryFileName!
    let current: DirectoryHandle
    do throws(ProtFSError) {
      current = try fileSystem.openDirectory(record.temporaryDirectory, creating: false)
    } catch {
      if heldDirectory == nil { throw error }
      throw Self.directoryChanged(record.temporaryDirectory, because: error)
    }
    if let held = heldDirectory {
      guard held.isSameDirectory(as: current) else { throw Self.directoryChanged(record.temporaryDirectory) }
    } else {
      heldDirectory = current
    }
    let source = heldDirectory!
    let destination = try destinationDirectory(record.destinationDirectory)
    // The attempt's own descriptor stays open for the caller to close; one opened here closes
    // when `file` goes away.
    let file: FileDescriptor
    if let transfer {
      file = transfer.file
    } else {
      file = try source.openDescriptor(name, flags: O_RDONLY | O_NONBLOCK)
    }
    let status = try Self.requirePrivateFile(file.rawValue, at: source.pathOf(name))
    try fileSystem.label(file: file.rawValue, status: status, for: destination)
    switch valueOrErrno(.rename, { renameat(source.fd, name, destination.fd, fileName) }) {
    case .success:
      // The held destination may have been moved out of the device between its opening and the
      // rename: then the file is taken back out of it and the task fails.
      let now = try? fileSystem.openDirectory(record.destinationDirectory, creating: false)
      guard let now, now.isSameDirectory(as: destination) else {
        destination.removeFile(fileName, ifStill: file.rawValue)
        _ = destinations.withLock { $0.removeValue(forKey: record.destinationDirectory) }
        throw Self.directoryChanged(record.destinationDirectory)
      }
    case .failure(let e) where e == .crossDevice:
      let failure = TemporaryFile.moveAcrossFilesystems(name, in: source, to: fileName, in: destination) { fd in
        do throws(ProtFSError) {
          try fileSystem.label(file: fd, for: destination)
          return nil
        } catch {
          return error.errno ?? EIO
        }
      }
      if let failure {
        throw ProtFSError.system("move the download to", path: destination.pathOf(fileName), errno: failure)
      }
    case .failure(let e):
      throw ProtFSError.system("move the download to", path: destination.pathOf(fileName), errno: e.rawValue)
    }
  }

  /// The destination directory at `path`: the one opened for an earlier placement while it still
  /// exists (a directory removed and made again at the path is opened anew), else opened now.
  private func destinationDirectory(_ path: String) throws(ProtFSError) -> DirectoryHandle {
    if let held = destinations.withLock({ $0[path] }), let status = try? held.status(), status.linkCount > 0 {
      return held
    }
    let opened = try core.configuration.fileSystem.openDirectory(path, creating: false)
    destinations.withLock { $0[path] = opened }
    return opened
  }

  /// Refuses to label, hand over or move anything but a regular file with one link: another link
  /// (made while the download ran) could be outside the device, and the label and owner would
  /// change that item too. Returns the file's `fstat`.
  private static func requirePrivateFile(_ fd: Int32, at path: String) throws(ProtFSError) -> stat {
    var status = stat()
    _ = try valueOrErrno(.stat) { fstat(fd, &status) }.orThrow("read", path: path)
    guard status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1 else {
      throw ProtFSError(
        .invalidArgument,
        "The temp file '\(path)' is not a regular file with a single link (another name was linked to it); protfs does not move it.",
        path: path, remedy: .advice("nothing was kept; download it again"))
    }
    return status
  }

  /// The error of a placement whose directory at `path` changed while the download ran.
  package static func directoryChanged(_ path: String, because cause: ProtFSError? = nil) -> ProtFSError {
    var message =
      "the directory '\(path)' was moved, replaced or swapped for a symbolic link during the download"
    if let cause { message += " (\(cause.message.hasSuffix(".") ? String(cause.message.dropLast()) : cause.message))" }
    return ProtFSError(
      .symlink, message + "; the downloaded file was removed.", path: path, errno: ELOOP,
      remedy: .advice("leave the container's directories in place while a download runs, then download it again"))
  }
}
