import CFuse3
import Foundation
import ProtFS
import ProtFSSystem

/// Callbacks for file contents, directories and extended attributes.
extension MountOperations {
  /// open, create, read, write, flush, release, fsync.
  static func addData(_ ops: inout fuse_lowlevel_ops) {
    ops.open = { req, ino, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let opened = try fs.open(try fs.nodes.node(UInt64(ino)), flags: fi!.pointee.flags)
        MountOperations.configure(fi, opened)
        if fuse_reply_open(req, fi) != 0 { MountOperations.release(fi) }
      }
    }
    ops.create = { req, parent, name, mode, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let (opened, attributes) = try fs.create(
          try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!), mode: mode, flags: fi!.pointee.flags,
          caller: MountOperations.caller(req))
        MountOperations.configure(fi, opened)
        var e = MountOperations.entry(fs, opened.handle.node, attributes)
        if fuse_reply_create(req, &e, fi) != 0 { MountOperations.release(fi) }
      }
    }
    ops.read = { req, _, size, offset, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let handle = MountOperations.handle(fi)!
        try fs.decideIO(handle)
        if let sealed = try handle.sealedIO() {
          // Decrypted in one buffer and sent from there: no copy but the kernel's.
          _ = try sealed.withPlaintextOrEIO(at: Int(offset), count: size) {
            fuse_reply_buf(req, $0.baseAddress, $0.count)
          }
        } else {
          _ = protfs_fuse_reply_fd(req, handle.fd, size, offset)
        }
      }
    }
    ops.write_buf = { req, _, buffers, offset, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        fuse_reply_write(req, try MountOperations.write(buffers, fs, MountOperations.handle(fi)!, at: offset, fi))
      }
    }
    ops.flush = { req, _, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        try fs.flush(MountOperations.handle(fi)!)
        fuse_reply_err(req, 0)
      }
    }
    ops.release = { req, _, fi in
      MountOperations.release(fi)
      fuse_reply_err(req, 0)
    }
    ops.fsync = { req, _, dataOnly, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        try fs.sync(MountOperations.handle(fi)!, dataOnly: dataOnly != 0)
        fuse_reply_err(req, 0)
      }
    }
  }

  /// Writes `buffers` through `handle` at `offset`; returns the bytes written.
  static func write(
    _ buffers: UnsafeMutablePointer<fuse_bufvec>?, _ fs: MountFileSystem, _ handle: MountHandle, at offset: off_t,
    _ fi: UnsafeMutablePointer<fuse_file_info>?
  ) throws(Errno) -> Int {
    if handle.isSealed {
      try fs.decideIO(handle)
      guard let sealed = try handle.sealedIO() else { throw Errno(EIO) }
      // The plaintext, encrypted straight out of the request where it lies in memory.
      var size = 0
      if let memory = protfs_fuse_buffers_memory(buffers, &size) {
        try sealed.writeOrEIO(UnsafeRawBufferPointer(start: memory, count: size), at: Int(offset))
        return size
      }
      // Else copied once out of the request (a pipe) straight into the blocks it is encrypted in.
      let count = protfs_fuse_buffers_size(buffers)
      var failure: Int32 = 0
      do {
        try sealed.writeOrEIO(count: count, at: Int(offset)) { block in
          let copied = protfs_fuse_write_to_memory(buffers, block.baseAddress, block.count)
          if copied < 0 { failure = Int32(-copied) }
          return copied == block.count
        }
      } catch {
        throw failure != 0 ? Errno(failure) : error
      }
      return count
    } else if protfs_fuse_is_writeback(fi) != 0 {
      // Pages written back were taken by write(2) while the daemon allowed it (a later write
      // is refused at its attributes, in getattr): refusing them now would lose what the app
      // was told it wrote.
      return try fs.writeBack(buffers, handle, at: offset)
    } else {
      try fs.decideIO(handle)
      let result = protfs_fuse_write_to_fd(buffers, handle.fd, offset)
      if result < 0 { throw Errno(Int32(-result)) }
      return result
    }
  }

  /// opendir, readdir, readdirplus, releasedir, fsyncdir, statfs.
  static func addDirectories(_ ops: inout fuse_lowlevel_ops) {
    ops.opendir = { req, ino, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let node = try fs.nodes.node(UInt64(ino))
        MountOperations.store(try fs.openDirectory(node), in: fi)
        // The kernel keeps the listing in its cache (which it drops itself when the directory
        // changes through the mount, or its modification time does), and may list from there
        // while it still holds every entry of the last listing: no request, and no lookup per
        // entry after it. Otherwise its cache starts anew from this listing.
        let now = DispatchTime.now().uptimeNanoseconds
        protfs_fuse_set_cache_readdir(fi, 1)
        protfs_fuse_set_keep_cache(fi, fs.nodes.listingStillCached(node, now: now, validFor: fs.entryValidity) ? 1 : 0)
        if fuse_reply_open(req, fi) != 0 { MountOperations.release(fi) }
      }
    }
    ops.readdir = { req, _, size, offset, fi in
      MountOperations.readDirectory(req, MountOperations.handle(fi)!, size: size, offset: offset, plus: false)
    }
    ops.readdirplus = { req, _, size, offset, fi in
      MountOperations.readDirectory(req, MountOperations.handle(fi)!, size: size, offset: offset, plus: true)
    }
    ops.releasedir = { req, _, fi in
      MountOperations.release(fi)
      fuse_reply_err(req, 0)
    }
    ops.fsyncdir = { req, _, _, fi in
      MountOperations.reply(req) { () throws(Errno) in
        _ = try Kernel.fsync(MountOperations.handle(fi)!.fd).get()
        fuse_reply_err(req, 0)
      }
    }
    ops.statfs = { req, _ in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        var s = statvfs()
        _ = try Kernel.fstatvfs(fs.nodes.root.fd, &s).get()
        fuse_reply_statfs(req, &s)
      }
    }
  }

  /// Fills one `readdir` or `readdirplus` reply from the directory stream of `handle`. Entries of
  /// `readdirplus` other than `.` and `..` are looked up (one lookup each, as the kernel counts),
  /// except those whose name and attributes the kernel still holds from an entry sent within the
  /// cache time (a second to spare): they go without attributes (node 0), which the kernel takes
  /// as a plain entry, keeping what it has. A listing repeated within the cache time then costs
  /// no `stat` per entry; what changed behind the mount still shows within the cache time.
  static func readDirectory(_ req: fuse_req_t?, _ handle: MountHandle, size: Int, offset: off_t, plus: Bool) {
    let fs = MountOperations.fileSystem(req)
    let now = DispatchTime.now().uptimeNanoseconds
    let validFor = fs.entryValidity
    if offset == 0 {
      handle.listedFromStart = plus
      handle.oldestEntrySent = .max
    }
    var ended = false
    guard let stream = handle.directory else {
      fuse_reply_err(req, EBADF)
      return
    }
    if offset != handle.offset {
      seekdir(stream, Int(offset))
      handle.offset = Int(offset)
    }
    var buffer = [CChar](repeating: 0, count: size)
    var used = 0
    while true {
      errno = 0
      guard let item = Kernel.readdir(stream) else {
        ended = errno == 0
        break
      }
      let entry = item.pointee
      let next = off_t(entry.d_off)
      let added = withUnsafePointer(to: &item.pointee.d_name) { namePointer -> Int? in
        namePointer.withMemoryRebound(to: CChar.self, capacity: 256) { name -> Int? in
          let remaining = size - used
          guard plus else {
            var s = stat()
            s.st_ino = entry.d_ino
            s.st_mode = mode_t(entry.d_type) << 12
            let needed = buffer.withUnsafeMutableBufferPointer {
              fuse_add_direntry(req, $0.baseAddress! + used, remaining, name, &s, next)
            }
            return needed > remaining ? nil : needed
          }
          guard fuse_add_direntry_plus(req, nil, 0, name, nil, 0) <= remaining else { return nil }
          guard var e = plusEntry(fs, handle, name, entry, now: now, validFor: validFor) else { return 0 }
          return buffer.withUnsafeMutableBufferPointer {
            fuse_add_direntry_plus(req, $0.baseAddress! + used, remaining, name, &e, next)
          }
        }
      }
      guard let added else {
        seekdir(stream, handle.offset)
        break
      }
      used += added
      handle.offset = Int(next)
    }
    if ended && handle.listedFromStart {
      fs.nodes.noteListingSent(handle.node, oldest: handle.oldestEntrySent == .max ? now : handle.oldestEntrySent)
    }
    fuse_reply_buf(req, buffer, used)
  }

  /// The `readdirplus` entry of `name` (`entry` of the stream of `handle`): looked up, or without
  /// attributes when the kernel still holds them (or for `.`, `..` and names that are not UTF-8,
  /// whose lookup is refused); nil when the item went meanwhile.
  private static func plusEntry(
    _ fs: MountFileSystem, _ handle: MountHandle, _ name: UnsafePointer<CChar>, _ entry: dirent, now: UInt64,
    validFor: UInt64
  ) -> fuse_entry_param? {
    let isDot = name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0))
    var e = fuse_entry_param()
    let cached =
      isDot || entry.d_type == 0
      ? nil
      : fs.nodes.entryStillCached(inode: UInt64(entry.d_ino), in: handle.node, now: now, validFor: validFor)
    // A name that is not UTF-8 is listed as a plain entry; its lookup is refused (EILSEQ).
    if let text = isDot || cached != nil ? nil : try? MountOperations.name(name) {
      guard let found = try? fs.lookup(handle.node, text) else { return nil }  // gone meanwhile
      e = MountOperations.entry(fs, found.0, found.1, at: now)
      handle.oldestEntrySent = min(handle.oldestEntrySent, now)
    } else {
      e.attr.st_ino = entry.d_ino
      e.attr.st_mode = mode_t(entry.d_type) << 12
      if let cached { handle.oldestEntrySent = min(handle.oldestEntrySent, cached) }
    }
    return e
  }

  /// getxattr, listxattr, setxattr, removexattr.
  static func addAttributes(_ ops: inout fuse_lowlevel_ops) {
    ops.getxattr = { req, ino, name, size in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let value = try fs.attribute(try fs.nodes.node(UInt64(ino)), try MountOperations.name(name!), size: size)
        if size == 0 { fuse_reply_xattr(req, value.count) } else { fuse_reply_buf(req, value, value.count) }
      }
    }
    ops.listxattr = { req, ino, size in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let names = try fs.attributeNames(try fs.nodes.node(UInt64(ino)), size: size)
        if size == 0 { fuse_reply_xattr(req, names.count) } else { fuse_reply_buf(req, names, names.count) }
      }
    }
    ops.setxattr = { req, ino, name, value, size, flags in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let bytes = UnsafeRawBufferPointer(start: value, count: size).map { $0 }
        try fs.setAttribute(try fs.nodes.node(UInt64(ino)), try MountOperations.name(name!), bytes, flags: flags)
        fuse_reply_err(req, 0)
      }
    }
    ops.removexattr = { req, ino, name in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        try fs.removeAttribute(try fs.nodes.node(UInt64(ino)), try MountOperations.name(name!))
        fuse_reply_err(req, 0)
      }
    }
  }
}
