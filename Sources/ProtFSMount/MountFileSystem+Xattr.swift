import CFuse3
import Foundation
import ProtFS
import ProtFSSystem

/// Extended attributes through the mount. Reading is metadata. Writing is a write to the item,
/// decided by its class now; `user.protfs.class` takes any class name `protfs set-class` takes
/// (stored as the raw value) and refuses anything else with `EINVAL`; protfs's other attributes
/// (saved modes, container defaults) cannot be written through the mount at all (`EPERM`), so
/// that no program can forge them.
extension MountFileSystem {
  /// `getxattr`: the value, or only its size when `size` is 0.
  func attribute(_ node: MountNode, _ name: String, size: Int) throws(Errno) -> [UInt8] {
    if node === nodes.root, name == AttributeName.mountState {
      guard let state = appliedState.withLock({ $0 }), let json = try? state.mountStateValue() else {
        throw .noData
      }
      guard size == 0 || size >= json.count else { throw .range }
      return size == 0 ? [UInt8](repeating: 0, count: json.count) : Array(json)
    }
    if node === nodes.root, name == AttributeName.mountFileKeys, let seal {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys]
      guard let json = try? encoder.encode(seal.openKeys.heldCounts()) else { throw .noData }
      guard size == 0 || size >= json.count else { throw .range }
      return size == 0 ? [UInt8](repeating: 0, count: json.count) : Array(json)
    }
    var buffer = [UInt8](repeating: 0, count: size)
    // Through /proc at once, as before: `withPath` gives an `O_PATH` descriptor for most nodes.
    let count = try node.withPath { (fd) throws(Errno) in
      try buffer.withUnsafeMutableBytes {
        Kernel.getAttribute(ofDescriptor: fd, attribute: name, into: $0, pathOnly: true)
      }.get()
    }
    return size == 0 ? [UInt8](repeating: 0, count: count) : Array(buffer.prefix(count))
  }

  /// `listxattr`: the names, or only their size when `size` is 0.
  func attributeNames(_ node: MountNode, size: Int) throws(Errno) -> [UInt8] {
    var buffer = [CChar](repeating: 0, count: size)
    let count = try node.withPath { (fd) throws(Errno) in
      try buffer.withUnsafeMutableBufferPointer { Kernel.listxattr(procPath(fd), $0.baseAddress, size) }.get()
    }
    if size == 0 { return [UInt8](repeating: 0, count: count) }
    return buffer.prefix(count).map { UInt8(bitPattern: $0) }
  }

  /// `setxattr`.
  func setAttribute(_ node: MountNode, _ name: String, _ value: [UInt8], flags: Int32) throws(Errno) {
    var newClass: ProtectionClass?
    if name == AttributeName.protectionClass {
      // Not a class name: EINVAL, as the kernel answers a value it cannot take.
      guard let cls = try? ProtectionClass.parse(String(decoding: value, as: UTF8.self)) else {
        throw Errno(EINVAL)
      }
      newClass = cls
    } else if name.hasPrefix(Self.protfsPrefix) {
      throw .notPermitted
    }
    refreshOwnClass(node)
    try decide(node, .write)
    let applyAttribute = { () throws(Errno) in
      try node.withPath { (fd) throws(Errno) in
        let target = Kernel.AttributeTarget.descriptor(fd, pathOnly: true)
        if let newClass {
          try newClass.write(to: target, flags: flags).get()
        } else {
          try value.withUnsafeBytes { Kernel.setAttribute(target, attribute: name, value: $0, flags: flags) }.get()
        }
      }
    }
    if let newClass, let seal {
      // A sealed file's key is wrapped by its class: it follows the class, before the class changes.
      let fd = try node.reopen(O_RDONLY | O_NONBLOCK)
      defer { closeDescriptor(fd) }
      try seal.changeClass(fd, to: newClass, write: applyAttribute)
    } else {
      try applyAttribute()
    }
    if let newClass {
      nodes.setOwnClass(node, newClass)
      invalidateCache(node)
    }
  }

  /// `removexattr`. Removing `user.protfs.class` makes the item inherit again: a class change,
  /// decided as one.
  func removeAttribute(_ node: MountNode, _ name: String) throws(Errno) {
    if name != AttributeName.protectionClass && name.hasPrefix(Self.protfsPrefix) { throw .notPermitted }
    refreshOwnClass(node)
    try decide(node, .write)
    let dropAttribute = { () throws(Errno) in
      _ = try node.withPath { (fd) throws(Errno) in try Kernel.removexattr(procPath(fd), name).get() }
    }
    if name == AttributeName.protectionClass, let seal, nodes.ownClass(of: node) != nil {
      // The class it inherits then wraps a sealed file's key (or those of the files below a
      // directory that inherit), before its own class goes, as a class set does.
      for ancestor in nodes.ancestors(of: node) { refreshOwnClass(ancestor) }
      let fd = try node.reopen(O_RDONLY | O_NONBLOCK)
      defer { closeDescriptor(fd) }
      try seal.changeClass(fd, to: nodes.inheritedClass(of: node), removesOwnClass: true, write: dropAttribute)
    } else {
      try dropAttribute()
    }
    if name == AttributeName.protectionClass {
      nodes.setOwnClass(node, nil)
      invalidateCache(node)
    }
  }

  /// The prefix of every attribute protfs keeps.
  static let protfsPrefix = "user.protfs."
}
