import CProtFSSys
import Foundation

/// Open descriptors handed from one process to another over a Unix socket (`SCM_RIGHTS`): how a
/// launch gives a prewarmed app its terminal.
public enum DescriptorPassing {
  /// The most descriptors one message carries.
  public static let maximumCount = 8

  /// A connected pair of stream sockets, close-on-exec.
  public static func socketPair() throws(ProtFSError) -> (FileDescriptor, FileDescriptor) {
    var ends: [Int32] = [0, 0]
    if case .failure(let e) = valueOrErrno(
      .socketpair,
      {
        socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends)
      })
    {
      throw ProtFSError(.io, "Cannot create a socket pair: \(e).")
    }
    return (FileDescriptor(owning: ends[0]), FileDescriptor(owning: ends[1]))
  }

  /// Sends `bytes` (at least one) on `socket` with `descriptors` attached to their first byte;
  /// the rest follows as plain writes.
  public static func send(_ bytes: [UInt8], descriptors: [Int32], on socket: FileDescriptor) throws(ProtFSError) {
    precondition(!bytes.isEmpty && descriptors.count <= maximumCount)
    let sent = bytes.withUnsafeBytes { buffer in
      valueOrErrno(.sendmsg) {
        protfs_send_descriptors(
          socket.rawValue, buffer.baseAddress, buffer.count, descriptors, Int32(descriptors.count))
      }
    }
    switch sent {
    case .failure(let e): throw ProtFSError(.io, "Cannot hand descriptors over: \(e).")
    case .success(let count) where count < bytes.count:
      guard ControlSocket.writeAll(Array(bytes[count...]), on: socket) else {
        throw ProtFSError(.io, "Cannot hand descriptors over: the peer went away.")
      }
    case .success: break
    }
  }

  /// Receives at most `limit` bytes from `socket` and the descriptors that came with them (at most
  /// `maximumCount`, close-on-exec, owned by the caller). Empty bytes: the peer closed.
  public static func receive(on socket: FileDescriptor, limit: Int = 4096) throws(ProtFSError) -> (
    [UInt8], [FileDescriptor]
  ) {
    var bytes = [UInt8](repeating: 0, count: limit)
    var descriptors = [Int32](repeating: -1, count: maximumCount)
    var count: Int32 = 0
    let received = bytes.withUnsafeMutableBytes { buffer in
      valueOrErrno(.recvmsg) {
        protfs_receive_descriptors(
          socket.rawValue, buffer.baseAddress, buffer.count, &descriptors, Int32(maximumCount), &count)
      }
    }
    switch received {
    case .failure(let e): throw ProtFSError(.io, "Cannot receive descriptors: \(e).")
    case .success(let length):
      return (Array(bytes[..<length]), descriptors[..<Int(count)].map { FileDescriptor(owning: $0) })
    }
  }
}
