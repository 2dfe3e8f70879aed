import Synchronization

/// The staging buffers of ended transfers, reused by the next ones. A buffer comes back from
/// whichever thread writes its last bytes: the engine's, or the finisher's for a finished
/// download (whose last write is the finisher's work, off the engine's thread).
package final class StagingBuffers: Sendable {
  /// Each buffer's size.
  package let size: Int
  /// The idle buffers' addresses (an address is `Sendable`, a buffer pointer is not).
  private let idle = Mutex<[UInt]>([])

  package init(size: Int) { self.size = size }

  deinit {
    for address in idle.withLock({ $0 }) { buffer(at: address).deallocate() }
  }

  /// An idle buffer, or a new one.
  package func take() -> UnsafeMutableRawBufferPointer {
    if let address = idle.withLock({ $0.popLast() }) { return buffer(at: address) }
    return UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 4096)
  }

  /// Takes `buffer` back for a later transfer.
  package func give(_ buffer: UnsafeMutableRawBufferPointer) {
    let address = UInt(bitPattern: buffer.baseAddress)
    idle.withLock { $0.append(address) }
  }

  private func buffer(at address: UInt) -> UnsafeMutableRawBufferPointer {
    UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(bitPattern: address), count: size)
  }
}
