import CFuse3
import Foundation
import ProtFS
import ProtFSSystem

/// The table of low-level callbacks libfuse calls from its worker threads: each finds the file
/// system through the session's user data, runs one operation and sends one reply.
enum MountOperations {
  /// The file system a request belongs to.
  static func fileSystem(_ req: fuse_req_t?) -> MountFileSystem {
    Unmanaged<MountFileSystem>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
  }

  /// A name (or link target, or attribute name) the kernel sent: one that is not UTF-8 is
  /// refused with EILSEQ, as a `String` would decode it to another name, a look-alike that may
  /// be another item.
  static func name(_ pointer: UnsafePointer<CChar>) throws(Errno) -> String {
    guard let text = String(validatingCString: pointer) else { throw Errno(EILSEQ) }
    return text
  }

  /// The uid and gid of the process that made `req`.
  static func caller(_ req: fuse_req_t?) -> MountFileSystem.Caller {
    let context = fuse_req_ctx(req)!.pointee
    return MountFileSystem.Caller(uid: context.uid, gid: context.gid)
  }

  /// The handle stored in a `fuse_file_info`.
  static func handle(_ fi: UnsafeMutablePointer<fuse_file_info>?) -> MountHandle? {
    guard let fi, fi.pointee.fh != 0 else { return nil }
    return Unmanaged<MountHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh))!).takeUnretainedValue()
  }

  /// Stores `handle` in `fi`, which keeps it alive until `release`.
  static func store(_ handle: MountHandle, in fi: UnsafeMutablePointer<fuse_file_info>?) {
    fi?.pointee.fh = UInt64(UInt(bitPattern: Unmanaged.passRetained(handle).toOpaque()))
  }

  /// Drops the handle stored in `fi`.
  static func release(_ fi: UnsafeMutablePointer<fuse_file_info>?) {
    guard let fi, fi.pointee.fh != 0 else { return }
    Unmanaged<MountHandle>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh))!).release()
    fi.pointee.fh = 0
  }

  /// Runs `body`; replies with its errno when it throws.
  static func reply(_ req: fuse_req_t?, _ body: () throws(Errno) -> Void) {
    do {
      try body()
    } catch {
      fuse_reply_err(req, error.rawValue)
    }
  }

  /// The entry reply for `node`.
  static func entry(
    _ fs: MountFileSystem, _ node: MountNode, _ attributes: stat, at now: UInt64 = DispatchTime.now().uptimeNanoseconds
  ) -> fuse_entry_param {
    var e = fuse_entry_param()
    e.ino = fuse_ino_t(node.id)
    e.attr = attributes
    e.attr_timeout = fs.cacheSeconds
    e.entry_timeout = fs.cacheSeconds
    fs.nodes.noteEntrySent(node, at: now)
    return e
  }

  /// Replies to a request that made `node` known to the kernel.
  static func replyEntry(_ req: fuse_req_t?, _ fs: MountFileSystem, _ made: (MountNode, stat)) {
    var e = MountOperations.entry(fs, made.0, made.1)
    fuse_reply_entry(req, &e)
  }

  /// Sets the open flags of `fi` for `opened`.
  static func configure(_ fi: UnsafeMutablePointer<fuse_file_info>?, _ opened: OpenedHandle) {
    guard let fi else { return }
    protfs_fuse_set_direct_io(fi, opened.directIO ? 1 : 0)
    protfs_fuse_set_keep_cache(fi, opened.directIO ? 0 : 1)
    MountOperations.store(opened.handle, in: fi)
  }

  /// The callbacks.
  static func table() -> fuse_lowlevel_ops {
    var ops = fuse_lowlevel_ops()
    ops.`init` = { userdata, conn in
      if let conn { protfs_fuse_init_connection(conn) }
      if let userdata { Unmanaged<MountFileSystem>.fromOpaque(userdata).takeUnretainedValue().connected() }
    }
    MountOperations.addNodes(&ops)
    MountOperations.addCreation(&ops)
    MountOperations.addRemoval(&ops)
    MountOperations.addData(&ops)
    MountOperations.addDirectories(&ops)
    MountOperations.addAttributes(&ops)
    return ops
  }

  /// Looking nodes up, forgetting them, and their attributes and link targets.
  static func addNodes(_ ops: inout fuse_lowlevel_ops) {
    ops.lookup = { req, parent, name in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        MountOperations.replyEntry(
          req, fs, try fs.lookup(try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!)))
      }
    }
    ops.forget = { req, ino, count in
      MountOperations.fileSystem(req).nodes.forget(UInt64(ino), count)
      fuse_reply_none(req)
    }
    ops.forget_multi = { req, count, forgets in
      let fs = MountOperations.fileSystem(req)
      for i in 0..<count { fs.nodes.forget(UInt64(forgets![i].ino), forgets![i].nlookup) }
      fuse_reply_none(req)
    }
    ops.getattr = { req, ino, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        // A write(2) into the page cache asks for the file's attributes through its handle once
        // the daemon has dropped them (at each change of state or of class): the one request of
        // such a write, and so where a handle whose class no longer allows writing is refused.
        if let handle = MountOperations.handle(fi), handle.writesThroughCache { try fs.decideIO(handle) }
        var s = try fs.nodes.node(UInt64(ino)).withPath { (fd) throws(Errno) in try fs.attributes(fd) }
        fuse_reply_attr(req, &s, fs.cacheSeconds)
      }
    }
    ops.setattr = { req, ino, attr, toSet, fi in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        var s = try fs.setAttributes(
          try fs.nodes.node(UInt64(ino)), MountOperations.change(attr!.pointee, toSet),
          handle: MountOperations.handle(fi))
        fuse_reply_attr(req, &s, fs.cacheSeconds)
      }
    }
    ops.readlink = { req, ino in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        fuse_reply_readlink(req, try fs.readLink(try fs.nodes.node(UInt64(ino))))
      }
    }
  }

  /// Making files, directories, symbolic links and hard links.
  static func addCreation(_ ops: inout fuse_lowlevel_ops) {
    ops.mknod = { req, parent, name, mode, rdev in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let made = try fs.makeNode(
          try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!), mode: mode, device: rdev,
          caller: MountOperations.caller(req))
        MountOperations.replyEntry(req, fs, made)
      }
    }
    ops.mkdir = { req, parent, name, mode in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let made = try fs.makeDirectory(
          try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!), mode: mode,
          caller: MountOperations.caller(req))
        MountOperations.replyEntry(req, fs, made)
      }
    }
    ops.symlink = { req, target, parent, name in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let made = try fs.makeSymlink(
          try MountOperations.name(target!), try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!),
          caller: MountOperations.caller(req))
        MountOperations.replyEntry(req, fs, made)
      }
    }
    ops.link = { req, ino, parent, name in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        let made = try fs.link(
          try fs.nodes.node(UInt64(ino)), try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!))
        MountOperations.replyEntry(req, fs, made)
      }
    }
  }

  /// Removing and renaming names.
  static func addRemoval(_ ops: inout fuse_lowlevel_ops) {
    ops.unlink = { req, parent, name in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        try fs.remove(try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!), directory: false)
        fuse_reply_err(req, 0)
      }
    }
    ops.rmdir = { req, parent, name in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        try fs.remove(try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!), directory: true)
        fuse_reply_err(req, 0)
      }
    }
    ops.rename = { req, parent, name, newParent, newName, flags in
      let fs = MountOperations.fileSystem(req)
      MountOperations.reply(req) { () throws(Errno) in
        try fs.rename(
          try fs.nodes.node(UInt64(parent)), try MountOperations.name(name!), try fs.nodes.node(UInt64(newParent)),
          try MountOperations.name(newName!), flags: flags)
        fuse_reply_err(req, 0)
      }
    }
  }

  /// What a `setattr` request asks to change.
  static func change(_ attr: stat, _ toSet: Int32) -> MountFileSystem.AttributeChange {
    var change = MountFileSystem.AttributeChange()
    if toSet & FUSE_SET_ATTR_MODE != 0 { change.mode = attr.st_mode }
    if toSet & FUSE_SET_ATTR_UID != 0 { change.uid = attr.st_uid }
    if toSet & FUSE_SET_ATTR_GID != 0 { change.gid = attr.st_gid }
    if toSet & FUSE_SET_ATTR_SIZE != 0 { change.size = attr.st_size }
    let now = timespec(tv_sec: 0, tv_nsec: PROTFS_MOUNT_UTIME_NOW)
    if toSet & FUSE_SET_ATTR_ATIME_NOW != 0 {
      change.accessTime = now
    } else if toSet & FUSE_SET_ATTR_ATIME != 0 {
      change.accessTime = attr.st_atim
    }
    if toSet & FUSE_SET_ATTR_MTIME_NOW != 0 {
      change.modificationTime = now
    } else if toSet & FUSE_SET_ATTR_MTIME != 0 {
      change.modificationTime = attr.st_mtim
    }
    return change
  }
}
