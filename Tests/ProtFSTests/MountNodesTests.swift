import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

@testable import ProtFSMount

/// The mount's inode table (`MountNodes`), planted with nodes of real backing items and asked
/// directly: no FUSE session, no kernel requests.
@Suite struct MountNodesTests {
  /// A temporary directory tree, `Containers/` its root node, and a table over it.
  struct Planted {
    let t: TestDevice
    let nodes: MountNodes
    var containers: String { t.root + "/Containers" }

    init(deviceClass: ProtectionClass? = nil) throws {
      t = try TestDevice()
      let fd = try Self.pathDescriptor(t.root + "/Containers")
      let root = MountNode(
        id: 1, key: try Self.key(fd), fd: fd, isDirectory: true, mountFD: -1, prepared: nil)
      nodes = MountNodes(root: root, deviceClass: deviceClass)
    }

    /// An `O_PATH` descriptor of `path`, not following a symbolic link.
    static func pathDescriptor(_ path: String) throws -> Int32 {
      // O_PATH, which glibc hides without _GNU_SOURCE.
      let fd = open(path, 0o10_000_000 | O_NOFOLLOW | O_CLOEXEC)
      guard fd >= 0 else { throw Errno(errno) }
      return fd
    }

    /// The backing inode `fd` holds.
    static func key(_ fd: Int32) throws -> MountNode.Key {
      var s = stat()
      guard fstat(fd, &s) == 0 else { throw Errno(errno) }
      return MountNode.Key(device: UInt64(s.st_dev), inode: UInt64(s.st_ino))
    }

    /// Makes `relative` below `Containers/` (a directory, or a file) and remembers it as an entry
    /// of `parent` (the root when nil), as a lookup does.
    @discardableResult
    func plant(
      _ relative: String, directory: Bool, parent: MountNode? = nil, own: ProtectionClass?? = nil,
      containerDefault: ProtectionClass? = nil
    ) throws -> MountNode {
      let path = containers + "/" + relative
      if directory {
        mkdir(path, 0o755)
      } else if !FileManager.default.fileExists(atPath: path) {
        try t.writeFile(path)
      }
      return try remember(relative, directory: directory, parent: parent, own: own, containerDefault: containerDefault)
    }

    /// Remembers the existing `relative` as an entry of `parent` (the root when nil).
    func remember(
      _ relative: String, directory: Bool, parent: MountNode? = nil, own: ProtectionClass?? = nil,
      containerDefault: ProtectionClass? = nil
    ) throws -> MountNode {
      let fd = try Self.pathDescriptor(containers + "/" + relative)
      return try #require(
        nodes.remember(
          key: try Self.key(fd), fd: fd, isDirectory: directory, parent: parent ?? nodes.root, own: own,
          containerDefault: containerDefault))
    }
  }

  /// Whether `fd` is still open on the inode `key` (tests run in parallel: a closed number may
  /// have been reused by another test's descriptor, on another inode).
  static func holds(_ fd: Int32, _ key: MountNode.Key) -> Bool {
    fcntl(fd, F_GETFD) != -1 && (try? Planted.key(fd)) == key
  }

  // MARK: Lookups

  @Test func anInodeLookedUpTwiceIsOneNodeHoldingTwoLookups() throws {
    let p = try Planted()
    let first = try p.plant("app", directory: true)
    let fd = try Planted.pathDescriptor(p.containers + "/app")
    let again = try #require(
      p.nodes.remember(
        key: try Planted.key(fd), fd: fd, isDirectory: true, parent: p.nodes.root, own: nil, containerDefault: nil))
    #expect(again === first)
    #expect(first.lookups == 2)
    #expect(!Self.holds(fd, first.key), "the second lookup's descriptor is closed: the node keeps its own")
    #expect(Self.holds(first.fd, first.key))
    #expect(p.nodes.count == 2)
    #expect(try p.nodes.node(first.id) === first)
    #expect(p.nodes.node(for: first.key) === first)
    #expect(first.id == 2, "the root is 1; numbers start after it")
  }

  @Test func anUnknownNumberIsStale() throws {
    let p = try Planted()
    #expect(throws: Errno(ESTALE)) { try p.nodes.node(2) }
    #expect(try p.nodes.node(1) === p.nodes.root)
  }

  @Test func rememberKnownCountsOnlyANodeTheKernelKnows() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    let b = try p.plant("b", directory: true)
    let file = try p.plant("a/f", directory: false, parent: a)
    #expect(p.nodes.rememberKnown(MountNode.Key(device: file.key.device, inode: 1 << 40), parent: a) == nil)
    #expect(p.nodes.rememberKnown(file.key, parent: b) === file)
    #expect(file.lookups == 2)
    #expect(file.parent === b, "reached through b now")
  }

  @Test func anExistingNodeTakesTheOwnClassOnlyWhenItWasRead() throws {
    let p = try Planted()
    let node = try p.plant("a", directory: true, own: .some(.complete), containerDefault: ProtectionClass.none)
    _ = try p.remember("a", directory: true, own: nil)
    #expect(p.nodes.ownClass(of: node) == .complete, "not read this time: kept")
    #expect(node.containerDefault == ProtectionClass.none)
    _ = try p.remember("a", directory: true, own: .some(nil))
    #expect(p.nodes.ownClass(of: node) == nil, "read, and gone")
  }

  @Test func theRootKeepsNoParentWhateverReachesIt() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    let fd = try Planted.pathDescriptor(p.containers)
    let root = p.nodes.remember(
      key: p.nodes.root.key, fd: fd, isDirectory: true, parent: a, own: nil, containerDefault: nil)
    #expect(root === p.nodes.root)
    #expect(p.nodes.root.parent == nil)
    #expect(p.nodes.rememberKnown(p.nodes.root.key, parent: a) === p.nodes.root)
    p.nodes.reparent(p.nodes.root, to: a)
    #expect(p.nodes.root.parent == nil)
  }

  // MARK: Forgetting

  @Test func forgetGivesBackLookupsAndANodeWithNoneLeftLeaves() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    _ = try p.remember("a", directory: true)
    _ = try p.remember("a", directory: true)
    p.nodes.forget(a.id, 2)
    #expect(a.lookups == 1)
    #expect(try p.nodes.node(a.id) === a)
    p.nodes.forget(a.id, 1)
    #expect(throws: Errno(ESTALE)) { try p.nodes.node(a.id) }
    #expect(p.nodes.node(for: a.key) == nil)
    #expect(p.nodes.count == 1)
  }

  @Test func forgettingMoreThanWasLookedUpEndsAtZero() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    _ = try p.remember("a", directory: true)
    p.nodes.forget(a.id, 5)
    #expect(a.lookups == 0)
    #expect(p.nodes.node(for: a.key) == nil)
  }

  @Test func theRootAndUnknownNumbersAreNeverForgotten() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    p.nodes.forget(1, 1_000)
    p.nodes.forget(99, 1)
    #expect(try p.nodes.node(1) === p.nodes.root)
    #expect(try p.nodes.node(a.id) === a)
    #expect(a.lookups == 1)
    #expect(p.nodes.count == 2)
  }

  @Test func aForgottenNodesDescriptorClosesOnceNoChildHoldsIt() throws {
    let p = try Planted()
    weak var forgotten: MountNode?
    var child: MountNode?
    var fd: Int32 = -1
    var key = p.nodes.root.key
    do {
      let a = try p.plant("a", directory: true)
      (forgotten, fd, key) = (a, a.fd, a.key)
      child = try p.plant("a/b", directory: true, parent: a)
      p.nodes.forget(a.id, 1)
    }
    #expect(forgotten != nil, "the child still inherits from it")
    #expect(Self.holds(fd, key))
    p.nodes.forget(try #require(child).id, 1)
    child = nil
    #expect(forgotten == nil)
    #expect(!Self.holds(fd, key))
  }

  // MARK: Numbers and reused inodes

  @Test func anInodeSeenAgainAfterItWasForgottenGetsANewNumber() throws {
    let p = try Planted()
    let first = try p.plant("a", directory: true)
    let oldID = first.id
    p.nodes.forget(oldID, 1)
    // The same backing inode number again (reused by a new item, or looked up anew): the kernel's
    // old number must not reach it.
    let second = try p.remember("a", directory: true)
    #expect(second !== first)
    #expect(second.id == oldID + 1)
    #expect(second.lookups == 1)
    #expect(throws: Errno(ESTALE)) { try p.nodes.node(oldID) }
    // Numbers only grow: one more item takes the next.
    #expect(try p.plant("b", directory: true).id == oldID + 2)
  }

  @Test func aFileKeepsItsHandleAndTheTableOneDirectoryPerFilesystemToOpenIt() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    let f = try p.plant("a/f", directory: false, parent: a)
    let g = try p.plant("a/g", directory: false, parent: a)
    // ext4 and tmpfs give file handles: a file keeps no descriptor, only its handle.
    try #require(f.handleLength > 0, "the test filesystem gives no file handles")
    #expect(f.fd == -1)
    #expect(f.mountFD >= 0 && g.mountFD == f.mountFD, "one directory per filesystem opens every handle")
    let opened = try f.reopen(O_RDONLY)
    defer { close(opened) }
    #expect(try Planted.key(opened) == f.key)
  }

  @Test func aPreparedHandleWithNoDirectoryToOpenItIsRefused() throws {
    let p = try Planted()
    mkdir(p.containers + "/d", 0o755)
    let fd = try Planted.pathDescriptor(p.containers + "/d")
    defer { close(fd) }
    let prepared = try #require(InodeHandle(entry: "d", in: p.nodes.root.fd))
    // A directory takes no directory to open handles with: the prepared handle cannot be used.
    let node = p.nodes.remember(
      key: try Planted.key(fd), fd: -1, isDirectory: true, parent: p.nodes.root, own: nil, containerDefault: nil,
      prepared: prepared)
    #expect(node == nil)
    #expect(p.nodes.count == 1)
  }

  // MARK: Classes

  @Test func theEffectiveClassIsTheNearestOwnThenTheDevicesThenTheContainersDefault() throws {
    let p = try Planted()
    let container = try p.plant("app", directory: true, containerDefault: .completeUnlessOpen)
    let documents = try p.plant("app/Documents", directory: true, parent: container, own: .some(.complete))
    let file = try p.plant("app/Documents/f", directory: false, parent: documents)
    #expect(p.nodes.effectiveClass(of: file) == .complete)
    p.nodes.setOwnClass(documents, nil)
    #expect(p.nodes.effectiveClass(of: file) == .completeUnlessOpen)
    p.nodes.setOwnClass(file, ProtectionClass.none)
    #expect(p.nodes.effectiveClass(of: file) == ProtectionClass.none)
    #expect(p.nodes.isContainerRoot(container))
    #expect(!p.nodes.isContainerRoot(documents))
    #expect(!p.nodes.isContainerRoot(p.nodes.root))
    #expect(p.nodes.ancestors(of: file).map(\.id) == [documents.id, container.id])
  }

  @Test func theDeviceRootsClassComesBeforeTheContainersDefaultAndClassCIsLast() throws {
    let withDevice = try Planted(deviceClass: .completeWhenUserInactive)
    let container = try withDevice.plant("app", directory: true, containerDefault: .completeUnlessOpen)
    let file = try withDevice.plant("app/f", directory: false, parent: container)
    #expect(withDevice.nodes.effectiveClass(of: file) == .completeWhenUserInactive)
    let bare = try Planted()
    let plain = try bare.plant("app", directory: true)
    #expect(bare.nodes.effectiveClass(of: plain) == .completeUntilFirstUserAuthentication)
  }

  @Test func aRenamedNodeInheritsFromItsNewParent() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true, own: .some(.complete))
    let b = try p.plant("b", directory: true, own: .some(ProtectionClass.none))
    let file = try p.plant("a/f", directory: false, parent: a)
    p.nodes.reparent(file, to: b)
    #expect(p.nodes.effectiveClass(of: file) == ProtectionClass.none)
  }

  // MARK: What the kernel still holds

  @Test func anEntryIsCachedForItsValidityAsAnEntryOfItsParentUntilDropped() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    let b = try p.plant("b", directory: true)
    let file = try p.plant("a/f", directory: false, parent: a)
    let inode = file.key.inode
    #expect(p.nodes.entryStillCached(inode: inode, in: a, now: 1_500, validFor: 1_000) == nil, "never sent")
    p.nodes.noteEntrySent(file, at: 1_000)
    #expect(p.nodes.entryStillCached(inode: inode, in: a, now: 1_999, validFor: 1_000) == 1_000)
    #expect(p.nodes.entryStillCached(inode: inode, in: a, now: 2_000, validFor: 1_000) == nil, "expired")
    #expect(p.nodes.entryStillCached(inode: inode, in: b, now: 1_500, validFor: 1_000) == nil, "other parent")
    #expect(p.nodes.entryStillCached(inode: inode, in: a, now: 999, validFor: 1_000) == nil, "clock before it")
    p.nodes.noteAttributesDropped([file])
    #expect(p.nodes.entryStillCached(inode: inode, in: a, now: 1_500, validFor: 1_000) == nil, "dropped")
  }

  @Test func aListingIsCachedUntilItExpiresOrAnEntryOfItIsDropped() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    let file = try p.plant("a/f", directory: false, parent: a)
    #expect(!p.nodes.listingStillCached(a, now: 10, validFor: 1_000))
    p.nodes.noteListingSent(a, oldest: 1_000)
    #expect(p.nodes.listingStillCached(a, now: 1_999, validFor: 1_000))
    #expect(!p.nodes.listingStillCached(a, now: 2_000, validFor: 1_000))
    p.nodes.noteAttributesDropped([file])
    #expect(!p.nodes.listingStillCached(a, now: 1_500, validFor: 1_000), "its entry's parent listing goes")
  }

  @Test func filesListsEveryNodeButDirectories() throws {
    let p = try Planted()
    let a = try p.plant("a", directory: true)
    let file = try p.plant("a/f", directory: false, parent: a)
    #expect(p.nodes.files().map(\.id) == [file.id])
    #expect(Set(p.nodes.all().map(\.id)) == [1, a.id, file.id])
  }
}
