import Foundation
import ProtFS
import ProtFSSystem

/// Placing a finished download: the temp file checked, labelled with its destination's class and
/// renamed there between held directories, under a name no other task of the session claimed.
extension DownloadFinisher {
  /// A file renamed into its destination whose task waits for the batch's check that the
  /// destination directory is still the one at its path (`settle(_:)`).
  package struct PendingPlacement {
    var task: DownloadTask
    /// The name the task asked for, and the one it got (a numbered variant when taken).
    var fileName: String
    var placedName: String
    var destinationPath: String
    var destination: DirectoryHandle
    /// The placed file, open until the check, which removes the name only while it is this file.
    var file: FileDescriptor
  }

  /// What placing one task came to: settled now, or renamed and waiting for the batch's check.
  package enum Placement {
    case settled(Outcome)
    case pending(PendingPlacement)
  }

  /// The placements of one batch of finished tasks. A temp directory is compared with the one at
  /// its path once per batch, before the batch's first rename out of it; a destination directory
  /// once, after the batch's last rename into it. One check per directory instead of two opens
  /// per file, with the same guarantee: every file renamed into a destination that left the
  /// device by the time of the check is taken back out of it, and its task fails.
  package final class PlacementBatch {
    /// Held temp directories found to be the ones at their paths in this batch.
    fileprivate var verifiedSources: [(directory: DirectoryHandle, path: String)] = []
    fileprivate var pending: [PendingPlacement] = []
    /// The labelling of each destination directory files were placed in, worked out once per batch.
    fileprivate var destinationLabels = FileLabelsByDirectory()

    package init() {}

    fileprivate func isVerified(_ directory: DirectoryHandle, at path: String) -> Bool {
      verifiedSources.contains { $0.directory === directory && $0.path == path }
    }
  }

  /// Places each task of `tasks` as a batch (see `PlacementBatch`); the outcomes come in order.
  package func place(_ tasks: [DownloadTask]) -> [Outcome] {
    let batch = PlacementBatch()
    let placements = tasks.map { place($0, transfer: nil, in: batch) }
    // `settle` answers in the order of the renames, which is the order of the pending ones here.
    var settled = settle(batch).makeIterator()
    return placements.map { placement in
      if case .settled(let outcome) = placement { return outcome }
      return settled.next()!
    }
  }

  /// Places the task's file as part of `batch`: checks, labels and renames it, leaving the task
  /// to `settle(_:)` when the rename succeeded. Runs on the finisher thread, or on the caller's for
  /// `completeWaitingTasks()`.
  package func place(_ task: DownloadTask, transfer: Transfer?, in batch: PlacementBatch) -> Placement {
    let record = task.record
    let url = task.url.absoluteString
    guard let name = record.temporaryFileName, let destination = record.destinationPath,
      let fileName = record.fileName
    else {
      return .settled(
        settle(
          task, .failed,
          error: ProtFSError(.notFound, "The finished download of '\(url)' has no temp file or file name to place.")))
    }
    let temporary = record.temporaryDirectory + "/" + name
    switch core.configuration.accessPolicy.canPlaceDestination(destination) {
    case .allow:
      var heldDirectory = transfer?.directory
      let placedName = claim(fileName, in: record.destinationDirectory)
      do throws(ProtFSError) {
        let (directory, file) = try move(
          record, fileName: placedName, transfer: transfer, heldDirectory: &heldDirectory, batch: batch)
        let placed = PendingPlacement(
          task: task, fileName: fileName, placedName: placedName, destinationPath: record.destinationDirectory,
          destination: directory, file: file)
        batch.pending.append(placed)
        return .pending(placed)
      } catch {
        // The bytes are removed from wherever the held directory is now, even if it was moved
        // out of the device: nothing of the download stays outside it. (An unnamed file goes with
        // its descriptor.)
        heldDirectory?.removeFile(transfer?.temporaryFileName ?? name, ifStill: transfer?.file.rawValue)
        return .settled(notPlaced(task, because: error))
      }
    case .waitForUnlock:
      // The file waits in the temp directory, named, for the unlock.
      if let transfer, let failure = Self.name(transfer) { return .settled(notPlaced(task, because: failure)) }
      return .settled(
        settle(
          task, .waitingForUnlock,
          event: .waitingForUnlock(
            taskID: task.id, temporaryLocation: URL(fileURLWithPath: temporary, isDirectory: false))))
    case .deny(let code):
      TemporaryRemoval(task, in: core.configuration.fileSystem)?.remove()
      return .settled(
        settle(
          task, .failed,
          error: ProtFSError(
            .protectedDataUnavailable,
            "Cannot move the download of '\(url)' to '\(destination)': \(String(cString: strerror(code))).",
            path: destination, errno: code, remedy: .advice("unlock the device and download it again"))
        ) { $0.temporaryFileName = nil })
    }
  }

  /// Checks each destination directory of `batch`'s renamed files once, then settles their tasks:
  /// completed where the directory is still the one at its path; where it is not (moved out of the
  /// device, replaced, swapped for a link), each file is taken back out of it and its task fails.
  /// The outcomes come in the order of the renames.
  package func settle(_ batch: PlacementBatch) -> [Outcome] {
    var stillInPlace: [(directory: DirectoryHandle, path: String, same: Bool)] = []
    let fileSystem = core.configuration.fileSystem
    return batch.pending.map { placed in
      let same: Bool
      if let known = stillInPlace.first(where: {
        $0.directory === placed.destination && $0.path == placed.destinationPath
      }) {
        same = known.same
      } else {
        let now = try? fileSystem.openDirectory(placed.destinationPath, creating: false)
        same = now.map { $0.isSameDirectory(as: placed.destination) } ?? false
        stillInPlace.append((placed.destination, placed.destinationPath, same))
        if !same { _ = destinations.withLock { $0.removeValue(forKey: placed.destinationPath) } }
      }
      let task = placed.task
      guard same else {
        placed.destination.removeFile(placed.placedName, ifStill: placed.file.rawValue)
        return notPlaced(task, because: Self.directoryChanged(placed.destinationPath))
      }
      if placed.placedName != placed.fileName { task.runtime.withLock { $0.renamedFrom = placed.fileName } }
      // The event's URL is made only for a listener.
      let event =
        core.reportsEvents
        ? DownloadEvent.completed(
          taskID: task.id,
          location: URL(fileURLWithPath: placed.destinationPath, isDirectory: true).appendingPathComponent(
            placed.placedName, isDirectory: false))
        : nil
      return settle(task, .completed, event: event) {
        $0.temporaryFileName = nil
        $0.fileName = placed.placedName
      }
    }
  }

  /// The failure of a task whose file could not be placed, nothing of it kept.
  private func notPlaced(_ task: DownloadTask, because error: ProtFSError) -> Outcome {
    var failure = error
    failure.message = "The download of '\(task.url.absoluteString)' was not placed: \(error.message)"
    failure.remedy = error.remedy ?? .advice("nothing was kept; download it again")
    return settle(task, .failed, error: failure) { $0.temporaryFileName = nil }
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
  /// Returns the destination directory and the placed file, for the batch's check.
  private func move(
    _ record: DownloadTaskRecord, fileName: String, transfer: Transfer?, heldDirectory: inout DirectoryHandle?,
    batch: PlacementBatch
  ) throws(ProtFSError) -> (DirectoryHandle, FileDescriptor) {
    let fileSystem = core.configuration.fileSystem
    if let transfer, !transfer.isNamed {
      if let placed = try link(transfer, as: fileName, into: record.destinationDirectory, batch: batch) {
        return placed
      }
      // Named now, it takes the way of every named temp file.
    }
    let name = transfer?.temporaryFileName ?? record.temporaryFileName!
    let source = try verifiedTemporaryDirectory(of: record, held: &heldDirectory, batch: batch)
    let destination = try destinationDirectory(record.destinationDirectory)
    // The attempt's own descriptor stays open for the caller to close; one opened here closes
    // when the batch lets go of it.
    let file: FileDescriptor
    if let transfer {
      file = transfer.file
    } else {
      file = try source.openDescriptor(name, flags: O_RDONLY | O_NONBLOCK)
    }
    let status = try Self.requirePrivateFile(file.rawValue, at: source.pathOf(name))
    try batch.destinationLabels.labels(for: destination, in: fileSystem).label(file.rawValue, status: status)
    switch Kernel.renameat(source.fd, name, destination.fd, fileName) {
    case .success:
      // The held destination may have been moved out of the device between its opening and the
      // rename: the batch's check (`settle(_:)`) takes the file back out of it then.
      return (destination, file)
    case .failure(let e) where e == .crossDevice:
      // A copy next to the destination, labelled and flushed before it takes the name, so the
      // destination still never holds a partial or unlabelled file.
      do throws(ProtFSError) {
        // A sealed file's copy holds its ciphertext: it gets the key, for its own inode, first.
        try ItemCopier.move(name, in: source, to: fileName, in: destination, replacing: true) {
          fd throws(ProtFSError) in
          try fileSystem.adoptKey(fd, of: file.rawValue, in: destination)
          try fileSystem.label(file: fd, for: destination)
        }
      } catch {
        throw ProtFSError.system("move the download to", path: destination.pathOf(fileName), errno: error.errno ?? EIO)
      }
      // The copy is a new file: the check must look for it, not for the temp file.
      return (
        destination, (try? destination.openDescriptor(fileName, flags: O_RDONLY | O_NONBLOCK | O_NOFOLLOW)) ?? file
      )
    case .failure(let e):
      throw ProtFSError.system("move the download to", path: destination.pathOf(fileName), errno: e)
    }
  }

  /// The temp directory of `record`, checked to be the one at its path: the `held` one (set to
  /// the directory opened here when nil), compared once per batch.
  private func verifiedTemporaryDirectory(
    of record: DownloadTaskRecord, held heldDirectory: inout DirectoryHandle?, batch: PlacementBatch
  ) throws(ProtFSError) -> DirectoryHandle {
    if heldDirectory == nil, let known = batch.verifiedSources.first(where: { $0.path == record.temporaryDirectory }) {
      // Opened and checked for an earlier file of this batch.
      heldDirectory = known.directory
    } else if let held = heldDirectory, batch.isVerified(held, at: record.temporaryDirectory) {
      // Compared with the directory at its path earlier in this batch.
    } else {
      let current: DirectoryHandle
      do throws(ProtFSError) {
        current = try core.configuration.fileSystem.openDirectory(record.temporaryDirectory, creating: false)
      } catch {
        if heldDirectory == nil { throw error }
        throw Self.directoryChanged(record.temporaryDirectory, because: error)
      }
      if let held = heldDirectory {
        guard held.isSameDirectory(as: current) else { throw Self.directoryChanged(record.temporaryDirectory) }
      } else {
        heldDirectory = current
      }
      batch.verifiedSources.append((heldDirectory!, record.temporaryDirectory))
    }
    return heldDirectory!
  }

  /// Labels the unnamed finished file of `transfer` with its destination's class and links it
  /// there as `fileName`: one directory update where a named file takes three (its creation,
  /// and the rename's removal and addition), and the temp directory untouched. Returns the
  /// destination and the file, for the batch's check; nil, with the file named in its temp
  /// directory, where a link cannot place it: a file there from before (which the rename
  /// replaces, as the same download run again replaces its result) or another filesystem.
  private func link(_ transfer: Transfer, as fileName: String, into path: String, batch: PlacementBatch)
    throws(ProtFSError) -> (DirectoryHandle, FileDescriptor)?
  {
    let destination = try destinationDirectory(path)
    let file = transfer.file
    let status = try Self.requirePrivateFile(file.rawValue, at: transfer.temporaryPath, links: 0)
    try batch.destinationLabels.labels(for: destination, in: core.configuration.fileSystem).label(
      file.rawValue, status: status)
    switch Kernel.linkTmpfile(file.rawValue, destination.fd, fileName) {
    case .success:
      return (destination, file)
    case .failure(let e) where e == .exists || e == .crossDevice:
      if let failure = Self.name(transfer) { throw failure }
      return nil
    case .failure(let e):
      throw ProtFSError.system("move the download to", path: destination.pathOf(fileName), errno: e)
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

  /// Refuses to label, hand over or move anything but a regular file with its own `links` (one, or
  /// none for an unnamed file): another link (made while the download ran) could be outside the
  /// device, and the label and owner would change that item too. Returns the file's `fstat`.
  private static func requirePrivateFile(_ fd: Int32, at path: String, links: UInt64 = 1) throws(ProtFSError)
    -> stat
  {
    var status = stat()
    _ = try Kernel.fstat(fd, &status).orThrow("read", path: path)
    guard status.st_mode & S_IFMT == S_IFREG, UInt64(status.st_nlink) == links else {
      throw ProtFSError(
        .invalidArgument,
        "The temp file '\(path)' is not a regular file that only protfs names (another name was linked to it); protfs does not move it.",
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
