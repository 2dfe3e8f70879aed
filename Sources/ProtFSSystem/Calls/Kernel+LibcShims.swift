import CAttr
import CProtFSSys
import Foundation

/// The calls of Kernel+Calls.swift that Swift cannot make directly, as `Result`s: the layers above call
/// these, never the raw forms, which return `-1` and leave `errno` for `valueOrErrno` to read.
extension Kernel {
  /// The flags of `renameat2(2)`.
  package struct RenameFlags: OptionSet, Sendable {
    /// The raw flags.
    package var rawValue: UInt32
    /// Wraps raw flags.
    package init(rawValue: UInt32) { self.rawValue = rawValue }
    /// `RENAME_NOREPLACE`: `EEXIST` instead of replacing the target.
    package static let noReplace = RenameFlags(rawValue: 1)
    /// `RENAME_EXCHANGE`: the two names swap their files.
    package static let exchange = RenameFlags(rawValue: 2)
  }

  /// `openat2(2)` with `resolve` (`Kernel.openAt2`, retried on `EAGAIN`, as a `Result`). As `.open`.
  package static func openat2(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ oflag: Int32, resolve: Resolve
  ) -> Result<Int32, Errno> {
    valueOrErrno(.open) { openAt2(dirfd, path, oflag, resolve: resolve) }
  }

  /// `open(2)` with `O_TMPFILE` (`Kernel.openUnnamed` as a `Result`): a file in `dirfd` without a name. As `.tmpfile`.
  package static func openTmpfile(_ dirfd: Int32, _ mode: mode_t) -> Result<Int32, Errno> {
    valueOrErrno(.tmpfile) { openUnnamed(in: dirfd, mode: mode) }
  }

  /// `linkat(2)` of the unnamed file `fd` as `name` in `dirfd` (`Kernel.linkUnnamed` as a `Result`). As `.link`.
  package static func linkTmpfile(_ fd: Int32, _ dirfd: Int32, _ name: String) -> Result<Int32, Errno> {
    valueOrErrno(.link) { linkUnnamed(fd, in: dirfd, as: name) }
  }

  /// `renameat2(2)` with `flags` (`Kernel.rename` and `Kernel.renameNoReplace` as a `Result`). As `.rename`.
  package static func renameat2(
    _ oldfd: Int32, _ old: String, _ newfd: Int32, _ new: String, _ flags: RenameFlags
  ) -> Result<Int32, Errno> {
    valueOrErrno(.rename) { rename(oldfd, old, newfd, new, flags: flags.rawValue) }
  }

  /// `copy_file_range(2)` from the offset of `fdIn` to that of `fdOut` (`Kernel.copyFileRange` as a `Result`). As
  /// `.copyFileRange`.
  package static func copy_file_range(_ fdIn: Int32, _ fdOut: Int32, _ length: Int) -> Result<Int, Errno> {
    valueOrErrno(.copyFileRange) { copyFileRange(fdIn, fdOut, length) }
  }

  /// `ioctl(2)` `FICLONE`: `output` shares all of `input`'s extents (`Kernel.cloneFile` as a `Result`). As
  /// `.cloneFile`.
  package static func ficlone(_ input: Int32, into output: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.cloneFile) { cloneFile(input, into: output) }
  }

  /// `syncfs(2)` (`Kernel.syncFilesystem` as a `Result`). As `.syncfs`.
  package static func syncfs(_ fd: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.syncfs) { syncFilesystem(fd) }
  }

  /// `sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE` (`Kernel.startWriteback` as a `Result`). As `.syncFileRange`.
  package static func sync_file_range(_ fd: Int32, _ offset: Int64, _ nbytes: Int64) -> Result<Int32, Errno> {
    valueOrErrno(.syncFileRange) { startWriteback(fd, offset: offset, length: nbytes) }
  }

  /// `fallocate(2)` with `FALLOC_FL_KEEP_SIZE` (`Kernel.reserveSpace` as a `Result`). As `.fallocate`.
  package static func fallocateKeepSize(_ fd: Int32, _ offset: Int64, _ length: Int64) -> Result<Int32, Errno> {
    valueOrErrno(.fallocate) { reserveSpace(fd, offset: offset, length: length) }
  }

  /// libattr's `attr_copy_fd(3)` of the `user.*` attributes (`Kernel.copyAttributes` as a `Result`). As `.setxattr`.
  package static func attr_copy_fd(
    _ srcPath: String, _ srcFd: Int32, _ dstPath: String, _ dstFd: Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.setxattr) { copyAttributes(from: srcFd, srcPath, to: dstFd, dstPath) }
  }

  /// `add_key(2)` of the "user" key `description` in the user keyring (`Kernel.addUserKey` as a `Result`): its serial.
  /// As `.keyctl`.
  package static func add_key(_ description: String, _ payload: UnsafeRawBufferPointer) -> Result<Int, Errno> {
    valueOrErrno(.keyctl) { addUserKey(description, payload) }
  }

  /// `keyctl(KEYCTL_SEARCH)` of the user keyring (`Kernel.searchUserKey` as a `Result`): the serial. As `.keyctl`.
  package static func keyctlSearch(_ description: String) -> Result<Int, Errno> {
    valueOrErrno(.keyctl) { searchUserKey(description) }
  }

  /// `keyctl(KEYCTL_READ)` (`Kernel.readKey` as a `Result`): the payload's whole length. As `.keyctl`.
  package static func keyctlRead(_ serial: Int, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
    valueOrErrno(.keyctl) { readKey(serial, into: buffer) }
  }

  /// `keyctl(KEYCTL_INVALIDATE)` (`Kernel.invalidateKey` as a `Result`). As `.keyctl`.
  package static func keyctlInvalidate(_ serial: Int) -> Result<Int, Errno> {
    valueOrErrno(.keyctl) { invalidateKey(serial) }
  }
}
