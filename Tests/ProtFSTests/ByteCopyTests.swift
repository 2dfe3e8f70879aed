import Foundation
import ProtFSTestSupport
import Testing

@testable import ProtFS
@testable import ProtFSSystem

/// `ByteCopy`, the one byte-copy loop.
@Suite struct ByteCopyTests {
  /// A file of `count` patterned bytes in `t`'s scratch directory, opened for reading, and an
  /// empty file to copy into, opened for writing.
  private func files(_ t: TestDevice, count: Int) throws -> (input: Int32, output: Int32, bytes: [UInt8], out: String) {
    let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 / 4093) }
    let source = t.directory + "/source"
    try Data(bytes).write(to: URL(fileURLWithPath: source))
    let out = t.directory + "/copy"
    let input = open(source, O_RDONLY | O_CLOEXEC)
    let output = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    #expect(input >= 0 && output >= 0)
    return (input, output, bytes, out)
  }

  @Test func copiesEveryByteInSixteenMiBCallsAndReportsProgress() throws {
    let t = try TestDevice()
    let (input, output, bytes, out) = try files(t, count: 40 << 20)
    defer { close(input) }
    var seen: [Int64] = []
    let copied = ByteCopy.copy(from: input, to: output, progress: { seen.append($0) })
    close(output)
    #expect(copied == .success(Int64(bytes.count)))
    #expect(seen == [16 << 20, 32 << 20, 40 << 20])
    #expect(FileManager.default.contents(atPath: out) == Data(bytes))
  }

  @Test(arguments: [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EPERM])
  func fallsBackToReadAndWriteWhenTheKernelRefusesTheRange(_ refusal: Int32) throws {
    let t = try TestDevice()
    let (input, output, bytes, out) = try files(t, count: (3 << 20) + 5)
    defer { close(input) }
    let faults = SyscallFaults()
    // One range call goes through, the next is refused: the fallback goes on from there.
    faults.pass(.copyFileRange, times: 1)
    faults.fail(.copyFileRange, with: refusal)
    faults.fail(.read, with: EINTR)
    let copied = faults.during { ByteCopy.copy(from: input, to: output) }
    close(output)
    #expect(copied == .success(Int64(bytes.count)))
    #expect(faults.injectedCount(.copyFileRange) == 1 && faults.injectedCount(.read) == 1)
    #expect(FileManager.default.contents(atPath: out) == Data(bytes))
  }

  @Test func stopsAtTheLimitInBothWays() throws {
    let t = try TestDevice()
    for refused in [false, true] {
      let (input, output, bytes, out) = try files(t, count: 1 << 20)
      let faults = SyscallFaults()
      if refused { faults.fail(.copyFileRange, with: EXDEV) }
      let copied = faults.during { ByteCopy.copy(from: input, to: output, limit: 1000) }
      close(input)
      close(output)
      #expect(copied == .success(1000))
      #expect(FileManager.default.contents(atPath: out) == Data(bytes[0..<1000]))
    }
  }

  @Test func namesTheCallThatFailed() throws {
    let t = try TestDevice()
    let (input, output, _, _) = try files(t, count: 4096)
    defer {
      close(input)
      close(output)
    }
    let faults = SyscallFaults()
    faults.fail(.copyFileRange, with: EINTR)
    faults.fail(.copyFileRange, with: EIO)
    #expect(faults.during { ByteCopy.copy(from: input, to: output) } == .failure(.copying(Errno(EIO))))
    faults.fail(.copyFileRange, with: EXDEV)
    faults.fail(.write, with: ENOSPC)
    #expect(faults.during { ByteCopy.copy(from: input, to: output) } == .failure(.writing(Errno(ENOSPC))))
    faults.fail(.copyFileRange, with: EXDEV)
    faults.fail(.read, with: EIO)
    #expect(faults.during { ByteCopy.copy(from: input, to: output) } == .failure(.reading(Errno(EIO))))
  }
}
