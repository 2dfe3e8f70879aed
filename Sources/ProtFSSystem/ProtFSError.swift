import Foundation

/// The error every ProtFS operation throws: what failed, on which path, the errno, and a fix-it hint.
public struct ProtFSError: Error, Sendable, Equatable, Codable, CustomStringConvertible {
  /// What kind of failure this is; the command line maps it to an exit status.
  public enum Code: String, Sendable, Codable {
    /// A value given by the caller is not valid (class name, bundle id, size, …).
    case invalidArgument
    /// The item does not exist.
    case notFound
    /// The item already exists where protfs must create it.
    case alreadyExists
    /// The item has no `user.protfs.class` attribute.
    case noAttribute
    /// The filesystem does not support user extended attributes.
    case xattrUnsupported
    /// An attribute holds a value protfs does not understand.
    case corruptAttribute
    /// Permission bits or ownership refused the operation.
    case permissionDenied
    /// The path leaves the device, directly or through a symlink.
    case outsideDevice
    /// The path is a symlink, which protfs does not follow.
    case symlink
    /// The device directory has not been initialised.
    case notInitialized
    /// The data is protected and not available in the device's current state (EPERM on iOS).
    case protectedDataUnavailable
    /// A file protfs reads (entitlements, state, policy) is malformed.
    case malformed
    /// Any other system call failure.
    case io
    /// A download could not reach its server, the server failed, or the transfer broke off.
    case network
    /// A download was cancelled by its caller.
    case cancelled
    /// A download's bytes do not match the SHA-256 digest the caller expected.
    case checksumMismatch
  }

  /// What kind of failure this is.
  public var code: Code
  /// A whole sentence saying what went wrong, quoting the path.
  public var message: String
  /// The path involved, if any.
  public var path: String?
  /// The errno behind the failure, if a system call failed.
  public var errno: Int32?
  /// What the user can do about it, if anything.
  public var remedy: Remedy?

  /// The remedy in the library's words, which name no command (a front end words it its own way).
  public var hint: String? { remedy?.advice }

  /// Creates an error.
  public init(_ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil, remedy: Remedy? = nil) {
    self.code = code
    self.message = message
    self.path = path
    self.errno = errno
    self.remedy = remedy
  }

  /// The message followed by the remedy, worded by `advice` (the library's words unless a front end
  /// gives its own).
  public func description(advice: (Remedy) -> String) -> String {
    guard let hint = remedy.map(advice) else { return message }
    if message.hasSuffix("?") { return "\(message) \(hint.prefix(1).uppercased())\(hint.dropFirst())." }
    let base = message.hasSuffix(".") ? String(message.dropLast()) : message
    return "\(base); \(hint)."
  }

  /// The message followed by the remedy in the library's words.
  public var description: String { description(advice: \.advice) }

  /// Maps an errno from `operation` on `path` to an error, once, at the call site.
  public static func system(_ operation: String, path: String, errno: Int32) -> ProtFSError {
    let reason = String(cString: strerror(errno))
    let message = "Cannot \(operation) '\(path)': \(reason)."
    switch errno {
    case ENOENT:
      return ProtFSError(.notFound, message, path: path, errno: errno)
    case EEXIST:
      return ProtFSError(.alreadyExists, message, path: path, errno: errno)
    case EACCES:
      return ProtFSError(.permissionDenied, message, path: path, errno: errno)
    case EPERM:
      return ProtFSError(.permissionDenied, message, path: path, errno: errno)
    case ELOOP:
      return ProtFSError(
        .symlink, "Cannot \(operation) '\(path)': it is a symbolic link, which protfs does not follow.",
        path: path, errno: errno)
    case ENOTSUP:
      return ProtFSError(
        .xattrUnsupported,
        "Cannot \(operation) '\(path)': its filesystem does not support user extended attributes.",
        path: path, errno: errno,
        remedy: .advice("put the device on a filesystem with user xattrs (ext4, xfs, btrfs, tmpfs)"))
    default:
      return ProtFSError(.io, message, path: path, errno: errno)
    }
  }
}

extension ProtFSError: LocalizedError {
  /// The message followed by the hint.
  public var errorDescription: String? { description }
}

/// What the user can do about a failure. The library names the action; it never spells a command
/// line, which is the front end's to word (the CLI turns `.unlock` into "run `protfs unlock`").
public enum Remedy: Sendable, Equatable, Hashable, Codable {
  /// Unlock the device first.
  case unlock
  /// Give the item at `path` a valid protection class.
  case setClass(path: String)
  /// Create the container of `bundleID`.
  case createContainer(bundleID: String)
  /// Initialise the device at `root` by creating a first container.
  case initializeDevice(root: String)
  /// Give the app's nsurlsessiond Downloads directory NSFileProtectionNone.
  case initializeDownloadsDirectory
  /// Unlock the device and resume the task, or give the Downloads directory NSFileProtectionNone.
  case resumeAfterUnlock
  /// Remove the temp downloads no task needs.
  case purgeCaches
  /// Look the task up among the device's download tasks.
  case listTasks
  /// The stored passcode hash is unusable: remove it and set a new passcode.
  case resetPasscode
  /// Fix the item, then run `operation` (lock, unlock, …) again.
  case retry(operation: String)
  /// Inspect the transition journal; removing it abandons the transition, after which unlock.
  case inspectJournal
  /// Run as root, or (`orChown`) give the item to the device's owner.
  case runAsRoot(orChown: Bool)
  /// Run as the device's owner.
  case runAsDeviceOwner
  /// Run `protfs exec` as root, where setuid and prctl are not restricted.
  case confineAsRoot
  /// Make FUSE available (`/dev/fuse`, the fuse module) and mount as root.
  case enableFuse
  /// Unmount the device's mount first.
  case unmount(mountpoint: String)
  /// Look at the device's background sessions and their service.
  case listSessions
  /// Start the device's session service (as root).
  case startSessionService
  /// Stop the device's session service, then start it again.
  case restartSessionService
  /// Use the session from its app (launched as an app), or as root.
  case useSessionFromItsApp
  /// Resume task `id` in the foreground, where nothing else runs it.
  case resumeTask(id: Int64)
  /// Anything else, as the words of a sentence that name no command.
  case advice(String)

  /// The remedy in words that name no command.
  public var advice: String {
    switch self {
    case .unlock: "unlock the device first"
    case .setClass(let path): "give '\(path)' a valid protection class"
    case .createContainer(let bundleID): "create the container of \(bundleID) first"
    case .initializeDevice: "initialise the device by creating a first container"
    case .initializeDownloadsDirectory:
      "create the app's Downloads directory with NSFileProtectionNone (as nsurlsessiond needs)"
    case .resumeAfterUnlock:
      "unlock the device and resume the task, or give the app's Downloads directory NSFileProtectionNone"
    case .purgeCaches: "remove it by purging the container's caches, then download again"
    case .listTasks: "list the device's download tasks"
    case .resetPasscode: "remove the stored passcode hash and set a new passcode"
    case .retry(let operation): "fix the item, then \(operation) again"
    case .inspectJournal: "inspect it; removing it abandons the interrupted transition (unlock afterwards)"
    case .runAsRoot(let orChown):
      orChown ? "run as root, or give the item to the device's owner with chown" : "run as root"
    case .runAsDeviceOwner: "run as the device's owner"
    case .confineAsRoot: "confine the program as root, outside a user namespace that restricts setuid and prctl"
    case .listSessions: "look at the device's background sessions and their service"
    case .startSessionService: "start the device's session service as root"
    case .restartSessionService: "stop the device's session service and start it again"
    case .useSessionFromItsApp: "run it as root, or from the app the session belongs to"
    case .resumeTask(let id): "resume task \(id) in the foreground"
    case .enableFuse:
      "make /dev/fuse available (load the fuse module; in a container, pass /dev/fuse in) and mount as root"
    case .unmount(let mountpoint): "unmount '\(mountpoint)' first"
    case .advice(let text): text
    }
  }
}
