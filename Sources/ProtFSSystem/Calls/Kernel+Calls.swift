import CAttr
import CProtFSSys
import Foundation

/// The system calls Swift cannot make directly (variadic in C, or declared by glibc only under
/// `_GNU_SOURCE`), for the layers above: this target is the only one that imports the C shims.
///
/// Each returns what the C call returns (`-1` and `errno` on failure), so that callers run it
/// through `valueOrErrno`, the one place that retries `EINTR` and captures `errno`.
extension Kernel {
  /// `renameat2(2)` with `RENAME_NOREPLACE`: fails with `EEXIST` instead of replacing `to`.
  package static func renameNoReplace(_ fromDirectory: Int32, _ from: String, _ toDirectory: Int32, _ to: String)
    -> Int32
  {
    protfs_rename_noreplace(fromDirectory, from, toDirectory, to)
  }

  /// `open(2)` with `O_TMPFILE`: a new regular file in `directory` that has no name until
  /// `linkUnnamed` gives it one (read-write, close-on-exec).
  package static func openUnnamed(in directory: Int32, mode: mode_t) -> Int32 {
    protfs_open_unnamed(directory, mode)
  }

  /// `linkat(2)` of the unnamed file `fd` to `name` in `directory`; `EEXIST` when the name is taken.
  package static func linkUnnamed(_ fd: Int32, in directory: Int32, as name: String) -> Int32 {
    protfs_link_unnamed(fd, directory, name)
  }

  /// `copy_file_range(2)` of up to `length` bytes from the current offset of `input` to that of `output`.
  package static func copyFileRange(_ input: Int32, _ output: Int32, _ length: Int) -> Int {
    protfs_copy_file_range(input, output, length)
  }

  /// `ioctl(2)` with `FICLONE`: `output` becomes a clone of all of `input`, its extents shared with
  /// the input's until either file is written, so no byte is copied. Only where the file system
  /// can (XFS with reflink, btrfs): elsewhere `EOPNOTSUPP` (ext4, tmpfs), `EXDEV` (two file
  /// systems) or `EINVAL`.
  package static func cloneFile(_ input: Int32, into output: Int32) -> Int32 {
    protfs_clone_file(input, output)
  }

  /// Has a `posix_spawn` child close every descriptor from `from` on (glibc's
  /// `posix_spawn_file_actions_addclosefrom_np`).
  package static func spawnClosing(from: Int32, _ actions: inout posix_spawn_file_actions_t) -> Int32 {
    protfs_spawn_close_from(&actions, from)
  }

  /// `POSIX_SPAWN_SETSID`: a `posix_spawn` child starts a session of its own.
  package static var spawnNewSession: Int16 { protfs_spawn_setsid_flag() }

  /// Makes standard output line-buffered, also when it is a pipe.
  package static func lineBufferStandardOutput() { protfs_line_buffer_stdout() }

  /// `add_key(2)`: puts `payload` in the caller's user keyring as the "user" key `description`
  /// (replacing that key's payload if there is one); its serial.
  package static func addUserKey(_ description: String, _ payload: UnsafeRawBufferPointer) -> Int {
    protfs_add_user_key(description, payload.baseAddress, payload.count)
  }

  /// `keyctl(KEYCTL_SEARCH)` of the caller's user keyring for the "user" key `description`: its
  /// serial (ENOKEY when there is none).
  package static func searchUserKey(_ description: String) -> Int { protfs_search_user_key(description) }

  /// `keyctl(KEYCTL_READ)`: the key's payload into `buffer`; the payload's whole length.
  package static func readKey(_ serial: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int {
    protfs_read_key(serial, buffer.baseAddress, buffer.count)
  }

  /// `keyctl(KEYCTL_INVALIDATE)`: the key is gone for every process, its payload cleared.
  package static func invalidateKey(_ serial: Int) -> Int { protfs_invalidate_key(serial) }

  /// `syncfs(2)`: flushes the whole filesystem holding `fd`.
  package static func syncFilesystem(_ fd: Int32) -> Int32 { protfs_syncfs(fd) }

  /// `sync_file_range(2)` with `SYNC_FILE_RANGE_WRITE`: starts writing back a range without waiting.
  package static func startWriteback(_ fd: Int32, offset: Int64, length: Int64) -> Int32 {
    protfs_start_writeback(fd, offset, length)
  }

  /// `fallocate(2)` with `FALLOC_FL_KEEP_SIZE`: reserves blocks for `length` bytes at `offset`
  /// without changing the file's size. Blocks reserved past the end stay until a truncate.
  package static func reserveSpace(_ fd: Int32, offset: Int64, length: Int64) -> Int32 {
    protfs_reserve_space(fd, offset, length)
  }

  /// `openat(2)` with a mode (`open` is variadic in C).
  package static func openAt(_ directory: Int32, _ path: UnsafePointer<CChar>, _ flags: Int32, _ mode: mode_t) -> Int32
  {
    protfs_openat(directory, path, flags, mode)
  }

  /// libattr's `attr_copy_fd`: copies the `user.*` attributes of `input` to `output` (the paths are
  /// for libattr's messages only). `0`, or `-1` and `errno`.
  package static func copyAttributes(
    from input: Int32, _ sourcePath: String, to output: Int32, _ destinationPath: String
  )
    -> Int32
  {
    CAttr.attr_copy_fd(sourcePath, input, destinationPath, output, nil, nil)
  }

  /// `O_PATH`, which glibc hides without `_GNU_SOURCE`.
  package static let pathOnly = Int32(PROTFS_O_PATH)
  /// `lseek(2)`'s `SEEK_DATA`: the next offset that holds data.
  package static let seekData = Int32(PROTFS_SEEK_DATA)
  /// `lseek(2)`'s `SEEK_HOLE`: the next offset in a hole (or the end).
  package static let seekHole = Int32(PROTFS_SEEK_HOLE)

  /// The `RESOLVE_*` flags of `openat2(2)` that protfs uses.
  package struct Resolve: OptionSet, Sendable {
    /// The raw flags.
    package var rawValue: UInt64
    /// Wraps raw flags.
    package init(rawValue: UInt64) { self.rawValue = rawValue }
    /// `RESOLVE_NO_MAGICLINKS`: no `/proc/…/fd` style links.
    package static let noMagicLinks = Resolve(rawValue: UInt64(PROTFS_RESOLVE_NO_MAGICLINKS))
    /// `RESOLVE_NO_SYMLINKS`: no symlink in any component.
    package static let noSymlinks = Resolve(rawValue: UInt64(PROTFS_RESOLVE_NO_SYMLINKS))
    /// `RESOLVE_BENEATH`: never leave the starting directory (`EXDEV`).
    package static let beneath = Resolve(rawValue: UInt64(PROTFS_RESOLVE_BENEATH))
  }

  /// `openat2(2)` (Linux 5.6) with `resolve`; `ENOSYS` on older kernels.
  ///
  /// With `RESOLVE_BENEATH` the kernel answers `EAGAIN` when a `..` component was resolved while a
  /// rename or mount happened anywhere on the system, and asks the caller to try again; this does,
  /// up to 100 times, so that a busy machine never turns into a wrong answer. Only a hundred
  /// consecutive races give `EAGAIN` back.
  package static func openAt2(_ directory: Int32, _ path: UnsafePointer<CChar>, _ flags: Int32, resolve: Resolve)
    -> Int32
  {
    var attempts = 0
    while true {
      let fd = protfs_openat2(directory, path, flags, resolve.rawValue)
      guard fd < 0, errno == EAGAIN || errno == EINTR, attempts < 100 else { return fd }
      attempts += 1
    }
  }

  /// Whether capability number `capability` is in this process's effective set.
  /// Renames `from` in `fromDirectory` to `to` in `toDirectory` with renameat2(2)'s `flags`.
  package static func rename(_ fromDirectory: Int32, _ from: String, _ toDirectory: Int32, _ to: String, flags: UInt32)
    -> Int32
  {
    protfs_renameat2(fromDirectory, from, toDirectory, to, flags)
  }

  /// Waits until process `pid` has exited, at most `milliseconds`; true when it has (or never
  /// existed). `isStillIt` is asked once a descriptor pins the process (and when none can be
  /// had): false means the pid is another process's now, so the one waited for is gone. The
  /// corresponding C functions are `pidfd_open(2)` and `poll(2)`.
  package static func waitForExit(of pid: pid_t, milliseconds: Int32, isStillIt: () -> Bool = { true }) -> Bool {
    let fd = protfs_pidfd_open(pid)
    guard fd >= 0 else { return errno == ESRCH || !isStillIt() }
    defer { close(fd) }
    guard isStillIt() else { return true }
    var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    return (try? poll(&entry, 1, milliseconds).get()) == 1
  }

  package static func hasEffectiveCapability(_ capability: Int32) -> Bool { protfs_cap_effective(capability) == 1 }

  /// Kills this process with `SIGKILL`: the crash the transition tests ask for.
  package static func crashNow() -> Never {
    protfs_crash_now()
    fatalError("SIGKILL did not end the process")
  }
}

/// The capability and credential calls that confine a program (`prctl(2)`, `capset(2)`,
/// `setgroups(2)`, `getresuid(2)`). Each returns what its C shim returns: `0` or `1` for a question,
/// `-1` and `errno` on failure.
package enum Credentials {
  /// Asks for SIGKILL when the thread that started this process ends (`prctl(PR_SET_PDEATHSIG)`);
  /// kept across `execve`, cleared by an identity change.
  package static func killWhenParentDies() -> Int32 { protfs_set_pdeathsig(SIGKILL) }
  /// Empties the capability bounding set (needs `CAP_SETPCAP`).
  package static func dropBoundingSet() -> Int32 { protfs_capbset_drop_all() }
  /// Clears the ambient capabilities.
  package static func clearAmbient() -> Int32 { protfs_cap_ambient_clear() }
  /// Sets `no_new_privs`.
  package static func setNoNewPrivileges() -> Int32 { protfs_set_no_new_privs() }
  /// Drops every supplementary group.
  package static func clearGroups() -> Int32 { protfs_clear_groups() }
  /// Empties the permitted, effective and inheritable capability sets.
  package static func clearCapabilities() -> Int32 { protfs_cap_clear_all() }
  /// `1` when the permitted, effective and inheritable sets are empty.
  package static func capabilitiesAreEmpty() -> Int32 { protfs_cap_sets_are_empty() }
  /// `1` when the ambient set is empty.
  package static func ambientIsEmpty() -> Int32 { protfs_cap_ambient_is_empty() }
  /// `1` when `no_new_privs` is set.
  package static func noNewPrivileges() -> Int32 { protfs_no_new_privs() }
  /// `1` when the real, effective and saved ids are all `uid` and `gid`.
  package static func idsAre(_ uid: uid_t, _ gid: gid_t) -> Int32 { protfs_ids_are(uid, gid) }
  /// `1` when the bounding set is empty.
  package static func boundingSetIsEmpty() -> Int32 { protfs_capbset_is_empty() }
  /// Enters a mount namespace of this process's own in which `source` is bind-mounted over
  /// `target` (needs `CAP_SYS_ADMIN`).
  package static func enterMount(_ source: String, over target: String) -> Int32 {
    protfs_enter_mount(source, target)
  }
}

/// One `inotify_event` in a buffer read from an inotify descriptor (the struct ends in a flexible array).
package struct InotifyEvent {
  /// The event's start in the buffer.
  package let pointer: UnsafeRawPointer

  /// Wraps the event at `pointer`.
  package init(_ pointer: UnsafeRawPointer) { self.pointer = pointer }

  /// The length of the name that follows the header, padding included.
  package var nameLength: Int { Int(protfs_inotify_len(pointer)) }
  /// The name the event is about, if any.
  package var name: String? { nameLength > 0 ? String(cString: protfs_inotify_name(pointer)) : nil }
  /// The whole event's size: the header and its name.
  package var size: Int { MemoryLayout<inotify_event>.size + nameLength }
}
