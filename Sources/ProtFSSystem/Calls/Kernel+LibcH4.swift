import Foundation

/// The calls of the mount (ProtFSMount) that the other `Kernel+Libc*.swift` files lack.
extension Kernel {
  /// `open_by_handle_at(2)`: opens the inode `handle` names, on the filesystem of `mountFD`,
  /// through `call` (the mount's C shim: glibc declares the call only under `_GNU_SOURCE`). As
  /// `.open`.
  package static func open_by_handle_at(
    _ mountFD: Int32, _ handle: UnsafeRawPointer?, _ flags: Int32,
    through call: @convention(c) (Int32, UnsafeRawPointer?, Int32) -> Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.open) { call(mountFD, handle, flags) }
  }
}
