import ProtFSSystem

/// The downloads' failure codes: a transfer that broke off, was cancelled or brought wrong bytes.
extension ProtFSError.Code {
  /// A download could not reach its server, the server failed, or the transfer broke off.
  public static let network = Self("network")
  /// A download was cancelled by its caller.
  public static let cancelled = Self("cancelled")
  /// A download's bytes do not match the SHA-256 digest the caller expected.
  public static let checksumMismatch = Self("checksumMismatch")
}

/// The downloads' remedies: the Downloads directory's class, the temp files, the task list.
extension Remedy.Action {
  /// Give the app's nsurlsessiond Downloads directory NSFileProtectionNone.
  public static let initializeDownloadsDirectory = Self("initializeDownloadsDirectory")
  /// Unlock the device and resume the task, or give the Downloads directory NSFileProtectionNone.
  public static let resumeAfterUnlock = Self("resumeAfterUnlock")
  /// Remove the temp downloads no task needs.
  public static let purgeCaches = Self("purgeCaches")
  /// Look the task up among the device's download tasks.
  public static let listTasks = Self("listTasks")
}

extension Remedy {
  /// Give the app's nsurlsessiond Downloads directory NSFileProtectionNone.
  public static let initializeDownloadsDirectory = Remedy(
    .initializeDownloadsDirectory,
    advice: "create the app's Downloads directory with NSFileProtectionNone (as nsurlsessiond needs)")

  /// Unlock the device and resume the task, or give the Downloads directory NSFileProtectionNone.
  public static let resumeAfterUnlock = Remedy(
    .resumeAfterUnlock,
    advice: "unlock the device and resume the task, or give the app's Downloads directory NSFileProtectionNone")

  /// Remove the temp downloads no task needs.
  public static let purgeCaches = Remedy(
    .purgeCaches, advice: "remove it by purging the container's caches, then download again")

  /// Look the task up among the device's download tasks.
  public static let listTasks = Remedy(.listTasks, advice: "list the device's download tasks")
}
